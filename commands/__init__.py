"""proofbot core: inventory, SSH, checks, audit store and the operations built on them.

Knows nothing of Slack; the front-ends in ``bot/`` import it, never the reverse.
"""
