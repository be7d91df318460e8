"""A container engine's CLI is run (as the SSH user, root on most hosts) only when nobody but root can change
it: the CLI (found on the PATH when not a path), every symlink on the way and every dir above are checked
as ``package_guard`` checks its interpreter; otherwise nothing runs and the step says why (exit 126)."""

from __future__ import annotations

import shlex

from commands.checks.package_guard import functions

REFUSED = "proofbot: engine CLI"  # how the refusal starts: the engine's words (engine_words) carry it
# A sticky dir others can write (/var/tmp) is no way in: nobody but its owner renames or removes root's entry
# in it, and that entry is checked in turn (as a restore's dirs are judged, commands/restore/where.py).
ENGINE_GUARD = "set -f\n" + functions(r"-perm /022 ! \( -type d -perm -1000 \)") + r"""cli=$1; shift
case $cli in */*) c=$cli ;; *) c=$(command -v -- "$cli") || c= ;; esac
[ -n "$c" ] || { echo "proofbot: engine CLI $cli is not on the PATH: nothing run"; exit 127; }
if out=$(pb_follow "$c" && printf 'ok'); [ "$out" = ok ]; then
  exec "$c" "$@"
fi
printf 'proofbot: engine CLI %s refused, nothing run: %s\n' "$c" "$(printf '%s' "$out" | tr '\n' ';')"
exit 126
"""


def guarded(argv: list[str]) -> list[str]:
    """``argv`` (the engine's CLI first) run through the guard."""
    return ["sh", "-c", ENGINE_GUARD, "proofbot-engine", *argv]


def shown(argv: list[str]) -> str:
    """The command as evidence shows it: the engine's own, the guard named."""
    return shlex.join(argv) + "  # run only if root owns it and every dir above, none writable by others"
