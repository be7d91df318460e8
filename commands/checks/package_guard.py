"""The host-side guard of ``package:<dist>``: pick a root-owned interpreter outside the environment, or refuse.

The environment being checked usually belongs to a service account: its ``bin/python`` and
``pyvenv.cfg`` (whose ``home`` decides which standard library loads) are theirs, so running
it as root runs their code. The guard never touches the environment: it tries fixed
interpreters (``CANDIDATES``), follows each one's symlinks and requires every path on the way,
every directory from it up to ``/``, and every file of its standard library
(``<prefix>/lib/pythonX.Y``, ``lib64`` too; its site-packages aside, ``-S`` never loads them) to
be owned by root and not writable by group or others, a symlink leaving that tree followed and
checked the same way; then it execs that interpreter with ``-I -S`` on the probe. Nothing a
user other than root can write runs or is imported. If no candidate passes, it prints why
for each and exits ``REFUSED``: the check is an error naming the reasons.
"""

from __future__ import annotations

import hashlib

CANDIDATES = ("/usr/bin/python3", "/usr/local/bin/python3")
REFUSED = 5
PREFIX = "proofbot-guard: "

# pb_chain PATH: every dir from PATH up to / and PATH itself are root-owned, not group- or other-writable, no
# symlink; pb_follow PATH: PATH's symlinks followed (at most 8), each link's dir and the final target checked so,
# the target left in $p. Stricter than ``owner_guard``'s rule on purpose: only root's interpreter, whoever the SSH
# user is (it reads another account's environment as data).
_FUNCTIONS = r"""pb_chain() {
  q=$1; set --
  case $q in /*) ;; *) echo "$q: not an absolute path"; return 1 ;; esac
  while [ -n "$q" ]; do set -- "$@" "$q"; q=${q%/*}; done
  why=$(find -P / "$@" -maxdepth 0 \( -type l -printf '%p is a symlink\n' -quit \) -o \
    \( ! -user 0 -printf '%p is owned by %u (uid %U)\n' -quit \) -o \
    \( -perm /022 -printf '%p is writable by group %g or others (mode %m)\n' -quit \) 2>&1)
  [ -z "$why" ] || { printf '%s\n' "$why"; return 1; }
}
pb_follow() {
  p=$1; n=0
  [ -e "$p" ] || [ -L "$p" ] || { echo "$1: not there"; return 1; }
  while [ -L "$p" ]; do
    [ $n -lt 8 ] || { echo "$1: more than 8 symlinks"; return 1; }; n=$((n + 1))
    d=${p%/*}; pb_chain "${d:-/}" || return 1
    t=$(readlink -- "$p"); case $t in /*) p=$t ;; *) p=$d/$t ;; esac
  done
  pb_chain "$p"
}
"""


def functions() -> str:
    """pb_chain and pb_follow."""
    return _FUNCTIONS


# $1: the probe's source, $2: the environment's interpreter (data only, never run), $3: the dist, $4 (optional):
# a container's /proc/PID/root, inside which $2 is read.
SCRIPT = "set -f\n" + functions() + r"""pb_try() {
  pb_follow "$1" || return 1
  [ -f "$p" ] && [ -x "$p" ] || { echo "$p: not an executable file"; return 1; }
  exe=$p; v=${p##*/python}
  case $v in 3.[89]|3.[1-9][0-9]) ;; *) echo "$p: not python3.8 or later by its name"; return 1 ;; esac
  prefix=${p%/*}; prefix=${prefix%/*}; found=
  for lib in "$prefix/lib/python$v" "$prefix/lib64/python$v"; do
    case $lib in "$prefix/lib64/"*) [ -L "$prefix/lib64" ] && continue ;; esac
    [ -e "$lib" ] || [ -L "$lib" ] || continue
    pb_chain "$lib" || return 1
    # Every file of the standard library (site-packages never loads under -S); a link leaving the tree
    # (Debian's sitecustomize.py -> /etc/...) is followed as the candidate's own links are.
    out=$(find -P "$lib" \( -path "$lib/site-packages" -o -path "$lib/dist-packages" \) -prune \
      -o \( ! -type l ! -user 0 -printf '%p is owned by %u (uid %U)\n' -quit \) \
      -o \( ! -type l -perm /022 -printf '%p is writable by group %g or others (mode %m)\n' -quit \) \
      -o \( -type l \( -lname '/*' -o -lname '*..*' \) -printf 'link %p\n' \) 2>&1)
    IFS='
'
    for line in $out; do
      case $line in
        "link "*) pb_follow "${line#link }" || { unset IFS; return 1; } ;;
        *) unset IFS; echo "$line"; return 1 ;;
      esac
    done
    unset IFS
    [ -f "$lib/os.py" ] && found=1
  done
  [ -n "$found" ] || { echo "$exe: no standard library at $prefix/lib/python$v"; return 1; }
  printf '%s' "$exe"
}
for c in CANDIDATES; do
  if why=$(pb_try "$c"); then
    exec "$why" -I -S -c "$1" "$2" "$3" ${4+"$4"}
  fi
  printf 'PREFIX%s refused: %s\n' "$c" "$(printf '%s' "$why" | tr '\n' ';')"
done
echo 'PREFIXno root-owned interpreter outside the environment to read it with: nothing run'
exit REFUSED
"""
SCRIPT_TEXT = (SCRIPT.replace("CANDIDATES", " ".join(CANDIDATES)).replace("PREFIX", PREFIX)
               .replace("REFUSED", str(REFUSED)))
GUARD_ID = hashlib.sha256(SCRIPT_TEXT.encode()).hexdigest()[:12]


def refusals(lines: list[str]) -> list[str]:
    """The guard's reasons, from output lines that are not the probe's JSON."""
    return [line[len(PREFIX):] for line in lines if line.startswith(PREFIX)]
