"""Policies through a real ``proofbot serve`` (a subprocess started as users start it, HTTP mode) and the fake
Slack, signed requests as Slack signs them (issue 24): one serve and one loopback lab host for the module.

The inventory names the lab host twice (ct129 in `prod`, ct130 beside it) so a rolling restart spans mixed
policies; approver groups are re-asked of Slack after ``approvals.group_ttl_s: 1``."""

from __future__ import annotations

import asyncio
import json
import re
import sqlite3
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest_asyncio
import yaml

from bot.demo.host import demo_host
from tests.conftest import run_cli, write_inventory
from tests.lab.waits import until
from tests.serve_rig import free_port, kinds, start_serve, stop_serve
from tests.slack_fake.records import HttpAck, Message
from tests.slack_fake.server import FakeSlack
from tests.slack_fake.signing import block_actions_body, slash_command_body
from tests.test_slack_restore import APPROVER, CHANNEL, OTHER_APPROVER, REQUESTER, Rig, is_final

ELSEWHERE = "C0ELSE"
ONE_MORE, LEAD = "U0THIRD", "U0LEAD"
SRE = (APPROVER, OTHER_APPROVER, REQUESTER, ONE_MORE)  # @sre-oncall's members at the start of each test
TTL_S = 1.0
POLICIES = [
    {"targets": ["prod"], "operations": ["restore", "restart"], "approvers": ["@sre-oncall", APPROVER],
     "required": 2, "channels": [CHANNEL], "cli": "plan-only"},
    {"targets": ["ct130"], "operations": ["restart"], "approvers": [LEAD], "channels": [CHANNEL, ELSEWHERE]},
    {"targets": ["all"], "operations": ["verify"], "channels": [CHANNEL]},
    {"targets": ["ct130"], "operations": ["restore"], "approvers": ["@nobody-here"]},
]


