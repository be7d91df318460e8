"""``groups``: each group expanded to its hosts (members may be hosts or groups), unknown names and cycles
reported; ``all`` is every host."""

from __future__ import annotations

from commands.inventory.hosts import ALL_GROUP, NAME_PATTERN, Host
from commands.inventory.problems import KeyPath, Problems


def expand_groups(problems: Problems, written: dict[str, list[str]], hosts: dict[str, Host], *,
                   written_hosts: set[str]) -> dict[str, tuple[str, ...]]:
    """Each group as host names: members may be hosts or groups; unknown names and cycles are
    reported (a member that is a host with problems of its own is not reported again)."""
    if ALL_GROUP in written_hosts:
        problems.add(("hosts", ALL_GROUP), f"'{ALL_GROUP}' is the implicit group of every host; "
                     "name the host otherwise")
    usable: dict[str, list[str]] = {}
    for name, members in written.items():
        where: KeyPath = ("groups", str(name))
        if name == ALL_GROUP:
            problems.add(where, f"'{ALL_GROUP}' is implicit (every host); remove it or give the group another name")
        elif not NAME_PATTERN.fullmatch(str(name)):
            problems.add(where, "group names are letters, digits, '.', '_', '-'")
        elif name in written_hosts:
            problems.add(where, "a host has the same name; a host and a group may not share a name")
        else:
            usable[name] = members
        for index, member in enumerate(members):
            if member not in written_hosts and member not in written and member != ALL_GROUP:
                problems.add((*where, index), f"unknown host or group {member!r}", key=f"groups.{name}[{index}]")

    expanded: dict[str, tuple[str, ...]] = {ALL_GROUP: tuple(hosts)}
    cycles: set[str] = set()

    def expand(name: str, path: tuple[str, ...]) -> tuple[str, ...]:
        if name in expanded:
            return expanded[name]
        if name in path:
            cycle = " -> ".join((*path[path.index(name):], name))
            if path[-1] not in cycles:
                cycles.add(path[-1])
                problems.add(("groups", path[-1]), f"groups form a cycle: {cycle}")
            return ()
        members: dict[str, None] = {}
        for member in usable.get(name, []):
            if member in hosts:
                members[member] = None
            elif member in usable:
                members.update(dict.fromkeys(expand(member, (*path, name))))
        expanded[name] = tuple(members)
        return expanded[name]

    for name in usable:
        expand(name, ())
    return expanded
