"""What a job callable sees (F-03): its name, trigger, params, and
`log()`/`fail()`."""

from __future__ import annotations

import logging
import threading
from dataclasses import dataclass, field
from typing import Any

log = logging.getLogger("takt.job")


class JobFailed(Exception):
    """Raised by ``job.fail(msg)``: the run ends `failed` with that message."""


@dataclass
class JobContext:
    """Handed to a registered job function as its one argument."""

    name: str
    description: str
    trigger: str
    params: dict[str, Any]
    run_id: int
    job_id: int
    output_limit: int = 256 * 1024
    _lines: list[str] = field(default_factory=list)
    _size: int = 0
    _dropped: int = 0
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def log(self, message: object) -> None:
        """Append a line to the run's output (kept up to the output limit)."""
        line = str(message)
        log.info("%s", line, extra={"job_id": self.job_id, "run_id": self.run_id})
        with self._lock:
            if self._size + len(line) + 1 > self.output_limit:
                self._dropped += len(line) + 1
                return
            self._lines.append(line)
            self._size += len(line) + 1

    def fail(self, message: str) -> None:
        """End the run as failed with `message`."""
        raise JobFailed(message)

    def output(self) -> str:
        with self._lock:
            text = "\n".join(self._lines)
            if self._dropped:
                text += f"\n[output truncated: {self._dropped} more characters not kept]"
            return text
