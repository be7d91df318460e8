"""Differential: proofbot's ssh config resolution against OpenSSH 9.2's own ``ssh -G``, on the same inputs.

Each case (tests/ssh_config_cases.py) runs ``ssh -G [-l U] [-p P] [-i K] [-o UserKnownHostsFile=…] -F CONFIG
NAME`` and proofbot's resolution of an inventory naming NAME with the same values (``ssh.user``, ``port``,
``ssh.client_keys``, ``ssh.known_hosts``, ``ssh.config``); they must agree on every value proofbot takes
(host name, port, user, identity and certificate files, user and global known_hosts, HostKeyAlias,
ProxyJump), or proofbot must refuse naming the file and line. Cases with canonicalization run both under
``unshare -m`` with a private /etc/hosts (and an empty resolv.conf: no DNS), proofbot through
``proofbot inventory show --json``. Hypothesis adds Host pattern lists.
"""

from __future__ import annotations

import json
import os
import pwd
import re
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from commands.errors import InventoryError
from commands.inventory import parse_inventory
from commands.ssh_config.keywords import CHOICES, INTEGER, ONE_WORD, TIME
from commands.ssh_config.show import describe
from commands.ssh_config.tokens import LocalUser, tilde
from tests.ssh_config_cases import CASES, Case

pytestmark = pytest.mark.skipif(shutil.which("ssh") is None and os.environ.get("CI") != "true",
                                reason="needs OpenSSH's ssh client")
PROOFBOT = str(Path(sys.executable).with_name("proofbot"))
UNSHARE = 'mount --bind "$1" /etc/hosts && mount --bind "$2" /etc/resolv.conf && shift 2 && exec "$@"'
LINE = re.compile(r"\S+ line \d+")


def _lay_out(case: Case, directory: Path) -> Path:
    for relative, text in case.files.items():
        path = directory / relative
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text.replace("{d}", str(directory)))
        path.chmod(case.modes.get(relative, 0o600))
        if relative in case.owners:
            os.chown(path, pwd.getpwnam(case.owners[relative]).pw_uid, -1)
    for key in case.keys:
        (directory / key).write_text("not read: -i only needs the file to exist\n")
        (directory / key).chmod(0o600)
    config = directory / "config"
    config.write_text(case.config.replace("{d}", str(directory)))
    config.chmod(0o600)
    return config


def _wrapped(case: Case, directory: Path, argv: list[str]) -> list[str]:
    if case.hosts is None:
        return argv
    (directory / "hosts").write_text(case.hosts)
    (directory / "resolv.conf").write_text("")
    return ["unshare", "-m", "sh", "-c", UNSHARE, "sh", str(directory / "hosts"), str(directory / "resolv.conf"),
            *argv]


def _environment(case: Case, directory: Path) -> dict[str, str]:
    env = {**os.environ, **case.env}
    if case.home:
        env["HOME"] = str(directory)
    return env


def ssh_g(case: Case, directory: Path, config: Path) -> tuple[int, dict[str, list[str]], str]:
    argv = ["ssh", "-G"]
    if case.user:
        argv += ["-l", case.user]
    if case.port:
        argv += ["-p", str(case.port)]
    for key in case.keys:
        argv += ["-i", str(directory / key)]
    if case.known is not None:
        argv += ["-o", "UserKnownHostsFile=" + " ".join(path.replace("{d}", str(directory)) for path in case.known)]
    argv += ["-F", str(config), case.name]
    done = subprocess.run(_wrapped(case, directory, argv), capture_output=True, text=True, timeout=30,
                          env=_environment(case, directory), stdin=subprocess.DEVNULL, check=False)
    values: dict[str, list[str]] = {}
    for line in done.stdout.splitlines():
        key, _, value = line.partition(" ")
        values.setdefault(key, []).append(value)
    return done.returncode, values, done.stderr


def inventory(case: Case, directory: Path, config: Path) -> dict[str, Any]:
    ssh: dict[str, Any] = {"config": str(config)}
    if case.user:
        ssh["user"] = case.user
    if case.keys:
        ssh["client_keys"] = [str(directory / key) for key in case.keys]
    if case.known is not None:
        ssh["known_hosts"] = [path.replace("{d}", str(directory)) for path in case.known]
    entry: dict[str, Any] = {"port": case.port} if case.port else {}
    return {"ssh": ssh, "hosts": {case.name: entry}}


def proofbot(case: Case, directory: Path, config: Path, monkeypatch: pytest.MonkeyPatch) -> dict[str, Any]:
    """``inventory show --json``'s object (in-process ``describe`` unless the case needs its own /etc/hosts)."""
    document = inventory(case, directory, config)
    if case.hosts is not None:
        path = directory / "inventory.yml"
        path.write_text(yaml.safe_dump(document))
        argv = [PROOFBOT, "inventory", "show", case.name, "--json", "--inventory", str(path)]
        done = subprocess.run(_wrapped(case, directory, argv), capture_output=True, text=True, timeout=60,
                              env=_environment(case, directory), check=False)
        shown: dict[str, Any] = json.loads(done.stdout)
        return shown
    for key, value in case.env.items():
        monkeypatch.setenv(key, value)
    if case.home:
        monkeypatch.setenv("HOME", str(directory))
    try:
        host = parse_inventory(yaml.safe_dump(document), "inv.yml").host(case.name)
    except InventoryError as exc:
        return {"error": {"message": exc.message}}
    return describe(host)


