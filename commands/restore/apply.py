"""Restore, step two: snapshot, atomic replace, stale bytecode aside, re-read as proof.

Every step is a finding with its commands and output. A failing step stops the rest;
each live file is then either as it was or fully restored (temp file + rename), and a
re-read of every hash says which. Nothing is deleted: replaced files, stale bytecode
and chosen extra files all go into the snapshot dir.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from datetime import UTC, datetime

from commands.checks.check import Fact
from commands.checks.container_files import ContainerFileTimes
from commands.checks.file_times import FILE_TIMES, FileTimes
from commands.checks.files import FileCheck, hashes_by_path
from commands.checks.managers import checks_for
from commands.checks.pid_read import MainPidRead
from commands.command_result import CommandResult
from commands.errors import PlanVoid
from commands.findings import Evidence, Finding
from commands.operation import OnFinding
from commands.restore.into_container import inside_check, inside_facts, inside_step
from commands.restore.plan import FileState, RestorePlan
from commands.restore.source import MANIFEST
from commands.ssh import BatchStep, HostConnection
from commands.verify.runner import findings_of, parse, read_facts
from commands.vocabulary import CheckStatus


@dataclass
class ApplyOutcome:
    snapshot_dir: str
    restored: list[str] = field(default_factory=list)


def snapshot_dir_for(plan: RestorePlan) -> str:
    stamp = datetime.now(UTC).strftime("%Y%m%dT%H%M%SZ")
    return f"{plan.source.snapshot_root}/{stamp}-{plan.operation_id.rsplit('-', 1)[-1]}"


def _evidence(results: list[CommandResult]) -> Evidence:
    command = "\n".join(r.command for r in results)
    output = "\n".join(f"# {r.command}\n{r.text.rstrip()}" if len(results) > 1 else r.text for r in results)
    status = next((r.exit_status for r in results if r.exit_status != 0), 0)
    return Evidence.of(command, status, output, sum(r.duration_s for r in results))


class Applier:
    def __init__(self, conn: HostConnection, plan: RestorePlan, on_step: OnFinding, outcome: ApplyOutcome) -> None:
        self.conn = conn
        self.plan = plan
        self.on_step = on_step
        self.outcome = outcome

    async def step(self, finding: Finding) -> Finding:
        await self.on_step(finding)
        return finding

    def file_checks(self, files: list[FileState], backup_name: str) -> dict[str, FileCheck]:
        """``file:<name>`` of each file, by the file's name (inside the container for a file of its own layer)."""
        return {f.name: inside_check(self.plan.host, f, backup_name) if f.inside
                else FileCheck(f.name, backup_name, f.source_path, f.live_path) for f in files}

    def inside_facts(self, files: list[FileState]) -> list[Fact]:
        """What the checks of files inside the container read first: its main PID, then every file's hash."""
        return inside_facts(self.plan.host, [f.live_path for f in files if f.inside])

    async def recheck(self) -> None:
        """Approval binds to the plan shown: re-read the hashes; any change voids the plan."""
        checks = self.file_checks(self.plan.files, "")
        read = await read_facts(self.conn, [*self.inside_facts(self.plan.files), *checks.values()])
        results = [result for check in checks.values() for result in read[check.name]]
        changed = []
        for before in self.plan.files:
            now = parse(checks[before.name], read).details
            if now.get("live_sha256") != before.live_sha:
                changed.append(f"{before.live_path}: {_short(before.live_sha)} → {_short(now.get('live_sha256'))}")
            if now.get("backup_sha256") != before.source_sha:
                changed.append(f"{before.source_path}: {_short(before.source_sha)} → "
                               f"{_short(now.get('backup_sha256'))}")
        if changed:
            await self.step(Finding("recheck", CheckStatus.FAIL, "plan void, nothing written: changed since the plan: "
                                    + "; ".join(changed), _evidence(results)))
            raise PlanVoid(f"plan void: {self.plan.host.name} changed since the plan was shown: "
                           + "; ".join(changed), hint="request a new plan")
        await self.step(Finding("recheck", CheckStatus.PASS, f"{len(results)} file(s) unchanged since the plan",
                                _evidence(results)))

    async def snapshot(self) -> bool:
        snap = self.outcome.snapshot_dir
        manifest = {"host": self.plan.host.name, "operation_id": self.plan.operation_id,
                    "source": self.plan.source.label,
                    "files": {f.name: {"live_path": f.live_path, "sha256": f.live_sha, "mode": f.live_mode,
                                       "owner": f.live_owner, "absent": f.state == "missing"}
                              for f in self.plan.changes}}
        present = [f for f in self.plan.changes if f.state == "differs"]
        prepare = [["mkdir", "-p", "-m", "700", "--", self.plan.source.snapshot_root],
                   ["mkdir", "-m", "700", "--", snap]]
        results = await self.conn.run_batch(prepare, stop_on_failure=True)
        if len(results) == len(prepare) and results[-1].exit_status == 0:
            written = await self.conn.run(["tee", "--", f"{snap}/{MANIFEST}"],
                                          stdin=json.dumps(manifest, indent=2).encode())
            results.append(written)
        if all(r.exit_status == 0 for r in results):
            copies: list[BatchStep] = [["cp", "-p", "--", f.live_path, f"{snap}/{f.name}"] for f in present
                                       if not f.inside]
            copies += [inside_step(self.plan.host, "copy_out", [{"live": f.live_path, "dst": f"{snap}/{f.name}"}
                                                                for f in present if f.inside])] \
                if any(f.inside for f in present) else []
            copies.append(["sync", "--", snap, *[f"{snap}/{f.name}" for f in present]])
            copies.append(["sha256sum", "--", *[f"{snap}/{f.name}" for f in present]] if present else ["true"])
            results += await self.conn.run_batch(copies, stop_on_failure=True)
        failed = next((r for r in results if r.exit_status != 0), None)
        if failed is not None:
            await self.step(Finding("snapshot", CheckStatus.FAIL, f"could not keep a copy, nothing replaced: "
                                    f"`{failed.command}` said {failed.text.strip()[:300]!r}", _evidence(results)))
            return False
        copied = hashes_by_path(results[-1].text)
        bad = [f.name for f in present if copied.get(f"{snap}/{f.name}") != f.live_sha]
        if bad:
            await self.step(Finding("snapshot", CheckStatus.FAIL,
                                    f"snapshot copy differs from live for {', '.join(bad)}: "
                                    "nothing replaced", _evidence(results)))
            return False
        await self.step(Finding("snapshot", CheckStatus.PASS,
                                f"{len(present)} file(s) copied to {snap} with mode and owner,"
                                " hashes match the live files", _evidence(results)))
        return True

    async def replace(self) -> list[FileState]:
        """Per file, in order: a private dir beside the target, the new copy made there, owner and
        mode of the file it replaces, fsync, rename over the target (a symlink's target, so the
        link is kept), fsync the dir."""
        commands: list[BatchStep] = []
        for f in self.plan.changes:
            reference = f.write_path if f.state == "differs" else f.source_path
            commands.append(inside_step(self.plan.host, "write", [{"src": f.source_path, "live": f.live_path}])
                            if f.inside else
                            ["sh", "-c", REPLACE_SCRIPT, "proofbot-replace", f.source_path, f.write_path, reference])
        results = await self.conn.run_batch(commands, stop_on_failure=True)
        done = [f for f, r in zip(self.plan.changes, results, strict=False) if r.exit_status == 0]
        failed = results[-1] if results and results[-1].exit_status != 0 else None
        names = ", ".join(f.name for f in done) or "none"
        evidence = _evidence(results)
        if failed is not None:
            said = [line for line in failed.text.split("\n+ set +x", 1)[0].splitlines() if not line.startswith("+ ")]
            await self.step(Finding("replace", CheckStatus.FAIL, f"stopped at `{_last_step(failed.text)}`: "
                                    f"{chr(10).join(said).strip()[:300]!r}; replaced before the stop: {names}; "
                                    "temp files removed", evidence))
        else:
            await self.step(Finding("replace", CheckStatus.PASS,
                                    f"replaced atomically (private temp dir, fsync, rename): "
                                    f"{names}", evidence))
        return done

    async def set_bytecode_aside(self, restored: list[FileState]) -> None:
        python = [f for f in restored if f.name.endswith(".py") and not f.inside]  # not inside a container (yet)
        if not python:
            return
        target = f"{self.outcome.snapshot_dir}/bytecode"
        commands = [["mkdir", "-p", "--", target]]
        for f in python:
            cache = f"{os.path.dirname(f.live_path)}/__pycache__"
            commands.append(["find", cache, "-maxdepth", "1", "-type", "f", "-name", f"{f.name[:-3]}.*.pyc",
                             "-print", "-exec", "mv", "-f", "-t", target, "--", "{}", "+"])
        results = await self.conn.run_batch(commands)
        moved = [line for r in results[1:] for line in r.text.splitlines() if line.endswith(".pyc")]
        problems = [r for r in results[1:] if r.exit_status != 0 and "No such file" not in r.text]
        if problems or results[0].exit_status != 0:
            await self.step(Finding("bytecode", CheckStatus.FAIL, "could not set stale bytecode aside: "
                                    + (problems[0].text.strip()[:300] if problems else results[0].text.strip()),
                                    _evidence(results)))
            return
        no_cache = any("No such file" in r.text for r in results[1:])
        summary = (f"moved {len(moved)} stale .pyc into {target}: {', '.join(os.path.basename(m) for m in moved)}"
                   if moved else "no `__pycache__` beside the restored files: nothing to set aside (find's "
                   "'No such file' below is that)" if no_cache else "no stale bytecode found")
        await self.step(Finding("bytecode", CheckStatus.PASS, summary, _evidence(results)))

    async def reread(self) -> None:
        """The proof: every file's live hash read again and compared with the source."""
        checks = self.file_checks(self.plan.changes, self.plan.source.label.split(" ", 1)[1])
        found = await findings_of(self.conn, list(checks.values()), self.inside_facts(self.plan.changes))
        for f in self.plan.changes:
            finding = await self.step(found[checks[f.name].name])
            if finding.status == CheckStatus.PASS:
                self.outcome.restored.append(f.name)
            elif finding.details.get("live_sha256") == f.live_sha:
                await self.step(Finding(f"state:{f.name}", CheckStatus.FAIL,
                                        f"{f.live_path} is as it was before the restore",
                                        finding.evidence))

    async def move_extras(self) -> None:
        target = f"{self.outcome.snapshot_dir}/extras"
        commands = [["mkdir", "-p", "--", target]] + [["mv", "-n", "-t", target, "--", p] for p in self.plan.extras]
        results = await self.conn.run_batch(commands, stop_on_failure=True)
        if results[-1].exit_status != 0:
            await self.step(Finding("extra-files", CheckStatus.FAIL,
                                    f"could not move extras: {results[-1].text.strip()}",
                                    _evidence(results)))
            return
        await self.step(Finding("extra-files", CheckStatus.PASS,
                                f"moved {len(self.plan.extras)} extra file(s) into {target}: "
                                + ", ".join(self.plan.extras), _evidence(results)))

    async def staleness(self) -> None:
        service = self.plan.host.service
        if service is None or not self.outcome.restored:
            return
        restored = tuple(f.live_path for f in self.plan.changes if f.name in self.outcome.restored)
        # One round trip, the checks verify runs: the manager's main PID, the restored files' times, the start.
        manager = checks_for(service)
        main_pid, stale = manager.main_pid(service), manager.stale(service, restored)
        inside = tuple(f.live_path for f in self.plan.changes if f.name in self.outcome.restored and f.inside)
        times = ContainerFileTimes(tuple(p for p in restored if p not in inside), inside) if inside \
            else FileTimes(restored)
        read = await read_facts(self.conn, [main_pid, MainPidRead(), times, stale])
        if parse(main_pid, read).details.get("main_pid") is None:
            await self.step(Finding("stale-process", CheckStatus.WARN, f"{service.unit} has no running main PID: "
                                    "start it to load the restored files",
                                    _evidence([*read[main_pid.name], *read[FILE_TIMES]])))
            return
        await self.step(parse(stale, read))


