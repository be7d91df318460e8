"""Restore, the first round trip: where each backup file's paths lead and who can write the dirs a
restore writes into, read without any content; a plan that must not be read or written is refused here."""

from __future__ import annotations

import os
import re
from dataclasses import dataclass

from commands.command_result import CommandResult

# Run as `sh -c WHERE proofbot-where LIVE SOURCE SOURCE_DIR`: where each path leads, and the
# owner/mode of every dir a restore writes into (the live file's dir, its resolved dir, the
# target's dir for a symlink, and each of their parents), without reading any content.
WHERE_SCRIPT = r"""live=$1 src=$2 srcdir=$3
kind() { if [ -L "$1" ]; then echo symlink; elif [ -f "$1" ]; then echo file; elif [ -e "$1" ]; then echo other
  else echo missing; fi; }
follow() { if [ -f "$1" ]; then echo file; elif [ -e "$1" ]; then echo other; else echo missing; fi; }
target=$(readlink -f -- "$live")
printf 'live\t%s\t%s\t%s\0' "$(kind "$live")" "$(follow "$live")" "$target"
printf 'source\t%s\t%s\0' "$(follow "$src")" "$(realpath -e -- "$src" 2>/dev/null)"
printf 'source-dir\t%s\0' "$(realpath -e -- "$srcdir" 2>/dev/null)"
for d in "$(dirname -- "$live")" ${target:+"$(dirname -- "$target")"}; do
  while :; do
    stat --printf 'dir\t%u\t%g\t%a\t%F\t%n\0' -- "$d"
    case $d in /|.|'') break;; esac
    d=$(dirname -- "$d")
  done
done"""


def where_argv(live: str, source: str, source_dir: str) -> list[str]:
    return ["sh", "-c", WHERE_SCRIPT, "proofbot-where", live, source, source_dir]


@dataclass(frozen=True)
class Where:
    """Where one backup file's paths lead on the host, and who can write the dirs on the way."""

    live_type: str
    live_follows: str
    live_target: str
    source_follows: str
    source_real: str
    source_dir_real: str
    dirs: dict[str, tuple[int, int, int, str]]  # path -> (uid, gid, mode, type)


def parse_where(result: CommandResult) -> Where:
    """The NUL-ended records of WHERE_SCRIPT; a record missing leaves its fields empty (refused)."""
    fields: dict[str, list[str]] = {}
    dirs: dict[str, tuple[int, int, int, str]] = {}
    for record in result.text.split("\0"):
        record = "\n".join(line for line in record.split("\n") if not line.startswith("stat: "))
        kind, _, rest = record.partition("\t")
        parts = rest.split("\t", 4)
        if kind == "dir" and len(parts) == 5 and parts[0].isdigit() and parts[1].isdigit():
            dirs[parts[4]] = (int(parts[0]), int(parts[1]), int(parts[2] or "0", 8), parts[3])
        elif kind in ("live", "source", "source-dir"):
            fields[kind] = rest.split("\t", {"live": 2, "source": 1, "source-dir": 0}[kind])
    live = [*fields.get("live", []), "", "", ""]
    source = [*fields.get("source", []), "", ""]
    return Where(live[0], live[1], live[2], source[0], source[1], [*fields.get("source-dir", []), ""][0], dirs)


def ssh_ids(result: CommandResult) -> tuple[int, int] | None:
    match = re.search(r"uid=([0-9]+)\S* gid=([0-9]+)", result.text)
    return (int(match.group(1)), int(match.group(2))) if match else None


def untrusted_dirs(where: Where, ids: tuple[int, int], live: str) -> list[str]:
    """Dirs on the way that a user other than root and the SSH user can write, or own, each with who.

    A sticky parent (``/tmp``) is fine: nobody can rename or remove another user's entry in
    it, and the entry below is judged in turn. The dir written into may not be sticky either:
    other users could still create names in it.
    """
    uid, gid = ids
    written = {os.path.dirname(live), os.path.dirname(where.live_target)} - {""}
    found = []
    for path, (owner, group, mode, ftype) in where.dirs.items():
        if ftype != "directory":
            continue  # a symlinked parent: its own dir and its target's are both in the list
        if mode & 0o1000 and path not in written:
            continue
        who = []
        if owner not in (0, uid):  # without its write bit too: an owner can chmod its dir back at any time
            who.append(f"owner uid {owner}" + ("" if mode & 0o200 else " (who may chmod it)"))
        if mode & 0o020 and group not in (0, gid):
            who.append(f"group gid {group}")
        if mode & 0o002:
            who.append("every user" + (" (sticky)" if mode & 0o1000 else ""))
        if who:
            found.append(f"{path} (mode {mode:o}, writable by {' and '.join(who)})")
    return found


def refusals(name: str, live: str, src: str, source_dir: str, where: Where, ids: tuple[int, int] | None,
             allow_untrusted: bool) -> list[str]:
    """Why a restore of this file must not even be planned; empty when it may."""
    reasons: list[str] = []
    if not where.live_type or not where.source_follows:
        return [f"could not read where {live} and {src} lead"]
    if where.source_follows == "other":
        reasons.append(f"{src} is not a regular file: not read")
    elif where.source_real and not (where.source_dir_real
                                    and where.source_real.startswith(where.source_dir_real.rstrip("/") + "/")):
        reasons.append(f"backup entry {name} leads outside the backup dir {source_dir} "
                       f"(to {where.source_real}): not read")
    if where.live_type == "other" or where.live_follows == "other":
        reasons.append(f"live {live} is not a regular file")
    elif where.live_type == "symlink" and where.live_follows == "missing":
        reasons.append(f"live {live} is a symlink to nothing ({where.live_target or 'unresolvable'})")
    if ids is None:
        reasons.append("could not read the SSH user's uid and gid (`id`) to judge who can write the live dirs")
        return reasons
    untrusted = untrusted_dirs(where, ids, live)
    if where.live_type == "symlink" and untrusted:
        # Whoever can repoint the link chooses what a restore writes and what the plan diffs:
        # refused even where allow_untrusted_dirs accepts other users writing the files.
        reasons.append(f"live {live} is a symlink in a dir other users can write: {'; '.join(untrusted)}")
    elif untrusted and not allow_untrusted:
        reasons.append(f"{live} would be written in a dir other users can write: {'; '.join(untrusted)} "
                       "(set allow_untrusted_dirs: true on this backup to accept that)")
    return reasons
