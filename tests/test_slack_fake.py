"""Tests proving tests/slack_fake rejects what Slack rejects and serves real slack_sdk/bolt usage.

Everything runs against the local FakeSlack on 127.0.0.1; nothing reaches slack.com.
"""

from __future__ import annotations

import json
import re
import time
from collections.abc import AsyncIterator
from typing import Any
from urllib.parse import parse_qsl, urljoin

import aiohttp
import pytest
import yaml
from slack_bolt.adapter.socket_mode.async_handler import AsyncSocketModeHandler
from slack_bolt.app.async_app import AsyncApp
from slack_sdk.errors import SlackApiError
from slack_sdk.signature import SignatureVerifier
from slack_sdk.web.async_client import AsyncWebClient

from tests.slack_fake import FakeSlack, manifest_bot_scopes, signing
from tests.slack_fake.limits import METHOD_TIERS, POST_BURST, TIER_PER_MINUTE, RateLimits
from tests.slack_fake.records import MANIFEST
from tests.slack_fake.serving import serving

BOT = "xoxb-test"
APP = "xapp-test"
SECRET = "test-signing-secret"
CHANNEL = "C0PROOF"
INVITED = {CHANNEL: "proof", "C1": "general"}  # the channels the bot was invited to


@pytest.fixture
async def slack() -> AsyncIterator[FakeSlack]:
    async with FakeSlack(bot_token=BOT, app_token=APP, channels=INVITED,
                         signing_secret=SECRET) as fake:
        yield fake


@pytest.fixture
async def client(slack: FakeSlack) -> AsyncIterator[AsyncWebClient]:
    # One shared aiohttp session, closed when the test ends (no unclosed-session warnings).
    async with aiohttp.ClientSession() as session:
        yield AsyncWebClient(token=BOT, base_url=slack.api_url, session=session)


def section(text: str, **extra: Any) -> dict[str, Any]:
    return {"type": "section", "text": {"type": "mrkdwn", "text": text}, **extra}


def button(action_id: str, text: str = "Go", **extra: Any) -> dict[str, Any]:
    return {
        "type": "button",
        "action_id": action_id,
        "text": {"type": "plain_text", "text": text},
        **extra,
    }


async def expect_error(awaitable: Any, error: str) -> SlackApiError:
    with pytest.raises(SlackApiError) as info:
        await awaitable
    assert info.value.response["error"] == error, info.value.response.data
    return info.value


# ---------------------------------------------------------------- basics / auth


async def test_api_url_is_what_slack_sdk_joins_method_names_onto(slack: FakeSlack) -> None:
    assert slack.api_url.endswith("/api/")
    assert urljoin(slack.api_url, "chat.postMessage") == f"{slack.base_url}/api/chat.postMessage"


async def test_auth_test_reports_bot_identity(slack: FakeSlack, client: AsyncWebClient) -> None:
    resp = await client.auth_test()
    assert resp["user_id"] == "UBOT"
    assert resp["team_id"] == "T0TEST"
    assert resp["bot_id"]
    assert resp["url"].startswith("https://")
    assert resp.headers["x-oauth-scopes"] == ",".join(sorted(manifest_bot_scopes()))
    assert [c.method for c in slack.calls] == ["auth.test"]


def test_bot_scopes_are_exactly_the_manifests() -> None:
    requested = yaml.safe_load(MANIFEST.read_text())["oauth_config"]["scopes"]["bot"]
    assert FakeSlack(channels=INVITED).scopes == set(requested)
    assert "files:read" not in requested
    # channels:read / groups:read only because member_joined_channel needs them (the help on being invited)
    events = yaml.safe_load(MANIFEST.read_text())["settings"]["event_subscriptions"]["bot_events"]
    assert {"channels:read", "groups:read"} <= set(requested) and "member_joined_channel" in events


async def test_bad_token_is_invalid_auth(slack: FakeSlack) -> None:
    bad = AsyncWebClient(token="xoxb-wrong", base_url=slack.api_url)
    await expect_error(bad.chat_postMessage(channel=CHANNEL, text="hi"), "invalid_auth")
    assert slack.calls_to("chat.postMessage")[0].error == "invalid_auth"
    assert not slack.messages


async def test_missing_token_is_not_authed(slack: FakeSlack) -> None:
    anonymous = AsyncWebClient(base_url=slack.api_url)
    await expect_error(anonymous.auth_test(), "not_authed")


