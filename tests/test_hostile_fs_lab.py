"""Tier 2: hostile filesystems on real OpenSSH hosts, with a real unprivileged user planting things.

The service account here is ``nobody`` (uid 65534) on the namespace host: it owns the
release dir a backup restores into, as service accounts often do, and plants symlinks,
guesses temp names and names files with tabs and newlines, run with ``setpriv`` inside
the host. Real ``find``, ``cat``, ``mv``, ``readlink`` and ``sh`` decide every outcome.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from bot.plain_text import render_restore_plan
from commands.errors import Refused
from commands.inventory import Inventory, parse_inventory
from commands.operation import Origin
from commands.restore import apply_restore, request_restore
from commands.store import approvals
from commands.store.db import AuditStore
from tests.conftest import run_cli, write_inventory
from tests.lab.common import LabHost, Scenario
from tests.lab.fixtures import running_lab
from tests.lab.netns import NetnsLab

ORIGIN = Origin(actor="cli:tester", via="cli")
RELEASE = "/srv/svc/releases/7"
CURRENT = "/srv/svc/current"  # -> releases/7, as deploy tools leave it
BACKUP = "/root/svc-backup"
SECRET = "/srv/root-only/secret"
SECRET_TEXT = "root-only: the service account must never read or own this\n"
CLEAN = "MODE = 'nextn'\n"
PATCHED = "MODE = 'ddtree'  # patched\n"
NOBODY = 65534


@pytest.fixture(scope="module")
def lab() -> Iterator[NetnsLab]:
    with running_lab(NetnsLab, {f"ct{n}": Scenario() for n in range(170, 177)}) as running:
        yield running


def as_service_account(host: LabHost, script: str) -> str:
    """Run a shell script inside the host as the unprivileged service account."""
    argv = ["setpriv", f"--reuid={NOBODY}", f"--regid={NOBODY}", "--clear-groups", "--", "sh", "-c", script]
    return host.run(argv).stdout


def lay_out(host: LabHost, *, owner: int = NOBODY) -> None:
    """/srv/svc/releases/7 (owned by the service account), current -> releases/7, a patched
    conf.py there, its clean copy in /root/svc-backup, and a root-only secret."""
    host.run(["sh", "-c", f"mkdir -p {RELEASE} {BACKUP} /srv/root-only && chmod 700 /srv/root-only"
                          f" && ln -sfn releases/7 {CURRENT} && chown {owner}:{owner} {RELEASE}"])
    host.run(["tee", f"{BACKUP}/conf.py"], input=CLEAN)
    host.run(["tee", SECRET], input=SECRET_TEXT)
    host.run(["chmod", "600", SECRET])
    host.run(["tee", f"{RELEASE}/conf.py"], input=PATCHED)
    host.run(["chown", f"{owner}:{owner}", f"{RELEASE}/conf.py"])


def inventory_with(lab: NetnsLab, host: LabHost, live: str, **backup: Any) -> Inventory:
    document = lab.inventory()
    document["hosts"][host.name]["backups"]["svc"] = {"dir": BACKUP, "files": {"conf.py": live},
                                                      "watch": [CURRENT], **backup}
    return parse_inventory(yaml.safe_dump(document), "inventory.yml")


def secret_untouched(host: LabHost) -> None:
    assert host.run(["cat", SECRET]).stdout == SECRET_TEXT
    assert host.run(["stat", "-c", "%U %a %F", SECRET]).stdout.split() == ["root", "600", "regular", "file"]


async def restore(inventory: Inventory, host: LabHost, db: Path, before_apply: Any = None) -> Any:
    """Plan, approve and apply the "svc" backup; ``before_apply(plan)`` runs between plan and apply."""
    audit = AuditStore.open(db)
    try:
        plan = await request_restore(inventory, inventory.host(host.name), backup_name="svc", origin=ORIGIN,
                                     audit=audit)
        if before_apply:
            before_apply(plan)
        decided = await approvals.decide(audit, plan.operation_id, "UAPPROVER", "approved", inventory.approvals)
        return plan, await apply_restore(plan, decided, actor=ORIGIN.actor, audit=audit, move_extras=False)
    finally:
        audit.close()


@pytest.mark.tier2
async def test_untrusted_live_dir_is_refused_at_plan_time_unless_the_backup_allows_it(
        lab: NetnsLab, tmp_path: Path) -> None:
    host = lab["ct170"]
    lay_out(host)
    audit = AuditStore.open(tmp_path / "a.db")
    strict = inventory_with(lab, host, f"{RELEASE}/conf.py")
    with pytest.raises(Refused, match=rf"{RELEASE} \(mode 755, writable by owner uid {NOBODY}\).*"
                                      "allow_untrusted_dirs: true"):
        await request_restore(strict, strict.host(host.name), backup_name="svc", origin=ORIGIN, audit=audit)
    audit.close()
    stored = json.dumps(sqlite3.connect(tmp_path / "a.db").execute("SELECT details FROM events").fetchall())
    assert "ddtree" not in stored, "nothing was read: no diff, no plan"
    assert host.run(["cat", f"{RELEASE}/conf.py"]).stdout == PATCHED

    allowed = inventory_with(lab, host, f"{RELEASE}/conf.py", allow_untrusted_dirs=True)
    plan, result = await restore(allowed, host, tmp_path / "allowed.db")
    assert [f.name for f in plan.changes] == ["conf.py"]
    assert result.extra["restored"] == ["conf.py"]
    assert host.run(["cat", f"{RELEASE}/conf.py"]).stdout == CLEAN
    assert host.run(["stat", "-c", "%u %a", f"{RELEASE}/conf.py"]).stdout.split() == [str(NOBODY), "644"]


@pytest.mark.tier2
async def test_a_symlink_planted_at_the_temp_name_overwrites_nothing(lab: NetnsLab, tmp_path: Path) -> None:
    host = lab["ct171"]
    lay_out(host)
    inventory = inventory_with(lab, host, f"{RELEASE}/conf.py", allow_untrusted_dirs=True)
    planted: list[str] = []

    def plant(plan: Any) -> None:
        # The operation id is in the Slack plan; the old temp name was derived from it.
        guess = f"{RELEASE}/.conf.py.proofbot-{plan.operation_id.rsplit('-', 1)[-1]}.tmp"
        as_service_account(host, f"ln -s {SECRET} {guess}")
        planted.append(guess)

    _, result = await restore(inventory, host, tmp_path / "a.db", before_apply=plant)
    secret_untouched(host)
    statuses = {f.name: f.status for f in result.checks}
    assert statuses["replace"] == "pass" and statuses["file:conf.py"] == "pass"
    assert host.run(["cat", f"{RELEASE}/conf.py"]).stdout == CLEAN
    assert host.run(["stat", "-c", "%F %u", f"{RELEASE}/conf.py"]).stdout.split() == ["regular", "file",
                                                                                      str(NOBODY)]
    assert host.run(["readlink", planted[0]]).stdout.strip() == SECRET, "the planted link was not used"
    leftovers = host.run(["sh", "-c", f"ls -a {RELEASE} | grep '^\\.proofbot-' || true"]).stdout
    assert leftovers == "", "the private temp dir is gone"
    # No command line on the host ever named the temp dir: the replace step's argv holds the template.
    replace = next(f for f in result.checks if f.name == "replace")
    assert replace.evidence is not None and "XXXXXXXXXXXXXXXXXXXXXXXX" in replace.evidence.command


@pytest.mark.tier2
async def test_symlinked_watch_dir_sees_the_extra_file(lab: NetnsLab, tmp_path: Path) -> None:
    host = lab["ct172"]
    lay_out(host)
    host.run(["cp", f"{BACKUP}/conf.py", f"{RELEASE}/conf.py"])
    as_service_account(host, f"echo 'import os' > {RELEASE}/evil.py")
    report = await verify_json(lab, host, tmp_path)
    checks = {c["name"]: c for c in report["checks"]}
    assert checks["extra-files"]["status"] == "fail"
    assert f"{CURRENT}/evil.py" in checks["extra-files"]["details"]["extra_files"]
    assert "…/current/evil.py" in checks["extra-files"]["summary"]  # the message shortens, the details keep it
    assert checks["stale-process"]["status"] == "warn", checks["stale-process"]["summary"]


async def verify_json(lab: NetnsLab, host: LabHost, tmp_path: Path) -> dict[str, Any]:
    document = lab.inventory()
    document["hosts"][host.name]["backups"] = {"svc": {"dir": BACKUP, "files": {"conf.py": f"{CURRENT}/conf.py"},
                                                       "watch": [CURRENT]}}
    path = write_inventory(tmp_path / "inventory.yml", document)
    run = await run_cli("verify", host.name, "--json", "--no-probe", "--inventory", str(path),
                        "--db", str(tmp_path / "a.db"))
    assert run.code in (0, 1), run.stdout + run.stderr
    report: dict[str, Any] = json.loads(run.stdout)
    return report


@pytest.mark.tier2
async def test_a_file_name_with_tab_and_newline_cannot_forge_an_mtime(lab: NetnsLab, tmp_path: Path) -> None:
    host = lab["ct173"]
    lay_out(host)
    host.run(["cp", f"{BACKUP}/conf.py", f"{RELEASE}/conf.py"])  # written after the service started
    # Twenty forged records, so at least one lands after the real one in directory order: each
    # would read as "current/conf.py<TAB>0" in a newline-separated listing. Old mtimes, so they
    # are no reason for a warning themselves.
    as_service_account(host, f"cd {RELEASE} && for i in $(seq 20); do "
                             "f=$(printf 'conf.py\\t0\\nzzz%s' $i); : > \"$f\"; touch -d @0 \"$f\"; done")
    report = await verify_json(lab, host, tmp_path)
    stale = next(c for c in report["checks"] if c["name"] == "stale-process")
    assert stale["status"] == "warn", stale["summary"]
    assert f"{CURRENT}/conf.py" in stale["details"]["changed_after_start"] and "restart it" in stale["summary"]
    extras = next(c for c in report["checks"] if c["name"] == "extra-files")
    assert extras["status"] == "fail" and "20 file(s)" in extras["summary"] and "conf.py\\t0\\nzzz" in extras["summary"]


@pytest.mark.tier2
async def test_symlinked_live_file_restores_its_target_and_keeps_the_link(lab: NetnsLab, tmp_path: Path) -> None:
    host = lab["ct174"]
    lay_out(host, owner=0)
    link = "/srv/svc/etc/conf.py"
    host.run(["sh", "-c", f"mkdir -p /srv/svc/etc && ln -s {RELEASE}/conf.py {link}"])
    plan, result = await restore(inventory_with(lab, host, link), host, tmp_path / "a.db")
    [change] = plan.changes
    assert (change.live_type, change.live_target) == ("symlink", f"{RELEASE}/conf.py")
    assert f"symlink → {RELEASE}/conf.py" in render_restore_plan(plan)
    assert result.verdict != "fail", [(f.name, f.status, f.summary) for f in result.checks]
    assert host.run(["readlink", link]).stdout.strip() == f"{RELEASE}/conf.py", "the link is kept"
    assert host.run(["cat", f"{RELEASE}/conf.py"]).stdout == CLEAN, "its target holds the backup"
    assert result.extra["restored"] == ["conf.py"]


@pytest.mark.tier2
async def test_symlinked_live_file_in_an_untrusted_dir_is_refused_even_when_allowed(
        lab: NetnsLab, tmp_path: Path) -> None:
    host = lab["ct175"]
    lay_out(host)
    as_service_account(host, f"mv {RELEASE}/conf.py {RELEASE}/real.py && ln -s {SECRET} {RELEASE}/conf.py")
    audit = AuditStore.open(tmp_path / "a.db")
    inventory = inventory_with(lab, host, f"{RELEASE}/conf.py", allow_untrusted_dirs=True)
    with pytest.raises(Refused, match="is a symlink in a dir other users can write"):
        await request_restore(inventory, inventory.host(host.name), backup_name="svc", origin=ORIGIN, audit=audit)
    audit.close()
    assert "must never read" not in json.dumps(sqlite3.connect(tmp_path / "a.db").execute(
        "SELECT details FROM events").fetchall())
    secret_untouched(host)


@pytest.mark.tier2
async def test_backup_entry_leading_outside_the_backup_dir_is_refused_unread(lab: NetnsLab, tmp_path: Path) -> None:
    host = lab["ct176"]
    lay_out(host, owner=0)
    host.run(["ln", "-sf", SECRET, f"{BACKUP}/conf.py"])
    inventory = inventory_with(lab, host, f"{RELEASE}/conf.py")
    audit = AuditStore.open(tmp_path / "a.db")
    with pytest.raises(Refused, match=rf"backup entry conf.py leads outside the backup dir {BACKUP} "
                                      rf"\(to {SECRET}\): not read"):
        await request_restore(inventory, inventory.host(host.name), backup_name="svc", origin=ORIGIN, audit=audit)
    audit.close()
    stored = json.dumps(sqlite3.connect(tmp_path / "a.db").execute("SELECT details FROM events").fetchall())
    assert "must never read" not in stored, "the secret's content was never diffed into the audit log"
    secret_untouched(host)
    assert host.run(["cat", f"{RELEASE}/conf.py"]).stdout == PATCHED
