"""``package:<dist>``: an installed Python distribution is pristine, proven by its own RECORD, no backup needed.

The argv runs ``package_guard``'s script, which execs a root-owned interpreter outside the
environment on ``commands/checks/package_probe.py`` (the environment is read as data, never
run); this module's parser reads the JSON lines it prints (names, sizes, digests) and gives
the verdict, following the wheel spec's RECORD rules: ``algo=<urlsafe base64, no padding>``,
an empty hash only for RECORD itself (and its signatures) and for ``.pyc`` files, paths
relative to the site dir (``../../../bin/x`` for scripts).
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import json
import re
import shlex
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from commands.checks.check import Check, Read, Step
from commands.checks.package_guard import GUARD_ID, SCRIPT_TEXT, refusals
from commands.checks.package_probe import UNREADABLE
from commands.command_result import CommandResult
from commands.findings import Evidence, Finding
from commands.vocabulary import CheckStatus

_HERE = Path(__file__).parent
# The probe is one text on the host: package_probe's import of package_probe_fs is replaced by that
# module's own text (its __future__ line dropped: only the first statement may be one).
_FS_IMPORT = re.compile(r"^from commands\.checks\.package_probe_fs import (?:\([^)]*\)|[^\n]*)\n", re.M)
_FS_SOURCE = (_HERE / "package_probe_fs.py").read_text(encoding="utf-8").replace(
    "from __future__ import annotations\n", "")


def pasted(probe: str) -> str:
    """A host-side probe (a module of this dir) as the one text the host runs, package_probe_fs pasted in."""
    return _FS_IMPORT.sub(lambda _: _FS_SOURCE, (_HERE / probe).read_text(encoding="utf-8"), 1)


PROBE_SOURCE = pasted("package_probe.py")
PROBE_ID = hashlib.sha256(PROBE_SOURCE.encode()).hexdigest()[:12]
# The wheel spec forbids md5 and sha1 in RECORD; only these are proof.
TRUSTED_ALGORITHMS = {"sha256": 32, "sha384": 48, "sha512": 64, "sha3_256": 32, "sha3_384": 48,
                      "sha3_512": 64, "blake2b": 64, "blake2s": 32}
UNHASHED_NAMES = ("RECORD", "RECORD.jws", "RECORD.p7s")
SHOWN = 8


def package_argv(python: str, dist: str) -> list[str]:
    """The guard picks a root-owned interpreter outside the environment (or refuses) and runs the probe
    under it isolated (-I: no PYTHON* variables, no user site) and without site (-S); ``python`` is data."""
    return ["sh", "-c", SCRIPT_TEXT, "proofbot-package", PROBE_SOURCE, python, dist]


def shown_command(python: str, dist: str) -> str:
    """The command as evidence shows it: the guard and the probe named by their hashes, not pasted whole."""
    return (shlex.join(["sh", "-c", f"<proofbot package guard sha256:{GUARD_ID}>", "proofbot-package",
                        f"<proofbot package probe sha256:{PROBE_ID}>", python, dist])
            + f"  # runs: <root-owned python3> -I -S -c <probe> reading the environment of {python} as data")


def fix_command(python: str, dist: str, version: str) -> str:
    return shlex.join([python, "-m", "pip", "install", "--force-reinstall", "--no-deps",
                       f"{dist}=={version}" if version else dist])


@dataclass
class _Tally:
    """What the probe's rows add up to: problems that fail, rows that prove nothing, rows proven."""

    changed: list[dict[str, Any]] = field(default_factory=list)
    missing: list[str] = field(default_factory=list)
    unlisted: list[dict[str, Any]] = field(default_factory=list)
    untrusted: list[dict[str, Any]] = field(default_factory=list)
    unreadable: list[str] = field(default_factory=list)
    proven: int = 0
    pyc_ignored: int = 0
    rows: int = 0
    shown_lines: list[str] = field(default_factory=list)
    shown_rows: int = 0

    def problems(self) -> list[str]:
        # "is a symlink …", "is reached through …": what is there instead of a file, said as such.
        said = [f"{item['path']} {item['why']}" if item["why"].startswith("is ") else
                f"{item['path']} differs from RECORD: {item['why']}" for item in self.changed]
        said += [f"{path} is listed in RECORD but missing" for path in self.missing]
        said += [f"{item['path']} {item['why']}" for item in self.unlisted]
        return said


