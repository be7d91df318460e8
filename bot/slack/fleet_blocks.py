"""Pure Block Kit rendering of a fleet verify (``/verify GROUP``): progress, the grouped verdict, one
reply per non-passing group, and the per-host table attached as a file.

Readable at any fleet size: hosts are compressed (``ct[129-131,140]``), identical outcomes are
one section, passing hosts are one line of names; every message stays inside Slack's limits
(50 blocks, 3,000 characters a section) whether the fleet has 2 hosts or 500.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from slack_sdk.models.blocks import ActionsBlock, Block, ButtonElement

from bot.slack.blocks import SECTION_LIMIT, Message, as_dicts, context_block, escape, section_block
from bot.slack.emoji import COUNT_MARKS, OUTCOME_EMOJI, STATUS_EMOJI, VERDICT_EMOJI
from bot.slack.thread_blocks import FLEET_REVERIFY, finding_message
from bot.words import COUNT_WORDS, OUTCOME_WORDS, VERDICT_WORDS
from commands.findings import Finding
from commands.fleet.grouping import OutcomeGroup
from commands.fleet.names import compress_names
from commands.operation import OperationResult
from commands.verify.fleet import FleetResult
from commands.vocabulary import CheckStatus, Outcome, Verdict

FILE_ABOVE_HOSTS = 20  # more hosts than this: the per-host table is attached as a file
GROUP_REPLIES = 10  # at most this many group replies in a thread; the rest are in the file
GROUP_SECTIONS = 20  # at most this many groups shown on the parent
EXAMPLE_CHECKS = 15  # 3 blocks each: the example's evidence stays under 50 blocks
QUIET = (CheckStatus.PASS, CheckStatus.SKIPPED)  # said by a count, not check by check
FILE_EVIDENCE_CHARS = 1500  # each non-passing check's output in the file
FILE_EVIDENCE_TOTAL = 2_000_000


@dataclass(frozen=True)
class FleetView:
    """What the renderers need besides the result: who asked, and which hosts' files were not compared."""

    user_id: str
    left_out: Mapping[str, str]  # host -> why its files were not compared, e.g. "no backup pre-ddtree"
    addresses: Mapping[str, str]


def hosts_words(names: Sequence[str], limit: int = 1200) -> str:
    """Host names compressed (``ct[129-131,140], gpu-a``) in a code span, cut with "… and N more"
    to fit ``limit`` characters: the longest run of names, in the order given, that fits."""
    whole = escape(compress_names(names))
    if len(whole) + 2 <= limit:
        return f"`{whole}`"
    fits, too_many = 0, len(names)
    while too_many - fits > 1:
        middle = (fits + too_many) // 2
        if len(escape(compress_names(names[:middle]))) + 2 <= limit - 30:  # room for "… and N more"
            fits = middle
        else:
            too_many = middle
    shown = f"`{escape(compress_names(names[:fits]))}` " if fits else ""
    return f"{shown}… and {len(names) - fits} more"


def counts_line(done: int, total: int, counts: Mapping[str, int], *, emoji: bool) -> str:
    """ "31/50 hosts · 27 ✓ · 3 ✗ · 1 could not check": Slack's one counts line, each outcome in
    ``COUNT_WORDS``' order with its mark (emoji codes for blocks, glyphs for the text), or its word."""
    parts = [f"{done}/{total} hosts" if done < total else f"{total} hosts"]
    for outcome, word in COUNT_WORDS.items():
        if counts.get(outcome):
            code, glyph = COUNT_MARKS[outcome]
            parts.append(f"{counts[outcome]} {(code if emoji else glyph) or word}")
    return " · ".join(parts)


def fleet_progress_message(operation_id: str, target: str, user_id: str, total: int,
                           counts: Mapping[str, int]) -> Message:
    done = sum(counts.values())
    doing = f"verifying {escape(target)} for <@{user_id}>"
    headline = f":hourglass_flowing_sand: *{counts_line(done, total, counts, emoji=True)}* · {doing}…"
    text = f"{counts_line(done, total, counts, emoji=False)} · verifying {target} for <@{user_id}>…"
    note = f"fleet operation `{operation_id}` · hosts appear here as they finish"
    return text, as_dicts([section_block(headline), context_block(note)])


