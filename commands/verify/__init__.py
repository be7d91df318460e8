"""The verify operation: plan the checks for a host, run them over one SSH connection (README "How a verify runs").

``verify`` (the running part, with every check's parser) loads on first use: the CLI plans
and starts the SSH handshake first, and loads it while the handshake is in flight.
"""

from typing import TYPE_CHECKING, Any

from commands.verify.plan import VerifyPlan

if TYPE_CHECKING:
    from commands.verify.operation import verify

__all__ = ["VerifyPlan", "verify"]


def __getattr__(name: str) -> Any:
    if name == "verify":
        from commands.verify.operation import verify

        return verify
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
