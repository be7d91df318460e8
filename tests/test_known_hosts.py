"""known_hosts matching and the host-key decision, without SSH.

Which lines name a host (and parse) is compared with OpenSSH's own ``ssh-keygen -l -F NAME -f FILE``
(the same hostfile.c code ssh runs, with key parsing): hypothesis-made patterns and a corpus of
recorded odd lines. The decision is checked on keys and certificates made by asyncssh for the cases
the differential suite (tests/test_known_hosts_differential.py) cannot make cheaply.
"""

from __future__ import annotations

import base64
import os
import re
import shutil
import subprocess
import time
from pathlib import Path

import asyncssh
import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from commands.errors import HostKeyNotVerified
from commands.findings import Finding, could_not_check
from commands.inventory import parse_inventory
from commands.known_hosts import Decision, Trust, decide, lookup_for, trust_for
from commands.known_hosts_file import load, parse_text
from commands.ssh.failures import HostKeyRefused
from commands.ssh.options import effective
from commands.verify.causes import cause_of
from commands.verify.next_steps import next_step
from commands.verify.plan import VerifyPlan
from commands.vocabulary import CheckStatus
from tests.known_hosts_lab import hashed

KEYGEN = shutil.which("ssh-keygen")
pytestmark = pytest.mark.skipif(KEYGEN is None and os.environ.get("CI") != "true", reason="needs ssh-keygen")
HOST_KEY = asyncssh.generate_private_key("ssh-ed25519")
OTHER_KEY = asyncssh.generate_private_key("ssh-ed25519")
CA = asyncssh.generate_private_key("ssh-ed25519")
KEY = HOST_KEY.export_public_key().decode().split()
LINE_KEY = f"{KEY[0]} {KEY[1]}"


def openssh_matches(path: Path, name: str) -> list[tuple[int, str]]:
    """(line, marker) of each line ssh-keygen -l -F says names name, as ssh would load it."""
    assert KEYGEN is not None
    done = subprocess.run([KEYGEN, "-l", "-F", name, "-f", str(path)], capture_output=True, text=True, timeout=30)
    found = re.findall(r"^# Host .* found: line (\d+) (\S*)$", done.stdout, re.MULTILINE)
    return [(int(line), {"CA": "cert-authority", "REVOKED": "revoked"}.get(kind, "")) for line, kind in found]


def proofbot_matches(path: Path, name: str) -> list[tuple[int, str]]:
    parsed = parse_text(str(path), path.read_bytes())
    lines = [line for line in parsed.matching(name.encode()) if line.entry(str(path)) is not None]
    return [(line.number, line.marker or "") for line in lines]


PATTERN_CHARS = st.sampled_from(list("ab.*?!,[]:1W"))
NAMES = st.text(alphabet=st.sampled_from(list("ab.[]:1")), min_size=0, max_size=8)


@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(patterns=st.lists(st.text(alphabet=PATTERN_CHARS, min_size=1, max_size=10), min_size=1, max_size=6),
       markers=st.lists(st.sampled_from(["", "@revoked ", "@cert-authority "]), min_size=6, max_size=6),
       name=NAMES)
def test_which_lines_name_a_host_agrees_with_ssh_keygen(patterns: list[str], markers: list[str], name: str,
                                                        tmp_path: Path) -> None:
    path = tmp_path / "known_hosts"
    lines = zip(patterns, markers[:len(patterns)], strict=True)
    path.write_text("".join(f"{marker}{pattern} {LINE_KEY}\n" for pattern, marker in lines))
    if not name:
        return  # ssh never looks up an empty name
    assert proofbot_matches(path, name) == openssh_matches(path, name), path.read_text()


def unused_bits_set(field: str) -> str:
    """A hashed name whose salt decodes to the same bytes with its two unused bits set: not what OpenSSH's
    b64_pton accepts ("bad host hash"), though a lenient decoder reads the same salt."""
    alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/"
    salt = field.split("|")[2]
    last = alphabet.index(salt[26])
    return field.replace(salt, salt[:26] + alphabet[last | 3] + salt[27:], 1)


