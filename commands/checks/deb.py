"""``package:deb:<name>``: an installed Debian package is pristine, proven by dpkg's own md5sums, no backup needed.

One argv per package runs a fixed ``sh`` script (the package name is its ``$1``, never part of
the script) that prints three sections: ``dpkg-query -W`` (status, version, conffiles),
the number of files in the package's ``md5sums`` (or dpkg's complaint that there is none:
``dpkg --verify`` itself stays silent then, which would read as a pass), and
``dpkg --verify --verify-format rpm`` (one line per file that failed a check). dpkg stores
md5 digests only, so this check is md5-based, and the evidence says so.
"""

from __future__ import annotations

import hashlib
import re
import shlex
from dataclasses import dataclass, field

from commands.checks.check import Check, Read, Step
from commands.command_result import CommandResult
from commands.findings import Evidence, Finding
from commands.vocabulary import CheckStatus

# Section markers start with '@': no line dpkg prints can (verify lines start with their 9
# check characters, conffile lines with a space, messages with "dpkg"; dpkg refuses file
# names holding a newline), and the batch already frames each command with a nonce.
SCRIPT = r"""command -v dpkg >/dev/null || { echo 'proofbot: no dpkg on this host'; exit 127; }
echo @status
dpkg-query -W -f='${Status}\t${Version}\t${binary:Package}\n${Conffiles}\n' -- "$1" 2>&1
echo "@rc $?"
echo @md5sums
m=$(dpkg-query --control-show -- "$1" md5sums 2>&1)
r=$?
if [ $r -eq 0 ]; then printf %s "$m" | grep -c ''; else printf '%s\n' "$m" | head -n 20; fi
echo "@rc $r"
echo @verify
{ dpkg --verify --verify-format rpm -- "$1" 2>&1; echo "@rc $?"; } |
  awk '/^@rc / { print; next } ++n <= LIMIT { print } END { if (n > LIMIT) print "@cut " n - LIMIT }'
"""
VERIFY_LINES = 500  # a whole package rewritten prints one line per file: the rest is only counted
SHOWN = 8
MD5_NOTE = "md5-based: dpkg stores only md5 digests of a package's files"
# rpm format, as `man dpkg` gives it: 9 check characters (or "missing  "), a conffile mark, the path.
_VERIFY_LINE = re.compile(r"^(missing  |[?.A-Za-z0-9]{9}) (.) (.*)$")
_KNOWN_FLAGS = {1: "M", 2: "5"}  # positions after the first; every other position is always '?' today
# dpkg appends " (<strerror>)" to a missing line only when the file exists but cannot be looked at;
# strerror texts start with a capital, which a name such as "odd (name).txt" does not end in.
_MISSING_REASON = re.compile(r"^(.*) \(([A-Z][^()]*)\)$")


SCRIPT_TEXT = SCRIPT.replace("LIMIT", str(VERIFY_LINES))
SCRIPT_ID = hashlib.sha256(SCRIPT_TEXT.encode()).hexdigest()[:12]


def deb_argv(name: str) -> list[str]:
    return ["sh", "-c", SCRIPT_TEXT, "proofbot-deb", name]


def shown_command(name: str) -> str:
    """The command as evidence shows it: the script named by its hash (its text is in this module), then
    what it runs, since its quoting makes the whole argv unreadable in a thread."""
    return (shlex.join(["sh", "-c", f"<proofbot dpkg script sha256:{SCRIPT_ID}>", "proofbot-deb", name])
            + f"  # runs: dpkg-query -W {name}; dpkg-query --control-show {name} md5sums | count; "
            f"dpkg --verify --verify-format rpm {name}")


def fix_command(name: str, version: str) -> str:
    return shlex.join(["apt-get", "install", "--reinstall", f"{name}={version}" if version else name])


@dataclass
class _Sections:
    """The script's output cut at its markers: each section's lines and dpkg's exit status."""

    lines: dict[str, list[str]] = field(default_factory=dict)
    rc: dict[str, int] = field(default_factory=dict)
    cut: int = 0
    stray: list[str] = field(default_factory=list)