@dataclass
class ServeRig(Rig):
    """The module's serve, its Slack and host; ``Rig`` gives post, events, click and reject."""

    inventory: Path
    sre: str = ""  # @sre-oncall's id in the fake
    bot: asyncio.subprocess.Process | None = None
    port: int = 0

    async def start(self) -> None:
        """``proofbot serve --http`` as users start it; returns once it has recorded ``bot-started``."""
        started = kinds(self.db).count("bot-started") if self.db.exists() else 0
        with self.log.open("ab") as written:  # a file, not a pipe nobody reads while the tests run (it could fill)
            self.bot = await start_serve(self.slack, self.inventory, self.db, self.port, stdout=written,
                                         stderr=written)
        await until("serve to start", lambda: self.db.exists() and kinds(self.db).count("bot-started") > started, 60)

    async def stop(self) -> None:
        """SIGTERM, as a service manager stops it: it must exit 0, with no traceback in its log."""
        assert self.bot is not None
        await self.settled()
        await stop_serve(self.bot)
        said = self.log.read_text(errors="replace")
        assert self.bot.returncode == 0 and "Traceback" not in said, said

    async def settled(self) -> None:
        """Until the bot has made no Slack call for half a second (at most 15 s): a click's last replies are
        posted after the test has seen what it checks, and a stop in the middle of them is not what is tested."""
        deadline = time.monotonic() + 15
        calls = -1
        while len(self.slack.calls) != calls and time.monotonic() < deadline:
            calls = len(self.slack.calls)
            await asyncio.sleep(0.5)

    @property
    def log(self) -> Path:
        return self.db.with_name("serve.log")

    async def say(self, command: str, text: str, user: str = REQUESTER, channel: str = CHANNEL) -> HttpAck:
        return await self.post(slash_command_body(command, text, user, channel, self.slack.response_url(), "t1"))

    async def said(self, command: str, text: str, user: str = REQUESTER, channel: str = CHANNEL) -> str:
        """The ack's ephemeral answer as the user reads it: its text, then each block's, a line each."""
        ack = await self.say(command, text, user, channel)
        assert ack.status_code == 200, ack.text
        answer = ack.json()
        assert answer.get("response_type") == "ephemeral", answer
        texts = [block["text"]["text"] if "text" in block else " ".join(e["text"] for e in block["elements"])
                 for block in answer.get("blocks") or []]
        return "\n".join([answer["text"], *texts])

    def parents(self, channel: str = CHANNEL) -> list[Message]:
        return [m for m in self.slack.messages_in(channel) if not m.is_reply]

    async def new_plan(self, after: int, channel: str = CHANNEL) -> Message:
        """The first plan with buttons posted in ``channel`` after ``after`` parent messages were there."""
        def plan() -> Message | None:
            return next((m for m in self.parents(channel)[after:]
                         if any(b["type"] == "actions" for b in m.blocks or [])), None)
        await self.slack.wait_until(lambda: plan() is not None, timeout=60, what="the plan with buttons")
        found = plan()
        assert found is not None
        return found

    def shown(self, plan: Message) -> str:
        return json.dumps(self.slack.message(plan.channel, plan.ts).blocks)

    async def shows(self, plan: Message, text: str) -> None:
        await self.slack.wait_until(lambda: text in self.shown(plan), timeout=30, what=f"{text!r} on the plan")

    async def click_on(self, plan: Message, user: str, action_id: str) -> tuple[str, str]:
        """Click a button of the plan as it is shown now, from its channel: (the plan's id, the response_url)."""
        shown = self.slack.message(plan.channel, plan.ts)
        value = self.plan_id(shown)
        response_url = self.slack.response_url()
        payload: dict[str, Any] = {
            "type": "block_actions", "user": {"id": user, "username": user}, "api_app_id": "A0PROOF",
            "token": "verification", "trigger_id": self.slack.trigger_id(user), "team": {"id": "T0TEST"},
            "container": {"type": "message", "message_ts": shown.ts, "channel_id": plan.channel},
            "channel": {"id": plan.channel}, "response_url": response_url,
            "message": {"ts": shown.ts, "text": shown.text, "blocks": shown.blocks},
            "actions": [{"type": "button", "action_id": action_id, "block_id": "b", "value": value,
                         "action_ts": str(time.time())}],
        }
        assert (await self.post(block_actions_body(payload))).status_code == 200
        return value, response_url

    async def refused(self, plan: Message, user: str, action_id: str) -> str:
        """Approve as ``user``, expecting a refusal: the ephemeral answer Slack shows them."""
        _, response_url = await self.click_on(plan, user, action_id)
        await self.slack.wait_until(lambda: bool(self.slack.responses_to(response_url)), timeout=30,
                                    what="the answer to the click")
        return str(self.slack.responses_to(response_url)[0].body["text"])

    async def counted(self, plan: Message, user: str, action_id: str) -> None:
        """Approve as ``user``, expecting it to count: judged (a vote, or the decision) with no refusal."""
        judged = self.judged(self.plan_id(plan))
        plan_id, response_url = await self.click_on(plan, user, action_id)
        await self.slack.wait_until(lambda: self.judged(plan_id) > judged, timeout=30, what="the click judged")
        assert self.slack.responses_to(response_url) == []

    async def reject_plan(self, plan: Message, user: str, reason: str, action_id: str) -> None:
        """Reject as ``user``: the click, then the reason typed into the modal it opens."""
        opened = len(self.slack.calls_to("views.open"))
        await self.click_on(plan, user, action_id)
        await self.slack.wait_for("views.open", opened + 1)
        await self.reject_submit(user, reason)
        await self.slack.wait_until(lambda: "rejected by" in self.shown(plan), timeout=30, what="the plan rejected")

    @staticmethod
    def plan_id(plan: Message) -> str:
        return str(next(b for b in plan.blocks or [] if b["type"] == "actions")["elements"][0]["value"])

    def judged(self, plan_id: str) -> int:
        """Clicks on the plan recorded so far (votes, refusals, the decision)."""
        return int(sqlite3.connect(self.db).execute(
            "SELECT COUNT(*) FROM events WHERE operation_id = ? AND kind IN ('vote', 'refused', 'approved', "
            "'rejected')", (plan_id,)).fetchone()[0])

    def votes(self, plan_id: str) -> list[tuple[str, bool]]:
        rows = sqlite3.connect(self.db).execute(
            "SELECT details FROM events WHERE operation_id = ? AND kind = 'vote' ORDER BY id", (plan_id,))
        return [(json.loads(d)["user"], json.loads(d)["counted"]) for (d,) in rows]

    def members(self, *users: str) -> None:
        self.slack.set_usergroup_users(self.sre, *users)


