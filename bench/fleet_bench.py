"""Benchmark: proofbot's verify against the floor, Ansible and a shell loop, on 1 and 20 hosts, and at scale.

Needs root (it starts namespace hosts, see tests/lab). Run:

    .venv/bin/python -m bench.fleet_bench [--hosts 20] [--rtt-ms 50] [--repeats 3] [--scale 1,20,100,500]

1. One host, whole process, at +RTT: ``proofbot verify HOST`` in a fresh process against the
   floor (bench/floor_child.py: a fresh Python process, one asyncssh connection, one batched
   exec of the same work).
2. N namespace hosts (real OpenSSH + supervisord) at +RTT: ``proofbot verify all``, the
   floor on N hosts, Ansible (bench/.venv-ansible, installed here on first use:
   SSH multiplexing, pipelining, forks = N, no fact gathering; one task per check) and a
   bash loop of one ``ssh`` per check per host.
3. Scale on tier 1 (in-process asyncssh servers, a few processes): wall time and peak RSS of
   the proofbot process at each size.

Every tool's wall time is a fresh process's, from spawn to exit; the median of --repeats
after one warm-up run. The delay is a userspace proxy per host (tests/lab/proxy.py, half the
added RTT each way). Network: only loopback and the namespace hosts it creates.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import resource
import secrets
import shlex
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from commands.checks.check import Fact
from commands.checks.file_times import FILE_TIMES
from commands.inventory import Host, parse_inventory
from commands.ssh.batch import batch_script  # the exact script proofbot's run_batch sends
from commands.verify import VerifyPlan
from commands.verify.operation import host_batch
from tests.lab import require_root_netns
from tests.lab.common import make_keypair
from tests.lab.netns import NetnsLab
from tests.lab.proxy import DelayProxy

REPO = Path(__file__).resolve().parent.parent
PYTHON = sys.executable
ANSIBLE_VENV = REPO / "bench" / ".venv-ansible"
RUNTIME_VENV = REPO / "bench" / ".venv-runtime"
SCALE_SHARD = 125  # in-process servers per serving process


@dataclass
class Run:
    wall_s: float
    rss_mb: float
    cpu_s: float  # user + system, this child and the children it waited for (ssh, for the loop)
    code: int
    out: str
    err: str
    machine_cpu_s: float = 0.0  # every process on the machine meanwhile: the hosts' side too (/proc/stat)


def machine_busy_s() -> float:
    """CPU seconds the whole machine has spent busy since boot (every core, /proc/stat)."""
    with open("/proc/stat") as stat:
        fields = [int(value) for value in stat.readline().split()[1:]]
    user, nice, system, _idle, _iowait, irq, softirq, steal = (fields + [0] * 8)[:8]
    return (user + nice + system + irq + softirq + steal) / os.sysconf("SC_CLK_TCK")


def run_measured(argv: Sequence[str], env: dict[str, str] | None = None, timeout_s: float = 900) -> Run:
    """Spawn argv, wait for it, and return its wall time and its own peak RSS (wait4: this child only)."""
    started, busy = time.monotonic(), machine_busy_s()
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        child = subprocess.Popen(argv, cwd=REPO, env={**os.environ, **(env or {})}, stdin=subprocess.DEVNULL,
                                 stdout=out, stderr=err)
        deadline = started + timeout_s
        while True:
            pid, status, usage = os.wait4(child.pid, os.WNOHANG)
            if pid:
                break
            if time.monotonic() > deadline:
                child.kill()
                raise TimeoutError(f"{argv[:3]} ran past {timeout_s:g} s")
            time.sleep(0.002)
        wall, machine = time.monotonic() - started, machine_busy_s() - busy
        child.returncode = os.waitstatus_to_exitcode(status)
        out.seek(0)
        err.seek(0)
        text, problems = out.read().decode(errors="replace"), err.read().decode(errors="replace")
    return Run(wall, usage.ru_maxrss / 1024, usage.ru_utime + usage.ru_stime, child.returncode, text, problems,
               machine)


def measure_runs(label: str, argv: Sequence[str], repeats: int, env: dict[str, str] | None = None,
                 warm_up: bool = True, ok: tuple[int, ...] = (0,)) -> list[Run]:
    """One warm-up run (not counted) unless told not to, then repeats; every run must exit with a code in ok."""
    runs = []
    for index in range(repeats + 1 if warm_up else repeats):
        run = run_measured(argv, env)
        if run.code not in ok:
            raise RuntimeError(f"{label}: exit {run.code}\n{run.err[-2000:]}\n{run.out[-2000:]}")
        if index or not warm_up:
            runs.append(run)
    print(f"  {label}: " + ", ".join(f"{r.wall_s:.3f}s (CPU {r.cpu_s:.2f}s)" for r in runs), flush=True)
    return runs


async def median_of(label: str, argv: Sequence[str], repeats: int, env: dict[str, str] | None = None,
                    warm_up: bool = True) -> list[Run]:
    """measure_runs in a thread: the delay proxies run on this event loop meanwhile."""
    return await asyncio.to_thread(measure_runs, label, argv, repeats, env, warm_up)


def wall(runs: list[Run]) -> float:
    return statistics.median(r.wall_s for r in runs)


# -- the same work, for each tool ---------------------------------------------------------------------

def check_commands(host: Host) -> list[tuple[str, str]]:
    """(check, shell command) as a person writes them: one per check, the PID read where it is needed."""
    assert host.service is not None
    _, backup = host.backup(None)
    plan = VerifyPlan.for_host(host, None)
    # each check's own argv, by its name (the main PID's reads are written by hand below)
    argv_of = {item.name: step for item in [*plan.facts(), *plan.checks()] if isinstance(item, Fact)
               for step in item.steps()[:1] if isinstance(step, list)}
    state = shlex.join(["supervisorctl", "status", host.service.unit])
    pid = f"$(supervisorctl pid {shlex.quote(host.service.unit)})"
    commands = [("main-pid", state), ("cmdline", f"cat /proc/{pid}/cmdline"),
                ("process start", f"cat /proc/{pid}/stat /proc/uptime; date +%s.%N; getconf CLK_TCK")]
    commands += [(f"file:{name}", shlex.join(argv_of[f"file:{name}"])) for name in backup.files]
    commands.append(("listing", shlex.join(argv_of[FILE_TIMES])))
    return [*commands, ("health", shlex.join(health_argv(host))), ("probe", shlex.join(probe_argv(host)))]


def health_argv(host: Host) -> list[str]:
    assert host.service is not None
    return ["curl", "-sS", "-m", "5", "-o", "/dev/null", "-w", "%{http_code}", host.service.health_url]


def probe_argv(host: Host) -> list[str]:
    assert host.service is not None and host.service.probe is not None
    probe = host.service.probe
    return ["curl", "-sS", "-m", f"{probe.timeout_s:g}", "-H", "Content-Type: application/json",
            "--data-binary", json.dumps(probe.json_body), probe.url]


def floor_script(host: Host) -> str:
    """proofbot's own one batch for host, with health and the probe as curl at its end."""
    steps = host_batch(VerifyPlan.for_host(host, None))
    extra = [health_argv(host), probe_argv(host)] if host.service and host.service.probe else []
    return batch_script(secrets.token_hex(8), [*steps, *extra])


