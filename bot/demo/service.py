#!/usr/bin/env python3
"""Stand-in for an LLM inference server (sglang-like), run by `proofbot demo` and the test lab.

Standard library only, so it also runs inside the minimal Debian containers of tier 3.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import socket
import socketserver
import sys
import threading
import time
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

STARTED = time.monotonic()


class Options:
    """Parsed command line (unknown flags are accepted and ignored)."""

    def __init__(self, argv: list[str]) -> None:
        p = argparse.ArgumentParser(add_help=True)
        p.add_argument("--host", default="127.0.0.1")
        p.add_argument("--port", type=int, default=30000)
        p.add_argument("--speculative-algorithm", default=None)
        p.add_argument("--enable-ddtree", action="store_true")
        p.add_argument("--api-key", default=None)
        p.add_argument("--startup-delay", type=float, default=0.0)
        p.add_argument("--reply", default="OK")
        p.add_argument("--hang", action="store_true")
        p.add_argument("--exit-after", type=float, default=0.0)  # crash (exit 1) this long after start
        p.add_argument("--ignore-sigterm", action="store_true")  # a stop that never finishes by itself
        p.add_argument("--model-path", default="default")
        ns, _unknown = p.parse_known_args(argv)
        self.host: str = ns.host
        self.port: int = ns.port
        self.api_key: str | None = ns.api_key
        self.startup_delay: float = ns.startup_delay
        self.reply: str = ns.reply
        self.hang: bool = ns.hang
        self.exit_after: float = ns.exit_after
        self.ignore_sigterm: bool = ns.ignore_sigterm
        self.model: str = ns.model_path


OPTS = Options([])  # replaced by main(); importing this module has no side effects


def ready() -> bool:
    return time.monotonic() - STARTED >= OPTS.startup_delay


class Handler(BaseHTTPRequestHandler):
    server_version = "fake-llm/1.0"
    protocol_version = "HTTP/1.1"

    def address_string(self) -> str:  # never reverse-resolve the client
        return str(self.client_address[0])

    def log_message(self, format: str, *args: Any) -> None:  # quiet per request
        return

    def _send(self, code: int, body: bytes, ctype: str = "text/plain") -> None:
        self.send_response(code)
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def _json(self, code: int, obj: Any) -> None:
        self._send(code, json.dumps(obj).encode(), "application/json")

    def _authorized(self) -> bool:
        if OPTS.api_key is None:
            return True
        return self.headers.get("Authorization", "") == f"Bearer {OPTS.api_key}"

    def do_GET(self) -> None:
        path = self.path.split("?", 1)[0]
        if path in ("/health", "/health_generate"):
            if ready():
                self._send(200, b"ok")
            else:
                self._send(503, b"starting")
        elif path == "/v1/models":
            if not self._authorized():
                self._json(401, {"error": "unauthorized"})
                return
            self._json(200, {"object": "list", "data": [{"id": OPTS.model, "object": "model"}]})
        else:
            self._send(404, b"not found")

    def do_POST(self) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(length) if length else b""
        path = self.path.split("?", 1)[0]
        if path != "/v1/chat/completions":
            self._send(404, b"not found")
            return
        if not ready():
            self._send(503, b"starting")
            return
        if not self._authorized():
            self._json(401, {"error": "unauthorized"})
            return
        if OPTS.hang:
            threading.Event().wait()  # never answer; the client has to time out
        try:
            req = json.loads(raw or b"{}")
        except ValueError:
            self._json(400, {"error": "bad json"})
            return
        self._json(
            200,
            {
                "id": "chatcmpl-lab",
                "object": "chat.completion",
                "created": int(time.time()),
                "model": req.get("model", OPTS.model) if isinstance(req, dict) else OPTS.model,
                "choices": [
                    {
                        "index": 0,
                        "message": {"role": "assistant", "content": OPTS.reply},
                        "finish_reason": "stop",
                    }
                ],
                "usage": {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2},
            },
        )


class Server(ThreadingHTTPServer):
    daemon_threads = True
    allow_reuse_address = True
    # One stand-in answers every host of bench/fleet_bench's tier-1 fleet, all at once: socketserver's
    # backlog of 5 dropped connections there ("Server disconnected without sending a response").
    request_queue_size = 128

    def server_bind(self) -> None:
        # HTTPServer.server_bind calls socket.getfqdn(), which hangs without DNS.
        socketserver.TCPServer.server_bind(self)
        host, port = self.server_address[:2]
        self.server_name = str(host)
        self.server_port = int(port)


def _schedule_lifecycle() -> None:
    """Log the moment /health starts answering 200 (benchmarks read it) and the test faults."""
    def announce_ready() -> None:
        print(f"fake-llm pid {os.getpid()} ready at {time.time():.6f}", file=sys.stderr, flush=True)

    def crash() -> None:
        print(f"fake-llm pid {os.getpid()} crashing (--exit-after {OPTS.exit_after:g})", file=sys.stderr, flush=True)
        os._exit(1)

    def at(delay_s: float, action: Callable[[], None]) -> None:
        timer = threading.Timer(max(0.0, delay_s - (time.monotonic() - STARTED)), action)
        timer.daemon = True
        timer.start()

    if OPTS.ignore_sigterm:
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
    at(OPTS.startup_delay, announce_ready)
    if OPTS.exit_after:
        at(OPTS.exit_after, crash)


def main() -> None:
    global OPTS
    OPTS = Options(sys.argv[1:])
    family = socket.AF_INET6 if ":" in OPTS.host else socket.AF_INET
    Server.address_family = family
    httpd = Server((OPTS.host, OPTS.port), Handler)
    print(f"fake-llm listening on {OPTS.host}:{OPTS.port}", file=sys.stderr, flush=True)
    _schedule_lifecycle()
    try:
        httpd.serve_forever(poll_interval=0.2)
    except KeyboardInterrupt:
        pass
    finally:
        httpd.server_close()


if __name__ == "__main__":
    main()
