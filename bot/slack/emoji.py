"""Slack's table of the vocabulary (``commands.vocabulary``): the emoji (and so the colour) of each check
status, verdict and outcome, the order a verdict lists checks in, each operation's present tense, and the
glyph each emoji becomes when a thread is printed as plain text (the demo). The words are ``bot.words``."""

from __future__ import annotations

from commands.store import IN_PROGRESS
from commands.vocabulary import CheckStatus, Operation, Outcome, Verdict

STATUS_EMOJI: dict[str, str] = {CheckStatus.PASS: ":white_check_mark:", CheckStatus.FAIL: ":x:",
                                CheckStatus.WARN: ":warning:", CheckStatus.ERROR: ":grey_question:",
                                CheckStatus.SKIPPED: ":fast_forward:"}
VERDICT_EMOJI: dict[str, str] = {Verdict.PASS: ":large_green_circle:", Verdict.FAIL: ":red_circle:",
                                 Verdict.ERROR: ":large_yellow_circle:", Verdict.REJECTED: ":no_entry_sign:",
                                 Verdict.EXPIRED: ":hourglass:", Verdict.REFUSED: ":no_entry:",
                                 Verdict.INTERRUPTED: ":warning:", IN_PROGRESS: ":hourglass_flowing_sand:"}
# A verdict's circle by its outcome: a pass that warned (e.g. a restore that left the service on old code) is
# orange, not a plain green pass.
OUTCOME_CIRCLE: dict[str, str] = {Outcome.FAIL: VERDICT_EMOJI[Verdict.FAIL],
                                  Outcome.ERROR: VERDICT_EMOJI[Verdict.ERROR],
                                  Outcome.WARN: ":large_orange_circle:", Outcome.PASS: VERDICT_EMOJI[Verdict.PASS]}
OUTCOME_EMOJI: dict[str, str] = {Outcome.FAIL: ":x:", Outcome.ERROR: ":grey_question:", Outcome.WARN: ":warning:",
                                 Outcome.PASS: ":white_check_mark:"}
# A counts line's mark per outcome, as emoji (blocks) and glyph (the text fallback); none: the word is said.
COUNT_MARKS: dict[str, tuple[str, str]] = {Outcome.PASS: (":white_check_mark:", "✓"), Outcome.WARN: (":warning:", "⚠"),
                                           Outcome.FAIL: (":x:", "✗"), Outcome.ERROR: ("", "")}
ROLLOUT_EMOJI: dict[str, str] = {**VERDICT_EMOJI, Verdict.REFUSED: ":no_entry_sign:"}  # halted: not all restarted
# What went wrong first; a stable sort keeps the plan's order within a status.
WORST_FIRST: dict[str, int] = {CheckStatus.FAIL: 0, CheckStatus.ERROR: 1, CheckStatus.WARN: 2, CheckStatus.PASS: 3,
                               CheckStatus.SKIPPED: 4}
PRESENT_TENSE: dict[str, str] = {Operation.VERIFY: "Verifying", Operation.RESTORE: "Restoring",
                                 Operation.RESTART: "Restarting"}

EMOJI_GLYPHS = {
    ":white_check_mark:": "✓", ":x:": "✗", ":warning:": "!", ":grey_question:": "?", ":fast_forward:": "»",
    ":large_green_circle:": "●", ":red_circle:": "●", ":large_yellow_circle:": "●", ":large_orange_circle:": "●",
    ":hourglass_flowing_sand:": "…", ":no_entry:": "⛔", ":no_entry_sign:": "⊘", ":hourglass:": "⌛",
    ":receipt:": "≡", ":white_circle:": "○", ":heavy_plus_sign:": "+", ":heavy_equals_sign:": "=", ":pencil2:": "✏",
    ":leftwards_arrow_with_hook:": "↩", ":arrows_counterclockwise:": "↻", ":ledger:": "▤", ":lock:": "🔒",
    ":information_source:": "i", ":page_facing_up:": "▤",
}
