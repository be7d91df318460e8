"""Everything kept in SQLite: the hash-chained events, migrations, locks, plans awaiting approval, the trail."""

# How many operations an audit listing shows (by default, at most): here so the CLI's argument
# parser reads them without loading the store.
DEFAULT_LIMIT = 10
MAX_LIMIT = 1000
# The verdict of an operation not ended yet (commands/store/trail.py): here so the words a verify prints
# (bot/words.py) name it without loading the trail's reader and the schema checks.
IN_PROGRESS = "in progress"
# The migrations a current audit DB has applied (commands/store/migrations.py holds them and refuses to load when
# they are not this many): here so opening a current DB checks its version without loading them.
SCHEMA_VERSION = 10
URL_SCHEMES = ("postgresql://", "postgres://")


def is_pg_url(target: object) -> bool:
    """A ``postgresql://`` (or ``postgres://``) URL: the PostgreSQL store (commands/store/pg.py), else SQLite."""
    return isinstance(target, str) and target.startswith(URL_SCHEMES)