# Run as `sh -c REPLACE_SCRIPT proofbot-replace SOURCE TARGET REFERENCE`. The target's dir may be
# one other users can write (allow_untrusted_dirs), and they see every name made there. So
# the new copy is made inside a dir mktemp creates exclusively (mode 700, 24 random
# characters, the name made on the host and never in an argv), entered once: every later
# step names the copy relative to that dir, which nobody else can write, so no symlink or
# rename planted in the target's dir can redirect a write, a chown or a chmod. The copy
# itself is created with O_EXCL (`set -C`) and written through the shell's own descriptor.
# The traps turn tracing off without tracing that (`{ set +x; } 2>/dev/null`): once the bot is
# gone its pipe is broken, and one more trace line would be a SIGPIPE that ends the clean-up.
REPLACE_SCRIPT = r"""set -eu
src=$1 target=$2 ref=$3
dir=$(dirname -- "$target")
umask 077
set -C
inside= private=
clean_up() {
  if [ -n "$inside" ]; then rm -f ./new; fi
  cd /
  if [ -n "$private" ]; then rmdir -- "$private"; fi
}
trap '{ set +x; } 2>/dev/null; clean_up' EXIT
trap '{ set +x; } 2>/dev/null; exit 129' HUP INT TERM PIPE
private=$(mktemp -d -- "$dir/.proofbot-XXXXXXXXXXXXXXXXXXXXXXXX")
cd -P -- "$private"
inside=1
here=$(stat -c '%u %a' .)
if [ "$here" != "$(id -u) 700" ]; then
  echo "proofbot: the private temp dir was swapped (found uid and mode: $here): stopped, nothing written"
  exit 1
fi
set -x
cat -- "$src" >new
chown --reference="$ref" -- new
chmod --reference="$ref" -- new
sync -- new
[ -f new ] && [ ! -L new ] || { echo "proofbot: the new copy is no longer a regular file"; exit 1; }
mv -f -T -- new "$target"
sync -- "$dir"
"""


