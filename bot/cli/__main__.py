"""``python -m bot.cli``: the same entry point as the ``proofbot`` script."""

from bot.cli.main import console_main

console_main()