@pytest_asyncio.fixture(loop_scope="session", scope="module")
async def rig(tmp_path_factory: Any) -> AsyncIterator[ServeRig]:
    tmp_path = tmp_path_factory.mktemp("policy-serve")
    async with demo_host("ct129") as host, FakeSlack(channels={CHANNEL: "ops", ELSEWHERE: "elsewhere"},
                                                     signing_secret="policy-serve-secret") as slack:
        document = host.inventory()
        entry = document["hosts"]["ct129"]
        document["hosts"]["ct130"] = json.loads(json.dumps(entry))  # the same lab host under a second name
        document["groups"] = {"prod": ["ct129"], "mixed": ["ct129", "ct130"]}
        document["approvals"] = {"approvers": [LEAD], "expire_after_s": 900, "group_ttl_s": TTL_S}
        document["policies"] = POLICIES
        inventory = write_inventory(tmp_path / "inventory.yml", document)
        sre = slack.add_usergroup("sre-oncall", *SRE)
        slack.add_usergroup("nobody-here")
        port = await free_port()
        made = ServeRig(slack, f"http://127.0.0.1:{port}/slack/events", tmp_path / "audit.db", host, inventory, sre,
                        port=port)
        await made.start()
        try:
            yield made
        finally:
            await made.stop()
        assert slack.warnings == []


async def test_policy_shows_who_may_do_what_where_with_the_groups_members(rig: ServeRig) -> None:
    """`/policy`, `/policy HOST`, `/policy GROUP` answer ephemerally from the inventory, each user group with its
    members as Slack says now; when Slack cannot say, the answer says so (never an empty group). The App Home
    ends with the same policies; a channel the reader is not in is counted, never named. The CLI's
    `inventory check` and `policy` read the same file."""
    rig.members(*SRE)
    every = await rig.said("/policy", "", APPROVER)
    assert every.startswith("Who may do what, where: 5 policies")
    assert ("*0* · prod · restore, restart · 2 of `@sre-oncall` (4 members: <@U0APPROVER>, <@U0APPROVER2>, "
            "<@U0REQ>, <@U0THIRD>), <@U0APPROVER> · from <#C0OPS> · CLI: plan only") in every
    assert "*1* · ct130 · restart · 1 of <@U0LEAD> · from <#C0OPS>, 1 channel(s) you are not in" in every
    assert "*2* · all · verify · no approval needed · from <#C0OPS>" in every
    assert "*3* · ct130 · restore · 1 of `@nobody-here` (no members: never satisfied) · from any channel" in every
    assert "*4* (implicit) · all · verify, restore, restart, ping · 1 of <@U0LEAD> · from any channel" in every

    on_host = await rig.said("/policy", "ct130", ONE_MORE, ELSEWHERE)
    assert re.findall(r"\*([a-z, ]+)\* · policy (\d)", on_host) == [
        ("verify", "2"), ("restore", "3"), ("restart", "1"), ("ping", "4")]
    assert "*restart* · policy 1 · 1 of <@U0LEAD> · from <#C0ELSE>, 1 channel(s) you are not in" in on_host
    assert "*ping* · policy 4 (implicit: `approvals`) · no approval needed · from any channel" in on_host
    group = await rig.said("/policy", "mixed", APPROVER)
    assert "*restart* · policy 0 · 2 of `@sre-oncall`" in group  # the strictest host's, as a rollout takes
    assert "a restore takes one host" in group and "*restore*" not in group
    assert "unknown host or group 'prdo'" in (await rig.say("/policy", "prdo")).text
    refused = sqlite3.connect(rig.db).execute(
        "SELECT operation, json_extract(details, '$.requested_host') FROM events WHERE kind = 'refused'").fetchall()
    assert refused == [("policy", "prdo")]  # a refusal is audited; the reads above are not

    # Slack failing while the groups are read: said, never shown as a group without members
    rig.slack.scopes.discard("usergroups:read")
    try:
        await asyncio.sleep(TTL_S)  # past the cache's TTL: Slack is asked again
        down = await rig.said("/policy", "ct129", APPROVER)
    finally:
        rig.slack.scopes.add("usergroups:read")
    assert "`@sre-oncall` (not checked: Slack answered 'missing_scope')" in down
    assert "no members" not in down and "members:" not in down
    assert rig.events("vote") == [] and rig.events("requested") == []  # a read: nothing recorded

    # the App Home's closing section: the same policies, each group with its member count
    published = len(rig.slack.calls_to("views.publish"))
    opened = {"type": "app_home_opened", "user": ONE_MORE, "tab": "home", "channel": "D0HOME"}
    assert (await rig.slack.deliver_event(rig.url, opened)).status_code == 200
    await rig.slack.wait_for("views.publish", published + 1)
    home = [b["text"]["text"] for b in (rig.slack.home_of(ONE_MORE) or {})["blocks"] if b["type"] == "section"]
    assert home[-5:] == [
        "*0* · prod · restore, restart · 2 of `@sre-oncall` (4 members), <@U0APPROVER> · from 1 channel(s) you "
        "are not in · CLI: plan only",
        "*1* · ct130 · restart · 1 of <@U0LEAD> · from <#C0ELSE>, 1 channel(s) you are not in",
        "*2* · all · verify · no approval needed · from 1 channel(s) you are not in",
        "*3* · ct130 · restore · 1 of `@nobody-here` (no members: never satisfied) · from any channel",
        "*4* (implicit) · all · verify, restore, restart, ping · 1 of <@U0LEAD> · from any channel"]

    check = await run_cli("inventory", "check", "--inventory", str(rig.inventory))
    assert check.code == 0, check.stderr
    assert "user groups @nobody-here, @sre-oncall: members not checked" in check.stdout
    cli = await run_cli("policy", "ct130", "--inventory", str(rig.inventory))
    assert cli.code == 0, cli.stderr
    assert "  restart: policy 1 · 1 of U0LEAD · from C0OPS, C0ELSE" in cli.stdout