def recorded_lines(blob: str) -> str:
    long = "x" * 1023
    salt = base64.b64encode(os.urandom(20)).decode()
    return "\n".join([
        f"web1.test {LINE_KEY}",
        f"WEB1.Test,!web2.test {LINE_KEY} upper case names",
        f"@cert-authority\tweb1.test {LINE_KEY}",  # marker ended by a tab, but the line has spaces later
        f"@cert-authority\tweb1.test\t{LINE_KEY.replace(' ', chr(9))}",  # tabs only
        f"@revoked @revoked web1.test {LINE_KEY}",
        f"@revokedx web1.test {LINE_KEY}",
        f"web1.test {LINE_KEY}\r",  # CRLF file
        f"web1.test ED25519 {blob}",  # a short name is not a type name in a file
        f"web1.test rsa-sha2-256 {blob}",  # a type name of another kind than the blob
        f"web1.test ssh-ed25519 {blob[:-1]}",  # padding cut
        f"web1.test ssh-ed25519 {blob[:-2]}B=",  # unused bits set
        f"web1.test ssh-ed25519 {blob}\0trailing after NUL",
        f"web1.test\0 ssh-ed25519 {blob}",
        f"{long},web1.test {LINE_KEY}",  # a subpattern of 1023 characters: the whole list matches nothing
        f"{long[:-1]},web1.test {LINE_KEY}",
        f"|1|{salt}|{salt} {LINE_KEY}",  # hashed, wrong hash
        f"|1|notbase64|{salt} {LINE_KEY}",
        f"{hashed('web1.test')},web2.test {LINE_KEY}",  # hashed with a comma
        f"{hashed('web1.test')} {LINE_KEY}",
        f"{hashed('[web1.test]:2222')} {LINE_KEY}",
        f"{unused_bits_set(hashed('web1.test'))} {LINE_KEY}",
        f"   \t web1.test {LINE_KEY}",
        "web1.test",
        f"web1.test {KEY[0]}",
        f"web1.test #{LINE_KEY}",
        f"web1.test  {KEY[0]}   {KEY[1]}   comment",
        f"[web1.test]:2222 {LINE_KEY}",
        f"web?.t*t {LINE_KEY}",
        f"!web1.test {LINE_KEY}",
        f"*,!web1.test {LINE_KEY}",
    ]) + "\n"


@pytest.mark.parametrize("name", ["web1.test", "web2.test", "[web1.test]:2222", "x" * 1022])
def test_recorded_odd_lines_agree_with_ssh_keygen(name: str, tmp_path: Path) -> None:
    path = tmp_path / "known_hosts"
    text = recorded_lines(KEY[1])
    path.write_bytes(text.encode())
    assert proofbot_matches(path, name) == openssh_matches(path, name)


def test_a_file_is_parsed_once_per_change(tmp_path: Path) -> None:
    path = tmp_path / "known_hosts"
    path.write_text(f"web1.test {LINE_KEY}\n")
    first = load(str(path))
    assert first is not None and load(str(path)) is first
    path.write_text(f"web1.test {LINE_KEY}\nweb2.test {LINE_KEY}\n")  # size changes: read again
    again = load(str(path))
    assert again is not first and again is not None and len(again.lines) == 2


def certificate(principals: list[str], valid: tuple[int, int] | None = None, ca: asyncssh.SSHKey = CA) -> bytes:
    now = int(time.time())
    after, before = valid or (now - 60, now + 3600)
    cert = ca.generate_host_certificate(HOST_KEY, "h", principals=principals, valid_after=after,
                                        valid_before=before)
    return bytes(cert.public_data)


def trust(tmp_path: Path, text: str, address: str = "web1.test", port: int = 2222, alias: str | None = None) -> Trust:
    path = tmp_path / f"kh{len(list(tmp_path.iterdir()))}"
    path.write_text(text)
    return trust_for(lookup_for(address, port, alias), [str(path)], [])


def ca_line(pattern: str = "*.test") -> str:
    return f"@cert-authority {pattern} {CA.export_public_key().decode().strip()}\n"


def test_certificate_failures_are_named_and_fall_back_to_the_listed_key(tmp_path: Path) -> None:
    plain = bytes(HOST_KEY.public_data)
    now = time.time()
    good = decide(trust(tmp_path, ca_line()), certificate(["web1.test"]), now)
    assert good.accepted and good.kind == "ca"
    wrong = decide(trust(tmp_path, ca_line()), certificate(["db.test"]), now)
    assert (wrong.accepted, wrong.kind) == (False, "principal") and "names db.test, not web1.test" in wrong.reason
    assert "do not add" in wrong.hint
    expired = decide(trust(tmp_path, ca_line()), certificate(["web1.test"], (1, 2)), now)
    assert expired.kind == "expired" and "expired at 1970-01-01T00:00:02Z" in expired.reason
    listed = decide(trust(tmp_path, ca_line() + f"web1.test {LINE_KEY}\n"), certificate(["db.test"]), now)
    assert (listed.accepted, listed.kind, listed.key_data) == (True, "fallback", plain)
    other_ca = decide(trust(tmp_path, ca_line()), certificate(["web1.test"], ca=OTHER_KEY), now)
    assert other_ca.kind == "untrusted-ca" and "which no @cert-authority line for [web1.test]:2222" in other_ca.reason


