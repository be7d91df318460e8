"""The fake's user groups: ``usergroups.list`` and ``usergroups.users.list`` as Slack documents them (bot scope
``usergroups:read``; an unknown or disabled group is ``no_such_subteam``; a disabled one is listed only with
``include_disabled``), and the test's hands on them (add, change members, disable): a mixin of `FakeSlack`."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from .records import JSON, USER_ID_RE, SlackError, _invalid_arguments, _opt_str

HANDLE_RE = re.compile(r"^[a-z0-9][a-z0-9._-]*$")


@dataclass
class UserGroup:
    id: str
    handle: str
    users: list[str] = field(default_factory=list)
    disabled: bool = False

    def to_json(self, include_users: bool) -> JSON:
        shown: JSON = {"id": self.id, "handle": self.handle, "name": self.handle, "is_usergroup": True,
                       "date_delete": 1 if self.disabled else 0, "user_count": len(self.users)}
        if include_users:
            shown["users"] = list(self.users)
        return shown


def _flag(value: Any) -> bool:
    return str(value).lower() in ("1", "true")


class UserGroups:
    """What `FakeSlack` knows of user groups (``self.usergroups``, by id)."""

    usergroups: dict[str, UserGroup]

    def add_usergroup(self, handle: str, *users: str) -> str:
        """A user group with these members; returns its id (S…)."""
        if not HANDLE_RE.match(handle) or any(g.handle == handle for g in self.usergroups.values()):
            raise ValueError(f"bad or taken handle: {handle!r}")
        self.set_usergroup_users(group_id := f"S{len(self.usergroups) + 1:08d}", *users, create=handle)
        return group_id

    def set_usergroup_users(self, group_id: str, *users: str, create: str | None = None) -> None:
        """The group's members are now exactly ``users`` (as usergroups.users.update would leave them)."""
        for user in users:
            if not USER_ID_RE.match(user):
                raise ValueError(f"not a user id: {user!r}")
        if create is not None:
            self.usergroups[group_id] = UserGroup(group_id, create)
        self.usergroups[group_id].users = list(users)

    def disable_usergroup(self, group_id: str) -> None:
        self.usergroups[group_id].disabled = True

    def _usergroups_list(self, args: JSON) -> JSON:
        include_disabled = _flag(args.get("include_disabled"))
        return {"usergroups": [group.to_json(_flag(args.get("include_users")))
                               for group in self.usergroups.values() if include_disabled or not group.disabled]}

    def _usergroups_users_list(self, args: JSON) -> JSON:
        group_id = _opt_str(args.get("usergroup"))
        if not group_id:
            raise _invalid_arguments("usergroup")
        group = self.usergroups.get(group_id)
        if group is None or (group.disabled and not _flag(args.get("include_disabled"))):
            raise SlackError("no_such_subteam")
        return {"users": list(group.users)}
