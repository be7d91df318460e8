"""proofbot front-ends: the Slack app, Block Kit rendering, the CLI and the demo."""