def floor_spec(hosts: list[Host], path: Path) -> Path:
    path.write_text(json.dumps([{
        "address": host.address, "port": host.port, "user": host.ssh.user,
        "known_hosts": str(host.ssh.known_hosts_path()),
        "client_key": str(host.ssh.client_key_paths()[0]), "script": floor_script(host),
    } for host in hosts]))
    return path


def shell_loop(hosts: list[Host], key: Path, known_hosts: Path, path: Path) -> Path:
    """A bash script, one `ssh` per check per host, sequential, like people write."""
    lines = ["#!/bin/bash", "set -e"]
    for host in hosts:
        for _, command in check_commands(host):
            ssh = ["ssh", "-F", "/dev/null", "-o", f"UserKnownHostsFile={known_hosts}",
                   "-o", "GlobalKnownHostsFile=/dev/null", "-o", "StrictHostKeyChecking=yes", "-o", "BatchMode=yes",
                   "-i", str(key), "-p", str(host.port), f"{host.ssh.user}@{host.address}", command]
            lines.append(shlex.join(ssh) + " >/dev/null")
    path.write_text("\n".join(lines) + "\n")
    return path


def runtime_python() -> str:
    """The interpreter of a venv with exactly requirements.lock (what the Docker image installs),
    made on first use: proofbot and the floor run as users run them, without the dev tools
    (import-linter brings rich, which httpx then imports at start-up)."""
    python = RUNTIME_VENV / "bin" / "python"
    lock = REPO / "requirements.lock"
    stamp = RUNTIME_VENV / "requirements.lock"
    if not python.exists() or not stamp.exists() or stamp.read_text() != lock.read_text():
        shutil.rmtree(RUNTIME_VENV, ignore_errors=True)
        subprocess.run([PYTHON, "-m", "venv", str(RUNTIME_VENV)], check=True)
        subprocess.run([str(RUNTIME_VENV / "bin" / "pip"), "install", "-q", "--disable-pip-version-check",
                        "-r", str(lock)], check=True)
        shutil.copyfile(lock, stamp)
    return str(python)  # proofbot itself is imported from REPO (the bench runs with cwd=REPO)


