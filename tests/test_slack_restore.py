"""/restore through the real bolt app: plan with buttons, approval rules, apply, proof on the host."""

from __future__ import annotations

import asyncio
import copy
import json
import sqlite3
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest_asyncio
import yaml

from bot.demo.host import DemoHost, demo_host
from bot.slack.app import BotContext, build_app
from commands.inventory import parse_inventory
from commands.store.db import AuditStore
from tests.slack_fake.records import HttpAck, Message
from tests.slack_fake.server import FakeSlack
from tests.slack_fake.serving import serving
from tests.slack_fake.signing import block_actions_body, slash_command_body

SECRET = "restore-secret"
CHANNEL = "C0OPS"
REQUESTER, APPROVER, OTHER_APPROVER, STRANGER = "U0REQ", "U0APPROVER", "U0APPROVER2", "U0STRANGER"
EXTRA = "ddtree_utils.py"  # planted by the seed: in the watch dir, not in the backup


@dataclass
class Rig:
    slack: FakeSlack
    url: str
    db: Path
    host: DemoHost

    async def post(self, body: bytes) -> HttpAck:
        """Slack delivers the command or click (signed) and judges the ack."""
        return await self.slack.deliver(self.url, body)

    async def restore(self, text: str = "ct129", user: str = REQUESTER) -> HttpAck:
        return await self.command("/restore", text, user)

    async def command(self, command: str, text: str, user: str = REQUESTER) -> HttpAck:
        return await self.post(slash_command_body(command, text, user, CHANNEL, self.slack.response_url(), "t1"))

    async def restore_plan_message(self) -> Message:
        await self.slack.wait_until(lambda: self._plan() is not None, timeout=20, what="the plan with buttons")
        plan = self._plan()
        assert plan is not None
        return plan

    def _plan(self) -> Message | None:
        for message in self.slack.messages_in(CHANNEL):
            if not message.is_reply and message.blocks and any(b["type"] == "actions" for b in message.blocks):
                return message
        return None

    async def click(self, message: Message, action_id: str, user: str,
                    shown: list[dict[str, Any]] | None = None) -> tuple[HttpAck, str]:
        """Click a button as shown (``shown``: the blocks as the user saw them before an update)."""
        buttons = next(b for b in shown or message.blocks or [] if b["type"] == "actions")["elements"]
        button = next(b for b in buttons if b["action_id"] == action_id)
        response_url = self.slack.response_url()
        payload: dict[str, Any] = {
            "type": "block_actions", "user": {"id": user, "username": user}, "api_app_id": "A0PROOF",
            "token": "verification", "trigger_id": self.slack.trigger_id(user), "team": {"id": "T0TEST"},
            "container": {"type": "message", "message_ts": message.ts, "channel_id": CHANNEL},
            "channel": {"id": CHANNEL}, "message": {"ts": message.ts, "text": message.text},
            "response_url": response_url,
            "actions": [{"type": "button", "action_id": action_id, "block_id": "b", "value": button["value"],
                         "action_ts": str(time.time())}],
        }
        return await self.post(block_actions_body(payload)), response_url

    async def reject(self, message: Message, action_id: str, user: str, reason: str) -> HttpAck:
        """Click Reject, wait for the modal it opens, type ``reason`` and submit it; the submission's ack."""
        opened = len(self.slack.calls_to("views.open"))
        await self.click(message, action_id, user)
        await self.slack.wait_for("views.open", opened + 1)
        return await self.reject_submit(user, reason)

    async def reject_submit(self, user: str, reason: str) -> HttpAck:
        """Type ``reason`` into the user's open Reject modal and submit it."""
        view = self.slack.open_views(user)[-1]
        return await self.slack.submit_view(self.url, view.id, user, {"reason": {"reason_input": reason}})

    def events(self, kind: str) -> list[dict[str, Any]]:
        rows = sqlite3.connect(self.db).execute("SELECT details FROM events WHERE kind = ? ORDER BY id", (kind,))
        return [json.loads(row[0]) for row in rows]


@asynccontextmanager
async def make_rig(tmp_path: Path, expire_after_s: float, *, flags: list[str] | None = None,
                   service: bool = True) -> AsyncIterator[Rig]:
    async with demo_host("ct129", flags=flags) as host:
        document = host.inventory()
        if not service:
            del document["hosts"]["ct129"]["service"]
        document["approvals"] = {"approvers": [APPROVER, OTHER_APPROVER, REQUESTER], "allow_self_approval": False,
                                 "expire_after_s": expire_after_s}
        inventory = parse_inventory(yaml.safe_dump(document), "inventory.yml")
        audit = AuditStore.open(tmp_path / "audit.db")
        async with FakeSlack(channels={CHANNEL: "ops"}, signing_secret=SECRET) as slack:
            context = BotContext(inventory, audit)
            app = build_app(context, bot_token=slack.bot_token, signing_secret=SECRET, api_url=slack.api_url)
            try:
                async with serving(app) as url:
                    yield Rig(slack, url, tmp_path / "audit.db", host)
            finally:
                for timer in list(context.timers):
                    timer.cancel()
                audit.close()


