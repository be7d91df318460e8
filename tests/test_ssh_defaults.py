"""SSH defaults, the hop limit and the user/address patterns have one home (commands/ssh_config/defaults.py):
the inventory's schema and the ssh config resolution both read it, and no other module writes them again."""

from __future__ import annotations

from commands.inventory import SshSettings
from commands.ssh_config import defaults
from commands.ssh_config.files import FILE_DEFAULTS
from tests.conftest import REPO

# Each fact as it would be written again by hand.
FACTS = ("MAX_HOPS = ", r"[a-z_][a-z0-9_.-]{0,31}", r"[A-Za-z0-9.:-]{1,253}", '"~/.ssh/id_ed25519"',
         '"~/.ssh/known_hosts"', '"/etc/ssh/ssh_known_hosts"')


def test_no_module_but_defaults_writes_them() -> None:
    home = REPO / "commands" / "ssh_config" / "defaults.py"
    found = {fact: [str(path.relative_to(REPO)) for path in sorted((REPO / "commands").rglob("*.py"))
                    if path != home and fact in path.read_text(encoding="utf-8")] for fact in FACTS}
    assert found == {fact: [] for fact in FACTS}
    assert all(fact in home.read_text(encoding="utf-8") for fact in FACTS)


def test_the_inventory_and_the_file_checks_use_them() -> None:
    settings = SshSettings()
    assert settings.user == defaults.USER
    assert settings.known_hosts == FILE_DEFAULTS["known_hosts"] == defaults.KNOWN_HOSTS
    assert tuple(settings.client_keys) == tuple(FILE_DEFAULTS["client_keys"]) == defaults.CLIENT_KEYS
    assert tuple(settings.global_known_hosts) == tuple(FILE_DEFAULTS["global_known_hosts"]) == defaults.SYSTEM_HOSTFILES