async def test_token_types_are_not_interchangeable(slack: FakeSlack) -> None:
    with_app_token = AsyncWebClient(token=APP, base_url=slack.api_url)
    await expect_error(
        with_app_token.chat_postMessage(channel=CHANNEL, text="hi"), "not_allowed_token_type"
    )
    bot = AsyncWebClient(token=BOT, base_url=slack.api_url)
    await expect_error(bot.apps_connections_open(app_token=BOT), "not_allowed_token_type")
    opened = await bot.apps_connections_open(app_token=APP)
    assert re.fullmatch(rf"ws://127\.0\.0\.1:{slack.port}/link/\?ticket=\w+&app_id=\w+", opened["url"])


async def test_unknown_method(client: AsyncWebClient) -> None:
    await expect_error(client.api_call("chat.postMessages", json={"x": 1}), "unknown_method")


async def test_missing_scope_names_needed_and_provided() -> None:
    async with FakeSlack(bot_token=BOT, app_token=APP, channels=INVITED,
                         scopes=["commands", "chat:write"]) as narrow:
        c = AsyncWebClient(token=BOT, base_url=narrow.api_url)
        err = await expect_error(c.files_getUploadURLExternal(filename="a", length=1), "missing_scope")
        assert (err.response["needed"], err.response["provided"]) == ("files:write", "chat:write,commands")
        await c.chat_getPermalink(channel=CHANNEL, message_ts=(await c.chat_postMessage(
            channel=CHANNEL, text="x"))["ts"])  # getPermalink needs no scope
        narrow.scopes = {"commands"}
        err = await expect_error(c.chat_postMessage(channel=CHANNEL, text="x"), "missing_scope")
        assert err.response["needed"] == "chat:write"


# ---------------------------------------------------------------- messages


async def test_post_update_and_thread_reply(slack: FakeSlack, client: AsyncWebClient) -> None:
    first = await client.chat_postMessage(channel=CHANNEL, text="restoring ct129")
    second = await client.chat_postMessage(channel=CHANNEL, text="unrelated")
    assert re.fullmatch(r"\d{10}\.\d{6}", first["ts"])
    assert float(second["ts"]) > float(first["ts"])
    assert first["channel"] == CHANNEL
    assert first["message"]["text"] == "restoring ct129"

    updated = await client.chat_update(
        channel=CHANNEL, ts=first["ts"], text="restored ct129", blocks=[section("*done*")]
    )
    assert updated["ts"] == first["ts"]
    msg = slack.message(CHANNEL, first["ts"])
    assert msg.text == "restored ct129"
    assert msg.blocks == [section("*done*")]
    assert len(msg.update_times) == 1

    reply = await client.chat_postMessage(channel=CHANNEL, thread_ts=first["ts"], text="proof")
    assert slack.calls_to("chat.postMessage")[-1].args["thread_ts"] == first["ts"]
    assert [m.ts for m in slack.thread(CHANNEL, first["ts"])] == [reply["ts"]]
    assert slack.message(CHANNEL, reply["ts"]).is_reply

    link = await client.chat_getPermalink(channel=CHANNEL, message_ts=reply["ts"])
    assert link["permalink"] == (
        f"https://fake.slack.test/archives/{CHANNEL}/p{reply['ts'].replace('.', '')}"
        f"?thread_ts={first['ts']}&cid={CHANNEL}"
    )
    assert slack.warnings == []


async def test_update_of_unknown_message_is_message_not_found(client: AsyncWebClient) -> None:
    await expect_error(
        client.chat_update(channel=CHANNEL, ts="1700000000.999999", text="x"), "message_not_found"
    )
    await expect_error(
        client.chat_getPermalink(channel=CHANNEL, message_ts="1700000000.999999"),
        "message_not_found",
    )


async def test_reply_to_missing_parent_is_flagged(slack: FakeSlack, client: AsyncWebClient) -> None:
    await client.chat_postMessage(channel=CHANNEL, thread_ts="1600000000.000001", text="orphan")
    assert any("matches no message" in w for w in slack.warnings)
    slack.warnings.clear()


async def test_unexamined_warnings_fail_the_test() -> None:
    with pytest.raises(AssertionError, match="matches no message"):
        async with FakeSlack(channels=INVITED) as fake:
            c = AsyncWebClient(token=fake.bot_token, base_url=fake.api_url)
            await c.chat_postMessage(channel=CHANNEL, thread_ts="1600000000.000001", text="orphan")


async def test_text_limits(slack: FakeSlack, client: AsyncWebClient) -> None:
    await client.chat_postMessage(channel=CHANNEL, text="x" * 40_000)
    await expect_error(client.chat_postMessage(channel=CHANNEL, text="x" * 40_001), "msg_too_long")
    await expect_error(client.api_call("chat.postMessage", json={"channel": CHANNEL}), "no_text")