def ansible_setup(hosts: list[Host], key: Path, known_hosts: Path, workdir: Path) -> list[str]:
    """Ansible at its fastest settings, and a playbook with one task per check; returns the argv."""
    if not (ANSIBLE_VENV / "bin" / "ansible-playbook").exists():
        subprocess.run([PYTHON, "-m", "venv", str(ANSIBLE_VENV)], check=True)
        subprocess.run([str(ANSIBLE_VENV / "bin" / "pip"), "install", "-q", "ansible-core"], check=True)
    workdir.mkdir(parents=True, exist_ok=True)
    (workdir / "hosts.ini").write_text("[lab]\n" + "".join(
        f"{h.name} ansible_host={h.address} ansible_port={h.port}\n" for h in hosts))
    ssh_args = (f"-F /dev/null -o ControlMaster=auto -o ControlPersist=60s -o UserKnownHostsFile={known_hosts} "
                "-o GlobalKnownHostsFile=/dev/null -o StrictHostKeyChecking=yes -o BatchMode=yes")
    (workdir / "ansible.cfg").write_text(f"""[defaults]
inventory = {workdir / 'hosts.ini'}
forks = {len(hosts)}
gathering = explicit
host_key_checking = True
interpreter_python = /usr/bin/python3
remote_user = root
private_key_file = {key}
retry_files_enabled = False
[ssh_connection]
pipelining = True
ssh_args = {ssh_args}
control_path_dir = {workdir / 'cp'}
""")
    tasks = [{"name": name, "ansible.builtin.shell": command, "changed_when": False}
             for name, command in check_commands(hosts[0])]
    (workdir / "verify.yml").write_text(yaml.safe_dump([{"hosts": "all", "gather_facts": False, "tasks": tasks}],
                                                       sort_keys=False))
    return [str(ANSIBLE_VENV / "bin" / "ansible-playbook"), str(workdir / "verify.yml")]


# -- the namespace lab behind delay proxies -----------------------------------------------------------

async def namespace_part(args: argparse.Namespace, rows: dict[str, Any]) -> None:
    one_way = args.rtt_ms / 2000
    work = Path(tempfile.mkdtemp(prefix="fleet-bench-"))
    try:
        await namespace_lab(args, rows, one_way, work)
    finally:
        shutil.rmtree(work, ignore_errors=True)


async def namespace_lab(args: argparse.Namespace, rows: dict[str, Any], one_way: float, work: Path) -> None:
    with NetnsLab() as lab:
        lab.start(args.hosts)
        names = list(lab.hosts)
        proxies = [DelayProxy(lab[name].address, lab[name].port, delay_s=one_way) for name in names]
        for proxy in proxies:
            await proxy.start()
        try:
            known_hosts = work / "known_hosts"
            known_hosts.write_text("".join(lab[n].known_hosts_line("127.0.0.1", p.port) + "\n"
                                           for n, p in zip(names, proxies, strict=True)))
            document = lab.inventory()
            document["ssh"]["known_hosts"] = str(known_hosts)
            document["fleet"] = {"max_parallel": max(32, args.hosts)}
            for name, proxy in zip(names, proxies, strict=True):
                document["hosts"][name].update({"address": "127.0.0.1", "port": proxy.port})
            inventory_file = work / "inventory.yml"
            inventory_file.write_text(yaml.safe_dump(document))
            inventory = parse_inventory(yaml.safe_dump(document), "bench.yml")
            hosts = [inventory.host(name) for name in names]
            db = str(work / "bench.db")
            await measure_namespace(args, rows, hosts, inventory_file, db, known_hosts, lab.client_key, work)
        finally:
            for proxy in proxies:
                await proxy.stop()


