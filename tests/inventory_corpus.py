"""The inventory differential corpus: every inventory the tests, docs and example contain, plus seeded mutations
of them, each with the outcome the loader gave when it was recorded (the parsed Inventory as canonical JSON, or
the InventoryError's message, hint and problems). tests/test_inventory_corpus.py replays it.

``python -m tests.inventory_corpus`` rewrites tests/data/inventory_corpus.json.gz with today's loader (run it only
to record a change on purpose, and say why in the commit). The seeds (tests/data/inventory_seeds.json.gz) are every
text the tier-1 inventory tests gave ``parse_inventory`` (captured once, temp paths made /srv/corpus).
"""

from __future__ import annotations

import dataclasses
import gzip
import json
import random
import re
from pathlib import Path
from typing import Any

import yaml

ROOT = Path(__file__).resolve().parent.parent
SEEDS = ROOT / "tests" / "data" / "inventory_seeds.json.gz"
CORPUS = ROOT / "tests" / "data" / "inventory_corpus.json.gz"
SOURCE = "corpus.yml"
HOME = "/nonexistent-corpus-home"  # ~ in default paths: the same (absent) files wherever the corpus replays
MUTANTS_PER_SEED = 14
# Values a key is replaced with: wrong types, out-of-range numbers, bad patterns, empty, null, and values some
# validator reads specially (managers, durations, quiet hours, Slack ids, engine short forms, hops).
WRONG = [None, "", "x", 0, -1, 1.5, 70000, True, [], {}, ["a"], {"k": "v"}, "not a url", "rel/path", "/abs/path",
         "/", "bad name!", "a\nb", "systemd", "docker", "podman", "compose", "supervisord", "unix:///run/docker.sock",
         "tcp://x", "/usr/bin/docker", "5m", "10s", "1h30m", "5", "5min", "22:00-07:00 Europe/Berlin",
         "25:00-07:00 Europe/Berlin", "22:00-22:00 UTC", "22:00-07:00 Nowhere/Zone", "C0123ABCD", "c123", "U012AB",
         "@sre-oncall", "verify", "restart", "plan-only", "Sgl_Kernel", "python3-apt:amd64", "Bad_Deb",
         "http://127.0.0.1:30000/health", "ftp://x/", "all", "bastion,other", "user@host:2222", "[::1]:22",
         "bad user@h", "h:99999", ["/a", "rel"], [1, 2], ["verify", "nope"], [None], 4096, 4097, 65535, 65536, 86400,
         86401, 3600, 3601, 1024, 1025, 32, 33, 100, 101, "30", "1e3", "yes"]


def doc_texts() -> list[str]:
    """Every inventory written in the docs, README and the example file."""
    texts = [(ROOT / "inventory.example.yml").read_text(encoding="utf-8")]
    for page in [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]:
        for block in re.findall(r"```ya?ml\n(.*?)```", page.read_text(encoding="utf-8"), flags=re.S):
            texts.append(block)
    return texts


def seed_texts() -> list[str]:
    with gzip.open(SEEDS, "rt", encoding="utf-8") as file:
        captured: list[str] = json.load(file)
    return list(dict.fromkeys([*captured, *doc_texts()]))


