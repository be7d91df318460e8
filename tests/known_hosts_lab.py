"""Loopback sshd's with chosen host keys and host certificates, and the known_hosts cases run against them.

Every key and certificate is made by ``ssh-keygen`` (``-s`` CA, ``-h``, ``-n`` principals, ``-V``
validity). ``run_cases`` runs in a private mount namespace (``unshare -m``) whose /etc/hosts makes
the cases' names resolve to 127.0.0.1, so it is a separate process: ``python -m
tests.known_hosts_lab SPEC OUT`` runs each case through the real ``ssh`` and through proofbot's own
connect, and writes what each did.
"""

from __future__ import annotations

import asyncio
import base64
import hmac
import json
import os
import socket
import subprocess
import sys
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import yaml

NAMES = ["web1.test", "web2.test", "db.test", "other.test"]  # all resolve to 127.0.0.1 in the namespace
# sshd name -> (CA that signs its host key, principals, validity, extra ssh-keygen args); None: no certificate
SERVERS: dict[str, tuple[str, str, str, list[str]] | None] = {
    "plain": None,
    "good": ("ca1", "web1.test,web2.test", "-1h:+52w", []),
    "wrongp": ("ca1", "other.test", "-1h:+52w", []),
    "expired": ("ca1", "web1.test", "20200101:20200102", []),
    "future": ("ca1", "web1.test", "20990101:21000101", []),
    "otherca": ("ca2", "web1.test", "-1h:+52w", []),
    "noprinc": ("ca1", "", "-1h:+52w", []),
    "sha1ca": ("ca3", "web1.test", "-1h:+52w", ["-t", "ssh-rsa"]),
}


@dataclass
class Case:
    """known_hosts text (``{KEY:plain}`` a key line, ``{BLOB:plain}`` its base64 alone, ``{PORT:plain}`` a
    port, ``{HASH:name}`` a hashed name), the server, the name and alias to connect with, and what OpenSSH 9.2 does."""

    id: str
    user: str
    server: str
    ssh_connects: bool
    global_: str = ""
    name: str = "web1.test"
    alias: str | None = None
    stricter: bool = False  # proofbot refuses on purpose where OpenSSH connects (said in the reason)
    says: str = ""  # what proofbot's refusal must name (issue 19 item 7: what the failure is)


def sh(argv: list[str]) -> str:
    return subprocess.run(argv, check=True, capture_output=True, text=True, timeout=60).stdout


def keygen(path: Path, kind: str = "ed25519") -> str:
    sh(["ssh-keygen", "-q", "-t", kind, "-N", "", "-C", path.name, "-f", str(path)])
    return " ".join(path.with_suffix(".pub").read_text().split()[:2])


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@dataclass
class Lab:
    dir: Path
    keys: dict[str, str]  # "plain", "good", … and "ca1".."ca3", "client": public key lines
    ports: dict[str, int]
    client_key: Path
    processes: list[subprocess.Popen[bytes]]

    def render(self, text: str) -> str:
        for name, key in self.keys.items():
            text = text.replace(f"{{KEY:{name}}}", key).replace(f"{{BLOB:{name}}}", key.split()[1])
        for name, port in self.ports.items():
            text = text.replace(f"{{PORT:{name}}}", str(port))
        while "{HASH:" in text:
            start = text.index("{HASH:")
            end = text.index("}", start)
            text = text[:start] + hashed(text[start + 6:end]) + text[end + 1:]
        return text

    def stop(self) -> None:
        for process in self.processes:
            process.terminate()
        for process in self.processes:
            try:
                process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait(timeout=10)


def hashed(name: str) -> str:
    """A HashKnownHosts name (|1|salt|hmac-sha1), as ssh-keygen -H writes it."""
    salt = os.urandom(20)
    digest = hmac.digest(salt, name.encode(), "sha1")
    return f"|1|{base64.b64encode(salt).decode()}|{base64.b64encode(digest).decode()}"


def start_lab(directory: Path) -> Lab:
    """One sshd per entry of SERVERS on 127.0.0.1, each with its own host key (and certificate)."""
    os.makedirs("/run/sshd", mode=0o755, exist_ok=True)  # sshd's privilege separation directory
    keys = {"client": keygen(directory / "client")}
    (directory / "authorized_keys").write_text(keys["client"] + "\n")
    for ca, kind in (("ca1", "ed25519"), ("ca2", "ed25519"), ("ca3", "rsa")):
        keys[ca] = keygen(directory / ca, kind)
    lab = Lab(directory, keys, {}, directory / "client", [])
    try:
        for server, cert in SERVERS.items():
            key = directory / f"{server}_key"
            keys[server] = keygen(key)
            lines = [f"Port {free_port()}", "ListenAddress 127.0.0.1", f"HostKey {key}", "PidFile none",
                     f"AuthorizedKeysFile {directory / 'authorized_keys'}", "StrictModes no", "UsePAM no",
                     "PermitRootLogin prohibit-password", "PasswordAuthentication no",
                     "KbdInteractiveAuthentication no", "LogLevel ERROR", "MaxStartups 100"]
            if cert is not None:
                ca, principals, validity, extra = cert
                sh(["ssh-keygen", "-q", "-s", str(directory / ca), "-I", f"{server}-host", "-h",
                    *(["-n", principals] if principals else []), "-V", validity, *extra, str(key) + ".pub"])
                lines.append(f"HostCertificate {key}-cert.pub")
            config = directory / f"{server}_sshd_config"
            config.write_text("\n".join(lines) + "\n")
            lab.ports[server] = int(lines[0].split()[1])
            with (directory / f"{server}_sshd.log").open("wb") as log:
                lab.processes.append(subprocess.Popen(["/usr/sbin/sshd", "-D", "-e", "-f", str(config)],
                                                      stdout=log, stderr=log))
        deadline = time.monotonic() + 20
        for server, port in lab.ports.items():
            while not _listening(port):
                if time.monotonic() > deadline:
                    raise AssertionError(f"sshd {server} not listening on 127.0.0.1:{port} within 20 s: "
                                         + (directory / f"{server}_sshd.log").read_text()[-500:])
                time.sleep(0.02)
    except BaseException:
        lab.stop()
        raise
    return lab


