"""The inventory's ``watch`` entries: parsed strictly, each bad value refused at its line with what to write."""

from __future__ import annotations

from datetime import time, timedelta

import pytest
from hypothesis import given
from hypothesis import strategies as st

from commands.errors import InventoryError
from commands.inventory import parse_inventory
from commands.inventory.watch import parse_duration

HEAD = """groups:
  gpu-west: [ct129, ct130]
hosts:
  ct129: {address: 10.1.230.172}
  ct130: {address: 10.1.230.173}
watch:
"""


def _problems(entries: str) -> list[str]:
    with pytest.raises(InventoryError) as caught:
        parse_inventory(HEAD + entries, "inv.yml")
    return caught.value.message.splitlines()


def test_an_entry_loads_with_its_values_parsed() -> None:
    inventory = parse_inventory(HEAD + """\
  - {target: gpu-west, every: 5m, channel: C0123ABCD, after: 3, quiet: "22:00-07:00 Europe/Berlin", jitter: 20s}
  - {target: ct129, every: 1h30m, channel: C0999}
""", "inv.yml")
    first, second = inventory.watch
    assert (first.target, first.interval, first.after, first.spread) == ("gpu-west", timedelta(minutes=5), 3,
                                                                         timedelta(seconds=20))
    quiet = first.quiet_hours
    assert quiet is not None and (quiet.start, quiet.end, quiet.zone.key) == (time(22), time(7), "Europe/Berlin")
    # defaults: after 2, a tenth of every as jitter, no quiet hours
    assert (second.after, second.spread, second.quiet_hours) == (2, timedelta(minutes=9), None)


def test_no_watch_section_is_no_entries() -> None:
    assert parse_inventory(HEAD.removesuffix("watch:\n"), "inv.yml").watch == ()


def test_every_bad_value_is_said_at_its_line_all_at_once() -> None:
    problems = _problems("""\
  - {target: gpu-west, every: 5, channel: C0123ABCD}
  - {target: ct129, every: 5m, channel: C0123ABCD, quiet: "22:00-07:00 Mars/Olympus"}
  - {target: nowhere, every: 5m, channel: C0123ABCD}
  - {target: ct130, every: 5 m, channel: "#ops"}
  - {target: ct130, every: 10s, channel: C1234, after: 0, quiet: "24:00-07:00 UTC", jitter: 1h, colour: red}
""")
    assert problems == [
        "inv.yml:7: watch.0.every: Input should be a valid string",
        "inv.yml:8: watch.1.quiet: unknown time zone 'Mars/Olympus' (an IANA name, e.g. Europe/Berlin)",
        "inv.yml:9: watch.2.target: unknown host or group 'nowhere'",
        "inv.yml:10: watch.3.every: not a duration: '5 m' (write e.g. 90s, 5m, 1h30m)",
        "inv.yml:10: watch.3.channel: not a Slack channel ID (C… or G…): '#ops'",
        "inv.yml:11: watch.4.every: every 10s is too often: at least 30s",
        "inv.yml:11: watch.4.after: Input should be greater than or equal to 1",
        "inv.yml:11: watch.4.quiet: not a time of day: '24:00' (00:00 to 23:59)",
        problems[8],
    ]
    assert problems[8].startswith("inv.yml:11: watch.4.colour: not an inventory key here; known: `target`")


@pytest.mark.parametrize(("entry", "problem"), [
    ('{target: ct129, every: 5m, channel: C0123ABCD, jitter: 5m}', "watch.0.jitter: jitter 5m must be shorter"),
    ('{target: ct129, every: 5m, channel: C0123ABCD, quiet: "07:00-07:00 UTC"}', "start and end at the same"),
    ('{target: ct129, every: 5m, channel: C0123ABCD, quiet: "7:00-08:00 UTC"}', "not quiet hours: '7:00-08:00 UTC'"),
    ('{target: ct129, every: 5m, channel: C0123ABCD, quiet: "22:00-07:00 ../etc/passwd"}', "unknown time zone"),
    ('{target: ct129, every: 5m, channel: C0123ABCD, quiet: "22:00-07:00 Europe"}', "unknown time zone"),
    ('{target: ct129, every: 5m, channel: C0123ABCD, after: "2"}', "watch.0.after: Input should be a valid int"),
    ('{target: ct129, every: 5min, channel: C0123ABCD}', "not a duration: '5min'"),
    ("ct129", "watch[0]: must be a mapping"),
])
def test_one_bad_value(entry: str, problem: str) -> None:
    problems = _problems(f"  - {entry}\n")
    assert len(problems) == 1 and problem in problems[0], problems
    assert problems[0].startswith("inv.yml:7: ")


def test_the_same_target_twice_is_refused_at_the_second() -> None:
    problems = _problems("""\
  - {target: ct129, every: 5m, channel: C0123ABCD}
  - {target: ct129, every: 1m, channel: C0123ABCD}
""")
    assert problems == ["inv.yml:8: watch.1.target: 'ct129' is already watched by entry 0"]


def test_watch_must_be_a_list() -> None:
    assert _problems("  target: ct129\n") == [
        "inv.yml:6: watch: must be a list of entries, e.g. - {target: gpu, every: 5m, channel: C0123ABCD}"]


@given(st.integers(0, 99), st.integers(0, 59), st.integers(0, 59))
def test_durations_read_back_as_written(hours: int, minutes: int, seconds: int) -> None:
    written = (f"{hours}h" if hours else "") + (f"{minutes}m" if minutes else "") + (f"{seconds}s" if seconds else "")
    if written:
        assert parse_duration(written) == timedelta(hours=hours, minutes=minutes, seconds=seconds)


@given(st.text(max_size=8))
def test_a_duration_is_its_form_or_refused(written: str) -> None:
    try:
        parse_duration(written)
    except ValueError as exc:
        assert "not a duration" in str(exc)
    else:
        assert written and written[-1] in "hms" and written[0].isdigit() and written.isascii()
