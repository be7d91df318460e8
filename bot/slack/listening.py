"""What every Slack listener is given (not bolt's own ``context``): the inventory, the audit store, timers,
and each command's handlers.

``SlackCommand`` is one registry operation's Slack side: the slash command's body and the
buttons it answers. ``Approvable`` is what the shared approval flow needs of an operation
whose plans wait for an Approve click (README "Slack").
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Generic, TypeVar

from slack_bolt.async_app import AsyncAck
from slack_sdk.web.async_client import AsyncWebClient

from bot.slack.blocks import Message
from commands.approvers import GroupCache
from commands.errors import Refused
from commands.inflight import InFlight, Ticket, Work
from commands.inventory import Inventory
from commands.plans import Decidable
from commands.store.approvals import PendingPlan
from commands.store.db import AuditStore

log = logging.getLogger("proofbot.slack")

Body = dict[str, Any]
P = TypeVar("P", bound=Decidable)


@dataclass(frozen=True)
class Click:
    """An Approve or Reject click, as recorded: who clicked which button on which plan's message."""

    user: str
    action_id: str
    decided: PendingPlan
    channel: str
    ts: str

    @classmethod
    def of(cls, body: Body, decided: PendingPlan) -> Click:
        return cls(str(body["user"]["id"]), str(body["actions"][0]["action_id"]), decided,
                   decided.channel or body["channel"]["id"], decided.message_ts or body["message"]["ts"])

    @property
    def requester(self) -> str:
        return self.decided.requested_by.removeprefix("slack:")


@dataclass(frozen=True)
class Approvable(Generic[P]):
    """How one operation's plan is shown once decided, and applied once approved."""

    plan_type: type[P]
    reject_action: str
    nothing_done: str  # said when a plan is rejected or expires: "nothing was changed"
    decided_message: Callable[[P, str, str], Message]  # (plan, requester, status)
    apply_in_thread: Callable[[BotContext, AsyncWebClient, Click, P], Awaitable[None]]

    def decided_for(self, inventory: Inventory, pending: PendingPlan, status: str) -> Message:
        plan = self.plan_type.load(inventory, pending)
        return self.decided_message(plan, pending.requested_by.removeprefix("slack:"), status)


@dataclass
class BotContext:
    inventory: Inventory
    audit: AuditStore
    timers: set[asyncio.Task[None]] = field(default_factory=set)
    approvables: dict[str, Approvable[Any]] = field(default_factory=dict)
    inflight: InFlight = field(init=False)  # Slack-started work in flight: limits.per_user, limits.total
    groups: GroupCache = field(default_factory=GroupCache)  # policies' user groups, members cached (TTL)
    listeners: set[asyncio.Task[Any]] = field(default_factory=set)  # bolt's tasks running a listener now

    def __post_init__(self) -> None:
        self.inflight = InFlight(self.inventory.limits)

    def start(self, user: str, operation: str, hosts: list[str], backups: list[str | None] | None = None,
              target: str = "", plan_id: str | None = None) -> Ticket:
        """A slot for this user's request, taken before the ack (instant); raises AlreadyRunning or OverLimit."""
        return self.inflight.start(Work(f"slack:{user}", operation, tuple(hosts), tuple(backups or ()), target,
                                        plan_id))

    def listening(self) -> None:
        """Said first by each listener (bolt runs it in a task of its own, after the ack): serve drains these
        at shutdown before the store closes (bot/slack/serve.py)."""
        task = asyncio.current_task()
        if task is not None and task not in self.listeners:
            self.listeners.add(task)
            task.add_done_callback(self.listeners.discard)

    def keep(self, timer: asyncio.Task[None]) -> asyncio.Task[None]:
        """A background task serve owns (cancelled at shutdown): held until done, and its failure logged
        when it ends, never left as an exception nobody retrieved."""
        self.timers.add(timer)
        timer.add_done_callback(self._ended)
        return timer

    def _ended(self, timer: asyncio.Task[None]) -> None:
        self.timers.discard(timer)
        if not timer.cancelled() and (failure := timer.exception()) is not None:
            log.warning("background task %s failed: %r", timer.get_name(), failure)

    def check_channel(self, channel: str) -> None:
        if self.inventory.channels is not None and channel not in self.inventory.channels:
            allowed = ", ".join(f"<#{c}>" for c in self.inventory.channels)
            raise Refused("proofbot does not take commands in this channel", hint=f"use {allowed}")

    async def command_for_click(self, body: Body) -> Body:
        """The slash command a "Verify now" / "Restart now" click stands for: the operation's host,
        looked up in the audit log by the operation id the button carries (never taken from the click)."""
        operation_id = str(body["actions"][0]["value"])
        events = await self.audit.events_of(operation_id)
        host = next((event.host for event in events if event.host), None) or ""
        return {"user_id": body["user"]["id"], "channel_id": body["channel"]["id"], "text": host}


Listener = Callable[[BotContext, AsyncAck, Body, AsyncWebClient], Awaitable[None]]


@dataclass(frozen=True)
class SlackCommand:
    """One slash command: its listener (after help and the channel check) and the buttons it owns."""

    name: str
    on_command: Listener
    actions: Mapping[str, Listener] = field(default_factory=dict)
    approvable: Approvable[Any] | None = None
    empty_text_is_help: bool = True
    # Plans of another kind this command also makes (``/restart GROUP``: a rolling restart's plan).
    more_approvables: tuple[Approvable[Any], ...] = ()