async def test_ephemeral(slack: FakeSlack, client: AsyncWebClient) -> None:
    slack.join(CHANNEL, "U1")
    eph = await client.chat_postEphemeral(channel=CHANNEL, user="U1", text="only you")
    assert slack.ephemerals[0].user == "U1"
    assert slack.ephemerals[0].message_ts == eph["message_ts"]
    await expect_error(client.chat_update(channel=CHANNEL, ts=eph["message_ts"], text="x"),
                       "message_not_found")
    await expect_error(client.chat_postEphemeral(channel=CHANNEL, user="nobody", text="x"),
                       "user_not_in_channel")
    await expect_error(client.chat_postEphemeral(channel="C1", user="U1", text="x"), "user_not_in_channel")


async def test_a_slash_command_puts_its_sender_in_the_channel(slack: FakeSlack, client: AsyncWebClient) -> None:
    """Slack lets people type only in a channel they are in: the one who sent a command can get an ephemeral."""
    await expect_error(client.chat_postEphemeral(channel=CHANNEL, user="U0ALICE", text="x"), "user_not_in_channel")
    async with serving(AsyncApp(token=BOT, signing_secret=SECRET, client=client)) as url:
        await slack.deliver(url, signing.slash_command_body("/verify", "", "U0ALICE", CHANNEL, slack.response_url(),
                                                            slack.trigger_id("U0ALICE")))
    slack.warnings.clear()  # the app has no /verify listener: Slack would say so, not the point here
    await client.chat_postEphemeral(channel=CHANNEL, user="U0ALICE", text="only you")
    assert CHANNEL in [e.channel for e in slack.ephemerals]


async def test_no_channel_is_created_on_first_use(slack: FakeSlack, client: AsyncWebClient) -> None:
    for channel in ("C0NEVERSEEN", "not-a-channel", "#proof"):
        await expect_error(client.chat_postMessage(channel=channel, text="x"), "channel_not_found")
    await expect_error(client.chat_postEphemeral(channel="C0NEVERSEEN", user="U1", text="x"),
                       "channel_not_found")
    assert set(slack.channels) == set(INVITED) and not slack.messages


async def test_post_where_the_bot_was_not_invited_fails_as_in_slack(
    slack: FakeSlack, client: AsyncWebClient
) -> None:
    slack.add_channel("C0PUBLIC", "town-square", member=False)
    slack.add_channel("G0SECRET", "secret", member=False)
    slack.add_channel("C0OLD", "old", is_archived=True)
    # private, not invited: the bot cannot even see it
    await expect_error(client.chat_postMessage(channel="G0SECRET", text="x"), "channel_not_found")
    # public, not invited: only chat:write.public (granted by the manifest) lets it post
    assert (await client.chat_postMessage(channel="C0PUBLIC", text="x"))["ok"]
    await expect_error(client.chat_postEphemeral(channel="C0PUBLIC", user="U1", text="x"),
                       "not_in_channel")
    started = await client.files_getUploadURLExternal(filename="a.txt", length=1)
    async with aiohttp.ClientSession() as http, http.post(started["upload_url"], data=b"a"):
        pass
    await expect_error(client.files_completeUploadExternal(
        files=[{"id": started["file_id"]}], channel_id="C0PUBLIC"), "not_in_channel")
    slack.scopes.discard("chat:write.public")
    await expect_error(client.chat_postMessage(channel="C0PUBLIC", text="x"), "not_in_channel")
    await expect_error(client.chat_postMessage(channel="C0OLD", text="x"), "is_archived")


async def test_form_encoded_arguments_are_accepted(slack: FakeSlack, client: AsyncWebClient) -> None:
    blocks = [section("from a form")]
    resp = await client.api_call(
        "chat.postMessage",
        data={"channel": CHANNEL, "text": "form", "blocks": json.dumps(blocks)},
    )
    assert slack.message(CHANNEL, resp["ts"]).blocks == blocks
    await expect_error(
        client.api_call("chat.postMessage", data={"channel": CHANNEL, "blocks": "[{not json"}),
        "invalid_blocks_format",
    )


async def test_blocks_without_text_fallback_are_recorded(
    slack: FakeSlack, client: AsyncWebClient
) -> None:
    with pytest.warns(UserWarning, match="top-level `text`"):  # slack_sdk warns too
        await client.chat_postMessage(channel=CHANNEL, blocks=[section("no fallback")])
    assert len(slack.warnings) == 1
    assert "fallback" in slack.warnings[0]
    slack.warnings.clear()


