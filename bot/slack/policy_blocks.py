"""Who may do what, where, in Block Kit (pure): `/policy`'s ephemeral answer and the App Home's section, from a
``PolicyView``, what Slack said of each user group (members, or why it could not say) and the channels the
reader may see named (any other is counted, never named)."""

from __future__ import annotations

from collections.abc import Collection, Mapping
from dataclasses import dataclass
from typing import Any

from bot.slack.blocks import Message, context_block, escape, section_block
from commands.inventory.policy_view import PolicyLine, PolicyView

MEMBERS_SHOWN = 8  # a group's members named in `/policy`; the rest counted
MESSAGE_LINES_MAX = 40  # policies in one answer (Slack: 50 blocks a message)
HOME_LINES_MAX = 9  # policies in the App Home's section (it shares the Home's 100 blocks)
NEVER = "no members: never satisfied"


@dataclass(frozen=True)
class GroupSeen:
    """A user group as Slack said it just now: its members, or ``error`` (never read as "no members")."""

    members: frozenset[str] | None
    error: str = ""


def group_words(handle: str, seen: GroupSeen | None, *, listed: bool) -> str:
    """```@sre-oncall` (4 members)``; with ``listed``, the members named (up to MEMBERS_SHOWN)."""
    if seen is None or seen.members is None:
        why = seen.error if seen is not None else "not asked of Slack"
        return f"`{escape(handle)}` (not checked: {escape(why)})"
    if not seen.members:
        return f"`{escape(handle)}` ({NEVER})"
    count = f"{len(seen.members)} member{'s' if len(seen.members) != 1 else ''}"
    if not listed:
        return f"`{escape(handle)}` ({count})"
    names = sorted(seen.members)
    more = f", … {len(names) - MEMBERS_SHOWN} more" if len(names) > MEMBERS_SHOWN else ""
    return f"`{escape(handle)}` ({count}: {', '.join(f'<@{u}>' for u in names[:MEMBERS_SHOWN])}{more})"


def approvers_text(line: PolicyLine, seen: Mapping[str, GroupSeen], *, listed: bool) -> str:
    if not line.needs_approval:  # verify, ping: whoever may type it here
        return "no approval needed"
    who = ", ".join(group_words(w, seen.get(w), listed=listed) if w.startswith("@") else f"<@{w}>"
                    for w in line.policy.approvers) or "nobody"
    return f"{line.policy.required} of {who}"


def where_text(channels: list[str] | None, visible: Collection[str]) -> str:
    """Where it may be requested and clicked: the channels the reader may see named, the others counted."""
    if channels is None:
        return "any channel"
    named = [f"<#{c}>" for c in channels if c in visible]
    unseen = len(channels) - len(named)
    return ", ".join([*named, *([f"{unseen} channel(s) you are not in"] if unseen else [])]) or "no channel"


def distinct_now(line: PolicyLine, seen: Mapping[str, GroupSeen]) -> int | None:
    """How many distinct people may approve now (ids and members as Slack said); None while a group is unknown."""
    people: set[str] = set()
    for who in line.policy.approvers:
        if not who.startswith("@"):
            people.add(who)
            continue
        group = seen.get(who)
        if group is None or group.members is None:
            return None
        people |= group.members
    return len(people)


def warning_text(line: PolicyLine, seen: Mapping[str, GroupSeen]) -> str:
    if line.never:
        return f" · :warning: {escape(line.never)}"
    people = distinct_now(line, seen)
    if line.policy.approvers and people is not None and 0 < people < line.policy.required:
        return (f" · :warning: only {people} distinct approver(s) now, {line.policy.required} required: "
                "nothing it covers can be approved until more join")
    return ""


def line_text(line: PolicyLine, seen: Mapping[str, GroupSeen], visible: Collection[str], *, on_target: bool,
              listed: bool) -> str:
    """One policy as one line: which, what, who (N of them), from where, and what else applies."""
    index = line.applied.index
    implicit = " (implicit: `approvals`)" if line.applied.implicit else ""
    operations = escape(", ".join(line.operations))
    head = (f"*{operations}* · policy {index}{implicit}" if on_target else
            f"*{index}*{' (implicit)' if line.applied.implicit else ''} · {escape(', '.join(line.policy.targets))}"
            f" · {operations}")
    tail = (" · CLI: plan only" if line.policy.cli else "") + (
        " · the requester's own approval counts" if line.self_approval else "")
    return (f"{head} · {approvers_text(line, seen, listed=listed)} · from {where_text(line.policy.channels, visible)}"
            f"{tail}{warning_text(line, seen)}")


def policy_message(view: PolicyView, seen: Mapping[str, GroupSeen], visible: Collection[str]) -> Message:
    """`/policy [HOST|GROUP]`'s ephemeral answer."""
    on = f" on {view.target}" if view.target else ""
    blocks = [section_block(f"*Who may do what, where{escape(on)}*").to_dict(),
              context_block("as the inventory says, first match wins; the last is `approvals` (every host, every "
                            "operation); user groups as Slack says now" if view.target is None else
                            "each operation with the policy that rules it here; user groups as Slack says now"
                            ).to_dict()]
    if view.group_note:
        blocks.append(context_block(escape(view.group_note)).to_dict())
    for line in view.lines[:MESSAGE_LINES_MAX]:
        blocks.append(section_block(line_text(line, seen, visible, on_target=view.target is not None,
                                              listed=True)).to_dict())
    if len(view.lines) > MESSAGE_LINES_MAX:
        blocks.append(context_block(f"… {len(view.lines) - MESSAGE_LINES_MAX} more: `proofbot policy` on the "
                                    "bot's machine lists them all").to_dict())
    return f"Who may do what, where{on}: {len(view.lines)} polic{'y' if len(view.lines) == 1 else 'ies'}", blocks


def home_policy_blocks(view: PolicyView, seen: Mapping[str, GroupSeen], visible: Collection[str]
                       ) -> list[dict[str, Any]]:
    """The App Home's closing section: each policy in order, each user group with its member count."""
    blocks = [{"type": "header", "text": {"type": "plain_text", "text": "Who may do what, where"}},
              context_block("from the inventory's `policies`, first match wins; the last is `approvals` "
                            "(every host, every operation)").to_dict()]
    for line in view.lines[:HOME_LINES_MAX]:
        blocks.append(section_block(line_text(line, seen, visible, on_target=False, listed=False)).to_dict())
    if len(view.lines) > HOME_LINES_MAX:
        blocks.append(context_block(f"… {len(view.lines) - HOME_LINES_MAX} more: `/policy`").to_dict())
    return blocks
