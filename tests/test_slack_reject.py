"""Reject with a reason: the Reject button opens a modal asking why; the reason is decided by the same
rules as a click (judged again at submission), audited with the ``rejected`` event, and shown on the
plan and in its thread. Against the strict fake Slack (views validated) and the real bolt app over HTTP."""

from __future__ import annotations

import copy
import sqlite3
from collections.abc import AsyncIterator
from pathlib import Path

import pytest_asyncio

from tests.test_slack_restore import APPROVER, CHANNEL, OTHER_APPROVER, STRANGER, Rig, make_rig, rig

__all__ = ["rig"]  # the fixture, shared with the /restore tests

SECRET_TOKEN = "ghp_" + "A1b2C3d4E5f6G7h8I9j0K1l2M3n4O5p6Q7r8"


@pytest_asyncio.fixture(loop_scope="session")
async def short_rig(tmp_path: Path) -> AsyncIterator[Rig]:
    """Plans expire after 3 s: time to click Reject, not to wait out the modal."""
    async with make_rig(tmp_path, 3) as made:
        yield made


async def test_reject_asks_why_and_the_reason_reaches_the_log_the_plan_and_the_thread(rig: Rig) -> None:
    await rig.restore()
    plan = await rig.restore_plan_message()
    click, _ = await rig.click(plan, "restore_reject", APPROVER)
    assert click.status_code == 200 and click.text == ""
    (opened,) = await rig.slack.wait_for("views.open")
    view = rig.slack.open_views(APPROVER)[0].view
    assert view["title"]["text"] == "Reject this restore" and view["submit"]["text"] == "Reject"
    assert "ct129" in view["blocks"][0]["text"]["text"]
    assert rig.events("rejected") == []  # asking is not deciding
    reason = f"wrong backup, the token {SECRET_TOKEN} is in it"
    submitted = await rig.reject_submit(APPROVER, reason)
    assert submitted.status_code == 200 and submitted.text == ""  # the modal closes
    await rig.slack.wait_until(lambda: "rejected by" in rig.slack.message(CHANNEL, plan.ts).text, what="rejected")
    parent = rig.slack.message(CHANNEL, plan.ts)
    assert f"rejected by <@{APPROVER}>" in parent.text and "wrong backup, the token [REDACTED] is in it" in parent.text
    assert not any(block["type"] == "actions" for block in parent.blocks or [])
    await rig.slack.wait_until(lambda: any("Rejected by" in m.text for m in rig.slack.thread(CHANNEL, plan.ts)),
                               what="the reason in the thread")
    (event,) = rig.events("rejected")
    assert event["reason"] == "wrong backup, the token [REDACTED] is in it"
    finished = rig.events("finished")[-1]
    assert finished["verdict"] == "rejected" and "wrong backup" in finished["summary"]
    assert sqlite3.connect(rig.db).execute("SELECT COUNT(*) FROM locks").fetchone()[0] == 0
    assert SECRET_TOKEN not in str([c.args for c in rig.slack.calls]) and SECRET_TOKEN not in rig.db.read_text(
        errors="replace")
    assert "DDTREE" in rig.host.live_dir.joinpath("spec_info.py").read_text()  # nothing changed
    assert opened.ok


async def test_who_may_not_reject_gets_no_modal(rig: Rig) -> None:
    await rig.restore()
    plan = await rig.restore_plan_message()
    _, url = await rig.click(plan, "restore_reject", STRANGER)
    await rig.slack.wait_until(lambda: bool(rig.slack.responses_to(url)), what="the refusal")
    assert "you are not an approver" in rig.slack.responses_to(url)[0].body["text"]
    assert rig.slack.calls_to("views.open") == [] and rig.events("rejected") == []


