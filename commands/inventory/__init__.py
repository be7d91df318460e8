"""Inventory: the hosts, services and backups proofbot may touch, loaded and validated once.

HOST and BACKUP names typed by people are only ever looked up here; they never reach a shell. A bad file
is refused with the file, the line, the key and what is wrong, every problem at once.

settings (the ``ssh``, ``fleet``, ``limits``, ``approvals`` sections) · hosts (a host, the Inventory) ·
load (the file: merge, ssh config, then hops and groups) · problems (key lines, problems at their line) ·
hops (``ssh.jump``) · groups · hints (YAML errors and typos where a person looks) · check (``inventory check``).
This module is the package's API: the names the rest of proofbot uses.
"""

from commands.inventory.hosts import Backup, Host, Inventory, Probe, Service
from commands.inventory.load import inventory_path, load_inventory, parse_inventory
from commands.inventory.settings import Approvals, FleetSettings, Hop, Limits, SshSettings

__all__ = ["Approvals", "Backup", "FleetSettings", "Hop", "Host", "Inventory", "Limits", "Probe", "Service",
           "SshSettings", "inventory_path", "load_inventory", "parse_inventory"]