async def test_a_rolling_restart_over_mixed_policies_takes_the_strictest_hosts(rig: ServeRig) -> None:
    """`/restart mixed` (ct129: two approvals, only in #ops; ct130: the lead, also in #elsewhere) is ruled by
    ct129's policy: refused from #elsewhere, where ct130's own restart is taken; one approval does not apply
    it; any one approver's Reject ends it, nothing restarted."""
    rig.members(*SRE)
    pid = (await rig.host.supervisorctl("pid", "sglang")).strip()
    refused = await rig.said("/restart", "mixed", REQUESTER, ELSEWHERE)
    assert "rollout on mixed is taken only in C0OPS" in refused
    assert rig.parents(ELSEWHERE) == [] and rig.events("requested") == []

    assert (await rig.say("/restart", "ct130", REQUESTER, ELSEWHERE)).status_code == 200
    alone = await rig.new_plan(0, ELSEWHERE)
    assert "approvers: <@U0LEAD>" in json.dumps(alone.blocks)  # ct130's own policy: one approval, here too
    await rig.reject_plan(alone, REQUESTER, "asked for the group instead", "restart_reject")

    parents = len(rig.parents())
    assert (await rig.say("/restart", "mixed")).status_code == 200
    plan = await rig.new_plan(parents)
    plan_id = rig.plan_id(plan)
    assert "approvers: 2 of `@sre-oncall`, <@U0APPROVER>" in json.dumps(plan.blocks)
    await rig.counted(plan, APPROVER, "rollout_approve")
    await rig.shows(plan, "1 of 2 approvals: <@U0APPROVER>")
    assert '"actions"' in rig.shown(plan)  # still awaiting the second
    await rig.reject_plan(plan, OTHER_APPROVER, "one is enough today", "rollout_reject")
    assert '"actions"' not in rig.shown(plan)
    assert (await rig.host.supervisorctl("pid", "sglang")).strip() == pid
    assert rig.events("approved") == [] and rig.votes(plan_id) == [(APPROVER, True)]
    assert sqlite3.connect(rig.db).execute("SELECT COUNT(*) FROM locks").fetchone() == (0,)