async def test_rate_limit_answers_429_with_retry_after(
    slack: FakeSlack, client: AsyncWebClient
) -> None:
    slack.set_rate_limit("chat.update", max_calls=2, per_seconds=60)
    posted = await client.chat_postMessage(channel=CHANNEL, text="v0")
    for i in range(2):
        await client.chat_update(channel=CHANNEL, ts=posted["ts"], text=f"v{i + 1}")
    err = await expect_error(
        client.chat_update(channel=CHANNEL, ts=posted["ts"], text="v3"), "ratelimited"
    )
    assert err.response.status_code == 429
    assert int(err.response.headers["Retry-After"]) >= 1
    assert [c.ok for c in slack.calls_to("chat.update")] == [True, True, False]


async def test_slacks_documented_limits_are_on_by_default(slack: FakeSlack, client: AsyncWebClient) -> None:
    """chat.postMessage: about one a second per channel after a short burst; chat.update: Tier 3 (50 a
    minute). Past either, HTTP 429 with Retry-After; another channel has its own allowance. (The exact
    arithmetic is in the clock-controlled test below; here only what holds however slow the machine.)"""
    started, accepted = time.monotonic(), 0
    while True:
        try:
            await client.chat_postMessage(channel=CHANNEL, text="burst")
        except SlackApiError as refused:
            err = refused
            break
        accepted += 1
        assert accepted <= POST_BURST + time.monotonic() - started + 1, "no 429 past the burst and the pace"
    assert accepted >= POST_BURST and err.response.status_code == 429 and err.response["error"] == "ratelimited"
    assert int(err.response.headers["Retry-After"]) >= 1
    await client.chat_postMessage(channel="C1", text="another channel")
    posted = slack.messages_in(CHANNEL)[0]
    for i in range(TIER_PER_MINUTE[METHOD_TIERS["chat.update"]]):
        await client.chat_update(channel=CHANNEL, ts=posted.ts, text=f"v{i}")
    err = await expect_error(client.chat_update(channel=CHANNEL, ts=posted.ts, text="51st"), "ratelimited")
    assert 1 <= int(err.response.headers["Retry-After"]) <= 60
    assert len(posted.edits) == 50


def test_the_limits_arithmetic_on_a_clock_the_test_controls() -> None:
    limits = RateLimits()
    assert [limits.retry_after("chat.postMessage", "C1", 100.0) for _ in range(POST_BURST + 1)] == [
        *[None] * POST_BURST, 1]
    assert limits.retry_after("chat.postMessage", "C2", 100.0) is None  # per channel
    assert limits.retry_after("chat.postMessage", "C1", 100.5) == 1  # half a token back: not yet
    assert limits.retry_after("chat.postMessage", "C1", 101.0) is None  # one a second
    assert [limits.retry_after("chat.update", "C1", 200.0 + n / 10) for n in range(51)][-2:] == [None, 55]
    assert limits.retry_after("chat.update", "C1", 260.0) is None  # the first of the 50 left the minute
    assert limits.retry_after("auth.test", None, 0.0) is None  # special, no published figure: not limited
    limits.set("chat.update", 1, 1.0)
    assert [limits.retry_after("chat.update", "C1", 300.0) for _ in range(2)] == [None, 1]


async def test_a_response_url_expires_after_thirty_minutes(slack: FakeSlack) -> None:
    fresh, stale = slack.response_url(age=29 * 60), slack.response_url(age=30 * 60 + 1)
    async with aiohttp.ClientSession() as http:
        for url, status in ((fresh, 200), (stale, 404)):
            async with http.post(url, json={"text": "late"}) as response:
                assert response.status == status, url
    assert [r.error for r in slack.responses] == [None, "expired_url"]


async def test_an_envelope_never_acked_fails_the_test_like_an_http_timeout() -> None:
    slack = FakeSlack(app_token=APP, channels=INVITED)
    with pytest.raises(AssertionError, match=r"envelope .* \(slash_commands\) was never acked"):
        async with slack:
            slack.ack_deadline = 0.2
            async with aiohttp.ClientSession() as http:
                opened = await AsyncWebClient(base_url=slack.api_url, session=http).apps_connections_open(app_token=APP)
                ws = await http.ws_connect(opened["url"])
                await ws.receive_json()  # hello
                await slack.socket_send_slash_command("/verify", "ct129", channel_id=CHANNEL)
                await ws.receive_json()  # the envelope, never acked
                await ws.close()


# ---------------------------------------------------------------- Block Kit


