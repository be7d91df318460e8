"""The ``proofbot`` command line: one module per operation, driven by the registry; and its process's cyclic GC,
held off while the command starts (``started``)."""

import gc
import os
import sys

# A CLI command starts by importing ~600 modules and building the inventory's models: every object it makes then
# lives to the end, so the cyclic GC's passes over them (a full one each time the long-lived objects grow by a
# quarter) find nothing and cost a cold verify ~0.1 CPU-s. So in the CLI's own process (the `proofbot` script or
# `python -m bot.cli`; never a test or another program importing this package) it is off until the command has its
# modules and inventory: ``started`` then freezes what exists (never traversed again) and enables it with the
# default thresholds, so a long verify of 500 hosts still collects its own garbage (once frozen, the collector
# costs a run nothing measurable: docs/benchmarks.md). Held at most until `started`, which every command reaches
# before its work (bot.cli.main's dispatch, or the session it opens); --help and usage errors exit before.
_HELD = sys.orig_argv[1:3] == ["-m", "bot.cli"] or os.path.basename(sys.argv[0]) == "proofbot"
if _HELD:
    gc.disable()


def started(*, freeze: bool = True) -> None:
    """The command has loaded what it runs with: the cyclic GC runs from now on (once; a no-op elsewhere).
    ``freeze=False`` (``serve``, which runs for months): a normal GC, the start-up objects in it too."""
    global _HELD
    if _HELD:
        _HELD = False
        if freeze:
            gc.freeze()
        gc.enable()