def signature_lines(group: OutcomeGroup, limit: int = 8) -> list[str]:
    """The group's non-passing checks: for one host as it said them, for several as they read on any of
    them (<host> stands for each one). Checks that say the same thing share a line."""
    said: list[tuple[str, str, str]]
    if len(group.hosts) == 1:
        said = [(f.name, f.status, f.summary) for f in group.example.checks if f.status not in QUIET]
    else:
        said = [(name, status, summary.replace("{host}", "<host>").replace("{address}", "<address>"))
                for name, status, summary in group.signature]
    alike: dict[tuple[str, str], list[str]] = {}
    for name, status, summary in said:
        alike.setdefault((status, summary), []).append(name)
    lines = [f"{STATUS_EMOJI[status]} {', '.join(f'`{escape(n)}`' for n in names)} {escape(_cut(summary, 240))}"
             for (status, summary), names in list(alike.items())[:limit]]
    if len(alike) > limit:
        lines.append(f"… and {len(alike) - limit} more")
    return lines


def _cut(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _group_section(group: OutcomeGroup) -> str:
    plural = "host" if len(group.hosts) == 1 else "hosts"
    head = (f"{OUTCOME_EMOJI[group.outcome]} *{OUTCOME_WORDS[group.outcome]}* on {len(group.hosts)} {plural}: "
            f"{hosts_words(group.hosts, 900)}")
    return "\n".join([head, *signature_lines(group)])[:SECTION_LIMIT]


def not_passing_count(fleet: FleetResult) -> int:
    """The hosts the Re-verify button re-runs: those whose verdict is not pass."""
    return sum(1 for result in fleet.results if result.verdict != Verdict.PASS)


def attaches_file(fleet: FleetResult, groups: Sequence[OutcomeGroup]) -> bool:
    return len(fleet.results) > FILE_ABOVE_HOSTS or _failing(groups)[GROUP_REPLIES:] != []


def _failing(groups: Sequence[OutcomeGroup]) -> list[OutcomeGroup]:
    return [group for group in groups if group.outcome != Outcome.PASS]


def fleet_verdict_message(fleet: FleetResult, groups: Sequence[OutcomeGroup], view: FleetView) -> Message:
    """The parent once every host is done: counts, each non-passing group, the passing hosts, the button."""
    counts = fleet.counts()
    line = counts_line(len(fleet.results), len(fleet.results), counts, emoji=True)
    verdict = VERDICT_WORDS[fleet.verdict]
    headline = (f"{VERDICT_EMOJI[fleet.verdict]} *verify {escape(fleet.target)}: {verdict}* — {line} "
                f"({fleet.duration_s:.1f} s)")
    blocks: list[Block] = [section_block(headline)]
    failing = _failing(groups)
    blocks += [section_block(_group_section(group)) for group in failing[:GROUP_SECTIONS]]
    if len(failing) > GROUP_SECTIONS:
        rest = failing[GROUP_SECTIONS:]
        blocks.append(section_block(f"… and {len(rest)} more groups ({sum(len(g.hosts) for g in rest)} hosts): "
                                    "see the attached table"))
    passing = [group for group in groups if group.outcome == Outcome.PASS]
    if passing:
        hosts = passing[0].hosts
        blocks.append(section_block(f":white_check_mark: *{len(hosts)} passed*: {hosts_words(hosts, 2800)}"))
    blocks += _left_out_blocks(view.left_out)
    where = "one reply per group that did not pass in this thread" if failing else "every host passed"
    if attaches_file(fleet, groups):
        where += "; the per-host table is attached"
    blocks.append(context_block(f"fleet operation `{fleet.operation_id}` · requested by <@{view.user_id}> · "
                                f"{where}"))
    failed = not_passing_count(fleet)
    if failed:
        blocks.append(ActionsBlock(elements=[ButtonElement(
            text=f"Re-verify the {failed} that failed", action_id=FLEET_REVERIFY, value=fleet.operation_id,
            style="primary")]))
    plain = counts_line(len(fleet.results), len(fleet.results), counts, emoji=False)
    text = f"verify {fleet.target}: {verdict} — {plain}"
    return text, as_dicts(blocks)


def _left_out_blocks(left_out: Mapping[str, str]) -> list[Block]:
    """Hosts whose files were not compared, grouped by reason: said plainly, not hidden in a pass."""
    by_reason: dict[str, list[str]] = {}
    for host, reason in left_out.items():
        by_reason.setdefault(reason, []).append(host)
    lines = [f":information_source: files not compared on {len(hosts)} host{'s' if len(hosts) != 1 else ''} "
             f"({escape(reason)}): {hosts_words(hosts, 500)}" for reason, hosts in list(by_reason.items())[:5]]
    return [section_block("\n".join(lines))] if lines else []


def group_reply_message(group: OutcomeGroup, index: int, count: int, results: Mapping[str, OperationResult],
                        file_attached: bool) -> Message:
    """One non-passing group: its hosts, what they share, and one example host's evidence, rendered
    as the single-host thread renders each check."""
    example = group.example
    plural = "host" if len(group.hosts) == 1 else "hosts"
    head = (f"{OUTCOME_EMOJI[group.outcome]} *Group {index} of {count}: {OUTCOME_WORDS[group.outcome]} on "
            f"{len(group.hosts)} {plural}*: {hosts_words(group.hosts, 1500)}")
    blocks: list[Block] = [section_block("\n".join([head, *signature_lines(group)]))]
    others = [host for host in group.hosts if host != example.host]
    where = f"evidence below is *{escape(example.host)}*'s (operation `{example.operation_id}`)"
    if others:
        ids = ", ".join(f"{escape(host)} `{results[host].operation_id}`" for host in others[:8] if host in results)
        more = f" and {len(others) - 8} more" if len(others) > 8 else ""
        where += f"; the others' evidence is in the audit log: {ids}{more}"
        if file_attached:
            where += " (every operation id is in the attached table)"
    blocks.append(context_block(where))
    rendered = as_dicts(blocks)
    failing = [finding for finding in example.checks if finding.status not in QUIET]
    # Checks stopped by one cause carry no evidence of their own: the first says it, the head lists the rest.
    blind = next((finding for finding in failing if finding.evidence is None), None)
    shown = [finding for finding in failing if finding.evidence is not None or finding is blind]
    for finding in shown[:EXAMPLE_CHECKS]:  # each check as the single-host thread's reply shows it
        rendered += finding_message(finding, f"cut here: whole in the audit log, operation `{example.operation_id}`")[1]
    if len(shown) > EXAMPLE_CHECKS:
        rendered += as_dicts([context_block(f"{len(shown) - EXAMPLE_CHECKS} more checks not shown: "
                                            "see the audit log")])
    text = f"Group {index} of {count}: {OUTCOME_WORDS[group.outcome]} on {len(group.hosts)} {plural}"
    return text, rendered[:50]


def more_groups_message(rest: Sequence[OutcomeGroup]) -> Message:
    hosts = sum(len(group.hosts) for group in rest)
    text = (f"… {len(rest)} more groups ({hosts} hosts) did not pass: not posted here to stay inside "
            "Slack's rate limits; see the attached table")
    return text, as_dicts([section_block(escape(text))])


def fleet_table(fleet: FleetResult) -> str:
    """The file: one row per host (host, verdict, operation id, each non-passing check and its
    summary), then the evidence of every check that did not pass, host by host."""
    width = max([len(result.host) for result in fleet.results] + [4])
    counts = counts_line(len(fleet.results), len(fleet.results), fleet.counts(), emoji=False)
    lines = [f"verify {fleet.target}: {VERDICT_WORDS[fleet.verdict]} — {counts} — fleet operation "
             f"{fleet.operation_id}, started {fleet.started_at}",
             "", f"{'HOST'.ljust(width)}  {'VERDICT'.ljust(15)}  {'OPERATION'.ljust(26)}  NOT PASSING"]
    for result in fleet.results:
        failing = [f for f in result.checks if f.status not in QUIET]
        checks = "; ".join(f"{f.name} {f.status}: {_one_line(f.summary)}" for f in failing) or "-"
        lines.append(f"{result.host.ljust(width)}  {VERDICT_WORDS[result.verdict].ljust(15)}  "
                     f"{result.operation_id.ljust(26)}  {checks}")
    lines += ["", "== Evidence of every check that did not pass =="]
    used = 0
    for result in fleet.results:
        for finding in (f for f in result.checks if f.status not in QUIET):
            block = _evidence_text(result, finding)
            if used + len(block) > FILE_EVIDENCE_TOTAL:
                lines.append("… [the rest cut to keep this file small: `proofbot audit OPERATION` has it all]")
                return "\n".join(lines) + "\n"
            used += len(block)
            lines.append(block)
    return "\n".join(lines) + "\n"


def _one_line(text: str) -> str:
    return " ".join(text.split())


def _evidence_text(result: OperationResult, finding: Finding) -> str:
    head = f"--- {result.host} ({result.operation_id}) {finding.name} {finding.status}: {_one_line(finding.summary)}"
    if finding.evidence is None:
        return head + "\n(no evidence: the check could not run)"
    output = finding.evidence.output.rstrip("\n")
    if len(output) > FILE_EVIDENCE_CHARS:
        output = output[:FILE_EVIDENCE_CHARS] + f"\n… [{len(output) - FILE_EVIDENCE_CHARS} more characters]"
    status = "no exit status" if finding.evidence.exit_status is None else f"exit {finding.evidence.exit_status}"
    return f"{head}\n$ {finding.evidence.command}\n{output}\n({status})"