def parse_package(python: str, dist: str, result: CommandResult) -> Finding:
    """The verdict on one distribution from the probe's output."""
    check = f"package:{dist}"
    records, stray = probe_records(result.output)
    env = next((r for r in records if r.get("t") == "env"), None)
    error = next((r for r in records if r.get("t") == UNREADABLE), None)
    dist_line = next((r for r in records if r.get("t") == "dist"), None)
    end = next((r for r in records if r.get("t") == "end"), None)
    tally = _Tally()
    head: list[str] = []
    for record in records:
        kind = record.get("t")
        if kind == "row":
            tally.rows += 1
            _judge_row(record, dist_line, tally)
        elif kind == "extra":
            _judge_extra(record, tally)
        elif kind == "bad":
            tally.untrusted.append({"row": record.get("n"), "path": str(record.get("p", "")),
                                    "record": f"row {record.get('n')}",
                                    "why": f"{record.get('fields')} field(s) where RECORD rows have 3"})
            tally.shown_lines.append(_line(record))
        elif kind in ("env", "dist"):
            head.append(_line(record))
        elif kind in ("error", "end", "cut"):
            tally.shown_lines.append(_line(record))
    # Only the rows that matter are shown; the matching ones are counted, so evidence stays readable.
    hidden = tally.rows - tally.shown_rows
    note = [f"({hidden} row(s) not shown: each matched RECORD or is never proof)"] if hidden else []
    shown = "\n".join(head + tally.shown_lines + stray[:20] + note)
    evidence = Evidence.of(shown_command(python, dist), result.exit_status, shown, result.duration_s)
    if error is not None:  # the environment's own errors come before its env line
        links = "; ".join(f"{link.get('at')} -> {link.get('target')!r}" for link in (env or {}).get("links") or [])
        unfollowed = f" (symlinks in its layout, not followed: {links})" if links else ""
        return Finding(check, CheckStatus.ERROR,
                       _error_summary(dist, python, error) + unfollowed, evidence, {"error": error})
    if env is None:
        return _no_probe(check, python, result, stray, evidence)
    if dist_line is None or end is None:
        return Finding(check, CheckStatus.ERROR, f"the probe's output ended early (exit {result.exit_status}): "
                       "nothing is proven", evidence)
    return _verdict(check, python, dist, dist_line, end, tally, evidence,
                    cut=any(r.get("t") == "cut" for r in records))


def probe_records(output: bytes) -> tuple[list[dict[str, Any]], list[str]]:
    """The probe's JSON lines, and any other line (a traceback, a shell's 'not found')."""
    records: list[dict[str, Any]] = []
    stray: list[str] = []
    for raw in output.decode("utf-8", "replace").splitlines():
        try:
            value = json.loads(raw)
        except ValueError:
            value = None
        if isinstance(value, dict):
            records.append(value)
        elif raw.strip():
            stray.append(raw[:300])
    return records, stray


def _line(record: dict[str, Any]) -> str:
    return json.dumps(record, ensure_ascii=False, sort_keys=True)


