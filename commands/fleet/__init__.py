"""Many hosts at once: a bounded runner (one slow host never holds the rest) and identical outcomes grouped."""

from commands.fleet.grouping import OutcomeGroup, group_outcomes
from commands.fleet.run import run_bounded

__all__ = ["OutcomeGroup", "group_outcomes", "run_bounded"]
