"""The one rule of what proofbot runs or has read as the SSH user (root on most hosts): shell functions shared by
``engine_guard`` (an engine's CLI, its daemon's socket, a Python CLI's interpreter and import path) and
``compose_guard`` (docker-compose and the compose file). No other module judges ownership on a host this way.

The rule (restore's, ``commands.restore.where.untrusted_dirs``): a path may be changed by root and by the SSH user
only. Its owner must be root or the SSH user (a non-root SSH user's own files are as trusted as that user), a
group write bit is allowed only for root's group or the SSH user's, and no world write bit, on the path, every
symlink on the way (each link's target in turn) and every directory above. A sticky ancestor (``/tmp``,
``/var/tmp``) is allowed (nobody else can rename or remove an entry there, and the entry is judged in turn) but
not as the directory the path itself is in: others could add a name beside it (a ``.env`` docker-compose reads,
a module a Python script imports first). A daemon's socket may be writable by its group (the ``docker`` group:
its members are root-equivalent anyway, they can run a privileged container).
"""

from __future__ import annotations

MAX_LINKS = 8
MAX_TREE_LINES = 50

# pb_judge PATH KIND UID GID MODE TYPE: KIND is `file` (the path itself), `sock` (a daemon's socket), `dir` (the
# directory the path is in) or `up` (an ancestor); prints why and returns 1 when others could change it.
# pb_chain PATH [KIND]: the path and every dir above, from one stat. pb_path PATH [KIND]: a path (a bare name
# found on the PATH, as exec finds it), its symlinks followed (each link's own dir chain judged), then its real
# path's chain (a `..` or a linked dir on the way). pb_guard PATH...: pb_path on each; pb_maybe PATH...: on each
# that is there. pb_tree DIR [GLOB]: every file below DIR (a link followed by pb_path), or DIR's names matching
# GLOB. pb_sock SOCKET: a unix socket (it need not exist: then only root can create it, its dirs being judged).
# pb_python SCRIPT: a `#!` script's interpreter and, for a Python one, every dir it imports from, their .pth
# files and the `compose` package.
# Each caller sets pb_u and pb_g (`pb_ids`).
FUNCTIONS = r"""set -f
pb_nl='
'
pb_ids() { pb_u=$(id -u) pb_g=$(id -g); }
pb_judge() {
  case $6 in l|symbolic) return 0 ;; esac  # a link's own mode means nothing; the dir it is in is judged
  case $3$4$5 in ''|*[!0-9]*) echo "$1: cannot judge its owner and mode ($3 $4 $5)"; return 1 ;; esac
  pb_m=$((0$5)); pb_who=
  [ "$3" = 0 ] || [ "$3" = "$pb_u" ] || pb_who="its owner uid $3"
  if [ $((pb_m & 16)) -ne 0 ] && [ "$2" != sock ] && [ "$4" != 0 ] && [ "$4" != "$pb_g" ]; then
    pb_who="${pb_who:+$pb_who and }group gid $4"
  fi
  if [ $((pb_m & 2)) -ne 0 ] && { [ "$2" != up ] || [ $((pb_m & 512)) -eq 0 ]; }; then
    pb_who="${pb_who:+$pb_who and }every user"
  fi
  [ -z "$pb_who" ] || { echo "$1 is writable by $pb_who (owner uid $3, group gid $4, mode $5)"; return 1; }
  [ "$2" != sock ] || [ "$6" = socket ] || { echo "$1 is not a socket (owner uid $3, mode $5)"; return 1; }
}
pb_chain() {
  # one stat for the path and every dir above (in that order: kinds $2, dir, up, up...)
  pb_k=${2:-file}; pb_d=$1; set -- "$1"
  while [ "$pb_d" != / ]; do pb_d=${pb_d%/*}; pb_d=${pb_d:-/}; set -- "$@" "$pb_d"; done
  pb_s=$(stat -c '%u:%g:%a:%F' -- "$@" 2>&1) || { echo "cannot stat $1: $pb_s" | head -n 2; return 1; }
  for pb_x in "$@"; do
    pb_line=${pb_s%%"$pb_nl"*}; pb_s=${pb_s#*"$pb_nl"}
    pb_ifs=$IFS; IFS=:; set -- $pb_line; IFS=$pb_ifs
    pb_judge "$pb_x" "$pb_k" "$1" "$2" "$3" "${4%% *}" || return 1
    case $pb_k in dir|up) pb_k=up ;; *) pb_k=dir ;; esac
  done
}
pb_path() {
  pb_p=$1; pb_fk=${2:-file}
  case $pb_p in
    /*) ;;
    *) pb_q=$(command -v -- "$pb_p") || { echo "$pb_p: not found on PATH"; return 1; }
       case $pb_q in /*) pb_p=$pb_q ;; *) echo "$pb_p is not a file on PATH ($pb_q)"; return 1 ;; esac ;;
  esac
  [ -e "$pb_p" ] || { echo "$pb_p: no such file"; return 1; }
  pb_n=0
  while :; do
    pb_chain "$pb_p" "$pb_fk" || return 1
    [ -L "$pb_p" ] || break
    pb_n=$((pb_n + 1)); [ $pb_n -le MAX_LINKS ] || { echo "$pb_p: more than MAX_LINKS symlinks"; return 1; }
    pb_t=$(readlink -- "$pb_p"); case $pb_t in /*) pb_p=$pb_t ;; *) pb_p=${pb_p%/*}/$pb_t ;; esac
  done
  pb_r=$(realpath -e -- "$pb_p") || { echo "$pb_p: cannot resolve"; return 1; }
  [ "$pb_r" = "$pb_p" ] || pb_chain "$pb_r" "$pb_fk" || return 1
}
pb_guard() {
  for pb_a in "$@"; do pb_path "$pb_a" || return 1; done
}
pb_maybe() {
  for pb_a in "$@"; do if [ -e "$pb_a" ] || [ -L "$pb_a" ]; then pb_path "$pb_a" || return 1; fi; done
}
pb_tree() {
  # Only what could fail the rule is printed (a superset: root's group may write), each judged by pb_judge; a
  # name with a newline splits into a line that cannot be judged: refused. $2: only the names matching it, in $1.
  if [ -n "${2-}" ]; then set -- "$1" -maxdepth 1 -name "$2"; else set -- "$1"; fi
  pb_lines=$(find -P "$@" \( \( -type l -printf 'l 0 0 0 %p\n' \) -o \
    \( \( ! -user 0 ! -user "$pb_u" -o -perm /022 \) -printf '%y %U %G %m %p\n' \) \) 2>&1 | head -n MAX_TREE_LINES)
  [ -n "$pb_lines" ] || return 0
  pb_ifs=$IFS; IFS='
'
  for pb_line in $pb_lines; do
    IFS=$pb_ifs
    case $pb_line in
      "l 0 0 0 "*) pb_path "${pb_line#l 0 0 0 }" || return 1 ;;
      [a-z]" "*) set -- $pb_line; pb_x=${pb_line#* * * * }
                 pb_judge "$pb_x" file "$2" "$3" "$4" "$1" || return 1 ;;
      *) echo "cannot judge: $pb_line"; return 1 ;;
    esac
  done
  IFS=$pb_ifs
}
pb_sock() {
  case $1 in /*) ;; *) echo "the engine's socket $1 is not an absolute path"; return 1 ;; esac
  if [ -e "$1" ] || [ -L "$1" ]; then pb_path "$1" sock; return; fi
  pb_d=${1%/*}; pb_chain "${pb_d:-/}"  # none there: only whoever can write its dir can plant one
}
pb_python() {
  case $1 in /*) ;; *) set -- "$(command -v -- "$1")" ;; esac
  pb_l=$(head -c 256 -- "$1" 2>/dev/null | tr -d '\000' | head -n 1)  # an ELF CLI: no #!, nothing else read
  case $pb_l in '#!'*) ;; *) return 0 ;; esac
  set -- "$1" ${pb_l#??}
  [ $# -ge 2 ] || { echo "$1: a #! line naming no interpreter"; return 1; }
  pb_i=$2
  case ${pb_i##*/} in env) [ $# -ge 3 ] || { echo "$1: #!$pb_i names no program"; return 1; }
    pb_guard "$pb_i" || return 1; pb_i=$3 ;; esac
  pb_path "$pb_i" || return 1
  pb_i=$pb_r
  case ${pb_i##*/} in python*) ;; *) return 0 ;; esac
  # Where its imports come from as it runs (PYTHON* variables unset, as the guard execs it): the script's real
  # dir first, then the interpreter's own path; -E -S: nothing from the environment or a site dir runs here.
  pb_sp=$("$pb_i" -E -S -c 'import site, sys
print(*sys.path[1:], site.getusersitepackages(), *site.getsitepackages(), sep="\n")' </dev/null 2>&1 | head -n 40) \
    || { echo "$pb_i: cannot tell where it imports from: $pb_sp"; return 1; }
  pb_r=$(realpath -e -- "$1") || { echo "$1: cannot resolve"; return 1; }
  pb_ifs=$IFS; IFS='
'
  pb_found=
  for pb_e in "${pb_r%/*}" $pb_sp; do
    IFS=$pb_ifs
    case $pb_e in /*) ;; *) continue ;; esac
    [ -d "$pb_e" ] || continue
    pb_path "$pb_e" || return 1
    pb_tree "$pb_e" '*.pth' || return 1
    for pb_c in "$pb_e/compose" "$pb_e/compose.py"; do
      if [ -z "$pb_found" ] && { [ -e "$pb_c" ] || [ -L "$pb_c" ]; }; then
        pb_found=1; pb_path "$pb_c" && pb_tree "$pb_c" || return 1
      fi
    done
  done
  IFS=$pb_ifs
}
""".replace("MAX_TREE_LINES", str(MAX_TREE_LINES)).replace("MAX_LINKS", str(MAX_LINKS))

# The Python variables a Python CLI would obey (PYTHONPATH, PYTHONSTARTUP's kin, PYTHONHOME, PYTHONUSERBASE...):
# unset before any exec, as `-E` would, whatever sshd's AcceptEnv or the user's environment let through.
UNSET_PYTHON = ("for pb_v in $(env | sed -n 's/^\\(PYTHON[A-Za-z0-9_]*\\)=.*/\\1/p'); do unset \"$pb_v\"; done")