def _judge_row(row: dict[str, Any], dist_line: dict[str, Any] | None, tally: _Tally) -> None:
    path, recorded, size_field = str(row.get("p", "")), str(row.get("h", "")), str(row.get("s", ""))
    state = row.get("st")
    name = path.rsplit("/", 1)[-1]
    dist_info = str((dist_line or {}).get("dist_info", ""))
    if state in ("link", "hardlink", "other"):  # whatever the row says: a link is a finding, never followed
        return _change(tally, row, _not_a_file(row, path, "where RECORD lists a file"))
    if not recorded:
        if path.endswith(".pyc"):
            tally.pyc_ignored += 1
            return
        if path.startswith(f"{dist_info}/") and name in UNHASHED_NAMES:
            return
        return _untrust(tally, row, "listed without a hash: nothing to compare")
    algorithm, _, encoded = recorded.partition("=")
    expected = _decode(encoded)
    if algorithm not in TRUSTED_ALGORITHMS:
        return _untrust(tally, row, f"hash algorithm {algorithm!r} is not one the wheel spec accepts as proof")
    if expected is None or len(expected) != TRUSTED_ALGORITHMS[algorithm]:
        return _untrust(tally, row, "the hash is not valid urlsafe base64 of a " + algorithm + " digest")
    if size_field and not size_field.isdigit():
        return _untrust(tally, row, f"size {size_field!r} is not a number")
    if state == "missing":
        tally.missing.append(path)
        return _show_row(tally, row)
    if state == "outside":
        return _untrust(tally, row, "resolves outside the environment: not read")
    if state == "unreadable":
        tally.unreadable.append(f"{path} ({row.get('err')})")
        return _show_row(tally, row)
    if state != "ok":
        return _change(tally, row, "is not a regular file")
    actual = _decode(str(row.get("d", "")))
    size_differs = bool(size_field) and int(size_field) != row.get("size")
    if actual == expected and not size_differs:
        tally.proven += 1
        return None
    if row.get("sbi") and row.get("sbr") and "/bin/" in f"/{path}" and path.startswith("../"):
        return _untrust(tally, row, f"a script whose #! header is now {_first(row.get('sbn'))!r} where RECORD's "
                                    f"was {_first(row.get('sbr'))!r} (both as an installer writes them), the rest "
                                    "byte for byte as RECORD says: rewritten by an installer or a move, RECORD "
                                    "cannot prove it")
    why = (f"size {row.get('size')} B (recorded {size_field or '?'} B), {algorithm} "
           f"{_hex(actual)} (recorded {_hex(expected)})")
    if row.get("sbn") is not None and not row.get("sbi"):
        why += f"; its #! header {_first(row.get('sbn'))!r} is not one an installer writes"
    return _change(tally, row, why)


def _first(header: object) -> str:
    """A script header as one line (distlib's long form spans three)."""
    return str(header or "").rstrip("\n").replace("\n", "\\n")[:200]


def _not_a_file(item: dict[str, Any], path: str, where: str) -> str:
    """Why nothing at path was read: a link (on the way or the file itself), a hard link, not a file."""
    state = item.get("st")
    if state == "hardlink":
        return (f"is a hard link to a file of uid {item.get('uid')} that others cannot read: not read, "
                "its digest would tell what it holds")
    if state == "other":
        return "is not a regular file"
    target = item.get("target")
    if not item.get("via"):
        return f"is a symlink to {target!r} {where}: not followed"
    return f"is reached through the symlink {item['via']} -> {target!r}: not followed, nothing behind it read"


def _judge_extra(extra: dict[str, Any], tally: _Tally) -> None:
    path = str(extra.get("p", ""))
    tally.shown_lines.append(_line(extra))
    if extra.get("st") in ("link", "hardlink", "other"):
        why = _not_a_file(extra, path, "that RECORD does not list")
    elif path.endswith(".pyc"):
        why = "is a sourceless .pyc beside the modules (importable with no .py) that RECORD does not list"
    else:
        size = f"{extra.get('size')} B, sha256 {_hex(_decode(str(extra.get('d', ''))))}" if extra.get("d") else ""
        why = f"is not listed in RECORD ({size or extra.get('st')})"
    tally.unlisted.append({"path": path, "why": why, "size": extra.get("size"), "digest": extra.get("d")})