def _paths(node: Any, path: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    found = [path]
    if isinstance(node, dict):
        for key, value in node.items():
            found += _paths(value, (*path, key))
    elif isinstance(node, list):
        for index, value in enumerate(node):
            found += _paths(value, (*path, index))
    return found


def _at(node: Any, path: tuple[Any, ...]) -> Any:
    for part in path:
        node = node[part]
    return node


def _mutants(text: str, rng: random.Random) -> list[str]:
    """Seeded mutations of one inventory: a key removed, a value replaced, an unknown key or a typo added, a key
    renamed (the probe's ``json`` alias), a line written twice."""
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError:
        return []
    out: list[str] = []
    lines = text.splitlines()
    keyed = [index for index, line in enumerate(lines) if re.match(r"\s*[A-Za-z_]+:", line)]
    if keyed:  # a duplicate key, at text level (YAML keeps the last)
        index = rng.choice(keyed)
        out.append("\n".join([*lines[:index + 1], lines[index], *lines[index + 1:]]) + "\n")
    if not isinstance(data, dict):
        return out
    paths = [path for path in _paths(data) if path]
    mappings = [path for path in _paths(data) if isinstance(_at(data, path), dict)]
    for _ in range(MUTANTS_PER_SEED):
        copy = json.loads(json.dumps(data, default=str))
        kind = rng.randrange(6)
        if kind == 0 and paths:  # remove
            path = rng.choice(paths)
            parent = _at(copy, path[:-1])
            del parent[path[-1]]
        elif kind in (1, 2) and paths:  # replace with a wrong or special value
            path = rng.choice(paths)
            _at(copy, path[:-1])[path[-1]] = rng.choice(WRONG)
        elif kind == 3 and mappings:  # an unknown key, or a typo of a known one
            path = rng.choice(mappings)
            parent = _at(copy, path)
            keys = [key for key in parent if isinstance(key, str)]
            name = rng.choice([f"{rng.choice(keys)}s", rng.choice(keys)[:-1], "bogus"]) if keys else "bogus"
            parent[name] = rng.choice(WRONG)
        elif kind == 4 and mappings:  # a key renamed (aliases: json <-> json_body)
            path = rng.choice(mappings)
            parent = _at(copy, path)
            keys = [key for key in parent if isinstance(key, str)]
            if keys:
                key = rng.choice(keys)
                renamed = {"json": "json_body", "json_body": "json"}.get(key, key.upper())
                parent[renamed] = parent.pop(key)
        else:  # a whole section replaced by something of the wrong shape
            key = rng.choice(["hosts", "ssh", "groups", "policies", "watch", "packages", "fleet", "limits",
                              "approvals", "channels"])
            copy[key] = rng.choice(WRONG)
        out.append(yaml.safe_dump(copy, sort_keys=False, allow_unicode=True))
    return out


EXTRA = ["", "- a\n", "hosts: []\n", "hosts:\n", "hosts: {}\n", "hosts:\n  a: 1\n", "hosts: {a: {address: h}}\n",
         "hosts: {a: {address: h, ssh: {jump: [1]}}}\n", "hosts: {'bad name': {address: h}}\n",
         "hosts:\n  a:\n    address: h\n  a:\n    address: g\n", "hosts: {a: {address: h}}\nhosts: {}\n",
         "{unclosed: [\n", "hosts: {a: {address: h, port: '22'}}\n", "hosts: {a: {address: h, port: 22.0}}\n",
         "hosts: {a: {address: h, port: 22.5}}\n", "hosts: {a: {address: h, port: true}}\n"]


def corpus_texts() -> list[str]:
    rng = random.Random(27)
    seeds = seed_texts()
    texts = [*seeds, *EXTRA]
    for seed in seeds:
        texts += _mutants(seed, rng)
    return list(dict.fromkeys(texts))


def canonical(value: Any) -> Any:
    """Every field of every model, in order (dicts keep their order, tuples say they are tuples), by attribute."""
    fields = getattr(type(value), "model_fields", None)
    if fields is None and dataclasses.is_dataclass(value) and not isinstance(value, type):
        fields = {field.name: None for field in dataclasses.fields(value) if not field.name.startswith("_")}
    if fields is not None:
        return {"type": type(value).__name__, **{name: canonical(getattr(value, name)) for name in fields}}
    if isinstance(value, dict):
        return {"dict": [[canonical(key), canonical(item)] for key, item in value.items()]}
    if isinstance(value, tuple):
        return {"tuple": [canonical(item) for item in value]}
    if isinstance(value, list):
        return [canonical(item) for item in value]
    if isinstance(value, float):
        return {"float": repr(value)}
    if value is None or isinstance(value, (str, int, bool)):
        return value
    raise TypeError(f"no canonical form for {type(value).__name__}")


def outcome(text: str) -> dict[str, Any]:
    """What parsing ``text`` gives: the Inventory, or the error a person reads; anything else is a crash."""
    from commands.errors import InventoryError
    from commands.inventory import parse_inventory

    try:
        inventory = parse_inventory(text, SOURCE)
    except InventoryError as exc:
        return {"error": exc.message, "hint": exc.hint, "problems": exc.problems}
    except Exception as exc:  # recorded as what it is (a crash is a bug the corpus shows)
        return {"crash": f"{type(exc).__name__}: {exc}"}
    return {"inventory": canonical(inventory)}


def record() -> None:
    import os

    os.environ["HOME"] = HOME
    cases = [{"text": text, "outcome": outcome(text)} for text in corpus_texts()]
    data = json.dumps(cases, ensure_ascii=False, indent=0).encode()
    CORPUS.write_bytes(gzip.compress(data, mtime=0))
    kinds = {"inventory": 0, "error": 0, "crash": 0}
    for case in cases:
        kinds[next(iter(case["outcome"]))] += 1
    print(f"{len(cases)} cases: {kinds}")


if __name__ == "__main__":
    record()