def _ok_blocks() -> list[dict[str, Any]]:
    return [
        {"type": "header", "text": {"type": "plain_text", "text": "h" * 150}},
        section("s" * 3000, block_id="b1", accessory=button("acc")),
        {"type": "section", "fields": [{"type": "mrkdwn", "text": "f" * 2000}] * 10},
        {"type": "divider"},
        {"type": "context", "elements": [{"type": "mrkdwn", "text": "c"}] * 9
         + [{"type": "image", "image_url": "https://x.test/i.png", "alt_text": "i"}]},
        {
            "type": "actions",
            "elements": [button(f"a{i}", "t" * 75, value="v" * 2000) for i in range(24)]
            + [
                button(
                    "danger",
                    style="danger",
                    confirm={
                        "title": {"type": "plain_text", "text": "Sure?"},
                        "text": {"type": "mrkdwn", "text": "Really *restart*?"},
                        "confirm": {"type": "plain_text", "text": "Yes"},
                        "deny": {"type": "plain_text", "text": "No"},
                    },
                )
            ],
        },
        {
            "type": "rich_text",
            "elements": [
                {"type": "rich_text_section", "elements": [{"type": "text", "text": "hi"}]},
                {
                    "type": "rich_text_list",
                    "style": "bullet",
                    "elements": [
                        {"type": "rich_text_section",
                         "elements": [{"type": "link", "url": "https://x.test"}]}
                    ],
                },
            ],
        },
        {"type": "image", "image_url": "https://x.test/p.png", "alt_text": "proof"},
        {
            "type": "input",
            "dispatch_action": True,
            "label": {"type": "plain_text", "text": "Reason"},
            "element": {"type": "plain_text_input", "action_id": "reason"},
        },
    ]


async def test_valid_block_kit_at_the_limits_is_accepted(
    slack: FakeSlack, client: AsyncWebClient
) -> None:
    await client.chat_postMessage(channel=CHANNEL, text="fallback", blocks=_ok_blocks())
    await client.chat_postMessage(channel=CHANNEL, text="fifty", blocks=[{"type": "divider"}] * 50)
    assert slack.warnings == []


async def test_51_blocks_is_invalid_blocks(slack: FakeSlack, client: AsyncWebClient) -> None:
    err = await expect_error(
        client.chat_postMessage(channel=CHANNEL, text="x", blocks=[{"type": "divider"}] * 51),
        "invalid_blocks",
    )
    assert err.response["response_metadata"]["messages"] == [
        "[ERROR] no more than 50 items allowed [json-pointer:/blocks]"
    ]
    assert not slack.messages


async def test_3001_char_section_is_invalid_blocks(client: AsyncWebClient) -> None:
    err = await expect_error(
        client.chat_postMessage(channel=CHANNEL, text="x", blocks=[section("s" * 3001)]),
        "invalid_blocks",
    )
    assert err.response["response_metadata"]["messages"] == [
        "[ERROR] must be less than 3001 characters [json-pointer:/blocks/0/text/text]"
    ]


CONFIRM_NO_DENY = {
    "title": {"type": "plain_text", "text": "t"},
    "text": {"type": "plain_text", "text": "t"},
    "confirm": {"type": "plain_text", "text": "ok"},
}


@pytest.mark.parametrize(
    ("blocks", "reason"),
    [
        ([{"type": "header", "text": {"type": "plain_text", "text": "h" * 151}}], "151 characters"),
        ([{"type": "header", "text": {"type": "mrkdwn", "text": "h"}}], "must be one of plain_text"),
        ([{"type": "section", "fields": [{"type": "mrkdwn", "text": "f"}] * 11}], "10 items"),
        ([{"type": "section", "fields": [{"type": "mrkdwn", "text": "f" * 2001}]}], "2001 char"),
        ([section("")], "more than 0 characters"),
        ([{"type": "section"}], "either text or fields"),
        ([{"type": "context", "elements": [{"type": "mrkdwn", "text": "c"}] * 11}], "10 items"),
        ([{"type": "actions", "elements": [button(f"a{i}") for i in range(26)]}], "25 items"),
        ([{"type": "actions", "elements": [button("a", "t" * 76)]}], "76 characters"),
        ([{"type": "actions", "elements": [button("a" * 256)]}], "256 characters"),
        ([{"type": "actions", "elements": [button("a", value="v" * 2001)]}], "2001 characters"),
        ([{"type": "actions", "elements": [button("a"), button("a")]}], "duplicate action_id"),
        (
            [section("x", accessory=button("a")), {"type": "actions", "elements": [button("a")]}],
            "duplicate action_id",
        ),
        ([{"type": "actions", "elements": [button("a", confirm=CONFIRM_NO_DENY)]}], "field: deny"),
        ([{"type": "actions", "elements": [button("a", style="green")]}], "primary"),
        ([section("a", block_id="b"), section("b", block_id="b")], "duplicate block_id"),
        ([section("a", block_id="b" * 256)], "256 characters"),
        ([{"type": "section", "text": {"type": "markdown", "text": "x"}}], "must be one of"),
        ([{"type": "sektion", "text": {"type": "mrkdwn", "text": "x"}}], "unsupported block type"),
        ([section("x", color="red")], "invalid additional property: color"),
        ([{"type": "actions", "elements": [{**button("a"), "disabled": True}]}], "additional"),
        ([{"type": "image", "image_url": "https://x.test/i.png"}], "field: alt_text"),
        ([{"type": "rich_text", "elements": [{"type": "rich_text_section",
                                              "elements": [{"type": None}]}]}], "rich text"),
        (["not an object"], "must be an object"),
    ],
)
async def test_invalid_block_kit_is_rejected(
    slack: FakeSlack, client: AsyncWebClient, blocks: list[Any], reason: str
) -> None:
    err = await expect_error(
        client.chat_postMessage(channel=CHANNEL, text="fallback", blocks=blocks), "invalid_blocks"
    )
    messages = err.response["response_metadata"]["messages"]
    assert any(reason in m for m in messages), messages
    assert all(m.startswith("[ERROR] ") and "[json-pointer:/blocks" in m for m in messages)


