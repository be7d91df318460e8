"""``Ciphers`` as OpenSSH 9.2's client resolves it (readconf.c's check, kex.c ``kex_assemble_names``): a list, or
``+`` (appended to the default), ``-`` (patterns removed from the default), ``^`` (put before the default).

``ssh -G`` agrees on every case of tests/test_ssh_ciphers_differential.py. proofbot offers OpenSSH's default set
(``commands.ssh.ciphers``); a config whose effective Ciphers is another set is refused at load, naming its line
(``keywords.REFUSED_WHEN``), until the inventory carries a cipher list to hand asyncssh.
"""

from __future__ import annotations

from commands.ssh_config.patterns import match_pattern, match_pattern_list

# ``ssh -Q cipher`` of OpenSSH 9.2 (cipher.c, OpenSSL build), in its order; "none" is internal, never valid here.
ALL = ("3des-cbc", "aes128-cbc", "aes192-cbc", "aes256-cbc", "aes128-ctr", "aes192-ctr", "aes256-ctr",
       "aes128-gcm@openssh.com", "aes256-gcm@openssh.com", "chacha20-poly1305@openssh.com")
# myproposal.h KEX_CLIENT_ENCRYPT: what ``ssh -G`` prints when no config says Ciphers.
DEFAULT = ("chacha20-poly1305@openssh.com", "aes128-ctr", "aes192-ctr", "aes256-ctr", "aes128-gcm@openssh.com",
           "aes256-gcm@openssh.com")


def _names(text: str) -> list[str]:
    """The names of a comma list as OpenSSH's strsep loops take them: up to the first empty one."""
    names = []
    for name in text.split(","):
        if not name:
            break
        names.append(name)
    return names


def bad_spec(spec: str) -> str | None:
    """readconf.c's check of a Ciphers value (every line, applying or not): None when ssh accepts it. Names are
    checked up to the first empty one, exactly (case-sensitive, no patterns); a ``-`` list is not checked."""
    if spec.startswith("-"):
        return None
    listed = spec[1:] if spec[:1] in ("+", "^") else spec
    if not listed or any(name not in ALL for name in _names(listed)):
        return f"Bad SSH2 cipher spec '{spec}'."
    return None


def _cat(first: list[str], then: list[str]) -> list[str]:
    """kex_names_cat: first as it is, then each name of then (up to an empty one) not already in it."""
    joined = list(first)
    for name in then:
        if not name:
            break
        if name not in joined:
            joined.append(name)
    return joined


def effective(spec: str | None) -> tuple[str, ...]:
    """The ciphers ssh offers for the Ciphers value of the line that applied (None: none did), in its order; a
    ``-`` list may remove every one (then ()). ``ValueError`` where ssh stops with "ciphers: invalid argument"."""
    if not spec:
        return DEFAULT
    if spec.startswith("-"):
        return tuple(name for name in DEFAULT if match_pattern_list(name, spec[1:], False) != 1)
    if spec.startswith("+"):
        items = _cat(list(DEFAULT), spec[1:].split(","))
    elif spec.startswith("^"):
        items = _cat(spec[1:].split(","), list(DEFAULT))
    else:
        items = spec.split(",")
    offered: list[str] = []
    for item in items:  # each item a pattern over every cipher ssh has, in that order
        if item.startswith("!"):
            raise ValueError("ciphers: invalid argument (a negated pattern in a list that is not a '-' list)")
        offered = _cat(offered, [name for name in ALL if item and match_pattern(name, item)])
    if not offered:
        raise ValueError("ciphers: invalid argument (no cipher left)")
    return tuple(offered)