async def test_an_empty_reason_is_asked_again_and_decides_nothing(rig: Rig) -> None:
    await rig.restore()
    plan = await rig.restore_plan_message()
    ack = await rig.reject(plan, "restore_reject", APPROVER, "   ")
    assert ack.json() == {"response_action": "errors", "errors": {"reason": "Say why the plan is rejected."}}
    assert rig.slack.open_views(APPROVER) and rig.events("rejected") == []


async def test_a_plan_approved_while_the_modal_was_open_is_not_rejected(rig: Rig) -> None:
    await rig.restore()
    plan = await rig.restore_plan_message()
    as_shown = copy.deepcopy(plan.blocks)
    await rig.click(plan, "restore_reject", APPROVER)
    await rig.slack.wait_for("views.open")
    await rig.click(plan, "restore_approve", OTHER_APPROVER, as_shown)
    await rig.slack.wait_until(lambda: "restore: PASS" in rig.slack.message(CHANNEL, plan.ts).text, timeout=30,
                               what="the restore applied")
    ack = await rig.reject_submit(APPROVER, "too late")
    assert ack.json()["response_action"] == "errors"
    assert "already applied by slack:U0APPROVER2" in ack.json()["errors"]["reason"]
    assert rig.events("rejected") == [] and rig.events("refused")[-1]["reason"].startswith("this plan was already")


async def test_a_reason_submitted_after_the_plan_expired_says_so(short_rig: Rig) -> None:
    rig = short_rig
    await rig.restore()
    plan = await rig.restore_plan_message()
    await rig.click(plan, "restore_reject", APPROVER)
    await rig.slack.wait_for("views.open")
    await rig.slack.wait_until(lambda: "expired at" in rig.slack.message(CHANNEL, plan.ts).text, timeout=15,
                               what="the plan to expire")
    ack = await rig.reject_submit(APPROVER, "too slow")
    assert ack.json()["response_action"] == "errors" and "already expired" in ack.json()["errors"]["reason"]
    assert rig.events("rejected") == []


HOSTILE_REASON = "<!channel> ask <@U0VICTIM> or <https://evil.example/x|the runbook> & <!here>"
RAW_SEQUENCES = ("<!channel>", "<@U0VICTIM>", "<https://evil.example/x|the runbook>", "<!here>")


def text_fields(value: object) -> list[str]:
    """Every string Slack renders as mrkdwn in a call's arguments: each `text` at any depth."""
    found: list[str] = []
    if isinstance(value, dict):
        for key, item in value.items():
            if key == "text" and isinstance(item, str):
                found.append(item)
            else:
                found.extend(text_fields(item))
    elif isinstance(value, list):
        for item in value:
            found.extend(text_fields(item))
    return found


async def test_a_typed_reason_is_escaped_in_every_text_field(rig: Rig) -> None:
    """Slack syntax typed as the reason (a channel ping, a user mention, a disguised link) is shown as typed,
    in the parent's update and the thread's reply, their `text` fallbacks included, never as syntax."""
    await rig.restore()
    plan = await rig.restore_plan_message()
    before = len(rig.slack.calls)
    await rig.click(plan, "restore_reject", APPROVER)
    await rig.slack.wait_for("views.open")
    submitted = await rig.reject_submit(APPROVER, HOSTILE_REASON)
    assert submitted.status_code == 200
    await rig.slack.wait_until(lambda: any("Rejected by" in m.text for m in rig.slack.thread(CHANNEL, plan.ts)),
                               what="the reason in the thread")
    calls = [c for c in rig.slack.calls[before:] if c.method in ("chat.update", "chat.postMessage")]
    texts = [t for call in calls for t in text_fields(call.args)]
    assert any("&lt;!channel&gt; ask &lt;@U0VICTIM&gt;" in t for t in texts), texts
    shown = [t for t in texts if "U0VICTIM" in t]
    assert len(shown) >= 4, shown  # parent text and block, reply text and block
    for text in shown:
        assert not any(raw in text for raw in RAW_SEQUENCES), text
    (event,) = rig.events("rejected")
    assert event["reason"] == HOSTILE_REASON  # the log keeps what was typed
