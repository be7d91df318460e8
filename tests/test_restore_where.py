"""Restore's first round trip, the pure side: which dirs on the way a restore refuses, from recorded stat lines."""

from __future__ import annotations

from commands.command_result import CommandResult
from commands.restore.where import parse_where, untrusted_dirs

SSH_IDS = (0, 0)


def where_of(*dirs: str) -> list[str]:
    records = ["live\tfile\tfile\t/srv/app/spec.py", "source\tfile\t/root/backup/spec.py", "source-dir\t/root/backup",
               *(f"dir\t{d}" for d in dirs)]
    return untrusted_dirs(parse_where(CommandResult("where", 0, ("\0".join(records) + "\0").encode(), 0.1)),
                          SSH_IDS, "/srv/app/spec.py")


def test_root_owned_dirs_are_trusted() -> None:
    assert where_of("0\t0\t755\tdirectory\t/srv/app", "0\t0\t755\tdirectory\t/srv", "0\t0\t755\tdirectory\t/") == []


def test_a_dir_another_user_owns_is_refused_even_without_its_write_bit() -> None:
    """uid 1000 owning /srv/app at mode 555 cannot write it now, but can chmod it back and plant a name."""
    assert where_of("1000\t1000\t555\tdirectory\t/srv/app", "0\t0\t755\tdirectory\t/srv") == [
        "/srv/app (mode 555, writable by owner uid 1000 (who may chmod it))"]
    assert where_of("1000\t1000\t755\tdirectory\t/srv/app") == ["/srv/app (mode 755, writable by owner uid 1000)"]


def test_group_and_world_write_and_the_sticky_rule() -> None:
    assert where_of("0\t50\t775\tdirectory\t/srv/app") == ["/srv/app (mode 775, writable by group gid 50)"]
    assert where_of("0\t0\t1777\tdirectory\t/srv") == []  # sticky above: fine
    assert where_of("0\t0\t1777\tdirectory\t/srv/app") == [  # sticky as the dir written into: not
        "/srv/app (mode 1777, writable by every user (sticky))"]