async def measure_namespace(args: argparse.Namespace, rows: dict[str, Any], hosts: list[Host],
                            inventory_file: Path, db: str, known_hosts: Path, key: Path, work: Path) -> None:
    """Every tool on one host, then on all of them: rows[f"{tool}_{size}"] = median wall time."""
    r = args.repeats
    for chosen in [hosts[:1], hosts] if len(hosts) > 1 else [hosts]:
        size, target = len(chosen), chosen[0].name if len(chosen) == 1 else "all"
        print(f"{size} host(s) at +{args.rtt_ms:g} ms RTT, whole process:", flush=True)
        spec = floor_spec(chosen, work / f"floor{size}.json")
        floor_runs = await median_of("floor", [runtime_python(), "bench/floor_child.py", str(spec)], r)
        rows[f"floor_{size}"] = wall(floor_runs)
        rows[f"floor_cpu_{size}"] = statistics.median(run.cpu_s for run in floor_runs)
        rows[f"floor_machine_cpu_{size}"] = statistics.median(run.machine_cpu_s for run in floor_runs)
        rows[f"proofbot_{size}"] = wall(await median_of(f"proofbot verify {target}",
                                                        proofbot_argv(inventory_file, db, target), r))
        if not args.skip_ansible:
            argv = ansible_setup(chosen, key, known_hosts, work / f"ansible{size}")
            env = {"ANSIBLE_CONFIG": str(work / f"ansible{size}" / "ansible.cfg")}
            rows[f"ansible_{size}"] = wall(await median_of("ansible-playbook", argv, r, env))
        if not args.skip_loop:
            script = shell_loop(chosen, key, known_hosts, work / f"loop{size}.sh")
            # On many hosts it takes minutes: one run, no warm-up (its ssh processes keep nothing warm).
            rows[f"loop_{size}"] = wall(await median_of("ssh loop", ["bash", str(script)], 1 if size > 1 else r,
                                                        warm_up=size == 1))
    rows["checks"] = len(check_commands(hosts[0]))


def proofbot_argv(inventory_file: Path, db: str, target: str) -> list[str]:
    """`proofbot verify TARGET` as a user runs it (the console script's own entry point)."""
    return [runtime_python(), "-m", "bot.cli", "verify", target, "--inventory", str(inventory_file), "--db", db,
            "--json"]


# -- tier 1 at scale ----------------------------------------------------------------------------------

