"""Restore, the diff a plan shows: ``diff -u`` of live and source, cut on the host at a byte limit with
diff's own exit status kept, and cut again on a line end when shown."""

from __future__ import annotations

from commands.command_result import CommandResult

DIFF_LIMIT = 200_000  # bytes of diff the host sends; the rest is only counted there
# diff's own exit status survives the pipe (sh has no pipefail): it leaves through fd 3 while
# the diff goes through dd, which passes exactly $4 bytes; wc then drains the rest (so diff
# never dies of SIGPIPE) and prints only its byte count, right after those $4 bytes.
DIFF_SCRIPT = ('{ st=$( { { diff -u --no-dereference --label "$1" --label "$3" -- "$2" "$3"; '
               'echo "$?" >&3; } | { dd bs="$4" count=1 iflag=fullblock 2>/dev/null; rest=$(wc -c); '
               '[ "$rest" -eq 0 ] || printf %s "$rest"; } >&4; } 3>&1 ); } 4>&1; exit "$st"')


def diff_argv(live: str, src: str, limit: int = DIFF_LIMIT, *, read: str | None = None) -> list[str]:
    """``diff -u live src`` (reading ``read`` for live, labelled ``live``) cut on the host at ``limit``
    bytes, keeping diff's exit status."""
    return ["sh", "-c", DIFF_SCRIPT, "sh", live, read or live, src, str(limit)]


def diff_text(result: CommandResult, limit: int = DIFF_LIMIT) -> tuple[str, int]:
    """The diff as shown and its full size: at most ``limit`` bytes came, then the count of the rest.

    The cut falls back to the last whole line, so no secret is shown in part.
    """
    body, rest = result.output[:limit], result.output[limit:]
    if not rest.isdigit():
        return result.output.decode("utf-8", errors="replace"), len(result.output)
    total = limit + int(rest)
    kept = body[: body.rfind(b"\n") + 1] or body
    note = (f"… [diff cut on the host after {len(kept):,} of {total:,} bytes: "
            "compare the hashes above; the rest was not read]\n")
    return kept.decode("utf-8", errors="replace") + note, total