@dataclass
class _Verified:
    """What ``dpkg --verify`` reported, file by file."""

    changed: list[str] = field(default_factory=list)
    missing: list[str] = field(default_factory=list)
    conffiles: list[str] = field(default_factory=list)
    odd: list[str] = field(default_factory=list)
    dpkg_errors: list[str] = field(default_factory=list)


def _sections(text: str) -> _Sections:
    found = _Sections()
    current: str | None = None
    for line in text.splitlines():
        if line in ("@status", "@md5sums", "@verify"):
            current = line[1:]
            found.lines[current] = []
        elif current and re.fullmatch(r"@rc \d+", line):
            found.rc[current] = int(line.split()[1])
        elif current == "verify" and re.fullmatch(r"@cut \d+", line):
            found.cut = int(line.split()[1])
        elif current is None:
            found.stray.append(line[:300])
        else:
            found.lines[current].append(line)
    return found


def parse_deb(name: str, result: CommandResult) -> Finding:
    """The verdict on one Debian package from the script's three sections."""
    check = f"package:deb:{name}"
    found = _sections(result.text)
    evidence = Evidence.of(shown_command(name), result.exit_status, _shown(found, result.text), result.duration_s)
    if "status" not in found.lines:
        if result.exit_status == 127 or any("not found" in line or "no dpkg" in line for line in found.stray):
            return Finding(check, CheckStatus.ERROR, "dpkg is not on the host: it is not a Debian system", evidence)
        tail = found.stray[-1] if found.stray else "no output"
        return Finding(check, CheckStatus.ERROR,
                       f"the dpkg commands gave no usable output (exit {result.exit_status}): {tail}",
                       evidence)
    if any(section not in found.rc for section in ("status", "md5sums", "verify")):
        return Finding(check, CheckStatus.ERROR, "dpkg's output ended early: nothing is proven", evidence)
    status_lines = found.lines["status"]
    head = status_lines[0].split("\t") if status_lines else []
    if found.rc["status"] != 0 or len(head) != 3:
        said = " ".join(status_lines)[:300] or "nothing"
        if "no packages found" in said:
            return Finding(check, CheckStatus.ERROR, f"{name} is not installed (dpkg-query: {said})", evidence)
        return Finding(check, CheckStatus.ERROR,
                       f"dpkg-query could not tell whether {name} is installed: {said}", evidence)
    state, version, package = head
    if state.split()[-1:] != ["installed"]:
        return Finding(check, CheckStatus.ERROR,
                       _not_installed(name, state), evidence, {"status": state, "version": version})
    # " <path> <md5>[ obsolete]": a path may hold spaces, so the md5 is cut from the right.
    conffiles = [line.strip().rsplit(" ", 1)[0] for line in status_lines[1:]
                 if line.strip() and not line.endswith(" obsolete")]
    return _verdict(check, package, version, conffiles, found, evidence)


def _shown(found: _Sections, raw: str) -> str:
    """dpkg --verify's lines first (they are the finding), the conffiles' digests counted, not listed."""
    if any(section not in found.rc for section in ("status", "md5sums", "verify")):
        return raw
    status = found.lines["status"]
    conffiles = sum(1 for line in status[1:] if line.strip())
    lines = ["@verify", *found.lines["verify"], *([f"@cut {found.cut}"] if found.cut else []),
             f"@rc {found.rc['verify']}", "@status", *status[:1],
             *([f"({conffiles} conffile line(s) not shown)"] if conffiles else []), f"@rc {found.rc['status']}",
             "@md5sums", *found.lines["md5sums"], f"@rc {found.rc['md5sums']}"]
    return "\n".join(lines)


def _not_installed(name: str, state: str) -> str:
    if state.endswith("config-files"):
        return f"{name} is not installed: only its conffiles remain (removed, not purged; status {state!r})"
    if state.endswith("not-installed"):
        return f"{name} is not installed (status {state!r})"
    return f"{name} is not fully installed (status {state!r}): dpkg's record of its files cannot be trusted"


def _verify_lines(found: _Sections) -> _Verified:
    seen = _Verified()
    for line in found.lines["verify"]:
        match = _VERIFY_LINE.match(line)
        if match is None:
            (seen.dpkg_errors if line.startswith("dpkg") else seen.odd).append(line[:300])
            continue
        checks, mark, path = match.groups()
        if mark == "c":
            seen.conffiles.append(_describe(checks, path))
        elif checks == "missing  ":
            seen.missing.append(_describe(checks, path))
        else:
            seen.changed.append(_describe(checks, path) + ("" if mark == " " else f" (unknown mark {mark!r})"))
    return seen


