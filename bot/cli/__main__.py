"""``python -m bot.cli``: the same entry point as the ``proofbot`` script."""

import sys

from bot.cli.main import main

sys.exit(main())