def scale_part(sizes: list[int], repeats: int) -> list[dict[str, float]]:
    work = Path(tempfile.mkdtemp(prefix="fleet-scale-"))
    client_key = work / "client_ed25519"
    make_keypair(client_key, "fleet-bench")
    authorized = work / "authorized_keys"
    authorized.write_text(Path(str(client_key) + ".pub").read_text())
    live, backup = work / "live", work / "backup"
    for folder in (live, backup):
        folder.mkdir()
        for name in ("spec_info.py", "eagle_info.py"):
            (folder / name).write_text(f"# {name}\n")
    http_port = free_port()
    service = subprocess.Popen([PYTHON, str(REPO / "bot" / "demo" / "service.py"), "--port", str(http_port),
                                "--speculative-algorithm", "NEXTN"], stdin=subprocess.DEVNULL)
    fake = work / "bin"
    fake.mkdir()
    (fake / "systemctl").write_text(
        "#!/bin/sh\nprintf 'MainPID=%s\\nActiveState=active\\nSubState=running\\nInvocationID=b\\nNRestarts=0\\n"
        f"ExecMainStartTimestampMonotonic=1\\n' {service.pid}\n")
    (fake / "systemctl").chmod(0o755)
    servers: list[subprocess.Popen[bytes]] = []
    rows = []
    try:
        wait_http(http_port)
        total = max(sizes)
        ports: list[dict[str, Any]] = []
        for shard in range(0, total, SCALE_SHARD):
            out = work / f"hosts-{shard}.json"
            servers.append(subprocess.Popen(
                [PYTHON, "-m", "bench.scale_hosts", "--count", str(min(SCALE_SHARD, total - shard)),
                 "--out", str(out), "--authorized", str(authorized), "--path-dir", str(fake)],
                cwd=REPO, stdin=subprocess.PIPE))
        for shard in range(0, total, SCALE_SHARD):
            ports += wait_json(work / f"hosts-{shard}.json")
        known_hosts = work / "known_hosts"
        known_hosts.write_text("".join(f"[127.0.0.1]:{h['port']} {h['host_key']}\n" for h in ports))
        for size in sizes:
            inventory_file = scale_inventory(work, size, ports, known_hosts, client_key, http_port, live, backup)
            # Exit 1 or 3 is data here: one shared service answers every host, and under load it may be late.
            runs = measure_runs(f"tier 1, {size} hosts", proofbot_argv(
                inventory_file, str(work / "scale.db"), "all"), repeats, ok=(0, 1, 3))
            not_pass = [sum(n for outcome, n in json.loads(r.out)["counts"].items() if outcome in ("fail", "error"))
                        for r in runs]
            rows.append({"hosts": size, "wall_s": wall(runs), "rss_mb": max(r.rss_mb for r in runs),
                         "not_pass": max(not_pass)})
            if max(not_pass):
                print(f"    not all passed: {next(problems(r.out) for r in runs if problems(r.out))}", flush=True)
    finally:
        for server in servers:
            if server.stdin:
                server.stdin.close()
        for server in servers:
            server.wait(timeout=60)
        service.terminate()
        service.wait(timeout=30)
        shutil.rmtree(work, ignore_errors=True)
    return rows


def problems(out: str) -> list[str]:
    """The first few checks that did not pass in a fleet's --json, as 'host check: summary'."""
    found = [f"{host['host']} {check['name']}: {check['summary']}" for host in json.loads(out)["hosts"]
             for check in host["checks"] if check["status"] not in ("pass", "warn", "skipped")]
    return found[:3]


def scale_inventory(work: Path, size: int, ports: list[dict[str, Any]], known_hosts: Path, key: Path,
                    http_port: int, live: Path, backup: Path) -> Path:
    url = f"http://127.0.0.1:{http_port}"
    service = {"manager": "systemd", "unit": "sglang.service", "health_url": f"{url}/health",
               "expect_flags": ["--speculative-algorithm NEXTN"], "forbid_flags": ["--enable-ddtree"],
               "probe": {"url": f"{url}/v1/chat/completions", "expect": "OK", "timeout_s": 60,
                         "json": {"model": "default", "messages": [{"role": "user", "content": "Say OK"}]}}}
    document = {
        "ssh": {"user": os.environ.get("USER") or "root", "known_hosts": str(known_hosts),
                "client_keys": [str(key)], "connect_timeout_s": 30, "command_timeout_s": 60},
        "hosts": {f"h{index:04d}": {
            "address": "127.0.0.1", "port": host["port"], "service": service,
            "backups": {"pre": {"dir": str(backup), "files": {n: str(live / n) for n in ("spec_info.py",
                                                                                          "eagle_info.py")},
                                "watch": [str(live)]}}}
            for index, host in enumerate(ports[:size])},
    }
    path = work / f"inventory-{size}.yml"
    path.write_text(yaml.safe_dump(document))
    return path


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def wait_http(port: int, deadline_s: float = 30) -> None:
    deadline = time.monotonic() + deadline_s
    while time.monotonic() < deadline:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            return
        except OSError:
            time.sleep(0.05)
    raise TimeoutError(f"nothing listens on 127.0.0.1:{port}")