@pytest_asyncio.fixture(loop_scope="session")
async def rig(tmp_path: Path) -> AsyncIterator[Rig]:
    async with make_rig(tmp_path, 900) as made:
        yield made


@pytest_asyncio.fixture(loop_scope="session")
async def short_rig(tmp_path: Path) -> AsyncIterator[Rig]:
    async with make_rig(tmp_path, 1.5) as made:
        yield made


def is_final(message: Message) -> bool:
    return bool(message.edits) and ("restore: PASS" in message.edits[-1].text or "restore: FAIL" in
                                    message.edits[-1].text)


async def test_approved_restore_replaces_the_file_and_proves_it(rig: Rig) -> None:
    assert (await rig.restore()).status_code == 200
    plan = await rig.restore_plan_message()
    approve = next(b for b in plan.blocks or [] if b["type"] == "actions")["elements"][0]
    assert approve["confirm"]["confirm"]["text"] == "Restore"
    assert "spec_info.py" in json.dumps(plan.blocks)
    await rig.slack.wait_until(lambda: bool(rig.slack.thread(CHANNEL, plan.ts)), what="the diff in the thread")
    diffs = rig.slack.thread(CHANNEL, plan.ts)
    diff_texts = [block["text"]["text"] for m in diffs for block in m.blocks or [] if block["type"] == "section"]
    assert any('+SPECULATIVE_ALGORITHMS = ("EAGLE", "NEXTN")' in text for text in diff_texts)
    assert rig.host.live_dir.joinpath("spec_info.py").read_text() != rig.host.backup_dir.joinpath(
        "spec_info.py").read_text()

    response, _ = await rig.click(plan, "restore_approve", APPROVER)
    assert response.status_code == 200
    await rig.slack.wait_until(lambda: is_final(rig.slack.message(CHANNEL, plan.ts)), timeout=30, what="verdict")
    assert rig.host.live_dir.joinpath("spec_info.py").read_bytes() == rig.host.backup_dir.joinpath(
        "spec_info.py").read_bytes()
    final = rig.slack.message(CHANNEL, plan.ts).edits[-1]
    assert "restore: PASS" in final.text
    assert not any(b["type"] == "actions" for b in final.blocks or [])
    assert "approved by <@U0APPROVER>" in json.dumps(final.blocks)
    # the verdict is on the parent when the restore ends; its evidence follows in the thread, the summary last
    await rig.slack.wait_until(lambda: any(m.text.startswith("Summary of operation")
                                           for m in rig.slack.thread(CHANNEL, plan.ts)), what="the summary")
    steps = [m.text.split(":")[0] for m in rig.slack.thread(CHANNEL, plan.ts)]
    assert {"recheck", "snapshot", "replace", "file"} <= set(steps)
    [finished] = [e for e in rig.events("finished") if e.get("restored")]
    snapshot = Path(finished["snapshot_dir"])
    assert snapshot.joinpath("spec_info.py").read_text().count("DDTREE") == 1  # the old file, kept
    assert rig.host.live_dir.joinpath(EXTRA).exists(), "plain Approve leaves the extra file in place"
    assert not snapshot.joinpath("extras").exists()
    assert rig.events("approved")[0]["requested_by"] == f"slack:{REQUESTER}"
    assert rig.slack.warnings == []


async def test_approve_and_move_extras_moves_the_extra_file_into_the_snapshot(rig: Rig) -> None:
    extra = rig.host.live_dir / EXTRA
    planted = extra.read_bytes()
    await rig.restore()
    plan = await rig.restore_plan_message()
    response, _ = await rig.click(plan, "restore_approve_move_extras", APPROVER)
    assert response.status_code == 200
    await rig.slack.wait_until(lambda: is_final(rig.slack.message(CHANNEL, plan.ts)), timeout=30, what="verdict")
    [finished] = [e for e in rig.events("finished") if e.get("restored")]
    assert not extra.exists(), "the extra file is still in the watch dir"
    snapshot = Path(finished["snapshot_dir"])
    assert snapshot.joinpath("extras", EXTRA).read_bytes() == planted, "moved, never deleted"


async def test_non_approver_and_requester_cannot_approve(rig: Rig) -> None:
    await rig.restore()
    plan = await rig.restore_plan_message()
    for user, words in ((STRANGER, "not an approver"), (REQUESTER, "another approver must approve")):
        response, response_url = await rig.click(plan, "restore_approve", user)
        assert response.status_code == 200
        await rig.slack.wait_until(lambda url=response_url: bool(rig.slack.responses_to(url)), what="ephemeral")
        reply = rig.slack.responses_to(response_url)[0].body
        assert reply["response_type"] == "ephemeral" and words in reply["text"]
    assert "DDTREE" in rig.host.live_dir.joinpath("spec_info.py").read_text()
    assert rig.events("approved") == []


