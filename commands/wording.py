"""How findings say things to people: a long path by its last parts, an age in the units people use."""

from __future__ import annotations


def short_path(path: str, keep: int = 2) -> str:
    """A long path as a message shows it: its last ``keep`` parts (the full path stays in the
    evidence and the details)."""
    parts = path.split("/")
    return path if len(parts) <= keep + 2 else "…/" + "/".join(parts[-keep:])


def age_words(seconds: float) -> str:
    """How long ago, as people say it: '45 s', '3 h 12 min', '2 d 4 h'."""
    seconds = max(0, int(seconds))
    if seconds < 60:
        return f"{seconds} s"
    minutes, hours, days = seconds // 60, seconds // 3600, seconds // 86400
    if days:
        return f"{days} d {hours % 24} h"
    if hours:
        return f"{hours} h {minutes % 60} min"
    return f"{minutes} min"
