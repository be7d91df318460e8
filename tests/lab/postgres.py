"""A private PostgreSQL 15 cluster for one test session: initdb into a temp dir (as the `postgres` user when
root, since PostgreSQL refuses to run as root), pg_ctl on a Unix socket only, stopped at the end.

``why_no_postgres()`` is the reason it cannot run here (tests/lab skip_or_fail turns it into a skip, or a
failure under CI); ``private_cluster`` starts one (the session's, a module's own, a bench's) and stops it after;
``Cluster.database(name)`` makes a fresh database from template0 and returns its URL.
"""

from __future__ import annotations

import os
import pwd
import shutil
import subprocess
import tempfile
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager, nullcontext
from pathlib import Path
from typing import NoReturn, TypeVar
from urllib.parse import quote

from tests.lab import UNAVAILABLE_ENV

BIN = Path("/usr/lib/postgresql/15/bin")
START_TIMEOUT_S = 60
SUPERUSER = "postgres"


def why_no_postgres() -> str | None:
    """Why the PostgreSQL lab cannot run here, or None (``PROOFBOT_LAB_UNAVAILABLE=postgres`` says it cannot)."""
    if "postgres" in os.environ.get(UNAVAILABLE_ENV, "").replace(" ", "").split(","):
        return f"PostgreSQL lab made unavailable by {UNAVAILABLE_ENV}"
    missing = [tool for tool in ("initdb", "pg_ctl", "postgres") if not (BIN / tool).exists()]
    if missing:
        return f"PostgreSQL 15 lab needs {', '.join(missing)} in {BIN} (apt: postgresql-15)"
    if os.geteuid() == 0:
        try:
            pwd.getpwnam(SUPERUSER)
        except KeyError:
            return "PostgreSQL lab run as root needs the `postgres` user (apt: postgresql-15)"
    return None


class Cluster:
    """initdb + pg_ctl in one temp dir; the socket lives in it too (no TCP: listen_addresses='')."""

    def __init__(self) -> None:
        self.root = Path(tempfile.mkdtemp(prefix="proofbot-pg-"))
        self.data = self.root / "data"
        self.socket_dir = self.root / "sock"
        self._user: int | None = None
        if os.geteuid() == 0:
            entry = pwd.getpwnam(SUPERUSER)
            self._user = entry.pw_uid
            os.chown(self.root, entry.pw_uid, entry.pw_gid)
        self._as_owner(["mkdir", "-m", "700", str(self.socket_dir)])

    def _as_owner(self, argv: list[str], timeout: float = START_TIMEOUT_S) -> subprocess.CompletedProcess[str]:
        return subprocess.run(argv, user=self._user, capture_output=True, text=True, timeout=timeout, check=True,
                              cwd=self.root, env={"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "LC_ALL": "C"})

    def start(self, *, durable: bool = False) -> None:
        """``durable``: PostgreSQL's defaults (fsync on), for the bench; tests turn fsync off, since a test
        cluster's crash safety is not under test and fsync is most of an append's cost."""
        try:
            self._as_owner([str(BIN / "initdb"), "-D", str(self.data), "-U", SUPERUSER, "-A", "trust",
                            "--no-sync", "-E", "UTF8"])
            options = (f"-k {self.socket_dir} -c listen_addresses='' -p 5432 -c max_connections=60"
                       + ("" if durable else " -c fsync=off"))
            self._as_owner([str(BIN / "pg_ctl"), "-D", str(self.data), "-l", str(self.root / "log"), "-w",
                            "-t", str(START_TIMEOUT_S), "-o", options, "start"], timeout=START_TIMEOUT_S + 10)
        except subprocess.CalledProcessError as exc:
            log = self.root / "log"
            tail = log.read_text(errors="replace")[-600:] if log.exists() else ""
            self.stop()
            raise RuntimeError(f"PostgreSQL would not start: {' '.join(exc.cmd[:2])} exited {exc.returncode}: "
                               f"{(exc.stderr or '')[-400:]} {tail}") from None

    def url(self, database: str = "postgres") -> str:
        return f"postgresql://{SUPERUSER}@/{database}?host={quote(str(self.socket_dir), safe='')}"

    def database(self, name: str) -> str:
        """A fresh, empty database (CREATE DATABASE … TEMPLATE template0) and its URL."""
        import psycopg

        with psycopg.connect(self.url(), autocommit=True) as conn:
            conn.execute(f'DROP DATABASE IF EXISTS "{name}"')
            conn.execute(f'CREATE DATABASE "{name}" TEMPLATE template0')
        return self.url(name)

    def restart(self) -> None:
        """Stop the server at once (every connection cut, as a crash or a failover would) and start it again."""
        self._as_owner([str(BIN / "pg_ctl"), "-D", str(self.data), "-l", str(self.root / "log"), "-m", "immediate",
                        "-w", "restart"],
                       timeout=START_TIMEOUT_S + 10)

    def stop(self) -> None:
        if (self.data / "postmaster.pid").exists():
            self._as_owner([str(BIN / "pg_ctl"), "-D", str(self.data), "-m", "immediate", "-w", "stop"],
                           timeout=START_TIMEOUT_S)
        shutil.rmtree(self.root, ignore_errors=True)


ClusterKind = TypeVar("ClusterKind", bound=Cluster)


@contextmanager
def private_cluster(unavailable: Callable[[str], object], kind: type[ClusterKind], *,
                    durable: bool = False) -> Iterator[ClusterKind]:
    """A private cluster of ``kind`` (Cluster or a subclass), started, stopped and removed after; where it cannot
    run here, or would not start, ``unavailable(reason)``, which raises (a test's skip_or_fail, a bench's exit)."""
    reason = why_no_postgres()
    if reason:
        unavailable(reason)
        raise RuntimeError(reason)
    cluster = kind()
    try:
        cluster.start(durable=durable)
    except RuntimeError as exc:
        unavailable(str(exc))
        raise
    try:
        yield cluster
    finally:
        cluster.stop()


def bench_cluster(pg_url: str | None) -> AbstractContextManager[Cluster | None]:
    """A bench's PostgreSQL: None when it was given ``--pg URL``, else a private cluster with PostgreSQL's own
    durability (fsync on), stopped when the bench ends."""
    if pg_url is not None:
        return nullcontext()
    return private_cluster(_bench_cannot, Cluster, durable=True)


def _bench_cannot(reason: str) -> NoReturn:
    raise SystemExit(f"{reason}; or pass --pg URL")
