"""HTTP as the host sees it: one request through the SSH connection's port forward (health, probe)."""

from __future__ import annotations

import time
from urllib.parse import urlsplit

import httpx

from commands.checks.health import HEALTH_TIMEOUT_S, HttpOutcome
from commands.checks.probe import probe_finding, probe_headers
from commands.findings import Evidence, Finding
from commands.inventory import Probe
from commands.ssh import HostConnection


async def fetch_via_host(conn: HostConnection, url: str, *, method: str = "GET",
                         json_body: object | None = None, timeout_s: float = HEALTH_TIMEOUT_S,
                         headers: dict[str, str] | None = None) -> HttpOutcome:
    """Send one request to url as seen FROM the host, through the SSH connection.

    ``headers`` are sent but never shown: the request string names only their keys.
    """
    parts = urlsplit(url)
    port = parts.port or (443 if parts.scheme == "https" else 80)
    dest = parts.hostname or "127.0.0.1"
    request = f"{method} {url} (from {conn.host.name}, via SSH forward)"
    if headers:
        request += " with header(s) " + ", ".join(sorted(headers))
    async with conn.forward(dest, port) as local_port:
        local_url = parts._replace(netloc=f"127.0.0.1:{local_port}").geturl()
        sent_headers = {**(headers or {}), "Host": parts.netloc.rpartition("@")[2]}  # never the userinfo
        extensions = {"sni_hostname": dest} if parts.scheme == "https" else {}
        started = time.monotonic()
        try:
            async with httpx.AsyncClient(timeout=timeout_s, trust_env=False) as client:
                response = await client.request(method, local_url, headers=sent_headers, json=json_body,
                                                extensions=extensions)
            return HttpOutcome(request, response.status_code, response.text, time.monotonic() - started)
        except httpx.TimeoutException:
            return HttpOutcome(request, None, "", time.monotonic() - started,
                               f"no answer within {timeout_s:g} s")
        except httpx.HTTPError as exc:
            problem = f"no HTTP response ({type(exc).__name__}): the host could not reach {dest}:{port}"
            return HttpOutcome(request, None, "", time.monotonic() - started, problem)


async def run_probe(conn: HostConnection, probe: Probe) -> Finding:
    """Send the probe once and judge the answer."""
    headers, missing = probe_headers(probe)
    if missing:
        names = ", ".join(f"${{{name}}}" for name in missing)
        return Finding("probe", "error", f"not sent: {names} not set in proofbot's environment",
                       Evidence.of(f"POST {probe.url}", None, "", 0.0))
    outcome = await fetch_via_host(conn, probe.url, method="POST", json_body=probe.json_body,
                                   timeout_s=probe.timeout_s, headers=headers or None)
    return probe_finding(probe, outcome)
