"""Datasette plugin: proofbot's table descriptions and canned queries on every database served, whatever
its file is called (metadata alone applies them to a database named ``proofbot`` only, i.e. proofbot.db).

    datasette proofbot-demo.db --metadata …/datasette-metadata.yml --plugins-dir …/datasette_plugin
"""

from __future__ import annotations

from functools import cache
from pathlib import Path
from typing import Any

import yaml
from datasette import hookimpl  # type: ignore[import-untyped,unused-ignore]  # no type hints shipped

METADATA = Path(__file__).parent.parent / "datasette-metadata.yml"
NOT_AUDIT_LOGS = ("_internal", "_memory")


@cache
def _audit_section() -> dict[str, Any]:
    document = yaml.safe_load(METADATA.read_text(encoding="utf-8"))
    return {"title": document["title"], "description": document["description"],
            "section": document["databases"]["proofbot"]}


@hookimpl  # type: ignore[untyped-decorator,unused-ignore]
def get_metadata(datasette: Any, key: str | None, database: str | None, table: str | None) -> dict[str, Any]:
    shared = _audit_section()
    names = [name for name in datasette.databases if name not in NOT_AUDIT_LOGS]
    return {"title": shared["title"], "description": shared["description"],
            "databases": {name: shared["section"] for name in names}}
