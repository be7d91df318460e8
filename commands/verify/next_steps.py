"""What to do next about each failing or warning verify finding, in the words an operator would use.

A pure mapping from (finding, plan) to a ``NextStep``; the front-ends render its command as
a slash command or a CLI line (README "Checks").
"""

from __future__ import annotations

import dataclasses

from commands.findings import Finding, NextStep
from commands.verify.causes import CAUSE, KEY_REFUSAL, REFUSED_KEY_KINDS, Cause
from commands.verify.plan import VerifyPlan
from commands.vocabulary import CheckStatus, Operation


def with_next_step(finding: Finding, plan: VerifyPlan) -> Finding:
    step = next_step(finding, plan)
    return dataclasses.replace(finding, next_step=step) if step else finding


def next_step(finding: Finding, plan: VerifyPlan) -> NextStep | None:
    step = _next_step(finding, plan)
    if step is None or step.operation != Operation.RESTART:
        return step
    # Only a restart advice needs the restart machinery's map of engines: a verify that gives none never loads it.
    from commands.restart.container import is_container

    service = plan.host.service
    if step is None or step.operation != Operation.RESTART or service is None or not is_container(service):
        return step
    if finding.name == "main-pid" and finding.status == CheckStatus.WARN:
        return NextStep(f"{service.unit} has not been up for min_uptime_s yet: wait, then", Operation.VERIFY,
                        (plan.host.name,))
    if service.manager == "compose" and service.compose_file is None:  # never a hint proofbot would refuse
        return NextStep(f"restart it on the host (docker-compose -p {service.project} restart {service.service}; "
                        "proofbot needs the service's compose_file: to do it), then", Operation.VERIFY,
                        (plan.host.name,))
    return step


def _next_step(finding: Finding, plan: VerifyPlan) -> NextStep | None:
    host, backup = plan.host.name, plan.backup_name
    restore = (host, backup) if backup else (host,)
    name, status = finding.name, finding.status
    cause = finding.details.get(CAUSE)
    if status == CheckStatus.ERROR and cause in (Cause.CONNECTION, Cause.BASTION):
        ssh = plan.host.ssh
        if finding.details.get(KEY_REFUSAL) in REFUSED_KEY_KINDS:
            # a revoked or mismatched key is never answered with advice to trust it (issue 19 item 7)
            return NextStep("the key it presented was refused for the reason above: check the host out of band "
                            "(do not add or replace its key in known_hosts), then", Operation.VERIFY, (host,))
        if ssh.jump and cause == Cause.BASTION:
            way = " → ".join(f"{hop.name} ({hop.address}:{hop.port})" for hop in ssh.jump)
            return NextStep(f"check that the bastion answers SSH ({way}) and that its host key is known, then",
                            Operation.VERIFY, (host,))
        return NextStep(f"check that {plan.host.address}:{plan.host.port} answers SSH as {ssh.user} and that its "
                        f"host key is in {', '.join(ssh.known_hosts_list())}, then", Operation.VERIFY, (host,))
    if status not in (CheckStatus.FAIL, CheckStatus.WARN):  # other errors say their own cause; a retry is all there is
        return None
    if name.startswith("file:"):
        return NextStep("put the backup's copy back:", Operation.RESTORE, restore)
    if name == "extra-files":
        return NextStep("move the extra files into a snapshot with the restore:", Operation.RESTORE, restore,
                        slack_choice="Approve + move extras", cli_flags=("--move-extras",))
    if name == "cmdline":
        return NextStep("fix the launch config (the unit or supervisord program), then", Operation.RESTART, (host,))
    if name == "stale-process":
        return NextStep("the service still runs the code it started with:", Operation.RESTART, (host,))
    service = plan.host.service
    if name == "main-pid" and service:
        return NextStep(f"{service.unit} is not running: start it, or", Operation.RESTART, (host,))
    if name in ("health", "probe"):
        return NextStep("read the service's log; if it is stuck,", Operation.RESTART, (host,))
    return None