def test_asyncssh_is_given_a_superset_of_what_the_decision_accepts(tmp_path: Path) -> None:
    """asyncssh re-checks what proofbot accepted: its sets hold every key and CA the decision can accept
    (under the port and without it) and only revocations the decision always honours."""
    other = OTHER_KEY.export_public_key().decode().strip()
    decided = trust(tmp_path, ca_line("[web1.test]:*") + f"web1.test {LINE_KEY}\n@revoked web1.test {other}\n"
                    f"@revoked [web1.test]:2222 {other}\n")
    keys, cas, revoked = decided.asyncssh_known_hosts()
    assert [k.public_data for k in keys] == [HOST_KEY.public_data]
    assert [k.public_data for k in cas] == [CA.public_data]
    assert [k.public_data for k in revoked] == [OTHER_KEY.public_data]  # the line under the port only


def test_host_key_algorithms_are_ordered_as_openssh_orders_them(tmp_path: Path) -> None:
    ecdsa = asyncssh.generate_private_key("ecdsa-sha2-nistp256").export_public_key().decode().strip()
    assert trust(tmp_path, f"[web1.test]:2222 {ecdsa}\n").algorithms()[:2] == [
        "ecdsa-sha2-nistp256-cert-v01@openssh.com", "ecdsa-sha2-nistp256"]  # sshconnect2.c: "prefer hostkeyalgs"
    assert trust(tmp_path, f"[web1.test]:2222 {LINE_KEY}\n").algorithms()[0] == "ssh-ed25519-cert-v01@openssh.com"
    with_ca = trust(tmp_path, f"[web1.test]:2222 {ecdsa}\n" + ca_line("*")).algorithms()
    assert with_ca.index("ecdsa-sha2-nistp256") > with_ca.index("rsa-sha2-256-cert-v01@openssh.com")
    assert "ssh-rsa" not in with_ca  # not in OpenSSH 9.2's default HostKeyAlgorithms


@pytest.mark.parametrize(("address", "expected"), [("WEB1.Test", "web1.test"), ("127.1", "127.0.0.1"),
                                                   ("FD00:0::1", "fd00::1"), ("web1.test.", "web1.test.")])
def test_the_name_looked_up_is_openssh_s(address: str, expected: str) -> None:
    assert lookup_for(address, 22, None).name == expected
    assert lookup_for(address, 2222, "Alias").name == "alias"


@pytest.mark.parametrize(("text", "presented", "refused_as"), ids=["revoked", "principal", "changed"], argvalues=[
    (f"@revoked * {LINE_KEY}\nweb1.test {LINE_KEY}\n", "plain", "revoked"),
    (ca_line(), "wrong-principal", "principal"),
    (f"[web1.test]:2222 {OTHER_KEY.export_public_key().decode().strip()}\n", "plain", "changed"),
])
def test_no_next_step_advises_trusting_a_refused_key(text: str, presented: str, refused_as: str,
                                                     tmp_path: Path) -> None:
    """Issue 19 item 7: the verify's next step for a revoked or mismatched key never says "put it in known_hosts"."""
    key = bytes(HOST_KEY.public_data) if presented == "plain" else certificate(["other.test"])
    decision = decide(trust(tmp_path, text), key, time.time())
    assert (decision.accepted, decision.kind) == (False, refused_as)
    host = parse_inventory(yaml.safe_dump({"hosts": {"h": {"address": "web1.test", "port": 2222}}}), "i.yml").host("h")
    plan = VerifyPlan.for_host(host, None)
    step = next_step(refused_key_finding(decision), plan)
    assert step is not None and "known_hosts" in step.advice and "host key is in" not in step.advice
    assert "do not add or replace its key" in step.advice
    unknown_key = decide(trust(tmp_path, f"other.test {LINE_KEY}\n"), bytes(OTHER_KEY.public_data), time.time())
    assert unknown_key.kind == "unknown"
    unknown = next_step(refused_key_finding(unknown_key), plan)
    assert unknown is not None and "host key is in ~/.ssh/known_hosts" in unknown.advice
    # Issue 20 item 3: the choice rests on the cause as data, never on a message's words.
    words = refused_key_finding(decision).summary
    assert next_step(Finding("file:a", CheckStatus.ERROR, words), plan) is None


def refused_key_finding(decision: Decision) -> Finding:
    """The finding verify makes when proofbot refused the host key as ``decision`` says (see commands.ssh)."""
    error = HostKeyNotVerified("h (web1.test:2222): host key not verified against ~/.ssh/known_hosts: "
                               + decision.reason)
    error.__cause__ = HostKeyRefused(decision)
    said, details = cause_of(error)
    return could_not_check("file:a", said, details=details)


def test_ping_v_shows_the_name_known_hosts_is_searched_for() -> None:
    def shown(**ssh: object) -> dict[str, object]:
        document = {"ssh": ssh, "hosts": {"h": {"address": "WEB1.test", "port": 2222}}}
        return effective(parse_inventory(yaml.safe_dump(document), "i.yml").host("h"))["host_key_name"]

    assert shown() == {"value": "[web1.test]:2222", "origin": "address and port"}
    assert shown(host_key_alias="Gpu-A")["value"] == "gpu-a"
