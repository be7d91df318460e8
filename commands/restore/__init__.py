"""The restore operation: plan, approval, snapshot, atomic replace, re-read as proof (README "Restore")."""

from commands.restore.operation import apply_restore, request_restore
from commands.restore.plan import RestorePlan

__all__ = ["RestorePlan", "apply_restore", "request_restore"]
