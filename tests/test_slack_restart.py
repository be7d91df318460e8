"""/restart through the real bolt app: plan with the current PID, approval, progress on the parent,
one reply per signal, the verdict — against a loopback host under a real supervisord."""

from __future__ import annotations

import dataclasses
import json
import sqlite3
from collections.abc import AsyncIterator
from pathlib import Path

import pytest_asyncio

from tests.slack_fake.records import Message
from tests.test_slack_restore import APPROVER, CHANNEL, REQUESTER, Rig, make_rig


@pytest_asyncio.fixture(loop_scope="session")
async def rig(tmp_path: Path) -> AsyncIterator[Rig]:
    async with make_rig(tmp_path, 900, flags=["--speculative-algorithm", "NEXTN"]) as made:
        yield made


async def test_approved_restart_shows_progress_and_proves_the_new_pid(rig: Rig) -> None:
    old_pid = int((await rig.host.supervisorctl("pid", "sglang")).strip())
    assert (await rig.command("/restart", "ct129")).status_code == 200
    plan = await rig.restore_plan_message()
    shown = json.dumps(plan.blocks)
    assert f"PID {old_pid}" in shown and "supervisorctl" in shown and "--speculative-algorithm NEXTN" in shown
    approve = next(b for b in plan.blocks or [] if b["type"] == "actions")["elements"][0]
    assert approve["action_id"] == "restart_approve" and approve["confirm"]["confirm"]["text"] == "Restart"
    plan_id = approve["value"]
    assert shown.count(plan_id) == 1 + 2  # said once in the message; the two buttons carry it as their value
    assert shown.count("Restart plan for") == 1  # one title, not one more inside the plan's code block

    response, _ = await rig.click(plan, "restart_approve", APPROVER)
    assert response.status_code == 200
    await rig.slack.wait_until(lambda: "restart: PASS" in rig.slack.message(CHANNEL, plan.ts).text
                               or "restart: FAIL" in rig.slack.message(CHANNEL, plan.ts).text,
                               timeout=60, what="the restart verdict")
    parent = rig.slack.message(CHANNEL, plan.ts)
    assert "restart: PASS" in parent.text, parent.text
    new_pid = int((await rig.host.supervisorctl("pid", "sglang")).strip())
    assert new_pid != old_pid
    progress = [edit.text for edit in parent.edits if "verifying" in edit.text]
    assert progress, "the parent shows progress while the restart is verified"
    assert any(f"PID {old_pid} →" in text for text in [*progress, parent.text])
    # the verdict is on the parent when the restart ends; its evidence follows in the thread, the summary last
    await rig.slack.wait_until(lambda: any(m.text.startswith("Summary of operation")
                                           for m in rig.slack.thread(CHANNEL, plan.ts)), what="the summary")
    replies = rig.slack.thread(CHANNEL, plan.ts)
    assert any(f"{old_pid} → {new_pid}" in reply.text for reply in replies)
    assert rig.events("approved")[0]["requested_by"] == f"slack:{REQUESTER}"
    assert rig.slack.warnings == []


async def test_host_without_a_service_is_refused(tmp_path: Path) -> None:
    async with make_rig(tmp_path, 900, service=False) as rig:
        reply = (await rig.command("/restart", "ct129")).json()
        assert "has no service in the inventory" in reply["text"]


async def test_restore_that_leaves_a_stale_process_offers_restart_now(rig: Rig) -> None:
    await rig.restore()
    restore_plan = await rig.restore_plan_message()
    await rig.click(restore_plan, "restore_approve", APPROVER)
    def offer() -> Message | None:
        return next((m for m in rig.slack.thread(CHANNEL, restore_plan.ts)
                     if any(b["type"] == "actions" for b in m.blocks or [])), None)

    await rig.slack.wait_until(lambda: offer() is not None, timeout=30, what="the Restart now offer")
    found = offer()
    assert found is not None and "still running the old code" in found.text
    await rig.click(found, "restart_now", REQUESTER)
    await rig.slack.wait_until(lambda: any(b.get("action_id") == "restart_approve"
                                           for m in rig.slack.messages_in(CHANNEL) if not m.is_reply
                                           for block in m.blocks or [] if block["type"] == "actions"
                                           for b in block["elements"]),
                               timeout=30, what="a restart plan awaiting approval")


async def test_a_click_only_counts_on_its_own_plan_message_and_kind(rig: Rig) -> None:
    """A correctly signed button of another kind, or from another message, decides nothing."""
    assert (await rig.command("/restart", "ct129")).status_code == 200
    plan = await rig.restore_plan_message()
    plan_id = next(b for b in plan.blocks or [] if b["type"] == "actions")["elements"][0]["value"]
    forged = [{"type": "actions", "elements": [{"action_id": "restore_approve", "value": plan_id}]}]
    wrong_kind, wrong_kind_url = await rig.click(plan, "restore_approve", APPROVER, shown=forged)
    elsewhere = dataclasses.replace(plan, ts="1700000099.000100")
    wrong_message, wrong_message_url = await rig.click(elsewhere, "restart_approve", APPROVER)
    assert wrong_kind.status_code == 200 and wrong_message.status_code == 200
    for url, why in ((wrong_kind_url, "a restore button cannot decide a restart plan"),
                     (wrong_message_url, "not on the plan's own message")):
        await rig.slack.wait_until(lambda url=url: bool(rig.slack.responses_to(url)), what="an ephemeral refusal")
        assert why in rig.slack.responses_to(url)[0].body["text"]
    assert rig.events("approved") == [] and len(rig.events("refused")) == 2
    response = await rig.reject(plan, "restart_reject", APPROVER, "wrong host")  # the real button still works
    assert response.status_code == 200
    await rig.slack.wait_until(lambda: "rejected by" in rig.slack.message(CHANNEL, plan.ts).text, timeout=20,
                               what="the rejection on the plan")
    assert sqlite3.connect(rig.db).execute("SELECT COUNT(*) FROM locks").fetchone()[0] == 0
