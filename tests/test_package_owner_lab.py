"""Tier 2: a venv owned by a service account (``nobody``, uid 65534) whose owner plants code for root to run.

Two real attacks on a real OpenSSH host, planted by the owner with ``setpriv`` inside it:
``pyvenv.cfg``'s ``home`` pointed at the owner's copy of the standard library with an edited
``encodings/__init__.py``, and ``bin/python`` replaced by a script. Each writes a marker when it
runs (shown first by running the environment's interpreter as its owner). proofbot's verify,
as root over SSH, must never write a marker, and its verdict must be an honest pass (saying who
can rewrite RECORD) or a refusal.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml

from bot.demo.wheel import make_env, pip_install, write_source
from commands.findings import Finding
from commands.inventory import parse_inventory
from commands.operation import Origin
from commands.store.db import AuditStore
from commands.verify import VerifyPlan, verify
from tests.lab.common import LabHost, Scenario
from tests.lab.fixtures import running_lab
from tests.lab.netns import NetnsLab

ENV = "/srv/svc-env"
NOBODY = 65534
MARKERS = (f"{ENV}/pwned-encodings", f"{ENV}/pwned-python")
STDLIB = "/usr/lib/python3.11"
HOME_ATTACK = f"""set -e
cd {ENV}
mkdir -p evil/bin evil/lib/python3.11
for entry in {STDLIB}/*; do ln -s "$entry" evil/lib/python3.11/; done
rm evil/lib/python3.11/encodings
cp -r {STDLIB}/encodings evil/lib/python3.11/encodings
cat >> evil/lib/python3.11/encodings/__init__.py <<'PY'
import os as _os
_fd = _os.open("{MARKERS[0]}", _os.O_WRONLY | _os.O_CREAT | _os.O_APPEND, 0o644)
_os.write(_fd, ("uid " + str(_os.getuid())).encode() + bytes([10]))
_os.close(_fd)
PY
ln -s /usr/bin/python3.11 evil/bin/python3.11
sed -i 's|^home = .*|home = {ENV}/evil/bin|' pyvenv.cfg
"""
PYTHON_ATTACK = f"""set -e
cd {ENV}/bin
rm python
printf '#!/bin/sh\\necho "uid $(id -u)" >> {MARKERS[1]}\\nexec /usr/bin/python3.11 "$@"\\n' > python
chmod 755 python
"""


@pytest.fixture(scope="module")
def lab() -> Iterator[NetnsLab]:
    with running_lab(NetnsLab, {"ct155": Scenario(), "ct156": Scenario()}) as started:
        yield started


def as_owner(host: LabHost, script: str, check: bool = True) -> str:
    argv = ["setpriv", f"--reuid={NOBODY}", f"--regid={NOBODY}", "--clear-groups", "--", "sh", "-c", script]
    done = host.run(argv, check=check)
    return done.stdout + done.stderr


async def owned_env(host: LabHost, tmp_path: Path) -> None:
    """A real venv of the host's root-owned /usr/bin/python3, sgl-kernel pip-installed, then given to nobody."""
    python = await make_env(host.local_path(ENV), "/usr/bin/python3")
    source = write_source(tmp_path, "sgl-kernel", "0.1.4", {"__init__.py": "", "m.py": "A = 1\n"})
    await pip_install(python, str(source))
    host.run(["chown", "-R", "-h", f"{NOBODY}:{NOBODY}", ENV])


async def package_finding(lab: NetnsLab, host: LabHost, tmp_path: Path) -> Finding:
    document = lab.inventory()
    document["hosts"][host.name]["packages"] = {"python": f"{ENV}/bin/python", "dists": ["sgl-kernel"]}
    inventory = parse_inventory(yaml.safe_dump(document), "inv.yml")
    audit = AuditStore.open(tmp_path / "a.db")
    try:
        result = await verify(VerifyPlan.for_host(inventory.host(host.name), None), origin=Origin("cli:t", "cli"),
                              audit=audit)
    finally:
        audit.close()
    assert result.stats["exec_round_trips"] == 1
    return next(f for f in result.checks if f.name == "package:sgl-kernel")


def markers(host: LabHost) -> dict[str, str]:
    return {marker: host.local_path(marker).read_text() for marker in MARKERS if host.local_path(marker).exists()}


def honest(finding: Finding) -> None:
    """A pass that says what it proves and who can rewrite RECORD, or a refusal; never a plain pass."""
    if finding.status == "pass":
        assert "rewritten by uid 65534 (nobody) (owner of /srv/svc-env)" in finding.summary, finding.summary
        assert "proves the files match RECORD, not that nobody changed both" in finding.summary
    else:
        assert finding.status == "error" and finding.summary.startswith("refused:"), finding.summary


@pytest.mark.tier2
async def test_the_owners_code_never_runs_as_root_and_the_verdict_says_what_it_proves(
        lab: NetnsLab, tmp_path: Path) -> None:
    host = lab["ct155"]
    await owned_env(host, tmp_path)
    before = await package_finding(lab, host, tmp_path)
    assert before.status == "pass", before.summary
    honest(before)

    as_owner(host, HOME_ATTACK)
    as_owner(host, f"{ENV}/bin/python -I -S -c pass")  # the planted stdlib is real: its owner's run writes
    assert markers(host) == {MARKERS[0]: "uid 65534\n"}
    host.local_path(MARKERS[0]).unlink()
    home = await package_finding(lab, host, tmp_path)
    assert markers(host) == {}, "the owner's encodings ran as root"
    honest(home)

    as_owner(host, PYTHON_ATTACK)
    as_owner(host, f"{ENV}/bin/python -I -S -c pass")
    assert markers(host) == {MARKERS[1]: "uid 65534\n"}  # (it execs /usr/bin/python3.11: no pyvenv.cfg there)
    host.local_path(MARKERS[1]).unlink()
    both = await package_finding(lab, host, tmp_path)
    assert markers(host) == {}, "the owner's bin/python or encodings ran as root"
    honest(both)
    assert both.status == "pass" and both.evidence is not None
    assert '"hasher": "/usr/bin/python3.11"' in both.evidence.output


@pytest.mark.tier2
@pytest.mark.parametrize("planted", ["/usr/bin/python3.11", f"{STDLIB}/encodings/__init__.py"])
async def test_with_no_root_owned_interpreter_the_check_refuses_and_runs_nothing(
        lab: NetnsLab, tmp_path: Path, planted: str) -> None:
    """Inside this host only (its own mount namespace), the interpreter or a module of its standard library
    is a copy the owner holds (bind-mounted over the real one)."""
    host = lab["ct156"]
    if not host.local_path(ENV).exists():
        await owned_env(host, tmp_path)
        as_owner(host, PYTHON_ATTACK)
    copy = f"{ENV}/planted"
    host.run(["cp", planted, copy])
    host.run(["chown", f"{NOBODY}:{NOBODY}", copy])
    host.run(["mount", "--bind", copy, planted])
    try:
        assert os.stat(planted).st_uid == 0, "the bind mount must stay inside the host"
        finding = await package_finding(lab, host, tmp_path)
    finally:
        host.run(["umount", planted])
    assert markers(host) == {}
    assert finding.status == "error", finding.summary
    assert finding.summary.startswith("refused: no root-owned interpreter outside the environment")
    assert f"{planted} is owned by nobody (uid 65534)" in finding.summary
    honest(finding)
