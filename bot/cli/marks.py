"""The terminal's table of the vocabulary (``commands.vocabulary``): each check status's mark, each
outcome's mark, each verdict's exit code. The words themselves are shared with Slack (``bot.words``)."""

from __future__ import annotations

from commands.vocabulary import CheckStatus, Outcome, Verdict

# A finding's line starts with its mark: padded to one width, so names line up.
MARKS: dict[str, str] = {CheckStatus.PASS: "✓ pass ", CheckStatus.FAIL: "✗ FAIL ", CheckStatus.WARN: "! warn ",
                         CheckStatus.ERROR: "? error", CheckStatus.SKIPPED: "» skip "}
# A group of hosts with one outcome (a fleet verify), as its heading starts.
OUTCOME_MARKS: dict[str, str] = {Outcome.FAIL: "✗ FAIL", Outcome.ERROR: "? COULD NOT CHECK",
                                 Outcome.WARN: "! PASS WITH A WARNING", Outcome.PASS: "✓ PASS"}
# Exit codes (docs/usage.md "Exit codes"): 0 pass, 1 a check failed, 3 could not check; 2 and 4 (bad usage,
# refused) come from ``commands.errors``.
EXIT_FOR_VERDICT: dict[str, int] = {Verdict.PASS: 0, Verdict.FAIL: 1, Verdict.ERROR: 3}
