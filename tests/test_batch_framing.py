"""Batch framing under fuzz: any output either splits into results whose end markers are all there, or is an error.

Pure (``split_batch`` on recorded bytes) plus one tier-1 run for the per-channel output cap.
"""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from bot.demo.host import DemoHost
from commands.errors import CouldNotCheck, MissingOutput, ProofbotError
from commands.ssh import MAX_OUTPUT_BYTES, connect
from commands.ssh.batch import split_batch
from tests.test_ssh import host_of

NONCE = "0123456789abcdef"
COMMANDS = ["cmd0", "cmd1", "cmd2", "cmd3"]


def end_marker(index: int, status: bytes = b"0", when: bytes = b"2.5") -> bytes:
    return b"\n" + NONCE.encode() + b" end %d " % index + status + b" " + when + b"\n"


def start() -> bytes:
    return NONCE.encode() + b" start 1.0\n"


def real_markers(output: bytes) -> set[int]:
    return {i for i in range(len(COMMANDS)) if b"\n" + NONCE.encode() + b" end %d " % i in output}


# Pieces a hostile or broken host could produce: noise, real-looking markers with odd fields, truncations.
PIECES = st.one_of(
    st.binary(max_size=40),
    st.builds(end_marker, st.integers(0, 5),
              st.sampled_from([b"0", b"7", b"255", b"-1", b"x", b"", b"1 2", b"99999", b"0\n"]),
              st.sampled_from([b"2.5", b"nan", b"inf", b"", b"1e999", b"\xff"])),
    st.just(start()),
    st.just(NONCE.encode() + b" end "),
    st.just(b"\n"),
)


@settings(max_examples=400, suppress_health_check=[HealthCheck.too_slow], deadline=None)
@given(st.booleans(), st.lists(PIECES, max_size=12))
def test_any_output_splits_or_is_an_error_never_a_guess(with_start: bool, pieces: list[bytes]) -> None:
    output = (start() if with_start else b"") + b"".join(pieces)
    try:
        results = split_batch(NONCE, COMMANDS, output)
    except ProofbotError as exc:  # only for a marker that is there but malformed: quoted from the output
        assert isinstance(exc, MissingOutput) and "malformed end marker after `cmd" in exc.message, exc
        shown = exc.message.split(": ", 1)[1].strip("'\"")
        assert shown in output.decode("utf-8", "replace"), (shown, output)
        return
    assert len(results) <= len(COMMANDS)
    present = real_markers(output)
    for index, result in enumerate(results):
        assert index in present, f"result for {COMMANDS[index]} without its end marker"
        assert result.command == COMMANDS[index]
        assert 0 <= result.exit_status <= 999 and result.duration_s >= 0


@settings(max_examples=200, deadline=None)
@given(st.lists(st.tuples(st.binary(max_size=60), st.integers(0, 255)), min_size=0, max_size=4),
       st.binary(max_size=30))
def test_well_framed_output_gives_back_every_body_and_status(runs: list[tuple[bytes, int]], tail: bytes) -> None:
    """What the script prints for the commands that ran, then anything cut short: each ran command comes back exact."""
    output = start() + b"".join(body + end_marker(i, str(status).encode()) for i, (body, status) in enumerate(runs))
    results = split_batch(NONCE, COMMANDS, output + tail.replace(NONCE.encode(), b""))
    assert [(r.output, r.exit_status) for r in results[: len(runs)]] == runs


@pytest.mark.parametrize("fields", [b"x 1.0", b"-1 1.0", b"1 2 3", b"", b"12345 1.0"])
def test_a_malformed_end_marker_is_missing_output_not_a_value_error(fields: bytes) -> None:
    output = start() + b"out\n" + NONCE.encode() + b" end 0 " + fields + b"\n"
    with pytest.raises(MissingOutput, match="malformed end marker after `cmd0`"):
        split_batch(NONCE, COMMANDS, output)


async def test_output_past_the_cap_is_an_error_saying_so(clean_host: DemoHost) -> None:
    async with connect(host_of(clean_host)) as conn:
        with pytest.raises(CouldNotCheck, match=r"output passed 16 MiB, stopped reading: head -c"):
            await conn.run(["head", "-c", str(MAX_OUTPUT_BYTES + 1), "/dev/zero"])
        exactly = await conn.run(["head", "-c", str(MAX_OUTPUT_BYTES), "/dev/zero"])
        assert len(exactly.output) == MAX_OUTPUT_BYTES and exactly.exit_status == 0
        assert (await conn.run(["echo", "still usable"])).text.strip() == "still usable"


@settings(max_examples=200, deadline=None)
@given(st.lists(st.tuples(st.binary(max_size=40), st.integers(0, 255)), max_size=3),
       st.sampled_from([b"-1", b"x", b"", b"1 2", b"2.5", b"0x1"]))
def test_a_malformed_marker_after_well_framed_runs_is_refused_naming_its_command(
        runs: list[tuple[bytes, int]], status: bytes) -> None:
    """Invalid only: good results first, then the next command's marker with a status that is no number."""
    good = b"".join(body.replace(NONCE.encode(), b"") + end_marker(i, str(code).encode())
                    for i, (body, code) in enumerate(runs))
    with pytest.raises(MissingOutput, match=f"malformed end marker after `{COMMANDS[len(runs)]}`"):
        split_batch(NONCE, COMMANDS, start() + good + b"body" + end_marker(len(runs), status))
