"""Everything kept in SQLite: the hash-chained events, migrations, locks, plans awaiting approval, the trail."""

# How many operations an audit listing shows (by default, at most): here so the CLI's argument
# parser reads them without loading the store.
DEFAULT_LIMIT = 10
MAX_LIMIT = 1000