def _jump_spec(values: dict[str, list[str]]) -> str | None:
    written = values.get("proxyjump", [None])[0]
    return written


def compare(values: dict[str, list[str]], shown: dict[str, Any]) -> None:
    """Every value proofbot takes, as ssh -G printed it (identity/certificate/global files ~-expanded as ssh does
    later; ssh -G prints them before that)."""
    local = LocalUser.current()
    ssh = {key: entry["value"] for key, entry in shown["ssh"].items()}
    single = {key: values[key][0] for key in ("hostname", "port", "user")}
    assert (ssh["address"], str(ssh["port"]), ssh["user"]) == (single["hostname"], single["port"], single["user"])
    identities = [tilde(path, local) for path in values.get("identityfile", []) if path.lower() != "none"]
    assert ssh["identity_files"] == identities
    assert ssh["certificates"] == [tilde(path, local) for path in values.get("certificatefile", [])]
    user_files = values["userknownhostsfile"][0].split(" ")
    assert ssh["known_hosts"] == ([] if user_files == ["none"] else user_files)
    global_files = values["globalknownhostsfile"][0].split(" ")
    assert ssh["global_known_hosts"] == ([] if global_files == ["none"] else [tilde(p, local) for p in global_files])
    assert ssh["host_key_alias"] == values.get("hostkeyalias", [None])[0]
    jump = _jump_spec(values)
    assert ",".join(hop["name"] for hop in ssh["jump"]) == (jump or "")
    assert "proxycommand" not in values or values["proxycommand"] == ["none"]


@pytest.mark.parametrize("case", CASES, ids=[case.id for case in CASES])
def test_proofbot_resolves_as_ssh_G_or_refuses_with_the_line(case: Case, tmp_path: Path,
                                                            monkeypatch: pytest.MonkeyPatch) -> None:
    if case.hosts is not None and os.getuid() != 0 and os.environ.get("CI") != "true":
        pytest.skip("a private /etc/hosts needs root (unshare -m)")
    directory = tmp_path / "case"
    directory.mkdir()
    config = _lay_out(case, directory)
    code, values, stderr = ssh_g(case, directory, config)
    shown = proofbot(case, directory, config, monkeypatch)
    error = shown.get("error", {}).get("message")
    if case.expect == "agree":
        assert code == 0, stderr
        assert error is None, error
        compare(values, shown)
        return
    assert error is not None, f"proofbot resolved what it must refuse: {shown}"
    assert LINE.search(error), f"the refusal names no file and line: {error}"
    assert re.search(case.refusal, error), error
    if case.expect == "both-refuse":
        assert code != 0, f"ssh -G accepted it: {values}"


@given(patterns=st.lists(st.text(alphabet="wb1*?!,", min_size=1, max_size=4), min_size=1, max_size=3),
       name=st.sampled_from(["web1", "b1", "w", "wb", "1"]))
@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
def test_host_pattern_lists_match_as_ssh_matches_them(patterns: list[str], name: str, tmp_path: Path) -> None:
    """Whitespace-separated Host patterns with * ? ! and commas: which block applies, as ssh decides."""
    case = Case("hypothesis", f"Host {' '.join(patterns)}\n    User matched\nHost *\n    User other\n", name=name)
    directory = tmp_path / f"h{abs(hash((tuple(patterns), name)))}"
    directory.mkdir(exist_ok=True)
    config = _lay_out(case, directory)
    code, values, stderr = ssh_g(case, directory, config)
    assert code == 0, stderr
    host = parse_inventory(yaml.safe_dump(inventory(case, directory, config)), "inv.yml").host(name)
    assert host.ssh.user == values["user"][0], (patterns, name)


def test_there_are_at_least_forty_configs() -> None:
    assert len(CASES) >= 40
    assert {case.expect for case in CASES} == {"agree", "refuse", "both-refuse"}


@pytest.mark.parametrize("keyword", sorted(ONE_WORD))
def test_values_of_options_proofbot_does_not_take_are_rejected_as_ssh_rejects_them(keyword: str,
                                                                                    tmp_path: Path) -> None:
    """ssh refuses a whole config for one bad value, even in a block that does not apply: so does proofbot."""
    valid = sorted(CHOICES.get(keyword, {"3"} if keyword in INTEGER else {"5m"} if keyword in TIME else {"x"}))
    for value in [*valid, "bogus%", "a b"]:
        case = Case("value", f"Host other\n    {keyword} {value}\n", name="web1")
        config = _lay_out(case, tmp_path)
        code, _, _ = ssh_g(case, tmp_path, config)
        try:
            parse_inventory(yaml.safe_dump(inventory(case, tmp_path, config)), "inv.yml")
            refused = False
        except InventoryError as exc:
            refused = bool(LINE.search(exc.message))
        assert refused == (code != 0), (keyword, value)
