"""Differential: ``Ciphers`` resolved by proofbot (commands/ssh_config/ciphers.py) against OpenSSH 9.2's ``ssh -G``,
on the same values: the list ssh would offer, or the error ssh stops with (a bad spec on any line, applying or not;
"invalid argument" where nothing is left); then what proofbot does with it at load (refuses another set, naming
the line)."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from commands.errors import InventoryError
from commands.inventory import parse_inventory
from commands.ssh.ciphers import CIPHERS
from commands.ssh_config.ciphers import ALL, DEFAULT, bad_spec, effective

pytestmark = pytest.mark.skipif(shutil.which("ssh") is None and os.environ.get("CI") != "true",
                                reason="needs OpenSSH's ssh client")

SPECS = [
    "aes128-ctr", "aes256-gcm@openssh.com,aes128-gcm@openssh.com", "+aes128-cbc", "+3des-cbc,aes128-cbc",
    "^aes256-ctr,aes128-cbc", "^aes128-gcm@openssh.com", "-aes*-ctr", "-chacha20-poly1305@openssh.com",
    "-chacha20-poly1305@openssh.com,aes128-gcm@openssh.com", "-*", "-", "-!aes*", "-*cbc", "-aes???-ctr",
    "aes128-ctr,aes128-ctr", "aes128-ctr,,bogus", "aes128-ctr,,aes256-ctr", "aes128-ctr,,aes*", "aes128-ctr,,!aes*",
    ",aes128-ctr", "aes128-ctr,", "+aes128-cbc,,3des-cbc", "^aes128-cbc,,3des-cbc", "+aes128-cbc,,*",
    "^aes256-gcm@openssh.com,,*cbc", "-aes128-ctr,,aes256-ctr", "+chacha20-poly1305@openssh.com",
    "^chacha20-poly1305@openssh.com", "AES128-CTR", "+", "^", "none", "aes*", "bogus", "+bogus",
    "aes128-ctr,bogus", "3des-cbc,aes128-cbc,aes192-cbc,aes256-cbc", ",bogus", ",aes*", ",",
    "aes128-gcm@openssh.com,aes256-gcm@openssh.com,chacha20-poly1305@openssh.com,aes128-ctr,aes192-ctr,aes256-ctr",
]


def ssh_g(spec: str, tmp_path: Path) -> tuple[str, tuple[str, ...] | None]:
    """(what ssh said on stderr, the ciphers it prints or None when it stopped or printed none)."""
    config = tmp_path / "config"
    config.write_text(f"Host *\n  Ciphers {spec}\n")
    done = subprocess.run(["ssh", "-G", "-F", str(config), "h"], capture_output=True, text=True, timeout=30,
                          check=False)
    for line in done.stdout.splitlines():
        if line.startswith("ciphers "):
            return done.stderr, tuple(filter(None, line.split(" ", 1)[1].split(",")))
    return done.stderr, None


def ours(spec: str) -> tuple[str, ...] | str:
    """proofbot's list, or its error text."""
    problem = bad_spec(spec)
    if problem is not None:
        return problem
    try:
        return effective(spec)
    except ValueError as exc:
        return str(exc)


def agree(spec: str, tmp_path: Path) -> None:
    stderr, offered = ssh_g(spec, tmp_path)
    mine = ours(spec)
    if offered is not None and "invalid argument" not in stderr:
        assert mine == offered, (spec, stderr)
    elif "Bad SSH2 cipher spec" in stderr:
        assert mine == f"Bad SSH2 cipher spec '{spec}'.", (spec, stderr)
    else:
        assert isinstance(mine, str) and "ciphers: invalid argument" in mine and "invalid argument" in stderr, \
            (spec, stderr, mine)


@pytest.mark.parametrize("spec", SPECS)
def test_ciphers_resolve_as_ssh_G_resolves_them(spec: str, tmp_path: Path) -> None:
    agree(spec, tmp_path)


_NAME = st.sampled_from([*ALL, "*", "aes*", "*-ctr", "*gcm*", "?es128-ctr", "!aes*", "", "bogus", "AES128-CTR"])


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(prefix=st.sampled_from(["", "+", "-", "^"]), names=st.lists(_NAME, min_size=1, max_size=5))
def test_generated_cipher_lists_resolve_as_ssh_G_resolves_them(prefix: str, names: list[str],
                                                               tmp_path: Path) -> None:
    spec = prefix + ",".join(names)
    if not spec or " " in spec:
        return  # a missing argument is the lexer's (tests/test_ssh_config_differential.py)
    agree(spec, tmp_path)


def test_no_ciphers_line_is_openssh_default_and_proofbot_offers_that_set_gcm_first() -> None:
    assert effective(None) == DEFAULT
    assert set(CIPHERS) == set(DEFAULT) and CIPHERS[:2] == ("aes128-gcm@openssh.com", "aes256-gcm@openssh.com")


def _load(tmp_path: Path, config_text: str) -> object:
    config = tmp_path / "ssh_config"
    config.write_text(config_text)
    config.chmod(0o600)
    inventory = {"hosts": {"web1": {"address": "192.0.2.10", "ssh": {"config": str(config)}}}}
    return parse_inventory(yaml.safe_dump(inventory), "t.yml").host("web1")


@pytest.mark.parametrize("spec", ["aes256-gcm@openssh.com", "+aes128-cbc", "-chacha20-poly1305@openssh.com", "-*"])
def test_a_config_whose_ciphers_are_another_set_is_refused_naming_its_line(spec: str, tmp_path: Path) -> None:
    with pytest.raises(InventoryError) as refused:
        _load(tmp_path, f"Host web1\n  Ciphers {spec}\n")
    assert f"line 2: Ciphers {spec}" in str(refused.value) and "OpenSSH's default set" in str(refused.value)


def test_the_default_set_in_another_order_is_taken_and_a_bad_spec_anywhere_is_refused(tmp_path: Path) -> None:
    host = _load(tmp_path, "Host web1\n  Ciphers ^aes256-ctr\n")
    assert "Ciphers (" in host.origins["ignored"] and "line 2)" in host.origins["ignored"]  # type: ignore[attr-defined]
    with pytest.raises(InventoryError, match=r"line 2: Bad SSH2 cipher spec 'aes\*'"):
        _load(tmp_path, "Host elsewhere\n  Ciphers aes*\n")
