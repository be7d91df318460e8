"""A container engine's CLI is run (as the SSH user, root on most hosts) only when nobody but root and that user
can change what it runs and whom it asks (``owner_guard``'s rule): the CLI (found on the PATH when not a path),
each symlink on the way and every dir above; a ``#!`` CLI's interpreter, and for a Python one (docker-compose
1.29) every dir it imports from; and the daemon's socket it talks to. Otherwise nothing runs, exit 126."""

from __future__ import annotations

import shlex

from commands.checks.owner_guard import FUNCTIONS, UNSET_PYTHON
from commands.command_result import CommandResult

REFUSED = "proofbot: engine"  # how a refusal starts: the engine's words (engine_words) carry it
REFUSED_STATUS = 126
DEFAULT_SOCKET = "unix:///var/run/docker.sock"
# The socket is the one the CLI will use: `-H` (engine.host) first, else DOCKER_HOST, else Docker's default,
# exported so that no CLI context (DOCKER_CONTEXT, ~/.docker/config.json) sends it elsewhere. Podman run as root
# is the engine itself and talks to no daemon: CONTAINER_HOST/CONTAINER_CONNECTION (which would make it a
# remote client) are unset instead. PYTHON* variables are unset (`-E`): a Python CLI imports what was judged.
ENGINE_GUARD = FUNCTIONS + UNSET_PYTHON + r"""
cli=$1; shift
case $cli in */*) c=$cli ;; *) c=$(command -v -- "$cli") || c= ;; esac
[ -n "$c" ] || { echo "proofbot: engine CLI $cli is not on the PATH: nothing run"; exit 127; }
pb_ids
case ${c##*/} in
  podman*) unset CONTAINER_HOST CONTAINER_CONNECTION; pb_h= ;;
  *) pb_h=${DOCKER_HOST:-DEFAULT_SOCKET}; unset DOCKER_CONTEXT ;;
esac
[ "${1-}" != -H ] || pb_h=${2-}
if out=$(pb_guard "$c" && pb_python "$c" && printf 'ok'); [ "$out" != ok ]; then
  printf 'proofbot: engine CLI %s refused, nothing run: %s\n' "$c" "$(printf '%s' "$out" | tr '\n' ';')"
  exit REFUSED_STATUS
fi
case $pb_h in
  ''|unix:///*) ;;
  *) printf 'proofbot: engine socket %s refused, nothing run: not a unix socket whose owner can be checked ' "$pb_h"
     echo "(name the daemon's socket in the inventory: engine: unix:///PATH)"; exit REFUSED_STATUS ;;
esac
if [ -n "$pb_h" ]; then
  out=$(pb_sock "${pb_h#unix://}" && printf 'ok')
  [ "$out" = ok ] || { printf 'proofbot: engine socket %s refused, nothing run: %s\n' "${pb_h#unix://}" \
    "$(printf '%s' "$out" | tr '\n' ';')"; exit REFUSED_STATUS; }
fi
[ -z "$pb_h" ] || export DOCKER_HOST="$pb_h"
exec "$c" "$@"
""".replace("DEFAULT_SOCKET", DEFAULT_SOCKET).replace("REFUSED_STATUS", str(REFUSED_STATUS))


def guarded(argv: list[str]) -> list[str]:
    """``argv`` (the engine's CLI first) run through the guard."""
    return ["sh", "-c", ENGINE_GUARD, "proofbot-engine", *argv]


def shown(argv: list[str]) -> str:
    """The command as evidence shows it: the engine's own, the guard named."""
    return shlex.join(argv) + "  # run only if no other user can change the CLI, what it runs or its socket"


def refusal(result: CommandResult) -> str | None:
    """The guard's words when it refused to run the engine (pure): which CLI or socket and why; None otherwise (a
    step may end with another status after it: compose's `ps` then inspect)."""
    for line in result.text.splitlines():
        if line.startswith(REFUSED) and " refused, nothing run: " in line:
            return line.removeprefix("proofbot: ")
    return None