async def test_block_kit_is_validated_on_update_and_ephemeral(slack: FakeSlack, client: AsyncWebClient) -> None:
    slack.join(CHANNEL, "U1")
    posted = await client.chat_postMessage(channel=CHANNEL, text="ok")
    too_long = [section("s" * 3001)]
    await expect_error(
        client.chat_update(channel=CHANNEL, ts=posted["ts"], text="x", blocks=too_long),
        "invalid_blocks",
    )
    await expect_error(
        client.chat_postEphemeral(channel=CHANNEL, user="U1", text="x", blocks=too_long),
        "invalid_blocks",
    )


# ---------------------------------------------------------------- files


async def test_files_upload_v2_end_to_end(slack: FakeSlack, client: AsyncWebClient) -> None:
    parent = await client.chat_postMessage(channel=CHANNEL, text="proof follows")
    resp = await client.files_upload_v2(
        channel=CHANNEL,
        thread_ts=parent["ts"],
        filename="proof.txt",
        content="service active (running)\n",
        title="Proof",
    )
    file_id = resp["file"]["id"]
    uploaded = slack.files[file_id]
    assert uploaded.content == b"service active (running)\n"
    assert uploaded.completed
    assert uploaded.title == "Proof"
    assert uploaded.channels == [CHANNEL]
    assert uploaded.thread_ts == parent["ts"]
    assert [c.method for c in slack.calls] == [
        "chat.postMessage",
        "files.getUploadURLExternal",
        "files.completeUploadExternal",
    ]
    assert slack.warnings == []


async def test_complete_upload_requires_the_bytes(client: AsyncWebClient) -> None:
    started = await client.files_getUploadURLExternal(filename="a.txt", length=3)
    await expect_error(
        client.files_completeUploadExternal(files=[{"id": started["file_id"]}], channel_id=CHANNEL),
        "file_not_found",
    )
    await expect_error(
        client.files_completeUploadExternal(files=[{"id": "F404"}], channel_id=CHANNEL),
        "file_not_found",
    )


# ---------------------------------------------------------------- response_url


async def test_response_url_records_and_validates(slack: FakeSlack) -> None:
    url = slack.response_url()
    async with aiohttp.ClientSession() as http:
        async with http.post(url, json={"text": "done", "response_type": "in_channel"}) as r:
            assert (r.status, await r.text()) == (200, "ok")
        async with http.post(url, json={"text": "x", "blocks": [section("s" * 3001)]}) as r:
            assert (r.status, await r.text()) == (400, "invalid_blocks")
        for _ in range(3):
            async with http.post(url, json={"text": "again"}) as r:
                assert r.status == 200
        async with http.post(url, json={"text": "sixth"}) as r:
            assert r.status == 404
        async with http.post(f"{slack.base_url}/response/nope", json={"text": "x"}) as r:
            assert r.status == 404
    posts = slack.responses_to(url)
    assert posts[0].body == {"text": "done", "response_type": "in_channel"}
    assert [p.status for p in posts] == [200, 400, 200, 200, 200, 404]


# ---------------------------------------------------------------- Socket Mode