def _untrust(tally: _Tally, row: dict[str, Any], why: str) -> None:
    tally.untrusted.append({"row": row.get("n"), "path": row.get("p"),
                            "record": f"{row.get('p')},{row.get('h')},{row.get('s')}", "why": why})
    _show_row(tally, row)


def _change(tally: _Tally, row: dict[str, Any], why: str) -> None:
    tally.changed.append({"path": str(row.get("p")), "why": why, "size": row.get("size"),
                          "recorded_size": row.get("s"), "digest": row.get("d"), "recorded": row.get("h")})
    _show_row(tally, row)


def _show_row(tally: _Tally, row: dict[str, Any]) -> None:
    tally.shown_lines.append(_line(row))
    tally.shown_rows += 1


def _decode(encoded: str) -> bytes | None:
    """RECORD's urlsafe base64 without padding; None when it is not that."""
    if not encoded or "=" in encoded or any(c in encoded for c in "+/ \n"):
        return None
    try:
        return base64.urlsafe_b64decode(encoded + "=" * (-len(encoded) % 4))
    except (binascii.Error, ValueError):
        return None


def _hex(raw: bytes | None) -> str:
    return raw.hex()[:12] if raw else "?"


def _no_probe(check: str, python: str, result: CommandResult, stray: list[str], evidence: Evidence) -> Finding:
    refused = refusals(stray)
    if refused:
        reasons = "; ".join(refused[:-1]) or refused[-1]
        return Finding(check, CheckStatus.ERROR,
                       f"refused: no root-owned interpreter outside the environment to read it with, "
                       f"so nothing was run (the environment of {python} is never executed): {reasons}",
                       evidence, {"refused": refused})
    tail = stray[-1] if stray else "no output"
    return Finding(check, CheckStatus.ERROR,
                   f"the probe gave no usable output (exit {result.exit_status}): {tail}", evidence)


_ERRORS = {
    "not-installed": "{dist} is not installed in the environment of {python}",
    "egg-info": "{dist} is installed as legacy egg-info ({where}): it has no RECORD to prove it by",
    "no-record": "{dist} has no RECORD in {where}: nothing to prove it by",
    "no-interpreter": "interpreter {python} is missing ({detail}): no environment there to check",
    "path-link": "the environment of {python} is reached through the symlink {at} -> {target!r}: not followed, "
                 "nothing read; name its real path in the inventory",
    "no-access": "could not check: no access to the container's root ({detail})",
}


def _error_summary(dist: str, python: str, error: dict[str, Any]) -> str:
    template = _ERRORS.get(str(error.get("reason")), "RECORD of {dist} is unreadable: {detail}")
    return template.format(dist=dist, python=python, where=error.get("dist_info"), detail=error.get("detail"),
                           at=error.get("at"), target=error.get("target"))


