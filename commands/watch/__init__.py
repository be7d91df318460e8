"""The drift watch: re-verify the inventory's ``watch`` targets on a schedule and say something only when a
host's confirmed state changes (state: the pure per-host machine; schedule: when each entry runs)."""