async def test_socket_mode_protocol_with_raw_client(slack: FakeSlack) -> None:
    bot = AsyncWebClient(token=APP, base_url=slack.api_url)
    url = (await bot.apps_connections_open(app_token=APP))["url"]
    async with aiohttp.ClientSession() as http:
        async with http.ws_connect(url) as ws:
            hello = await ws.receive_json(timeout=5)
            assert hello["type"] == "hello"
            assert hello["connection_info"]["app_id"]
            assert hello["num_connections"] == 1
            await ws.ping(b"sdk-ping-pong:1")  # answered by autoping, like Slack
            pending = await slack.socket_send_slash_command(command="/verify", text="ct129", channel_id=CHANNEL)
            envelope = await ws.receive_json(timeout=5)
            assert envelope["type"] == "slash_commands"
            assert envelope["accepts_response_payload"] is True
            assert envelope["payload"]["command"] == "/verify"
            assert envelope["payload"]["text"] == "ct129"
            await ws.send_json({"envelope_id": envelope["envelope_id"], "payload": {"text": "ok"}})
            ack = await pending
            assert ack.payload == {"text": "ok"}
            assert ack.elapsed >= 0
            await ws.send_json({"envelope_id": "unknown"})
            await ws.send_json({"envelope_id": envelope["envelope_id"]})
            await slack.wait_until(lambda: len(slack.warnings) == 2, what="2 warnings")
            assert "unknown envelope_id" in slack.warnings[0]
            assert "duplicate ack" in slack.warnings[1]
            slack.warnings.clear()

            # an ack payload Slack would refuse to render is reported
            bad = await slack.socket_send_slash_command(command="/verify", text="x", channel_id=CHANNEL)
            envelope = await ws.receive_json(timeout=5)
            await ws.send_json({"envelope_id": envelope["envelope_id"],
                                "payload": {"text": "t", "blocks": [section("s" * 3001)]}})
            await bad
            assert "invalid_blocks" in slack.warnings[0]
            assert "3001 characters" in slack.warnings[0]
            slack.warnings.clear()

            # acks slower than Slack's 3 s deadline are reported
            slack.ack_deadline = 0.0
            late = await slack.socket_send_slash_command(command="/verify", text="x", channel_id=CHANNEL)
            envelope = await ws.receive_json(timeout=5)
            await ws.send_json({"envelope_id": envelope["envelope_id"]})
            assert (await late).payload is None
            assert "Slack would have shown the user a timeout" in slack.warnings[0]
            slack.warnings.clear()
        with pytest.raises(aiohttp.WSServerHandshakeError):
            await http.ws_connect(url)  # tickets are single use


async def test_bolt_socket_mode_slash_command_round_trip(slack: FakeSlack) -> None:
    # Bolt's Socket Mode handler finds the fake through the app's web client base_url:
    # apps.connections.open goes to app.client (or web_client=...), which returns our ws:// URL.
    app = AsyncApp(client=AsyncWebClient(token=BOT, base_url=slack.api_url))

    @app.command("/verify")
    async def verify(ack: Any, command: dict[str, Any], say: Any, respond: Any) -> None:
        await ack(f"verifying {command['text']}")
        await say(text=f"{command['text']} verified")
        await respond(text="all good")

    handler = AsyncSocketModeHandler(app, APP)
    await handler.connect_async()
    try:
        assert slack.socket_connections == 1
        url = slack.response_url()
        pending = await slack.socket_send_slash_command(
            command="/verify", text="ct129", user_id="U1", channel_id="C1", response_url=url
        )
        ack = await pending.wait(timeout=10)
        assert ack.payload == {"text": "verifying ct129"}
        assert ack.elapsed >= 0
        posted = await slack.wait_for("chat.postMessage")
        assert posted[0].args["channel"] == "C1"
        assert posted[0].args["text"] == "ct129 verified"
        responses = await slack.wait_for_response(url)
        assert responses[0].body["text"] == "all good"
        assert slack.calls_to("auth.test")[0].ok
        assert slack.calls_to("apps.connections.open")[0].token == APP

        # Slack asks clients to reconnect from time to time; bolt must follow.
        await slack.socket_disconnect()
        await slack.wait_for("apps.connections.open", count=2)
        await slack.wait_until(
            lambda: slack.socket_connects == 2 and slack.socket_connections == 1,
            timeout=10,
            what="bolt to reconnect",
        )
        again = await slack.socket_send_slash_command(command="/verify", text="ct130", channel_id="C1")
        assert (await again).payload == {"text": "verifying ct130"}
        await slack.wait_for("chat.postMessage", count=2)
    finally:
        await handler.close_async()
    assert slack.warnings == []


# ---------------------------------------------------------------- HTTP mode signing


def test_sign_matches_slack_sdk_verifier() -> None:
    body = signing.slash_command_body(
        "/verify", "ct129", "U1", "C1", "https://hooks.test/r", "trig.1"
    )
    fields = dict(parse_qsl(body.decode()))
    assert fields["command"] == "/verify" and fields["text"] == "ct129"
    headers = signing.sign(body, SECRET)
    assert SignatureVerifier(SECRET).is_valid_request(body, headers)
    assert not SignatureVerifier(SECRET).is_valid_request(body + b"x", headers)
    fixed = signing.sign(b"payload", SECRET, timestamp=1_531_420_618)
    assert fixed["X-Slack-Request-Timestamp"] == "1531420618"
    assert fixed["X-Slack-Signature"].startswith("v0=") and len(fixed["X-Slack-Signature"]) == 67


