"""The verify operation: plan the checks for a host, run them over one SSH connection (README "How a verify runs")."""

from commands.verify.operation import verify
from commands.verify.plan import VerifyPlan

__all__ = ["VerifyPlan", "verify"]
