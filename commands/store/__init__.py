"""Everything kept in SQLite: the hash-chained events, migrations, locks, plans awaiting approval, the trail."""