def click_body(slack: FakeSlack, action_id: str, value: str) -> bytes:
    return signing.block_actions_body({
        "type": "block_actions",
        "user": {"id": "U1", "username": "tester", "team_id": "T0TEST"},
        "team": {"id": "T0TEST", "domain": "fake-team"},
        "api_app_id": "A0TEST",
        "container": {"type": "message", "message_ts": "1700000000.000100", "channel_id": "C1"},
        "trigger_id": "trig.2",
        "channel": {"id": "C1", "name": "general"},
        "response_url": slack.response_url(),
        "actions": [{"type": "button", "action_id": action_id, "block_id": "b1", "value": value,
                     "action_ts": "1700000001.000000"}],
    })


async def test_bolt_http_mode_gets_signed_requests_and_acks_are_recorded(slack: FakeSlack) -> None:
    app = AsyncApp(client=AsyncWebClient(token=BOT, base_url=slack.api_url), signing_secret=SECRET)
    clicked: list[str] = []

    @app.command("/verify")
    async def verify(ack: Any, command: dict[str, Any]) -> None:
        await ack(f"got {command['text']}")

    @app.action("approve")
    async def approve(ack: Any, body: dict[str, Any]) -> None:
        await ack()
        clicked.append(body["actions"][0]["value"])

    async with serving(app) as url:
        body = signing.slash_command_body("/verify", "ct129", "U1", "C1", slack.response_url(), "trig.1")
        ack = await slack.deliver(url, body)
        assert (ack.status_code, ack.kind) == (200, "slash_commands")
        assert (ack.text, ack.content_type) == ("got ct129", "text/plain") and ack.elapsed > 0
        async with aiohttp.ClientSession() as http, http.post(
            url, data=body, headers={"Content-Type": signing.FORM_CONTENT_TYPE,
                                     **signing.sign(body, "wrong-secret")}) as forged:
            assert forged.status == 401
        clicked_ack = await slack.deliver(url, click_body(slack, "approve", "ct129"))
        assert (clicked_ack.status_code, clicked_ack.kind, clicked_ack.text) == (200, "block_actions", "")
        await slack.wait_until(lambda: clicked == ["ct129"], what="the click handled")
        with pytest.raises(ValueError, match="no channel 'C0NOWHERE'"):
            await slack.deliver(url, signing.slash_command_body(
                "/verify", "x", "U1", "C0NOWHERE", slack.response_url(), "t"))
    assert [a.kind for a in slack.http_acks] == ["slash_commands", "block_actions"]
    assert slack.warnings == []


async def test_bad_http_acks_are_reported(slack: FakeSlack) -> None:
    app = AsyncApp(client=AsyncWebClient(token=BOT, base_url=slack.api_url), signing_secret=SECRET)

    @app.command("/verify")
    async def verify(ack: Any, command: dict[str, Any]) -> None:
        if command["text"] == "blocks":
            await ack(text="fallback", blocks=[section("s" * 3001)])
        elif command["text"] == "long":
            await ack(text="x" * 40_001)
        else:
            await ack(text="fine", response_type="in_channel")

    @app.action("approve")
    async def approve(ack: Any) -> None:
        await ack(text="Slack ignores this")

    def command(text: str) -> bytes:
        return signing.slash_command_body("/verify", text, "U1", "C1", slack.response_url(), "t")

    async with serving(app) as url:
        await slack.deliver(url, command("blocks"))
        assert len(slack.warnings) == 1
        assert "invalid_blocks" in slack.warnings[0] and "3001 characters" in slack.warnings[0]
        await slack.deliver(url, command("long"))
        assert "msg_too_long" in slack.warnings[1]
        await slack.deliver(url, click_body(slack, "approve", "x"))
        assert "block_actions carries a body that Slack ignores" in slack.warnings[2]
        slack.ack_deadline = 0.0
        await slack.deliver(url, command("ok"))
        assert "Slack would have shown the user a timeout" in slack.warnings[3]
        slack.ack_deadline = 3.0
        unhandled = signing.slash_command_body("/restart", "x", "U1", "C1", slack.response_url(), "t")
        assert (await slack.deliver(url, unhandled)).status_code == 404
        assert "HTTP 404 to a slash_commands" in slack.warnings[4]
    assert len(slack.warnings) == 5
    slack.warnings.clear()
