"""``health``: health_url answers 200, fetched through an SSH forward so it sees what the host sees."""

from __future__ import annotations

import time
from dataclasses import dataclass
from urllib.parse import urlsplit

import httpx

from commands.findings import Evidence, Finding
from commands.ssh import HostConnection

HEALTH_TIMEOUT_S = 5.0


@dataclass(frozen=True)
class HttpOutcome:
    """What an HTTP request through the forward came back with (status None: no response)."""

    request: str
    status: int | None
    body: str
    elapsed_s: float
    problem: str = ""


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
        sent_headers = {**(headers or {}), "Host": parts.netloc}
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


def health_finding(outcome: HttpOutcome) -> Finding:
    shown = f"HTTP {outcome.status}\n{outcome.body}" if outcome.status is not None else outcome.problem
    evidence = Evidence.of(outcome.request, 0 if outcome.status is not None else None, shown, outcome.elapsed_s)
    details = {"http_status": outcome.status}
    if outcome.status == 200:
        return Finding("health", "pass", f"200 in {outcome.elapsed_s * 1000:.0f} ms", evidence, details)
    if outcome.status is None:
        return Finding("health", "fail", outcome.problem, evidence, details)
    return Finding("health", "fail", f"answered {outcome.status}, not 200", evidence, details)
