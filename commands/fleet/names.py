"""Host names said briefly, the way ``dshbak -c`` and pdsh's hostlists do: ``ct[129-131,140], gpu-a``.

Pure; no I/O. Names that share a prefix and end in digits of the same width collapse into
one bracket of ranges; everything else is listed as written. The list reads back to exactly
the names given (each once), so nothing is hidden by the shortening.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

_NUMBERED = re.compile(r"^(.*?)(\d+)$")


def compress_names(names: Sequence[str]) -> str:
    """``["ct129", "ct130", "ct131", "ct140", "gpu-a"]`` → ``"ct[129-131,140], gpu-a"``.

    Groups appear in the order of their first name; numbers within a group are sorted. A
    prefix with a single number is written plainly (``ct129``). Leading zeros are kept:
    ``gpu09``, ``gpu10`` → ``gpu[09-10]``, and ``gpu1`` never joins them; ``n9``, ``n10`` → ``n[9-10]``.
    """
    numbered: list[tuple[str, str] | str] = []
    padded: dict[str, set[int]] = {}  # prefix → widths written with a leading zero
    for name in dict.fromkeys(names):
        match = _NUMBERED.match(name)
        if match is None:
            numbered.append(name)
            continue
        prefix, digits = match.groups()
        numbered.append((prefix, digits))
        if digits.startswith("0") and len(digits) > 1:
            padded.setdefault(prefix, set()).add(len(digits))
    buckets: dict[tuple[str, int], list[int]] = {}
    order: list[tuple[str, int] | str] = []
    for item in numbered:
        if isinstance(item, str):
            order.append(item)
            continue
        prefix, digits = item
        # Width 0: natural numbers (n9, n10); a number as wide as a zero-padded one joins it (gpu09, gpu10).
        key = (prefix, len(digits) if len(digits) in padded.get(prefix, set()) else 0)
        if key not in buckets:
            buckets[key] = []
            order.append(key)
        buckets[key].append(int(digits))
    parts: list[str] = []
    for entry in order:
        if isinstance(entry, str):
            parts.append(entry)
            continue
        prefix, width = entry
        numbers = sorted(buckets[entry])
        if len(numbers) == 1:
            parts.append(f"{prefix}{numbers[0]:0{width}d}")
        else:
            parts.append(f"{prefix}[{_ranges(numbers, width)}]")
    return ", ".join(parts)


def _ranges(numbers: list[int], width: int) -> str:
    spans: list[tuple[int, int]] = []
    for number in numbers:
        if spans and number == spans[-1][1] + 1:
            spans[-1] = (spans[-1][0], number)
        else:
            spans.append((number, number))
    return ",".join(f"{low:0{width}d}" if low == high else f"{low:0{width}d}-{high:0{width}d}"
                    for low, high in spans)
