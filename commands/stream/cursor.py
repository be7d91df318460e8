"""Where the stream stands: per target, the ``seq`` and ``hash`` of the last event it acknowledged, in one JSON
file (``--state``) replaced atomically (a new file beside it, fsynced, renamed over it), so a crash leaves the
old cursor or the new one, never half of one; at worst a batch is sent again, with the same seq and hash."""

from __future__ import annotations

import contextlib
import json
import os
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from commands.errors import UsageError

VERSION = 1
MAX_STATE_BYTES = 1 << 20


@dataclass(frozen=True)
class Cursor:
    seq: int = 0  # 0: nothing acknowledged yet
    hash: str | None = None


class StreamState:
    def __init__(self, path: Path) -> None:
        self.path = path
        self.cursors: dict[str, Cursor] = self._load()

    def _load(self) -> dict[str, Cursor]:
        try:
            with open(self.path, "rb") as file:
                raw = file.read(MAX_STATE_BYTES + 1)
        except FileNotFoundError:
            return {}
        except OSError as exc:
            raise UsageError(f"cannot read the stream state {self.path}: {exc.strerror}",
                             hint="pass --state PATH, a file only the stream writes") from None
        try:
            if len(raw) > MAX_STATE_BYTES:
                raise ValueError("too big")
            document = json.loads(raw)
            if document.get("version") != VERSION:
                raise ValueError(f"version {document.get('version')!r}")
            return {str(target): Cursor(int(c["seq"]), None if c.get("hash") is None else str(c["hash"]))
                    for target, c in document["targets"].items()}
        except (ValueError, TypeError, KeyError, AttributeError) as exc:
            raise UsageError(f"{self.path} is not a proofbot stream state ({exc})",
                             hint="pass --state PATH of a file `audit stream` wrote, or a new path to start "
                                  "from the first event") from None

    def cursor(self, target: str) -> Cursor:
        return self.cursors.get(target, Cursor())

    def acknowledged(self, target: str, cursor: Cursor) -> None:
        """Record ``cursor`` for ``target`` on disk before returning."""
        self.cursors[target] = cursor
        document: dict[str, Any] = {"version": VERSION, "targets": {
            name: {"seq": c.seq, "hash": c.hash} for name, c in sorted(self.cursors.items())}}
        write_atomically(self.path, json.dumps(document, indent=1).encode() + b"\n")


def write_atomically(path: Path, data: bytes) -> None:
    """Replace ``path`` with ``data``: a fresh file (random name, O_EXCL, 0600) beside it, fsynced, renamed."""
    folder = path.parent if str(path.parent) else Path(".")
    fd, temporary = tempfile.mkstemp(prefix=f".{path.name}.", dir=folder)
    try:
        with os.fdopen(fd, "wb") as file:
            file.write(data)
            file.flush()
            os.fsync(file.fileno())
        os.replace(temporary, path)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(temporary)  # never leave a half-written temporary beside the state
        raise
    directory = os.open(folder, os.O_RDONLY)
    try:
        os.fsync(directory)  # the rename itself survives a crash
    finally:
        os.close(directory)