def _describe(checks: str, path: str) -> str:
    if checks == "missing  ":
        reason = _MISSING_REASON.match(path)
        return f"{reason.group(1)} cannot be read ({reason.group(2)})" if reason else f"{path} is missing"
    said = []
    for position, flag in enumerate(checks):
        if flag in "?.":
            continue
        if _KNOWN_FLAGS.get(position) == flag:
            said.append("md5 differs" if flag == "5" else "not a regular file")
        else:
            said.append(f"check {flag!r} failed (position {position + 1}, unknown to proofbot)")
    return f"{path}: {', '.join(said) or 'reported with no failed check'}"


def _verdict(check: str, package: str, version: str, conffiles: list[str], found: _Sections,
             evidence: Evidence) -> Finding:
    seen = _verify_lines(found)
    md5sums = found.lines["md5sums"]
    has_md5sums = found.rc["md5sums"] == 0 and len(md5sums) == 1 and md5sums[0].isdigit()
    counted = int(md5sums[0]) if has_md5sums else 0
    fix = fix_command(package, version)
    details = {"version": version, "md5sums_files": counted, "conffiles": len(conffiles), "changed": seen.changed,
               "missing": seen.missing, "conffiles_changed": seen.conffiles, "odd": seen.odd,
               "dpkg_errors": seen.dpkg_errors, "not_shown": found.cut}
    who = f"{package} {version}"
    problems = seen.changed + seen.missing
    if problems:
        details["fix"] = fix
        more = len(problems) - SHOWN + found.cut
        shown = "; ".join(problems[:SHOWN]) + (f"; and {more} more" if more > 0 else "")
        return Finding(check, CheckStatus.FAIL, f"{who}: {len(problems) + found.cut} path(s) differ from dpkg's record "
                       f"({MD5_NOTE}): {shown}. To make it pristine: {fix}", evidence, details)
    if seen.dpkg_errors or found.rc["verify"] not in (0, 1) or found.cut:
        said = "; ".join(seen.dpkg_errors[:2]) or f"dpkg --verify exited {found.rc['verify']}"
        return Finding(check, CheckStatus.ERROR, f"{who}: dpkg --verify stopped before checking every file: {said}",
                       evidence, details)
    if not has_md5sums:
        said = " ".join(md5sums)[:200] or "no md5sums"
        return Finding(check, CheckStatus.ERROR,
                       f"{who}: dpkg holds no md5sums for it ({said}): dpkg --verify can check only "
                       f"its {len(conffiles)} conffile(s) and says nothing of the rest, so nothing is proven. "
                       f"A reinstall writes them: {fix}", evidence, details)
    total = f"{counted + len(conffiles)} file(s) with a stored md5 ({counted} in md5sums, {len(conffiles)} conffiles)"
    doubts = []
    if seen.conffiles:
        doubts.append(f"conffile(s) differ from the packaged version: {'; '.join(seen.conffiles[:SHOWN])}. Admins "
                      "edit conffiles on purpose (dpkg keeps their edits on upgrade and reinstall): check each is "
                      "an edit you meant")
    if seen.odd:
        doubts.append(f"dpkg printed line(s) proofbot does not read: {'; '.join(seen.odd[:SHOWN])!r}")
    if doubts:
        return Finding(check, CheckStatus.WARN, f"{who}: every other file of {total} matches; but " + "; ".join(doubts)
                       + f" ({MD5_NOTE})", evidence, details)
    return Finding(check, CheckStatus.PASS, f"{who}: all {total} match dpkg's record ({MD5_NOTE})", evidence, details)


@dataclass(frozen=True)
class DebCheck(Check):
    """``package:deb:<name>``."""

    package: str

    @property
    def name(self) -> str:
        return f"package:deb:{self.package}"

    def steps(self) -> list[Step]:
        return [deb_argv(self.package)]

    def parse(self, read: Read) -> Finding:
        return parse_deb(self.package, read.own[0])
