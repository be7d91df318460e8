"""The watch's state machine on simulated time: a change is said once, after ``after`` identical results; a flap,
proofbot's own restart and quiet hours say nothing (quiet hours: one digest when they end)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from hypothesis import given, settings
from hypothesis import strategies as st

from bot.slack.watch_blocks import watch_message
from bot.watch_text import host_line
from commands.inventory.watch import QuietHours
from commands.verify.fleet import FleetResult
from commands.vocabulary import Change, Operation, Verdict
from commands.watch.state import Announcement, Result, TargetWatch

PASS = Result(Verdict.PASS)
FAIL = Result(Verdict.FAIL, frozenset({"file:spec_info.py"}))
FAIL_OTHER = Result(Verdict.FAIL, frozenset({"main-pid"}))
ERROR = Result(Verdict.ERROR, frozenset({"ssh"}))
START = datetime(2026, 12, 1, 12, 0, tzinfo=UTC)  # 13:00 in Berlin
EVERY = timedelta(minutes=5)


def _run(watch: TargetWatch, runs: list[dict[str, Result]], start: datetime = START,
         held_until: dict[str, datetime] | None = None) -> list[tuple[int, Announcement]]:
    said = []
    for index, results in enumerate(runs):
        said += [(index, message) for message in watch.observe(start + index * EVERY, results, held_until)]
    return said


def _changes(said: list[tuple[int, Announcement]]) -> list[tuple[int, str, Change]]:
    return [(index, change.host, change.change) for index, message in said for change in message.changes]


def test_a_steady_pass_says_nothing_for_a_week() -> None:
    week = 7 * 24 * 12
    assert _run(TargetWatch("gpu"), [{"ct129": PASS, "ct130": PASS}] * week) == []


def test_a_failure_is_said_once_after_two_runs_then_its_recovery_once() -> None:
    runs = [{"ct129": PASS}] * 3 + [{"ct129": FAIL}] * 5 + [{"ct129": PASS}] * 4
    said = _run(TargetWatch("gpu"), runs)
    assert _changes(said) == [(4, "ct129", Change.FAILED), (9, "ct129", Change.RECOVERED)]
    failed = said[0][1].changes[0]
    assert (failed.before, failed.now, failed.since) == (PASS, FAIL, START + 3 * EVERY)


def test_a_new_cause_while_failing_and_could_not_check_are_changes() -> None:
    runs = [{"h": FAIL}] * 2 + [{"h": FAIL_OTHER}] * 2 + [{"h": ERROR}] * 2 + [{"h": PASS}] * 2
    assert _changes(_run(TargetWatch("h"), runs)) == [
        (1, "h", Change.FAILED), (3, "h", Change.NEW_CAUSE), (5, "h", Change.UNCHECKABLE), (7, "h", Change.RECOVERED)]


def test_hosts_that_change_together_are_one_message() -> None:
    hosts = [f"ct{n}" for n in range(100, 120)]
    runs = [dict.fromkeys(hosts, PASS)] * 2 + [dict.fromkeys(hosts, FAIL)] * 3
    said = _run(TargetWatch("gpu"), runs)
    assert len(said) == 1 and sorted(change.host for change in said[0][1].changes) == hosts


def test_after_one_says_it_at_once() -> None:
    assert _changes(_run(TargetWatch("h", after=1), [{"h": PASS}, {"h": FAIL}])) == [(1, "h", Change.FAILED)]


def test_proofbot_holding_the_host_says_nothing_then_judges_fresh_results() -> None:
    # ct129 is restarted by proofbot during runs 2..5 (its lock, then ready_timeout_s): failures then are its own.
    held = {"ct129": START + 6 * EVERY}
    runs = [{"ct129": PASS}] * 2 + [{"ct129": ERROR}, {"ct129": FAIL}, {"ct129": FAIL}, {"ct129": ERROR}] \
        + [{"ct129": PASS}] * 4
    assert _run(TargetWatch("gpu"), runs, held_until=held) == []
    # the same restart leaving the host broken is said, after `after` fresh results
    broken = runs[:6] + [{"ct129": FAIL}] * 3
    assert _changes(_run(TargetWatch("gpu"), broken, held_until=held)) == [(7, "ct129", Change.FAILED)]


def test_quiet_hours_hold_every_change_for_one_digest_at_their_end() -> None:
    quiet = QuietHours.parse("22:00-07:00 Europe/Berlin")
    evening = datetime(2026, 12, 1, 20, 30, tzinfo=UTC)  # 21:30 in Berlin
    night = 12 * 10  # ten hours of runs
    runs = [{"a": PASS, "b": PASS}] * 12 + [{"a": FAIL, "b": PASS}] * 40 + [{"a": FAIL, "b": FAIL}] * (night - 52)
    said = _run(TargetWatch("gpu", quiet=quiet), runs, start=evening)
    assert len(said) == 1
    index, digest = said[0]
    assert digest.digest and evening + index * EVERY == datetime(2026, 12, 2, 6, 0, tzinfo=UTC)  # 07:00 Berlin
    assert [(change.host, change.change) for change in digest.changes] == [("a", Change.FAILED), ("b", Change.FAILED)]


RESULTS = st.sampled_from([PASS, FAIL, FAIL_OTHER, ERROR])


@settings(max_examples=300)
@given(st.lists(RESULTS, max_size=60), st.integers(1, 5))
def test_every_change_is_confirmed_by_its_last_after_results(results: list[Result], after: int) -> None:
    watch = TargetWatch("h", after=after)
    for index, message in _run(watch, [{"h": result} for result in results]):
        (change,) = message.changes
        assert index + 1 >= after and results[index + 1 - after:index + 1] == [change.now] * after
        assert change.before != change.now
    last = watch.hosts.get("h")
    if len(results) >= after and len(set(results[-after:])) == 1 and last is not None:
        assert last.confirmed == results[-1]  # a state held `after` runs is always the one confirmed


@settings(max_examples=200)
@given(st.lists(st.sampled_from([PASS, FAIL]), min_size=1, max_size=60), st.integers(2, 5))
def test_a_flap_shorter_than_after_is_never_said(pattern: list[Result], after: int) -> None:
    # runs of fewer than `after` identical results, after a confirmed pass: nothing to say, ever
    runs, current = [PASS] * after, PASS
    for result in pattern:
        current = FAIL if current == PASS else PASS
        runs += [current] * min(after - 1, 1 + pattern.count(result) % (after - 1))
    assert _run(TargetWatch("h", after=after), [{"h": result} for result in runs]) == []


@settings(max_examples=200)
@given(st.lists(RESULTS, min_size=1, max_size=40), st.integers(0, 40))
def test_nothing_is_said_for_a_host_while_proofbot_holds_it(results: list[Result], held_runs: int) -> None:
    held = {"h": START + held_runs * EVERY}
    for index, _message in _run(TargetWatch("h"), [{"h": result} for result in results], held_until=held):
        assert index >= held_runs + 1  # and then only after `after` (2) fresh results


def test_a_host_that_failed_and_recovered_in_quiet_hours_is_one_line_of_the_digest() -> None:
    quiet = QuietHours.parse("22:00-07:00 Europe/Berlin")
    evening = datetime(2026, 12, 1, 20, 30, tzinfo=UTC)  # 21:30 in Berlin
    # a fails at 22:00 Berlin (confirmed 22:05) and recovers at 23:00 (confirmed 23:05); b fails and stays failing
    runs = ([{"a": PASS, "b": PASS}] * 6 + [{"a": FAIL, "b": FAIL}] * 12 + [{"a": PASS, "b": FAIL}] * 12
            + [{"a": PASS, "b": FAIL}] * (12 * 8))
    said = _run(TargetWatch("gpu", quiet=quiet), runs, start=evening)
    ((_, digest),) = said
    assert [(change.host, change.change) for change in digest.changes] == [("a", Change.RECOVERED),
                                                                             ("b", Change.FAILED)]
    a = digest.changes[0]
    assert [(step.change, step.since) for step in (*a.earlier, a)] == [
        (Change.FAILED, evening + 6 * EVERY), (Change.RECOVERED, evening + 18 * EVERY)]
    assert a.before == PASS and digest.changes[1].earlier == ()
    assert host_line(a) == ("a failed at 2026-12-01 21:00 UTC (file:spec_info.py), "
                            "recovered at 2026-12-01 22:00 UTC")
    assert host_line(digest.changes[1]) == "b now failing since 2026-12-01 21:00 UTC: file:spec_info.py"
    text, blocks = watch_message(digest, FleetResult("op-f", Operation.VERIFY, "gpu", "", 0.0, []))
    lines = str(blocks)
    assert lines.count("*a*") == 1 and "failed at <!date^" in lines and "recovered at <!date^" in lines
    assert text == "watch gpu (held through quiet hours): 1 host now failing, 1 host recovered"


def test_what_a_restart_must_not_forget_is_pending() -> None:
    watch = TargetWatch("gpu")
    watch.observe(START, {"new": PASS, "failing": FAIL, "steady": PASS})
    # a first pass is not news; a first fail, not yet confirmed, is pending
    assert set(watch.pending()) == {"failing"}
    watch.observe(START + EVERY, {"new": PASS, "failing": FAIL, "steady": PASS})
    assert watch.pending() == {} and watch.watching_since == START