def _verdict(check: str, python: str, dist: str, dist_line: dict[str, Any], end: dict[str, Any], tally: _Tally,
             evidence: Evidence, *, cut: bool) -> Finding:
    version, installer = str(dist_line.get("version", "")), str(dist_line.get("installer", "")) or "unknown"
    ignored = tally.pyc_ignored + int(end.get("pyc_ignored", 0))
    fix = fix_command(python, dist, version)
    owner = next((item for item in dist_line.get("writers") or [] if item.get("via") == "owner"), None)
    if owner:  # its pip is the owner's code: run as root, it is what proofbot itself refuses to do
        fix = (f"as uid {owner.get('uid')}" + (f" ({owner['name']})" if owner.get("name") else "")
               + f", the environment's owner, not as root: {fix}")
    details: dict[str, Any] = {
        "version": version, "installer": installer, "proven": tally.proven, "pyc_ignored": ignored,
        "changed": tally.changed, "missing": tally.missing, "unlisted": tally.unlisted,
        "untrusted": tally.untrusted, "unreadable": tally.unreadable, "site": dist_line.get("site"),
        "record_writers": dist_line.get("writers") or [],
    }
    who = f"{dist} {version} (installer {installer})"
    caveat = _caveat(dist_line.get("writers") or [])
    pycs = f"{ignored} __pycache__ .pyc ignored (never proof either way)"
    problems = tally.problems()
    if problems:
        if tally.unlisted:
            # pip removes only what RECORD lists: a reinstall alone would leave the unlisted files in place.
            fix = f"move aside the unlisted file(s) (a reinstall leaves them), then {fix}"
        details["fix"] = fix
        shown = "; ".join(problems[:SHOWN]) + (f"; and {len(problems) - SHOWN} more" if len(problems) > SHOWN else "")
        return Finding(check, CheckStatus.FAIL,
                       f"{who}: {len(problems)} problem(s): {shown}. To make it pristine: {fix}",
                       evidence, details)
    if tally.unreadable or cut:
        what = f"unreadable: {', '.join(tally.unreadable[:SHOWN])}" if tally.unreadable else \
            "RECORD is longer than the probe reads: the rest is not checked"
        return Finding(check, CheckStatus.ERROR, f"{who}: {what}", evidence, details)
    doubts: list[str] = []
    if dist_line.get("editable"):
        doubts.append(f"editable install from {dist_line.get('url') or 'a source tree'}: the code is not in "
                      "site-packages, so RECORD cannot prove it")
    if tally.untrusted:
        doubts += [f"RECORD row cannot be trusted: {item['record']!r}: {item['why']}"
                   for item in tally.untrusted[:SHOWN]]
    if dist_line.get("others"):
        doubts.append(f"other installs of {dist} shadowed by this one: {', '.join(dist_line['others'])}")
    if doubts:
        return Finding(check, CheckStatus.WARN, f"{who}: {tally.proven} file(s) match RECORD, but " + "; ".join(doubts)
                       + f"; {pycs}{caveat}", evidence, details)
    if tally.proven == 0:
        return Finding(check, CheckStatus.ERROR,
                       f"{who}: RECORD lists no file with a hash: nothing proven", evidence, details)
    return Finding(check, CheckStatus.PASS,
                   f"{who}: {tally.proven} file(s) proven identical to RECORD, nothing unlisted among "
                   f"its modules ({', '.join(map(str, end.get('tops') or [])) or 'no package dirs'}); {pycs}{caveat}",
                   evidence, details)


def _caveat(writers: list[dict[str, Any]]) -> str:
    """What a match proves when someone other than root can rewrite RECORD: only that files and RECORD agree."""
    if not writers:
        return ""
    said: list[str] = []
    for item in writers:
        if item.get("via") == "owner":
            who = f"uid {item.get('uid')}" + (f" ({item['name']})" if item.get("name") else "")
            said.append(f"{who} (owner of {item.get('p')})")
        elif item.get("via") == "group":
            who = f"members of group gid {item.get('gid')}" + (f" ({item['name']})" if item.get("name") else "")
            said.append(f"{who} (group-writable {item.get('p')})")
        else:
            said.append(f"anyone (world-writable {item.get('p')})")
    unique = list(dict.fromkeys(said))
    return (f". Only as good as RECORD: it and the files can both be rewritten by {', '.join(unique[:4])}"
            + (f" and {len(unique) - 4} more" if len(unique) > 4 else "")
            + ", so this proves the files match RECORD, not that nobody changed both")


@dataclass(frozen=True)
class PackageCheck(Check):
    """``package:<dist>`` of the environment of ``python``."""

    python: str
    dist: str

    @property
    def name(self) -> str:
        return f"package:{self.dist}"

    def steps(self) -> list[Step]:
        return [package_argv(self.python, self.dist)]

    def parse(self, read: Read) -> Finding:
        return parse_package(self.python, self.dist, read.own[0])
