"""Benchmark: resolving hosts through an operator's ssh config, against OpenSSH's ``ssh -G`` and asyncssh's parser.

No root needed. Run: .venv/bin/python -m bench.ssh_config_bench [--hosts 500] [--before /work/main]
Lays out a ~2,000-line config with 30 Included files (one block per host, Match lines, defaults),
then prints, per host and for all hosts: proofbot's resolution (commands/ssh_config), ``ssh -G``
(one process per host, the peer) and asyncssh's own config parser (what proofbot used before);
and the load time of a 500-host inventory naming those hosts (and of one without ssh.config), with
this tree and, given ``--before``, with another checkout's code (the parent commit's, say).
"""

from __future__ import annotations

import argparse
import getpass
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import yaml

from commands.ssh_config.resolve import CommandLine, resolve

INCLUDES = 30


def lay_out(directory: Path, hosts: int) -> tuple[Path, list[str]]:
    """The config and the host names: ~2,000 lines over a main file and 30 Included ones."""
    names = [f"gpu{index:03d}" for index in range(hosts)]
    included = directory / "conf.d"
    included.mkdir()
    (directory / "known_hosts").write_text("")
    per_file = -(-hosts // INCLUDES)
    for part in range(INCLUDES):
        lines = []
        for name in names[part * per_file:(part + 1) * per_file]:
            number = names.index(name)
            lines += [f"Host {name} {name}.fleet", f"    HostName 10.{number // 250}.{number % 250}.7",
                      f"    Port {2200 + number % 7}", "# rack and owner notes"]
        lines += [f"Match host 10.{part}.* user ops", f"    IdentityFile {directory}/rack{part}_key", ""]
        path = included / f"{part:02d}-rack.conf"
        path.write_text("\n".join(lines) + "\n")
        path.chmod(0o600)
    main = ["# the operator's config", f"Include {included}/*.conf", "", "Host bastion",
            "    HostName 10.255.0.1", "", "Host gpu* !bastion", "    ProxyJump ops@bastion", "",
            "Host *", "    User ops", f"    IdentityFile {directory}/fleet_key",
            f"    UserKnownHostsFile {directory}/known_hosts", "    ServerAliveInterval 30", ""]
    config = directory / "ssh_config"
    config.write_text("\n".join(main) + "\n")
    config.chmod(0o600)
    return config, names


def per_host(function: object, names: list[str]) -> list[float]:
    times = []
    for name in names:
        started = time.perf_counter()
        function(name)  # type: ignore[operator]
        times.append(time.perf_counter() - started)
    return times


def asyncssh_parser(config: Path) -> object:
    from asyncssh.config import SSHClientConfig  # the parser proofbot used before (before commands/ssh_config/)

    user = getpass.getuser()
    return lambda name: SSHClientConfig.load(None, [config], False, False, False, user, (), name, ())


def ssh_g(config: Path) -> object:
    return lambda name: subprocess.run(["ssh", "-G", "-F", str(config), name], capture_output=True, check=True,
                                       stdin=subprocess.DEVNULL, timeout=30)


LOAD = ("import sys, time; from pathlib import Path; from commands.inventory import load_inventory; "
        "started = time.perf_counter(); load_inventory(Path(sys.argv[1])); print(time.perf_counter() - started)")


def load_s(tree: Path, inventory: Path, repeats: int) -> float:
    """The median wall time of load_inventory in a fresh process on tree's code (its imports not counted)."""
    env = {**os.environ, "PYTHONPATH": str(tree)}
    runs = [float(subprocess.run([sys.executable, "-c", LOAD, str(inventory)], capture_output=True, text=True,
                                 check=True, env=env, cwd=tree, timeout=600).stdout) for _ in range(repeats)]
    return statistics.median(runs)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--hosts", type=int, default=500)
    parser.add_argument("--before", type=Path, help="another checkout to time inventory load with (e.g. main)")
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="ssh-config-bench-") as temp:
        directory = Path(temp)
        config, names = lay_out(directory, args.hosts)
        lines = sum(len(path.read_text().splitlines()) for path in [config, *directory.glob("conf.d/*")])
        print(f"config: {lines} lines, {INCLUDES} Included files, {len(names)} hosts")
        cold = per_host(lambda name: resolve(str(config), name, CommandLine()), names[:1])[0]
        ours = per_host(lambda name: resolve(str(config), name, CommandLine()), names)
        theirs = per_host(asyncssh_parser(config), names)
        peer = per_host(ssh_g(config), names)
        print(f"proofbot: first host {cold * 1e3:.1f} ms (files read and split), then "
              f"{statistics.median(ours) * 1e3:.2f} ms per host; {sum(ours):.2f} s for {len(names)}")
        print(f"ssh -G:   {statistics.median(peer) * 1e3:.2f} ms per host; {sum(peer):.2f} s for {len(names)}; "
              f"proofbot/ssh -G = {statistics.median(ours) / statistics.median(peer):.2f}")
        print(f"asyncssh: {statistics.median(theirs) * 1e3:.2f} ms per host; {sum(theirs):.2f} s; "
              f"proofbot/asyncssh = {statistics.median(ours) / statistics.median(theirs):.2f}")
        key = directory / "fleet_key"
        key.write_text("")
        key.chmod(0o600)
        for label, document in (
                ("with ssh.config", {"ssh": {"config": str(config)}, "hosts": {name: {} for name in names}}),
                ("without ssh.config", {"ssh": {"known_hosts": str(directory / "known_hosts"),
                                                "client_keys": [str(key)]},
                                        "hosts": {name: {"address": f"10.0.{i % 250}.{i // 250}"}
                                                  for i, name in enumerate(names)}})):
            inventory = directory / "inventory.yml"
            if label == "with ssh.config":  # the hop's block: main's parser needs none, ours resolves it too
                document["ssh"]["known_hosts"] = str(directory / "known_hosts")
            inventory.write_text(yaml.safe_dump(document))
            now = load_s(Path(__file__).resolve().parents[1], inventory, args.repeats)
            before = f", before ({args.before}): {load_s(args.before, inventory, args.repeats):.2f} s" \
                if args.before else ""
            print(f"inventory load, {len(names)} hosts {label}: {now:.2f} s{before}")


if __name__ == "__main__":
    main()