async def test_two_approvers_at_once_apply_exactly_once(rig: Rig) -> None:
    await rig.restore()
    plan = await rig.restore_plan_message()
    (first, first_url), (second, second_url) = await asyncio.gather(
        rig.click(plan, "restore_approve", APPROVER), rig.click(plan, "restore_approve", OTHER_APPROVER))
    assert first.status_code == second.status_code == 200
    await rig.slack.wait_until(lambda: is_final(rig.slack.message(CHANNEL, plan.ts)), timeout=30, what="verdict")
    assert len(rig.events("approved")) == 1
    assert sum(1 for e in rig.events("step") if e["name"] == "replace") == 1
    await rig.slack.wait_until(lambda: bool(rig.slack.responses_to(first_url) or rig.slack.responses_to(second_url)),
                               what="the loser's ephemeral")
    loser = (rig.slack.responses_to(first_url) or rig.slack.responses_to(second_url))[0].body["text"]
    assert "already approved by slack:U0APPROVER" in loser


async def test_second_restore_while_one_is_pending_is_refused_with_a_link(rig: Rig) -> None:
    await rig.restore()
    plan = await rig.restore_plan_message()
    response = await rig.restore(user=OTHER_APPROVER)
    reply = response.json()
    assert reply["response_type"] == "ephemeral"
    assert "ct129 is busy" in reply["text"] and f"/archives/{CHANNEL}/p{plan.ts.replace('.', '')}" in reply["text"]
    await rig.reject(plan, "restore_reject", APPROVER, "not now")
    await rig.slack.wait_until(lambda: "rejected by" in rig.slack.message(CHANNEL, plan.ts).text, what="rejected")
    again = await rig.restore(user=OTHER_APPROVER)
    assert again.text == ""  # accepted: the reject released the host


async def test_unknown_backup_gets_the_list(rig: Rig) -> None:
    reply = (await rig.restore("ct129 nope")).json()
    assert "unknown backup 'nope'" in reply["text"] and "pre-ddtree" in reply["text"]


async def test_plan_expires_buttons_go_and_late_click_says_so(short_rig: Rig) -> None:
    rig = short_rig
    await rig.restore()
    plan = await rig.restore_plan_message()
    as_shown = copy.deepcopy(plan.blocks)
    await rig.slack.wait_until(lambda: "expired at" in rig.slack.message(CHANNEL, plan.ts).text, timeout=10,
                               what="the plan to expire")
    assert not any(b["type"] == "actions" for b in rig.slack.message(CHANNEL, plan.ts).blocks or [])
    _, url = await rig.click(plan, "restore_approve", APPROVER, as_shown)
    await rig.slack.wait_until(lambda: bool(rig.slack.responses_to(url)), what="ephemeral")
    assert "already expired" in rig.slack.responses_to(url)[0].body["text"]
    assert "DDTREE" in rig.host.live_dir.joinpath("spec_info.py").read_text()


async def test_long_diff_is_trimmed_in_the_thread_and_attached_whole(rig: Rig) -> None:
    long_patch = "".join(f"DDTREE_OPTION_{n} = {n}\n" for n in range(400))
    rig.host.live_dir.joinpath("spec_info.py").write_text(long_patch)
    await rig.restore()
    plan = await rig.restore_plan_message()
    await rig.slack.wait_until(lambda: any(f.completed for f in rig.slack.files.values()), what="the diff file")
    [uploaded] = rig.slack.files.values()
    assert uploaded.thread_ts == plan.ts
    assert b"-DDTREE_OPTION_399 = 399" in uploaded.content
    inline = json.dumps(rig.slack.thread(CHANNEL, plan.ts)[0].blocks)
    assert "the whole diff is attached below" in inline
    assert rig.slack.warnings == []


async def test_nothing_to_restore_threads_each_file_with_its_own_read(rig: Rig) -> None:
    """A plan with nothing to apply says so and threads one reply per file, each with the `sha256sum` of that
    file's own backup copy and live path as evidence (the same findings the CLI prints)."""
    names = ("spec_info.py", "eagle_info.py")
    for name in names:
        rig.host.live_dir.joinpath(name).write_bytes(rig.host.backup_dir.joinpath(name).read_bytes())
    await rig.restore()
    await rig.slack.wait_until(lambda: len([m for m in rig.slack.messages_in(CHANNEL) if m.is_reply]) >= 2,
                               timeout=20, what="one reply per file")
    parent = next(m for m in rig.slack.messages_in(CHANNEL) if not m.is_reply)
    assert "nothing differs" in json.dumps(parent.edits[-1].blocks)
    replies = {m.text.split(":")[1]: json.dumps(m.blocks) for m in rig.slack.thread(CHANNEL, parent.ts)}
    assert set(replies) == set(names)
    for name in names:
        other = next(n for n in names if n != name)
        shown = replies[name]
        assert f"$ sha256sum -- {rig.host.backup_dir / name} {rig.host.live_dir / name}" in shown, shown
        assert other not in shown, f"the reply for {name} names {other}"
