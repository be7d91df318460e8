"""The restart operation: plan, approval, act, then prove new PID, health, flags, a real request (README "Restart")."""

from commands.restart.act import restart
from commands.restart.operation import apply_restart, request_restart
from commands.restart.plan import RestartPlan, plan_restart
from commands.restart.watch import RestartProgress

__all__ = ["RestartPlan", "RestartProgress", "apply_restart", "plan_restart", "request_restart", "restart"]
