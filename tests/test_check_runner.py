"""Tier 1: the one batch runner hands each check exactly what its own steps printed, by name (real sshd on
loopback, real sh): checks with none, one and several steps, facts, and a check that needs another's output.
And the one map of service managers to check classes covers every manager the inventory accepts."""

from __future__ import annotations

import typing
from dataclasses import dataclass
from pathlib import Path
from typing import ClassVar

import asyncssh
import pytest

from bot.demo.host import DemoHost
from commands.checks.check import Check, Read, Reads, Script, Step
from commands.checks.managers import MANAGERS, checks_for
from commands.checks.service import SupervisordMainPid, SystemdMainPid
from commands.findings import Evidence, Finding
from commands.inventory import Service
from commands.operation import Origin
from commands.ssh import connect
from commands.store.db import AuditStore
from commands.verify import verify
from commands.verify.plan import VerifyPlan
from commands.verify.runner import batch_of, findings_of, read_facts
from commands.vocabulary import CheckStatus
from tests.test_ssh import host_of


@dataclass(frozen=True)
class Echo(Check):
    """Prints each of ``words`` in a step of its own; passes when it got back exactly those, in order."""

    label: str
    words: tuple[str, ...]
    after: tuple[str, ...] = ()
    needs: ClassVar[tuple[str, ...]] = ()

    @property
    def name(self) -> str:
        return self.label

    def steps(self) -> list[Step]:
        return [["printf", "%s", word] for word in self.words]

    def parse(self, read: Read) -> Finding:
        got = tuple(result.text for result in read.own)
        status = CheckStatus.PASS if got == self.words else CheckStatus.FAIL
        evidence = Evidence.of("\n".join(r.command for r in read.own), 0, "\n".join(got), 0.0)
        return Finding(self.name, status, " ".join(got), evidence, {"got": list(got)})


@dataclass(frozen=True)
class SetsVariable(Check):
    """Sets a shell variable of the batch that ``ReadsVariable`` reads: it must run first."""

    needs: ClassVar[tuple[str, ...]] = ()

    @property
    def name(self) -> str:
        return "sets"

    def steps(self) -> list[Step]:
        return [Script("pb_test=from-sets; printf set", "set pb_test")]

    def parse(self, read: Read) -> Finding:
        return Finding(self.name, CheckStatus.PASS, read.own[0].text, Evidence.of("set", 0, read.own[0].text, 0.0))


@dataclass(frozen=True)
class ReadsVariable(Check):
    needs: ClassVar[tuple[str, ...]] = ("sets",)

    @property
    def name(self) -> str:
        return "reads"

    def steps(self) -> list[Step]:
        return [Script("printf '%s' \"${pb_test:-unset}\"", "echo pb_test")]

    def parse(self, read: Read) -> Finding:
        said, needed = read.own[0].text, read.of("sets")[0].text
        status = CheckStatus.PASS if (said, needed) == ("from-sets", "set") else CheckStatus.FAIL
        return Finding(self.name, status, f"{said} after {needed}", Evidence.of("read", 0, said, 0.0))


async def test_each_check_gets_its_own_results_whatever_the_others_run(clean_host: DemoHost) -> None:
    """Checks of 3, 0, 1 and 2 steps and a fact of 2 in one batch: none sees a neighbour's output (the way
    `plan.evidence[3*index]` once showed each restored file another command's)."""
    checks = [Echo("three", ("a1", "a2", "a3")), Echo("none", ()), Echo("one", ("b1",)), Echo("two", ("c1", "c2"))]
    fact = Reads("fact", (["printf", "%s", "f1"], ["printf", "%s", "f2"]))
    async with connect(host_of(clean_host)) as conn:
        rounds = conn.exec_round_trips
        found = await findings_of(conn, checks, [fact])
        by_name = await read_facts(conn, [fact, *checks])
        assert conn.exec_round_trips == rounds + 2  # one round trip each
    assert list(found) == ["three", "none", "one", "two"]
    assert {name: f.details["got"] for name, f in found.items()} == {
        "three": ["a1", "a2", "a3"], "none": [], "one": ["b1"], "two": ["c1", "c2"]}
    assert all(f.status == CheckStatus.PASS for f in found.values())
    evidence = found["two"].evidence
    assert evidence is not None and evidence.command == "printf %s c1\nprintf %s c2"
    assert [r.text for r in by_name["fact"]] == ["f1", "f2"]


async def test_a_check_runs_after_what_it_needs_and_reads_it_by_name(clean_host: DemoHost) -> None:
    async with connect(host_of(clean_host)) as conn:
        # listed first, it still runs after `sets`: its script reads the variable `sets` left in the shell
        found = await findings_of(conn, [ReadsVariable(), SetsVariable()])
    assert found["reads"].status == CheckStatus.PASS, found["reads"].summary


def test_a_plan_that_does_not_read_what_a_check_needs_is_refused_before_anything_runs() -> None:
    with pytest.raises(ValueError, match="reads needs sets, which the plan does not read"):
        batch_of([ReadsVariable()])
    with pytest.raises(ValueError, match="two different facts or checks named one"):
        batch_of([Echo("one", ("x",)), Echo("one", ("y",))])


def test_every_manager_the_inventory_accepts_has_its_check_classes() -> None:
    accepted = set(typing.get_args(typing.get_type_hints(Service)["manager"]))
    assert set(MANAGERS) == accepted
    systemd = Service(manager="systemd", unit="sglang", health_url="http://127.0.0.1:1/health")
    supervised = Service(manager="supervisord", unit="sglang", health_url="http://127.0.0.1:1/health")
    assert isinstance(checks_for(systemd).main_pid(systemd), SystemdMainPid)
    assert isinstance(checks_for(supervised).main_pid(supervised), SupervisordMainPid)


def test_a_verify_plan_names_its_checks_from_the_check_objects(seeded_host: DemoHost) -> None:
    plan = VerifyPlan.for_host(host_of(seeded_host), None)
    assert plan.check_names() == [check.name for check in plan.checks()]
    assert plan.check_names() == ["file:eagle_info.py", "file:spec_info.py", "extra-files", "main-pid", "health",
                                  "cmdline", "stale-process", "probe"]


async def test_a_changed_host_key_gets_no_advice_to_trust_it_from_a_real_refusal(clean_host: DemoHost,
                                                                                  tmp_path: Path) -> None:
    """Issue 20 item 3 end to end: the next step reads the refusal's kind from the exception chain of a real
    handshake (not the message's words), and never advises adding the key."""
    other = asyncssh.generate_private_key("ssh-ed25519").export_public_key().decode().strip()
    known = tmp_path / "known_hosts"
    known.write_text(f"[127.0.0.1]:{clean_host.ssh_port} {other}\n")
    host = host_of(clean_host, known_hosts=str(known))
    audit = AuditStore.open(tmp_path / "audit.db")
    try:
        result = await verify(VerifyPlan.for_host(host, None), origin=Origin.local_user(), audit=audit)
    finally:
        audit.close()
    first = result.checks[0]
    assert first.status == CheckStatus.ERROR and "the host key changed" in first.summary, first.summary
    assert first.details == {"cause": "connection", "key_refusal": "changed"}
    assert first.next_step is not None and "do not add or replace its key" in first.next_step.advice
