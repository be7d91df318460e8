"""Tier 2: SSH trust as fleets have it, decided by a real OpenSSH sshd: a host CA (``@cert-authority``) and
``@revoked`` in known_hosts, user certificates under ``TrustedUserCAKeys`` (and an expired one), hashed
known_hosts written by ``ssh-keyscan -H`` / ``ssh-keygen -H``, ``[host]:port`` and IPv6 entries, several
files, the operator's ssh config naming the hosts (and its ProxyJump through a real sshd), and the
ssh-agent (opt-in, never forwarded).

Every key, certificate and known_hosts file here is made by OpenSSH's own tools in the test. The hosts'
names (``ct190.labR.fleet.example``, one domain per lab so parallel runs never share a name) resolve
through lines this module adds to /etc/hosts (and removes, under a lock).
"""

from __future__ import annotations

import fcntl
import json
import os
import re
import shutil
import signal
import subprocess
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import yaml

from commands.errors import AuthenticationFailed, BastionUnreachable, HostKeyNotVerified
from commands.inventory import Host, parse_inventory
from commands.ssh import connect
from tests.conftest import run_cli, write_inventory
from tests.lab import net
from tests.lab.common import LabHost, Scenario, make_keypair
from tests.lab.fixtures import running_lab
from tests.lab.host_ca import sign_host_key
from tests.lab.netns import NetnsHost, NetnsLab
from tests.lab.sysutil import sh

HOSTS = {"ct190": Scenario(), "ct191": Scenario()}
CA_DOMAIN = "fleet.example"  # what the CA is trusted for: `@cert-authority *.fleet.example`
SECOND_PORT = 2222
EVERY_CHECK = {"file:spec_info.py", "file:eagle_info.py", "file:server_args.py", "extra-files", "main-pid",
               "health", "cmdline", "stale-process", "probe"}


@dataclass
class Fleet:
    lab: NetnsLab
    dir: Path
    host_ca_pub: str
    user_ca: Path
    v6: dict[str, str]  # host name -> its IPv6 address
    domain: str  # the hosts' DNS domain, one per lab (labs of parallel test runs never share a name)

    def host(self, name: str) -> LabHost:
        return self.lab.hosts[name]

    def ca_known_hosts(self, extra: str = "") -> Path:
        """A known_hosts file with only the @cert-authority line (and extra)."""
        path = self.dir / f"ca_known_hosts{len(list(self.dir.glob('ca_known_hosts*')))}"
        path.write_text(f"# fleet host CA\n@cert-authority *.{CA_DOMAIN} {self.host_ca_pub}\n{extra}")
        return path