def _last_step(output: str) -> str:
    """The step a replace stopped at, from its `set -x` trace."""
    traced = output.split("\n+ set +x", 1)[0]  # the exit trap's own steps are not the stop
    steps = [line[2:] for line in traced.splitlines() if line.startswith("+ ")]
    return steps[-1] if steps else "preparing a private temp dir"


def _short(digest: object) -> str:
    return str(digest)[:12] if digest else "missing"


async def apply_plan(conn: HostConnection, plan: RestorePlan, outcome: ApplyOutcome, *, move_extras: bool,
                     on_step: OnFinding) -> ApplyOutcome:
    """Run every step in order, filling ``outcome`` as it goes (so a caller keeps what was
    done even when the link drops mid-way)."""
    applier = Applier(conn, plan, on_step, outcome)
    await applier.recheck()
    if not await applier.snapshot():
        return applier.outcome
    restored = await applier.replace()
    await applier.set_bytecode_aside(restored)
    await applier.reread()
    if move_extras and plan.extras:
        await applier.move_extras()
    elif plan.extras:
        await applier.step(Finding("extra-files", CheckStatus.WARN, f"{len(plan.extras)} extra file(s) left in place "
                                   "(moving them was not chosen): " + ", ".join(plan.extras),
                                   Evidence.of("(from the plan)", 0, "\n".join(plan.extras), 0.0)))
    await applier.staleness()
    return applier.outcome