async def test_the_cli_is_plan_only_and_two_distinct_approvals_apply_the_restore(rig: ServeRig) -> None:
    """`cli: plan-only` makes the CLI print the Slack command; typed as printed, the restore waits for two
    distinct approvals: the requester (inside the group), the same person by id and through the group, a
    member removed from the group before the refresh, a Slack error while resolving: none of them counts."""
    rig.members(*SRE)
    live = rig.host.live_dir.joinpath("spec_info.py")
    before = live.read_bytes()
    cli = await run_cli("restore", "ct129", "--yes", "--inventory", str(rig.inventory), "--db", str(rig.db))
    assert cli.code == 4, cli.stdout + cli.stderr
    printed = re.search(r"request it in Slack: (/restore .+)", cli.stderr)
    assert printed is not None, cli.stderr
    command, text = printed.group(1).split(" ", 1)
    assert live.read_bytes() == before

    refused = await rig.said(command, text, REQUESTER, ELSEWHERE)  # the channel rule: only in #ops
    assert "restore on ct129 is taken only in C0OPS" in refused
    parents = len(rig.parents())
    assert (await rig.say(command, text)).status_code == 200
    plan = await rig.new_plan(parents)
    plan_id = rig.plan_id(plan)
    assert "another approver must approve" in await rig.refused(plan, REQUESTER, "restore_approve")
    await rig.counted(plan, OTHER_APPROVER, "restore_approve")  # through the group: counted
    await rig.shows(plan, "1 of 2 approvals: <@U0APPROVER2>")
    assert live.read_bytes() == before  # one of two: nothing applied

    rig.members(APPROVER, REQUESTER, ONE_MORE)  # OTHER_APPROVER leaves the group after their click
    await asyncio.sleep(TTL_S)  # the refresh: the next click asks Slack again
    await rig.counted(plan, APPROVER, "restore_approve")
    await rig.shows(plan, "1 of 2 approvals: <@U0APPROVER>\"")  # OTHER_APPROVER's no longer counts
    assert "already counted" in await rig.refused(plan, APPROVER, "restore_approve")  # by id and via the group
    assert live.read_bytes() == before

    rig.slack.scopes.discard("usergroups:read")  # Slack errs while resolving: refused, never falls open
    try:
        await asyncio.sleep(TTL_S)
        answer = await rig.refused(plan, ONE_MORE, "restore_approve")
    finally:
        rig.slack.scopes.add("usergroups:read")
    assert "could not resolve the approver group @sre-oncall" in answer
    assert live.read_bytes() == before and rig.events("approved") == []

    await rig.counted(plan, ONE_MORE, "restore_approve")  # the second distinct approval: applied
    await rig.slack.wait_until(lambda: is_final(rig.slack.message(CHANNEL, plan.ts)), timeout=60, what="verdict")
    assert "restore: PASS" in rig.slack.message(CHANNEL, plan.ts).edits[-1].text
    assert live.read_bytes() == rig.host.backup_dir.joinpath("spec_info.py").read_bytes()
    (approved,) = rig.events("approved")
    assert approved["approvals"] == [APPROVER, ONE_MORE] and approved["policy"]["index"] == 0
    assert rig.votes(plan_id) == [(REQUESTER, False), (OTHER_APPROVER, True), (APPROVER, True), (APPROVER, False)]


async def test_a_policy_changed_while_a_plan_waits_judges_its_next_click(rig: ServeRig) -> None:
    """A restart plan waits with one approval counted; `serve` is restarted under a policy that no longer names
    that approver: the plan survives, their approval no longer counts, a new approver's is the first of two."""
    rig.members(*SRE)
    pid = (await rig.host.supervisorctl("pid", "sglang")).strip()
    parents = len(rig.parents())
    assert (await rig.say("/restart", "ct129")).status_code == 200
    plan = await rig.new_plan(parents)
    plan_id = rig.plan_id(plan)
    await rig.counted(plan, APPROVER, "restart_approve")
    await rig.shows(plan, "1 of 2 approvals: <@U0APPROVER>")
    await rig.slack.wait_until(lambda: any(reply.text.endswith("1 of 2 approvals: <@U0APPROVER>")
                                           for reply in rig.slack.thread(CHANNEL, plan.ts)),
                               timeout=30, what="the count in the thread, the click's last step")

    await rig.stop()  # nothing in flight: the plan waits
    document = yaml.safe_load(rig.inventory.read_text())
    document["policies"][0]["approvers"] = [LEAD, ONE_MORE]  # APPROVER and @sre-oncall no longer approve
    write_inventory(rig.inventory, document)
    await rig.start()
    assert "you are not an approver" in await rig.refused(plan, APPROVER, "restart_approve")
    await rig.counted(plan, ONE_MORE, "restart_approve")
    await rig.shows(plan, "1 of 2 approvals: <@U0THIRD>")  # APPROVER's earlier approval is not counted
    await rig.reject_plan(plan, LEAD, "not today", "restart_reject")
    assert (await rig.host.supervisorctl("pid", "sglang")).strip() == pid
    assert rig.votes(plan_id) == [(APPROVER, True), (APPROVER, False), (ONE_MORE, True)]
