"""The operator's OpenSSH client config (``ssh.config``), resolved for each host exactly as OpenSSH 9.2's ``ssh -G``.

lexer (lines as ssh splits them), patterns (match.c), tokens (``%`` ``${}`` ``~``), evaluate and taken
(one pass: Host, Match, Include, first value wins), resolve (ssh.c's order), files (owner and mode
checks; an unsafe file at the inventory key that names it), entry (the inventory host entry: its values are
ssh's command line), show (``inventory show``), defaults (the one home of SSH defaults, the hop limit, and
what a user name and an address may be).
"""

from commands.ssh_config.entry import resolve_entry

__all__ = ["resolve_entry"]
