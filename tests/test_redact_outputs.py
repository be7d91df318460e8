"""No secret of the corpus leaves proofbot in any output (tier 1: loopback host, real supervisord).

The corpus (tests/recorded/secret_corpus.yml) is laid out as a config file in the backup, with
every secret changed in the live copy, so the restore plan's diff carries each shape behind
both a ``-`` and a ``+``; its command-line shapes are on the service's command line, so verify's
``cmdline`` evidence carries them; the health URL holds a password and a token. Then every
output is searched for every secret value: the CLI's text and ``--json`` (verify, restore plan,
restore, audit), the audit DB's bytes, and every Slack call, response and uploaded file.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest_asyncio
import yaml
from slack_sdk.web.async_client import AsyncWebClient

from bot.demo.host import DemoHost, demo_host
from bot.slack.app import BotContext, build_app
from bot.slack.redacting import RedactingWebClient
from commands.inventory import parse_inventory
from commands.store.db import AuditStore
from tests.conftest import REPO, run_cli, write_inventory
from tests.slack_fake.server import FakeSlack
from tests.test_slack_restore import CHANNEL, Rig, make_rig

CORPUS: list[dict[str, str]] = yaml.safe_load((REPO / "tests/recorded/secret_corpus.yml").read_text())
# A NUL makes diff call the file binary: that shape goes only through the command line.
FILE_SHAPES = [entry for entry in CORPUS if "\x00" not in entry["text"]]
# supervisord reads `%` in a command as its own interpolation: shapes with one go only through the file.
CMDLINE_SHAPES = [entry for entry in CORPUS
                  if entry["shape"].split()[0] in ("shell", "env", "url", "redis")
                  and not any(c in entry["text"] for c in "\n\x00%")]
HEALTH_PASSWORD, HEALTH_TOKEN, REPLY_SECRET = "Whealth-pw-7781", "Whealth-tok-8892", "Rreply-pw-1212"
TYPED_SECRET = "Ttyped-secret-4545"
SECRETS = [entry["secret"] for entry in CORPUS] + [HEALTH_PASSWORD, HEALTH_TOKEN, REPLY_SECRET, TYPED_SECRET]
CONFIG = "app.conf"


def leaks(*outputs: str | bytes) -> list[str]:
    found = []
    for secret in SECRETS:
        for output in outputs:
            haystack = output if isinstance(output, str) else output.decode("utf-8", errors="replace")
            if any(piece in haystack for piece in [secret, *(w for w in secret.split() if len(w) >= 5)]):
                found.append(secret)
                break
    return found


def lay_out_corpus(backup: Path, live: Path) -> None:
    """Backup holds the corpus; the live copy has every secret changed (it still contains the old one)."""
    text = "\n".join(entry["text"] for entry in FILE_SHAPES) + "\n"
    backup.write_text("# app config as backed up\n" + text)
    for entry in FILE_SHAPES:
        text = text.replace(entry["secret"], entry["secret"] + "Z")
    live.write_text("# app config, edited live\n" + text)


def service_flags() -> list[str]:
    return ["--speculative-algorithm", "NEXTN", "--reply", f"OK password: {REPLY_SECRET}",
            *[entry["text"] for entry in CMDLINE_SHAPES]]


def health_url(host: DemoHost) -> str:
    return f"http://monitor:{HEALTH_PASSWORD}@127.0.0.1:{host.http_port}/health?token={HEALTH_TOKEN}"


@pytest_asyncio.fixture(loop_scope="session")
async def corpus_host(tmp_path: Path) -> AsyncIterator[tuple[DemoHost, Path]]:
    async with demo_host("ct131", patched=False, extra_file=False, flags=service_flags()) as host:
        lay_out_corpus(host.backup_dir / CONFIG, host.live_dir / CONFIG)
        document = host.inventory(health_url=health_url(host))
        document["hosts"]["ct131"]["backups"]["pre-ddtree"]["files"][CONFIG] = str(host.live_dir / CONFIG)
        yield host, write_inventory(tmp_path / "inventory.yml", document)


def db_bytes(db: Path) -> bytes:
    return b"".join(path.read_bytes() for path in db.parent.glob(db.name + "*"))


async def test_no_secret_leaves_through_the_cli_or_the_audit_db(corpus_host: tuple[DemoHost, Path],
                                                                tmp_path: Path) -> None:
    host, inventory = corpus_host
    db = tmp_path / "audit.db"
    common = ["--inventory", str(inventory), "--db", str(db)]
    verify_text = await run_cli("verify", "ct131", "-v", *common)
    verify_json = await run_cli("verify", "ct131", "--json", *common)
    plan_text = await run_cli("restore", "ct131", *common)  # no terminal: shows the plan, changes nothing
    restart_text = await run_cli("restart", "ct131", *common)  # likewise: the restart plan, refused
    restore_json = await run_cli("restore", "ct131", "--yes", "--json", *common)
    audit_json = await run_cli("audit", "--json", "--db", str(db))

    assert plan_text.code == 4, plan_text.stderr
    assert restart_text.code == 4 and "health 200 from http://monitor:[REDACTED]@" in restart_text.stdout
    assert restore_json.code in (0, 1), restore_json.stderr
    assert (host.live_dir / CONFIG).read_bytes() == (host.backup_dir / CONFIG).read_bytes()
    # The outputs say what they must (so the search below searched something real) ...
    assert "-password: [REDACTED]" in plan_text.stdout and "+password: [REDACTED]" in plan_text.stdout
    assert "+# app config as backed up" in plan_text.stdout
    checks = {check["name"]: check for check in json.loads(verify_json.stdout)["checks"]}
    assert "[REDACTED]" in checks["cmdline"]["evidence"]["output"]
    assert checks["health"]["status"] == "pass"
    assert "monitor:[REDACTED]@127.0.0.1" in checks["health"]["evidence"]["command"]
    events = db_bytes(db)
    assert b"plan-shown" in events and b"[REDACTED]" in events
    # ... and not one secret is in any of them.
    outputs = [run.stdout + run.stderr for run in (verify_text, verify_json, plan_text, restart_text,
                                                         restore_json, audit_json)]
    assert leaks(*outputs, events) == []


def slack_record(rig: Rig) -> str:
    """Everything the fake Slack received: Web API calls, response_url posts, uploaded files."""
    calls: list[Any] = [[call.method, call.args] for call in rig.slack.calls]
    responses: list[Any] = [response.body for response in rig.slack.responses]
    files = [(file.content or b"").decode("utf-8", errors="replace") for file in rig.slack.files.values()]
    return json.dumps([calls, responses, files], ensure_ascii=False)


async def test_no_secret_leaves_through_slack(tmp_path: Path) -> None:
    async with make_rig(tmp_path, 900, flags=service_flags()) as rig:
        spec = "spec_info.py"  # the rig's inventory is fixed: the corpus takes an existing backup file's place
        lay_out_corpus(rig.host.backup_dir / spec, rig.host.live_dir / spec)
        assert (await rig.command("/verify", "ct129")).status_code == 200
        await rig.slack.wait_until(lambda: any("ct129 verify:" in (m.edits[-1].text if m.edits else m.text)
                                               for m in rig.slack.messages_in(CHANNEL)),
                                   timeout=60, what="the verify verdict")
        assert (await rig.restore()).status_code == 200
        plan = await rig.restore_plan_message()
        await rig.slack.wait_until(lambda: any(f.completed for f in rig.slack.files.values()), timeout=30,
                                   what="the whole diff attached")
        typed = await rig.command("/verify", f"ct129 --token={TYPED_SECRET}")  # echoed back: unknown backup
        assert "--token=[REDACTED]" in typed.text
        record = slack_record(rig) + typed.text
        thread = json.dumps([m.blocks for m in rig.slack.thread(CHANNEL, plan.ts)])
        assert "+password: [REDACTED]" in thread
        assert "[REDACTED]" in record
        assert leaks(record, db_bytes(rig.db)) == []


async def test_the_slack_client_masks_whatever_a_caller_posts(tmp_path: Path) -> None:
    """The last gate: a message or file built without redaction still leaves masked."""
    audit = AuditStore.open(tmp_path / "audit.db")
    async with FakeSlack(channels={CHANNEL: "ops"}, signing_secret="s") as slack:
        inventory = parse_inventory(yaml.safe_dump({"hosts": {}}), "inventory.yml")
        client = build_app(BotContext(inventory, audit), bot_token=slack.bot_token, signing_secret="s",
                           api_url=slack.api_url).client
        await client.chat_postMessage(channel=CHANNEL, text=f"password: {REPLY_SECRET}",
                                      blocks=[{"type": "section", "text": {"type": "mrkdwn",
                                                                           "text": f"--token {TYPED_SECRET}"}}])
        await client.files_upload_v2(channel=CHANNEL, content=f"db_password = {HEALTH_PASSWORD}\n",
                                     filename="x.diff", title="x")
        record = json.dumps([[call.method, call.args] for call in slack.calls], ensure_ascii=False)
        record += "".join((file.content or b"").decode() for file in slack.files.values())
        assert "password: [REDACTED]" in record and "--token [REDACTED]" in record
        assert "db_password = [REDACTED]" in record
        assert leaks(record) == []
    audit.close()


def secret_view(title_secret: str) -> dict[str, Any]:
    return {"type": "modal", "callback_id": "x", "private_metadata": f"password={REPLY_SECRET}",
            "title": {"type": "plain_text", "text": "Look"},
            "blocks": [{"type": "section", "text": {"type": "mrkdwn", "text": f"--token {title_secret}"}},
                       {"type": "section", "text": {"type": "mrkdwn", "text": f"password: {HEALTH_PASSWORD}"}}]}


async def test_views_leave_through_the_masking_client_too(tmp_path: Path) -> None:
    """views.open (the Reject modal) and views.publish (the App Home), the view methods proofbot calls, are
    masked like messages, from the app's client and from the one bolt hands a listener; the strict fake
    still accepts each view (its JSON intact)."""
    audit = AuditStore.open(tmp_path / "audit.db")
    async with FakeSlack(channels={CHANNEL: "ops"}, signing_secret="s") as slack:
        inventory = parse_inventory(yaml.safe_dump({"hosts": {}}), "inventory.yml")
        app_client = build_app(BotContext(inventory, audit), bot_token=slack.bot_token, signing_secret="s",
                               api_url=slack.api_url).client
        listener_client = RedactingWebClient.like(AsyncWebClient(token=slack.bot_token, base_url=slack.api_url))
        for client in (app_client, listener_client):
            await client.views_open(trigger_id=slack.trigger_id("U0A"), view=secret_view(TYPED_SECRET))
            await client.views_publish(user_id="U0A", view={"type": "home",
                                                            "blocks": secret_view(TYPED_SECRET)["blocks"]})
        sent = [call for call in slack.calls if call.method.startswith("views.")]
        assert [call.method for call in sent] == ["views.open", "views.publish"] * 2
        assert all(call.ok for call in sent), [(c.method, c.response) for c in sent]
        record = json.dumps([call.args for call in sent], ensure_ascii=False)
        assert "--token [REDACTED]" in record and "password: [REDACTED]" in record
        assert "password=[REDACTED]" in record  # the modal's private_metadata too
        assert leaks(record) == []
    audit.close()
