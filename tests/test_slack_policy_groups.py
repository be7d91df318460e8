"""Resolving an approver group at a click, against a Slack that does not answer or cannot be reached: the
click is refused within the deadline (Slack wants its ack in 3 s) and never counted, never an empty group."""

from __future__ import annotations

import asyncio
import socket
import time
from collections.abc import AsyncIterator

import pytest
import pytest_asyncio
from slack_sdk.web.async_client import AsyncWebClient

from bot.slack.policies import GROUP_FETCH_DEADLINE_S, group_members
from commands.approvers import GroupCache, resolve
from commands.errors import CouldNotCheck, Refused
from commands.inventory import parse_inventory

INVENTORY = """hosts:
  a: {address: 10.0.0.1}
policies:
  - {targets: [all], operations: [restart], approvers: ["@sre-oncall"]}
"""


@pytest_asyncio.fixture
async def silent_slack() -> AsyncIterator[str]:
    """A loopback HTTP port that takes the request and never answers."""
    held: list[asyncio.StreamWriter] = []

    async def hold(_reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        held.append(writer)

    server = await asyncio.start_server(hold, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    try:
        yield f"http://127.0.0.1:{port}/api/"
    finally:
        for writer in held:
            writer.close()
        server.close()
        await server.wait_closed()


async def test_a_slack_that_does_not_answer_refuses_the_click_within_the_deadline(silent_slack: str) -> None:
    client = AsyncWebClient(token="xoxb-test", base_url=silent_slack, timeout=30)
    fetch = group_members(client, deadline_s=0.3)
    started = time.monotonic()
    with pytest.raises(CouldNotCheck, match=r"did not answer within 0.3 s"):
        await fetch("sre-oncall")
    assert time.monotonic() - started < 10  # the client's own 30 s timeout was not what ended it
    applied = parse_inventory(INVENTORY, "i.yml").policy("restart", ["a"])
    with pytest.raises(Refused, match="could not resolve the approver group @sre-oncall"):
        await resolve(applied, GroupCache(ttl_s=60), fetch)


async def test_a_slack_that_cannot_be_reached_refuses_the_click() -> None:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        closed_port = probe.getsockname()[1]
    client = AsyncWebClient(token="xoxb-test", base_url=f"http://127.0.0.1:{closed_port}/api/", timeout=5)
    with pytest.raises(CouldNotCheck, match=r"could not be reached|did not answer"):
        await group_members(client)("sre-oncall")


def test_the_deadline_leaves_room_for_the_ack() -> None:
    assert GROUP_FETCH_DEADLINE_S < 3


async def test_what_policy_shows_of_a_slack_that_does_not_answer_is_bounded_and_says_so() -> None:
    """`/policy` and the App Home read every group within one deadline: each group is then "not checked",
    never "no members", and once the deadline is spent the others are not asked at all."""
    from types import SimpleNamespace

    from bot.slack.policies import groups_seen

    asked: list[asyncio.StreamWriter] = []

    async def hold(_reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        asked.append(writer)  # a request taken, never answered

    server = await asyncio.start_server(hold, "127.0.0.1", 0)
    client = AsyncWebClient(token="xoxb-test", base_url=f"http://127.0.0.1:{server.sockets[0].getsockname()[1]}/api/",
                            timeout=30)
    try:
        seen = await groups_seen(SimpleNamespace(groups=GroupCache(ttl_s=60)), client, ["@sre-oncall", "@dba", "@ml"],
                                 deadline_s=0.3)
    finally:
        for writer in asked:
            writer.close()
        server.close()
        await server.wait_closed()
    assert {handle: group.members for handle, group in seen.items()} == {"@sre-oncall": None, "@dba": None,
                                                                         "@ml": None}
    assert {group.error for group in seen.values()} == {"Slack did not answer within 0.3 s"}
    assert len(asked) <= 1  # only the first group was asked: its usergroups.list used the whole deadline
