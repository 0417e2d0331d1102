"""A local webhook receiver for the notification tests: an HTTP server on
127.0.0.1 that records the JSON it is POSTed, optionally holding each
request until the test releases it."""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


class Hook:
    """Records each POST's JSON body (`received`) and answers `status`.
    With `hold=True` every request waits for `release` (at most
    `hold_s`, so code that waits for the answer fails a test, not hangs it)."""

    def __init__(self, *, hold: bool = False, hold_s: float = 20) -> None:
        self.status = 200
        self.received: list[dict[str, Any]] = []
        self.release = threading.Event()
        if not hold:
            self.release.set()
        hook = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers["Content-Length"]))
                hook.release.wait(hold_s)
                hook.received.append(json.loads(body))
                self.send_response(hook.status)
                self.end_headers()

            def log_message(self, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/takt"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def events(self) -> list[tuple[str, str]]:
        return [(r["event"], r["title"]) for r in self.received]

    def close(self) -> None:
        self.release.set()
        self.server.shutdown()
        self.server.server_close()
        self.thread.join(timeout=10)