def wait_json(path: Path, deadline_s: float = 300) -> list[dict[str, Any]]:
    deadline = time.monotonic() + deadline_s
    while not path.exists():
        if time.monotonic() > deadline:
            raise TimeoutError(f"{path} was not written")
        time.sleep(0.05)
    loaded: list[dict[str, Any]] = json.loads(path.read_text())
    return loaded


# -- the table ----------------------------------------------------------------------------------------

def print_table(args: argparse.Namespace, rows: dict[str, Any], scale: list[dict[str, float]]) -> None:
    print()
    print(f"proofbot vs the floor, Ansible and an ssh loop; +{args.rtt_ms:g} ms RTT; median of {args.repeats} "
          "(the ssh loop on many hosts: one run)")
    labels = {"floor": "floor", "proofbot": "proofbot verify", "ansible": "Ansible",
              "loop": f"ssh loop ({rows.get('checks', 0)} ssh per host)"}
    if "floor_1" in rows:
        print(f"{'':38} {'wall':>8} {'x floor':>8}  {'proofbot is':>12}")
    for size in (1, args.hosts):
        if f"floor_{size}" not in rows:
            continue
        floor, ours = rows[f"floor_{size}"], rows[f"proofbot_{size}"]
        for tool, label in labels.items():
            if f"{tool}_{size}" not in rows:
                continue
            took = rows[f"{tool}_{size}"]
            ahead = f"{took / ours:>10.1f}x faster" if tool in ("ansible", "loop") else ""
            print(f"{f'{size} host(s): {label}':38} {took:>7.3f}s {took / floor:>7.2f}x  {ahead}")
    if "proofbot_1" in rows and f"proofbot_{args.hosts}" in rows:
        many, floor_many = rows[f"proofbot_{args.hosts}"], rows[f"floor_{args.hosts}"]
        print(f"proofbot on {args.hosts} hosts / on one host: {many / rows['proofbot_1']:.2f}x "
              f"(the floor: {floor_many / rows['floor_1']:.2f}x)")
        hosts_side = rows[f"floor_machine_cpu_{args.hosts}"] - rows[f"floor_cpu_{args.hosts}"]
        print(f"  why the floor grows too: the lab's {args.hosts} hosts share this machine's {os.cpu_count()} cores; "
              f"one floor run on them keeps the machine busy for {hosts_side:.1f} CPU-s outside the floor process "
              f"(sshd, supervisorctl, the services, the delay proxies) against {rows[f'floor_cpu_{args.hosts}']:.2f} "
              "CPU-s in it")
    if scale:
        print()
        print("tier 1 scale (in-process asyncssh servers): the proofbot process")
        print(f"{'hosts':>6} {'wall':>8} {'per host':>9} {'peak RSS':>9} {'RSS per host':>13} {'fail+error':>10}")
        base = scale[0]
        for row in scale:
            extra = (row["rss_mb"] - base["rss_mb"]) / (row["hosts"] - base["hosts"]) if row is not base else 0.0
            print(f"{row['hosts']:>6.0f} {row['wall_s']:>7.2f}s {row['wall_s'] / row['hosts'] * 1000:>7.1f}ms "
                  f"{row['rss_mb']:>7.1f}MB {extra * 1024:>10.0f} KB {row['not_pass']:>10.0f}")


async def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--hosts", type=int, default=20)
    parser.add_argument("--rtt-ms", type=float, default=50, help="round-trip time added to every host's link")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--scale", default="1,20,100,500", help="tier-1 sizes ('' to skip)")
    parser.add_argument("--skip-namespace", action="store_true", help="only the tier-1 scale figures")
    parser.add_argument("--skip-ansible", action="store_true")
    parser.add_argument("--skip-loop", action="store_true")
    args = parser.parse_args()
    rows: dict[str, Any] = {}
    if not args.skip_namespace:
        reason = require_root_netns()
        if reason:
            print(f"bench: skipped: {reason}", file=sys.stderr)
            return 2
        await namespace_part(args, rows)
    sizes = [int(size) for size in args.scale.split(",") if size]
    _, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))  # 500 servers and their clients, inherited
    scale = await asyncio.to_thread(scale_part, sizes, args.repeats) if sizes else []
    print_table(args, rows, scale)
    return 0


if __name__ == "__main__":
    sys.exit(asyncio.run(main()))