def _listening(port: int) -> bool:
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=1):
            return True
    except OSError:
        return False


def write_case_files(lab: Lab, case: Case) -> dict[str, Any]:
    """The case's known_hosts files, and what both clients are given."""
    user = lab.dir / f"{case.id}.known_hosts"
    glob = lab.dir / f"{case.id}.global_known_hosts"
    user.write_text(lab.render(case.user))
    glob.write_text(lab.render(case.global_))
    return {"id": case.id, "name": case.name, "port": lab.ports[case.server], "alias": case.alias,
            "user_file": str(user), "global_file": str(glob), "client_key": str(lab.client_key)}


def run_in_namespace(lab: Lab, cases: list[Case]) -> dict[str, dict[str, Any]]:
    """Every case through ssh and proofbot, in a mount namespace where NAMES resolve to 127.0.0.1."""
    hosts = lab.dir / "hosts"
    hosts.write_text("127.0.0.1 localhost " + " ".join(NAMES) + "\n")
    spec = lab.dir / "spec.json"
    out = lab.dir / "out.json"
    spec.write_text(json.dumps([write_case_files(lab, case) for case in cases]))
    script = 'mount --bind "$1" /etc/hosts && shift && exec "$@"'
    root = Path(__file__).resolve().parent.parent
    done = subprocess.run(["unshare", "-m", "sh", "-c", script, "sh", str(hosts), sys.executable, "-m",
                           "tests.known_hosts_lab", str(spec), str(out)], cwd=root, capture_output=True,
                          text=True, timeout=300)
    if done.returncode != 0:
        raise AssertionError(f"the case runner failed ({done.returncode}): {done.stderr[-2000:]}")
    results: dict[str, dict[str, Any]] = json.loads(out.read_text())
    return results


def _ssh(case: dict[str, Any]) -> dict[str, Any]:
    argv = ["ssh", "-F", "/dev/null", "-o", "BatchMode=yes", "-o", "StrictHostKeyChecking=yes",
            "-o", f"UserKnownHostsFile={case['user_file']}", "-o", f"GlobalKnownHostsFile={case['global_file']}",
            "-o", "UpdateHostKeys=no", "-o", f"IdentityFile={case['client_key']}", "-o", "IdentitiesOnly=yes",
            "-o", "ConnectTimeout=10", "-l", "root", "-p", str(case["port"])]
    if case["alias"]:
        argv += ["-o", f"HostKeyAlias={case['alias']}"]
    done = subprocess.run([*argv, case["name"], "true"], capture_output=True, text=True, timeout=60,
                          stdin=subprocess.DEVNULL)
    return {"connects": done.returncode == 0, "said": done.stderr.strip()[-600:]}


async def _proofbot(case: dict[str, Any]) -> dict[str, Any]:
    from commands.errors import ProofbotError
    from commands.inventory import parse_inventory
    from commands.ssh import connect

    ssh: dict[str, Any] = {"known_hosts": case["user_file"], "global_known_hosts": [case["global_file"]],
                           "client_keys": [case["client_key"]], "connect_timeout_s": 10}
    if case["alias"]:
        ssh["host_key_alias"] = case["alias"]
    document = {"ssh": ssh, "hosts": {"h": {"address": case["name"], "port": case["port"]}}}
    host = parse_inventory(yaml.safe_dump(document), f"{case['id']}.yml").host("h")
    try:
        async with connect(host) as conn:
            result = await conn.run(["true"])
        return {"connects": result.exit_status == 0, "said": "", "error": ""}
    except ProofbotError as exc:
        return {"connects": False, "said": str(exc), "error": type(exc).__name__}


async def _main(cases: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    results: dict[str, dict[str, Any]] = {}
    for case in cases:
        ssh = await asyncio.to_thread(_ssh, case)
        results[case["id"]] = {"ssh": ssh, "proofbot": await _proofbot(case), "port": case["port"]}
    return results


if __name__ == "__main__":
    Path(sys.argv[2]).write_text(json.dumps(asyncio.run(_main(json.loads(Path(sys.argv[1]).read_text()))), indent=1))


__all__ = ["Case", "Lab", "asdict", "run_in_namespace", "start_lab"]
