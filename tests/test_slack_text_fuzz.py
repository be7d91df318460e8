"""Whatever a user types after a slash command, the parsers either refuse it with proofbot's own
error (a clear reply, nothing run) or name a host and backup taken from the inventory, never from
the text. Hypothesis generates the text; hostile shapes are seeded explicitly."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest
import pytest_asyncio
import yaml
from hypothesis import example, given, settings
from hypothesis import strategies as st

from bot.slack.app import build_app
from bot.slack.audit import DEFAULT_LIMIT, SLACK_MAX_LIMIT, audit_request
from bot.slack.listening import BotContext
from bot.slack.verify import verify_plan
from commands.errors import ProofbotError
from commands.inventory import parse_inventory
from commands.store.db import AuditStore
from tests.slack_fake.server import FakeSlack
from tests.slack_fake.serving import serving
from tests.slack_fake.signing import slash_command_body

INVENTORY = parse_inventory(yaml.safe_dump({"hosts": {
    "ct129": {"address": "127.0.0.1", "port": 9, "backups": {
        "pre-ddtree": {"dir": "/root/b", "files": {"spec_info.py": "/srv/x/spec_info.py"}},
        "other": {"dir": "/root/c", "files": {"a.py": "/srv/x/a.py"}}}},
    "ct130": {"address": "127.0.0.1", "port": 9, "service": {  # something to check: a bare host is refused
        "manager": "systemd", "unit": "sglang", "health_url": "http://127.0.0.1:30000/health"}}}}), "fuzz.yml")
SECRET = "fuzz-secret"
CHANNEL = "C0OPS"
HOSTILE = ["ct129; reboot", "ct129 $(id)", "`id`", "ct129 ../../etc/passwd", "ct129\npre-ddtree",
           "CT129", "ct129 pre-ddtree extra", "²", "ct129 ٣", "\u200bct129", "ct129 -rf /", "'ct129'",
           "ct129 pre-ddtree\x00", " " * 5000 + "ct129", "all"]
TEXT = st.one_of(st.text(max_size=200), st.sampled_from(HOSTILE),
                 st.lists(st.sampled_from(["ct129", "ct130", "pre-ddtree", "other", "5", "25", "26", "0", ";",
                                           "$(id)", "help", "ct129;", "-1"]), max_size=4).map(" ".join))


BLANKS = st.text(" \t\n", min_size=1, max_size=3)  # what separates words (str.split)
EDGES = st.text(" \t\n", max_size=2)


def verify_text_is_valid(text: str) -> bool:
    """The contract of ``/verify HOST [BACKUP]``: a host of the inventory, and one of its backups, which
    may be left out only when the host has at most one."""
    words = text.split()
    if not 1 <= len(words) <= 2 or words[0] not in INVENTORY.hosts:
        return False
    backups = INVENTORY.hosts[words[0]].backups
    return words[1] in backups if len(words) == 2 else len(backups) <= 1


@st.composite
def valid_verify_text(draw: st.DrawFn) -> str:
    host = draw(st.sampled_from(sorted(INVENTORY.hosts)))
    backups = sorted(INVENTORY.hosts[host].backups)
    named = bool(backups) and (len(backups) > 1 or draw(st.booleans()))
    words = [host, draw(st.sampled_from(backups))] if named else [host]
    return draw(EDGES) + draw(BLANKS).join(words) + draw(EDGES)


@settings(max_examples=400, deadline=None)
@given(TEXT)
@example("ct129 pre-ddtree")
def test_verify_text_names_only_inventory_hosts_and_backups(text: str) -> None:
    """Accepted exactly when the text is valid, and then it names what was typed; refused otherwise."""
    try:
        plan = verify_plan(INVENTORY, {"text": text})
    except ProofbotError:
        assert not verify_text_is_valid(text), f"a valid text was refused: {text!r}"
        return
    assert verify_text_is_valid(text), f"an invalid text was accepted: {text!r}"
    assert plan.host is INVENTORY.hosts[plan.host.name]
    assert plan.backup_name is None or plan.backup_name in plan.host.backups
    assert text.split()[0] == plan.host.name  # exactly what was typed, nothing made of it


@settings(max_examples=200, deadline=None)
@given(valid_verify_text())
def test_every_valid_verify_text_is_accepted_as_typed(text: str) -> None:
    words = text.split()
    plan = verify_plan(INVENTORY, {"text": text})
    assert plan.host is INVENTORY.hosts[words[0]]
    assert plan.backup_name == (words[1] if len(words) == 2 else None)


def audit_text_is_valid(text: str) -> bool:
    """``/audit [HOST] [N]``: HOST of the inventory, N in ASCII digits from 1 to SLACK_MAX_LIMIT."""
    words = text.split()

    def count(word: str) -> bool:
        return word.isascii() and word.isdigit() and 1 <= int(word) <= SLACK_MAX_LIMIT
    if len(words) == 2:
        return words[0] in INVENTORY.hosts and count(words[1])
    return len(words) < 2 and (not words or words[0] in INVENTORY.hosts or count(words[0]))


@st.composite
def valid_audit_text(draw: st.DrawFn) -> tuple[str, str | None, int | None]:
    host = draw(st.none() | st.sampled_from(sorted(INVENTORY.hosts)))
    count = draw(st.none() | st.integers(1, SLACK_MAX_LIMIT))
    words = [w for w in (host, None if count is None else str(count)) if w is not None]
    return draw(EDGES) + draw(BLANKS).join(words) + draw(EDGES), host, count


@settings(max_examples=400, deadline=None)
@given(TEXT)
@example("ct129 25")
def test_audit_text_names_only_inventory_hosts_and_a_bounded_count(text: str) -> None:
    try:
        request = audit_request(INVENTORY, text)
    except ProofbotError:
        assert not audit_text_is_valid(text), f"a valid text was refused: {text!r}"
        return
    assert audit_text_is_valid(text), f"an invalid text was accepted: {text!r}"
    assert request.host is None or request.host in INVENTORY.hosts
    assert 1 <= request.limit <= SLACK_MAX_LIMIT


@settings(max_examples=200, deadline=None)
@given(valid_audit_text())
def test_every_valid_audit_text_is_accepted_as_typed(case: tuple[str, str | None, int | None]) -> None:
    text, host, count = case
    request = audit_request(INVENTORY, text)
    assert request.host == host
    assert request.limit == (count if count is not None else DEFAULT_LIMIT)


@pytest_asyncio.fixture(loop_scope="session")
async def app(tmp_path: Path) -> AsyncIterator[tuple[str, FakeSlack]]:
    audit = AuditStore.open(tmp_path / "audit.db")
    async with FakeSlack(channels={CHANNEL: "ops"}, signing_secret=SECRET) as slack:
        bolt = build_app(BotContext(INVENTORY, audit), bot_token=slack.bot_token, signing_secret=SECRET,
                         api_url=slack.api_url)
        try:
            async with serving(bolt) as url:
                yield url, slack
        finally:
            audit.close()


@pytest.mark.parametrize("command", ["/verify", "/restore", "/restart", "/audit", "/policy"])
async def test_hostile_texts_through_the_real_app_are_refused_plainly(app: tuple[str, FakeSlack],
                                                                       command: str) -> None:
    url, slack = app
    refused = [text for text in HOSTILE if ((text.split() and text.split()[0] not in INVENTORY.hosts)
               or len(text.split()) > 2) and not (command in ("/verify", "/policy") and text in INVENTORY.groups)]
    for text in refused:
        ack = await slack.deliver(url, slash_command_body(command, text, "U0ALICE", CHANNEL, slack.response_url(),
                                                          "t"))
        assert ack.status_code == 200, (command, text)
        reply = ack.json()["text"]
        assert reply.startswith(":no_entry:") and "internal error" not in reply, (command, text, reply)
    assert slack.calls_to("chat.postMessage") == []  # nothing ran for any of them
