"""What to do next about each failing or warning verify finding, in the words an operator would use.

A pure mapping from (finding, plan) to a ``NextStep``; the front-ends render its command as
a slash command or a CLI line (README "Checks").
"""

from __future__ import annotations

import dataclasses

from commands.findings import Finding, NextStep
from commands.verify.plan import VerifyPlan

# What commands.known_hosts says of a key it refused as revoked or as not the host's.
REFUSED_KEY_SIGNS = ("@revoked", "host certificate", "the host key changed")


def with_next_step(finding: Finding, plan: VerifyPlan) -> Finding:
    step = next_step(finding, plan)
    return dataclasses.replace(finding, next_step=step) if step else finding


def next_step(finding: Finding, plan: VerifyPlan) -> NextStep | None:
    host, backup = plan.host.name, plan.backup_name
    restore = (host, backup) if backup else (host,)
    name, status = finding.name, finding.status
    if status == "error" and finding.evidence is None and finding.summary.startswith("could not check"):
        ssh = plan.host.ssh
        if "host key not verified against" in finding.summary and any(
                sign in finding.summary for sign in REFUSED_KEY_SIGNS):
            # a revoked or mismatched key is never answered with advice to trust it (issue 19 item 7)
            return NextStep("the key it presented was refused for the reason above: check the host out of band "
                            "(do not add or replace its key in known_hosts), then", "verify", (host,))
        if ssh.jump and finding.summary.startswith("could not check: could not reach the bastion"):
            way = " → ".join(f"{hop.name} ({hop.address}:{hop.port})" for hop in ssh.jump)
            return NextStep(f"check that the bastion answers SSH ({way}) and that its host key is known, then",
                            "verify", (host,))
        return NextStep(f"check that {plan.host.address}:{plan.host.port} answers SSH as {ssh.user} and that its "
                        f"host key is in {', '.join(ssh.known_hosts_list())}, then", "verify", (host,))
    if status not in ("fail", "warn"):  # other errors say their own cause; a retry is all there is
        return None
    if name.startswith("file:"):
        return NextStep("put the backup's copy back:", "restore", restore)
    if name == "extra-files":
        return NextStep("move the extra files into a snapshot with the restore:", "restore", restore,
                        slack_choice="Approve + move extras", cli_flags=("--move-extras",))
    if name == "cmdline":
        return NextStep("fix the launch config (the unit or supervisord program), then", "restart", (host,))
    if name == "stale-process":
        return NextStep("the service still runs the code it started with:", "restart", (host,))
    service = plan.host.service
    if name == "main-pid" and service:
        return NextStep(f"{service.unit} is not running: start it, or", "restart", (host,))
    if name in ("health", "probe"):
        return NextStep("read the service's log; if it is stuck,", "restart", (host,))
    return None