@contextmanager
def _hosts_file_locked() -> Iterator[None]:
    """Test runs in parallel (every engineer's suite) edit /etc/hosts one at a time."""
    Path("/run/proofbot-lab").mkdir(parents=True, exist_ok=True)
    with open("/run/proofbot-lab/etc-hosts.lock", "a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)


@contextmanager
def etc_hosts(names: dict[str, str]) -> Iterator[None]:
    """Names resolvable by this machine's resolver while the context lasts; only our own lines are removed."""
    tag = f"# proofbot-test-{os.getpid()}"
    with _hosts_file_locked(), open("/etc/hosts", "a", encoding="utf-8") as hosts:
        hosts.write("".join(f"{address} {name} {tag}\n" for name, address in names.items()))
    try:
        yield
    finally:
        with _hosts_file_locked():
            text = Path("/etc/hosts").read_text(encoding="utf-8")
            Path("/etc/hosts").write_text("".join(line for line in text.splitlines(keepends=True)
                                                  if not line.rstrip("\n").endswith(tag)), encoding="utf-8")


def _trust_host(host: LabHost, index: int, octet: int, domain: str, host_ca: Path, user_ca: Path) -> str:
    """Sign host's key by the CA, trust the user CA, listen on a second port and on IPv6; its IPv6 address."""
    shutil.copy(user_ca.with_name(user_ca.name + ".pub"), host.local_path("/etc/ssh/user_ca.pub"))
    v6_root, v6_host = f"fd70:7062:{octet}:{index}::1", f"fd70:7062:{octet}:{index}::2"
    assert isinstance(host, NetnsHost)
    sh(["ip", "-6", "addr", "add", f"{v6_root}/64", "dev", host.veth, "nodad"])
    host.net_run(["ip", "-6", "addr", "add", f"{v6_host}/64", "dev", "eth0", "nodad"])
    sign_host_key(host, host_ca, [f"{host.name}.{domain}"],
                  f"TrustedUserCAKeys /etc/ssh/user_ca.pub\nPort {SECOND_PORT}\nListenAddress ::\n")
    net.wait_until(f"{host.name}: sshd on 22, {SECOND_PORT} and IPv6",
                   lambda: all(net.ssh_banner(address, port).startswith(b"SSH-") for address, port in
                               ((host.address, 22), (host.address, SECOND_PORT), (v6_host, 22))),
                   time.monotonic() + 30)
    return v6_host


@pytest.fixture(scope="module")
def fleet(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Fleet]:
    with running_lab(NetnsLab, HOSTS) as lab:
        work = tmp_path_factory.mktemp("fleet")
        host_ca, user_ca = work / "host_ca", work / "user_ca"
        host_ca_pub = make_keypair(host_ca, "fleet host CA")
        make_keypair(user_ca, "fleet user CA")
        assert lab.octet is not None
        domain = f"lab{lab.octet}.{CA_DOMAIN}"
        v6 = {host.name: _trust_host(host, index, lab.octet, domain, host_ca, user_ca)
              for index, host in enumerate(lab.hosts.values())}
        with etc_hosts({f"{name}.{domain}": host.address for name, host in lab.hosts.items()}):
            yield Fleet(lab, work, host_ca_pub, user_ca, v6, domain)


def operator_config(fleet: Fleet, known_hosts: Path, extra: str = "") -> Path:
    """~/.ssh/config as an operator keeps it: the fleet's aliases, its domain, key and CA-only known_hosts."""
    config = fleet.dir / f"ssh_config{len(list(fleet.dir.glob('ssh_config*')))}"
    config.write_text(
        "Host ct19?\n"
        f"    HostName %h.{fleet.domain}\n"
        "    User root\n"
        f"    IdentityFile {fleet.lab.client_key}\n"
        f"    UserKnownHostsFile {known_hosts}\n"
        f"{extra}"
        "\nHost *\n    ServerAliveInterval 30\n")
    config.chmod(0o600)
    return config


def alias_inventory(fleet: Fleet, config: Path, **ssh: Any) -> dict[str, Any]:
    """The lab's inventory naming only the aliases: service and backups, no address, user, key or known_hosts."""
    document = fleet.lab.inventory()
    for entry in document["hosts"].values():
        del entry["address"], entry["port"]
    # Generous: a verify through a hop on a loaded 2-core machine does two handshakes.
    document["ssh"] = {"config": str(config), "connect_timeout_s": 10, "command_timeout_s": 30, **ssh}
    return document


def direct(fleet: Fleet, name: str, **ssh: Any) -> Host:
    """The host by address, with ssh values replaced by ``ssh``."""
    document = fleet.lab.inventory()
    document["ssh"].update(ssh)
    return parse_inventory(yaml.safe_dump(document), "lab.yml").host(name)


def with_hop_ssh(host: Host, **update: Any) -> Host:
    """host with update applied to the ssh settings of each of its jump hops."""
    hops = tuple(hop.model_copy(update={"ssh": hop.ssh.model_copy(update=update)}) for hop in host.ssh.jump)
    return host.model_copy(update={"ssh": host.ssh.model_copy(update={"jump": hops})})


async def runs(host: Host, argv: list[str] | None = None) -> str:
    async with connect(host) as conn:
        result = await conn.run(argv or ["id", "-un"])
        assert result.exit_status == 0, result.text
        return result.text.strip()


@pytest.mark.tier2
async def test_a_fleet_trusted_only_through_a_host_ca_and_named_only_in_ssh_config_verifies(
        fleet: Fleet, tmp_path: Path) -> None:
    config = operator_config(fleet, fleet.ca_known_hosts())
    inventory = write_inventory(tmp_path / "inventory.yml", alias_inventory(fleet, config))
    for name in HOSTS:
        run = await run_cli("verify", name, "--json", "--inventory", str(inventory), "--db", str(tmp_path / "a.db"))
        assert run.code == 0, run.stdout + run.stderr
        statuses = {check["name"]: check["status"] for check in json.loads(run.stdout)["checks"]}
        assert set(statuses) == EVERY_CHECK and set(statuses.values()) == {"pass"}, statuses
    ping = await run_cli("ping", "ct190", "-v", "--inventory", str(inventory))
    assert ping.code == 0, ping.stdout + ping.stderr
    assert f"ct190.{fleet.domain}  ← {config} line 2 (Host ct19?)" in ping.stdout


@pytest.mark.tier2
async def test_a_host_ca_that_is_not_trusted_is_refused(fleet: Fleet) -> None:
    other_ca = make_keypair(fleet.dir / "other_ca", "some other CA")
    known = fleet.dir / "other_ca_known_hosts"
    known.write_text(f"@cert-authority *.{CA_DOMAIN} {other_ca}\n")
    host = parse_inventory(yaml.safe_dump(alias_inventory(fleet, operator_config(fleet, known))), "i.yml").host("ct190")
    not_trusted = (rf"its host certificate is signed by CA SHA256:\S+, which no @cert-authority line for "
                   rf"ct190\.{re.escape(fleet.domain)} names in {re.escape(str(known))}")
    with pytest.raises(HostKeyNotVerified, match=not_trusted) as refused:
        await runs(host)
    assert "@cert-authority" in (refused.value.hint or "")


@pytest.mark.tier2
async def test_a_revoked_host_key_is_refused_though_its_ca_is_trusted(fleet: Fleet) -> None:
    revoked = fleet.host("ct191").host_key_pub.split()[:2]
    known = fleet.ca_known_hosts(extra=f"@revoked * {' '.join(revoked)}\n")
    document = alias_inventory(fleet, operator_config(fleet, known))
    inventory = parse_inventory(yaml.safe_dump(document), "i.yml")
    assert await runs(inventory.host("ct190")) == "root"
    with pytest.raises(HostKeyNotVerified, match="revoked") as refused:
        await runs(inventory.host("ct191"))
    assert "ct191" in str(refused.value) and str(known) in str(refused.value)
    assert "@revoked" in (refused.value.hint or "")


def user_cert(fleet: Fleet, name: str, validity: str, principals: str = "root") -> Path:
    """A fresh key (in no authorized_keys) with a user certificate from the fleet's user CA beside it."""
    key = fleet.dir / name
    make_keypair(key, name)
    sh(["ssh-keygen", "-q", "-s", str(fleet.user_ca), "-I", name, "-n", principals, "-V", validity,
        str(key.with_name(name + ".pub"))])
    return key


@pytest.mark.tier2
async def test_a_user_certificate_beside_its_key_or_named_in_client_certs_logs_in(fleet: Fleet) -> None:
    key = user_cert(fleet, "ops_ed25519", "-5m:+1h")
    assert await runs(direct(fleet, "ct190", client_keys=[str(key)])) == "root"
    elsewhere = fleet.dir / "certs" / "ops.cert"
    elsewhere.parent.mkdir()
    shutil.move(key.with_name(key.name + "-cert.pub"), elsewhere)
    with pytest.raises(AuthenticationFailed, match="was refused"):
        await runs(direct(fleet, "ct190", client_keys=[str(key)]))  # the key alone is in no authorized_keys
    assert await runs(direct(fleet, "ct190", client_keys=[str(key)], client_certs=[str(elsewhere)])) == "root"
    config = operator_config(fleet, fleet.ca_known_hosts(), extra=f"    CertificateFile {elsewhere}\n")
    from_config = alias_inventory(fleet, config, client_keys=[str(key)])
    host = parse_inventory(yaml.safe_dump(from_config), "i.yml").host("ct190")
    assert host.origins["client_certs"] == f"{config} line 6 (Host ct19?)"
    assert await runs(host) == "root"


@pytest.mark.tier2
async def test_an_expired_user_certificate_is_refused_with_its_date(fleet: Fleet, tmp_path: Path) -> None:
    key = user_cert(fleet, "old_ed25519", "20250101000000:20250102000000")
    with pytest.raises(AuthenticationFailed, match="expired at 2025-01-02T00:00:00Z") as refused:
        await runs(direct(fleet, "ct190", client_keys=[str(key)]))
    assert refused.value.message.startswith("ct190: user certificate ")
    early = user_cert(fleet, "early_ed25519", "20990101000000:20990102000000")
    with pytest.raises(AuthenticationFailed, match="not valid before 2099-01-01T00:00:00Z"):
        await runs(direct(fleet, "ct190", client_keys=[str(early)]))
    document = fleet.lab.inventory()
    document["ssh"]["client_keys"] = [str(key)]
    run = await run_cli("verify", "ct190", "--json", "--inventory", str(write_inventory(tmp_path / "i.yml", document)),
                        "--db", str(tmp_path / "a.db"))
    assert run.code == 3 and "expired at 2025-01-02T00:00:00Z" in run.stdout


def keyscan(fleet: Fleet, address: str, port: int, *, hashed: bool) -> str:
    """What `ssh-keyscan [-H] -p PORT ADDRESS` prints for the host's ed25519 key."""
    argv = ["ssh-keyscan", "-t", "ed25519", "-p", str(port), *(["-H"] if hashed else []), address]
    out = sh(argv).stdout
    assert out.strip(), f"ssh-keyscan printed nothing for {address}:{port}"
    return out


@pytest.mark.tier2
@pytest.mark.parametrize("port", [22, SECOND_PORT])
async def test_hashed_known_hosts_from_ssh_keyscan_and_ssh_keygen(fleet: Fleet, port: int) -> None:
    ct190 = fleet.host("ct190")
    scanned = fleet.dir / f"scanned_{port}"
    scanned.write_text(keyscan(fleet, ct190.address, port, hashed=True))
    assert scanned.read_text().startswith("|1|") and ct190.address not in scanned.read_text()
    host = direct(fleet, "ct190", known_hosts=str(scanned))
    host = host.model_copy(update={"port": port})
    assert await runs(host) == "root"
    plain = fleet.dir / f"plain_{port}"
    plain.write_text(keyscan(fleet, ct190.address, port, hashed=False))
    assert plain.read_text().startswith(ct190.address if port == 22 else f"[{ct190.address}]:{port}")
    sh(["ssh-keygen", "-H", "-f", str(plain)])
    assert ct190.address not in plain.read_text()
    hashed_by_keygen = host.ssh.model_copy(update={"known_hosts": str(plain)})
    assert await runs(host.model_copy(update={"ssh": hashed_by_keygen})) == "root"
    other = direct(fleet, "ct191", known_hosts=str(plain))
    with pytest.raises(HostKeyNotVerified):
        await runs(other.model_copy(update={"port": port}))


@pytest.mark.tier2
async def test_an_ipv6_literal_with_a_port_in_a_known_hosts_among_several_files(fleet: Fleet) -> None:
    v6 = fleet.v6["ct191"]
    scanned = fleet.dir / "v6_known_hosts"
    scanned.write_text("# written by ssh-keyscan\n" + keyscan(fleet, v6, SECOND_PORT, hashed=False))
    assert scanned.read_text().splitlines()[1].startswith(f"[{v6}]:{SECOND_PORT} ssh-ed25519 ")
    empty = fleet.dir / "empty_known_hosts"
    empty.write_text("# nothing here yet\n")
    document = fleet.lab.inventory()
    document["ssh"]["known_hosts"] = [str(empty), str(fleet.dir / "absent"), str(scanned)]
    document["hosts"]["ct191"].update(address=v6, port=SECOND_PORT)
    host = parse_inventory(yaml.safe_dump(document), "i.yml").host("ct191")
    assert await runs(host) == "root"
    only_empty = host.model_copy(update={"ssh": host.ssh.model_copy(update={"known_hosts": [str(empty)]})})
    with pytest.raises(HostKeyNotVerified, match=str(empty)):
        await runs(only_empty)


@dataclass
class Agent:
    socket: str
    process: subprocess.Popen[bytes]


@pytest.fixture
def agent(fleet: Fleet, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Agent]:
    """A real ssh-agent holding the lab's client key; SSH_AUTH_SOCK set as at an operator's terminal."""
    socket = str(tmp_path / "agent.sock")
    process = subprocess.Popen(["ssh-agent", "-D", "-a", socket], stdout=subprocess.DEVNULL,
                               stderr=subprocess.DEVNULL)
    try:
        net.wait_until("ssh-agent socket", lambda: Path(socket).exists(), time.monotonic() + 10)
        sh(["env", f"SSH_AUTH_SOCK={socket}", "ssh-add", "-q", str(fleet.lab.client_key)])
        monkeypatch.setenv("SSH_AUTH_SOCK", socket)
        yield Agent(socket, process)
    finally:
        process.send_signal(signal.SIGTERM)
        process.wait(timeout=10)


@pytest.mark.tier2
async def test_the_agent_is_used_only_when_the_inventory_says_so(fleet: Fleet, agent: Agent) -> None:
    stranger = fleet.dir / "stranger_ed25519"
    if not stranger.exists():
        make_keypair(stranger, "in no authorized_keys")
    with pytest.raises(AuthenticationFailed, match="was refused"):
        await runs(direct(fleet, "ct190", client_keys=[str(stranger)]))
    assert await runs(direct(fleet, "ct190", client_keys=[str(stranger)], agent=True)) == "root"
    assert await runs(direct(fleet, "ct190", client_keys=[], agent=True)) == "root"
    with pytest.raises(AuthenticationFailed, match="no client key to offer"):
        await runs(direct(fleet, "ct190", client_keys=[]))


@pytest.mark.tier2
async def test_the_agent_is_never_forwarded_even_when_the_ssh_config_says_forward_agent(
        fleet: Fleet, agent: Agent) -> None:
    config = operator_config(fleet, fleet.ca_known_hosts(),
                             extra="    ForwardAgent yes\n    StrictHostKeyChecking no\n")
    document = alias_inventory(fleet, config, agent=True, client_keys=[])
    host = parse_inventory(yaml.safe_dump(document), "i.yml").host("ct190")
    assert await runs(host, ["sh", "-c", "echo \"sock=${SSH_AUTH_SOCK:-none}\""]) == "sock=none"


@pytest.mark.tier2
async def test_the_configs_proxyjump_through_a_real_sshd_reaches_what_only_the_hop_can(
        fleet: Fleet, tmp_path: Path) -> None:
    """`inner` is ct190's own loopback sshd, reachable only through ct190: verify passes through the hop."""
    ct190 = fleet.host("ct190")
    inner_key = sh(["nsenter", f"--net=/run/netns/{ct190.netns}", "ssh-keyscan", "-t", "ed25519", "127.0.0.1"]).stdout
    known = fleet.ca_known_hosts(extra=inner_key)
    config = fleet.dir / "jump_config"
    config.write_text(
        "Host inner\n    HostName 127.0.0.1\n    ProxyJump ct190\n\n"
        f"Host ct19?\n    HostName %h.{fleet.domain}\n\n"
        f"Host *\n    User root\n    IdentityFile {fleet.lab.client_key}\n    UserKnownHostsFile {known}\n")
    config.chmod(0o600)
    document = alias_inventory(fleet, config)
    document["hosts"] = {"inner": document["hosts"]["ct190"]}
    inventory = write_inventory(tmp_path / "inventory.yml", document)
    run = await run_cli("verify", "inner", "--json", "--inventory", str(inventory), "--db", str(tmp_path / "a.db"))
    assert run.code == 0, run.stdout + run.stderr
    statuses = {check["name"]: check["status"] for check in json.loads(run.stdout)["checks"]}
    assert set(statuses) == EVERY_CHECK and set(statuses.values()) == {"pass"}, statuses
    host = parse_inventory(yaml.safe_dump(document), "i.yml").host("inner")
    assert [(hop.name, hop.address, hop.ssh.user) for hop in host.ssh.jump] == [
        ("ct190", f"ct190.{fleet.domain}", "root")]
    revoked = fleet.ca_known_hosts(extra=inner_key + f"@revoked * {' '.join(ct190.host_key_pub.split()[:2])}\n")
    hop_revoked = with_hop_ssh(host, known_hosts=[str(revoked)])
    bastion = re.escape(f"ct190 (ct190.{fleet.domain}:22)")
    with pytest.raises(BastionUnreachable, match=rf"^could not reach the bastion {bastion}: host key not verified "
                                                 rf"against {revoked}: its host key SHA256:\S+ is marked @revoked "
                                                 rf"in {revoked}:\d+ "):
        await runs(hop_revoked)


@pytest.mark.tier2
async def test_a_hop_logs_in_with_its_own_identity_file_and_known_hosts_from_the_config(fleet: Fleet) -> None:
    """The hop (as nobody, with a certificate only for nobody, its key checked through the CA) and the host
    (as root, with the lab key, its key from ssh-keyscan) each need their own block's values."""
    ct190 = fleet.host("ct190")
    inner_known = fleet.dir / "inner_known_hosts"
    inner_known.write_text(
        sh(["nsenter", f"--net=/run/netns/{ct190.netns}", "ssh-keyscan", "-t", "ed25519", "127.0.0.1"]).stdout)
    nobody_key = user_cert(fleet, "nobody_ed25519", "-5m:+1h", principals="nobody")
    hop_known = fleet.ca_known_hosts()
    config = fleet.dir / "hop_config"
    config.write_text(
        f"Host inner\n    HostName 127.0.0.1\n    ProxyJump ct190\n    User root\n"
        f"    IdentityFile {fleet.lab.client_key}\n    UserKnownHostsFile {inner_known}\n\n"
        f"Host ct19?\n    HostName %h.{fleet.domain}\n    User nobody\n"
        f"    IdentityFile {nobody_key}\n    UserKnownHostsFile {hop_known}\n")
    config.chmod(0o600)
    document = alias_inventory(fleet, config)
    document["hosts"] = {"inner": document["hosts"]["ct190"]}
    host = parse_inventory(yaml.safe_dump(document), "i.yml").host("inner")
    (hop,) = host.ssh.jump
    assert (hop.ssh.user, hop.ssh.client_keys, hop.ssh.known_hosts) == (
        "nobody", [str(nobody_key)], [str(hop_known)])
    assert (host.ssh.user, host.ssh.client_keys) == ("root", [str(fleet.lab.client_key)])
    assert await runs(host) == "root"
    bastion = re.escape(f"ct190 (ct190.{fleet.domain}:22)")
    with_host_values = with_hop_ssh(host, client_keys=host.ssh.client_keys, known_hosts=host.ssh.known_hosts)
    with pytest.raises(BastionUnreachable, match=rf"^could not reach the bastion {bastion}: host key not verified "
                                                 rf"against {inner_known}: "):
        await runs(with_host_values)  # the host's known_hosts does not know the hop
    host_keys_only = with_hop_ssh(host, client_keys=host.ssh.client_keys)
    with pytest.raises(BastionUnreachable, match=rf"^could not reach the bastion {bastion}: user nobody was refused"):
        await runs(host_keys_only)  # the lab key is root's only
