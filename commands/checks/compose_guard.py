"""The ownership guard of what a compose restart runs and reads as the SSH user (root, usually): ``docker-compose``
and the compose file (the engine's CLI has its own guard, ``commands.checks.engine_guard``, at every run). Each path
(a bare name found on the SSH user's PATH, as the exec would find it), every symlink on the way and every directory
above each of them must be writable by no one but root and the SSH user, or the restart is refused before anything
runs, naming the path, its owner and its mode.

The rule is restore's (``commands.restore.where.untrusted_dirs``): an owner other than root or the SSH user, a
group write bit for a group other than root's or the SSH user's, or a world write bit refuses; a sticky ancestor
(``/tmp``, ``/var/tmp``) is fine, but not as the directory the file itself is in (anyone could add names beside
it: docker-compose reads a ``.env`` there). It runs in the batch that reads the plan's state: no extra round trip.
"""

from __future__ import annotations

import shlex
from collections.abc import Sequence

from commands.command_result import CommandResult
from commands.inventory import Service
from commands.inventory.containers import Engine

PREFIX = "proofbot-compose-guard: "
MAX_LINKS = 8

# pb_guard PATH...: exit 0 when every one is safe to run or read as this user; else prints PREFIX + why, exit 1.
# pb_one PATH KIND: KIND is `file` (the path itself), `dir` (the directory it is in) or `up` (an ancestor).
_FUNCTIONS = r"""pb_one() {
  pb_s=$(stat -c '%u %g %a %F' -- "$1" 2>&1) || { echo "cannot stat $1: $pb_s"; return 1; }
  set -- "$1" "$2" $pb_s
  case $6 in symbolic) return 0 ;; esac  # a link's own mode means nothing; the dir it is in is judged
  pb_m=$((0$5)); pb_who=
  [ "$3" = 0 ] || [ "$3" = "$pb_u" ] || pb_who="its owner uid $3"
  if [ $((pb_m & 16)) -ne 0 ] && [ "$4" != 0 ] && [ "$4" != "$pb_g" ]; then
    pb_who="${pb_who:+$pb_who and }group gid $4"
  fi
  if [ $((pb_m & 2)) -ne 0 ] && { [ "$2" != up ] || [ $((pb_m & 512)) -eq 0 ]; }; then
    pb_who="${pb_who:+$pb_who and }every user"
  fi
  [ -z "$pb_who" ] || { echo "$1 is writable by $pb_who (owner uid $3, group gid $4, mode $5)"; return 1; }
}
pb_chain() {
  pb_one "$1" file || return 1
  pb_d=$1; pb_k=dir
  while [ "$pb_d" != / ]; do
    pb_d=${pb_d%/*}; pb_d=${pb_d:-/}
    pb_one "$pb_d" $pb_k || return 1; pb_k=up
  done
}
pb_guard() {
  pb_u=$(id -u) pb_g=$(id -g)
  for pb_p in "$@"; do
    case $pb_p in
      /*) ;;
      *) pb_q=$(command -v -- "$pb_p") || { echo "$pb_p: not found on PATH"; return 1; }
         case $pb_q in /*) pb_p=$pb_q ;; *) echo "$pb_p is not a file on PATH ($pb_q)"; return 1 ;; esac ;;
    esac
    [ -e "$pb_p" ] || { echo "$pb_p: no such file"; return 1; }
    pb_n=0
    while :; do
      pb_chain "$pb_p" || return 1
      [ -L "$pb_p" ] || break
      pb_n=$((pb_n + 1)); [ $pb_n -le MAX_LINKS ] || { echo "$pb_p: more than MAX_LINKS symlinks"; return 1; }
      pb_t=$(readlink -- "$pb_p"); case $pb_t in /*) pb_p=$pb_t ;; *) pb_p=${pb_p%/*}/$pb_t ;; esac
    done
    # the resolved file's real directories too (a `..` or a linked directory on the way above), when they differ
    pb_r=$(realpath -e -- "$pb_p") || { echo "$pb_p: cannot resolve"; return 1; }
    [ "$pb_r" = "$pb_p" ] || pb_chain "$pb_r" || return 1
  done
}""".replace("MAX_LINKS", str(MAX_LINKS))


def guarded_paths(service: Service) -> list[str]:
    """What a compose restart runs and reads besides the engine's CLI: ``docker-compose`` and the compose file."""
    engine = service.engine or Engine()
    return [engine.compose, *([service.compose_file] if service.compose_file is not None else [])]


def guard_script(paths: Sequence[str]) -> str:
    """Shell text: the guard's functions, then ``pb_why`` empty when every path passed, else why not."""
    return f"{_FUNCTIONS}\npb_why=$(pb_guard {shlex.join(paths)} 2>&1 | head -c 1000)"


def guarded_command(command: str) -> str:
    """Shell text that runs ``command`` only when the guard (``guard_script``, run before it in the same shell)
    passed; else prints the refusal and exits 1."""
    return (f"if [ -z \"$pb_why\" ]; then {command}\n"
            f"else printf '{PREFIX}refused: %s: nothing run\\n' \"$pb_why\"; false; fi")


def guard_argv(paths: Sequence[str]) -> list[str]:
    """The guard as one argv (a restart plan's read of what the act will run): exit 1 and the refusal, or 0."""
    return ["sh", "-c", guard_script(paths) + "\n" + guarded_command("true"), "proofbot-guard"]


def refusal(result: CommandResult) -> str | None:
    """The guard's reason when it refused (pure); None when it did not."""
    for line in result.text.splitlines():
        if line.startswith(PREFIX + "refused: "):
            return line[len(PREFIX + "refused: "):]
    return None
