"""The Slack front-end: the bolt app, one module per command, Block Kit rendering, threads, serve."""
