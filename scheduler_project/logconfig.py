"""Log lines as text or as JSON objects (TAKT_LOG_FORMAT, F-107).

With `json` every line of every Takt process is one JSON object:

    {"time": "2026-01-05T02:30:00.120Z", "level": "INFO", "logger": "takt.job",
     "message": "…", "host": "node-1", "pid": 4711, "worker": "worker@node-1",
     "job_id": 7, "run_id": 42, "trigger": "schedule"}

`job_id`, `run_id` and `trigger` come from a record's `extra` or, on a
worker, from the run being executed (`log_context`, set in runs/tasks.py
and runs/execution.py), so a job's own `logging.getLogger(...)` lines carry
them too. `worker` is the Celery node name on a worker process. Any other
`extra` key becomes a field of its own.

Context lives in a ContextVar: a worker's pool process runs one task at a
time, and a thread started by the run (the lock keeper) starts with an empty
context, so its lines carry only what their `extra` says.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import socket
from collections.abc import Iterator, Mapping
from contextvars import ContextVar
from datetime import UTC, datetime
from types import MappingProxyType
from typing import Any

_context: ContextVar[Mapping[str, Any]] = ContextVar(
    "takt_log_context", default=MappingProxyType({})
)
# Fields of the whole process (a worker's node name), set once it is known.
_process_fields: dict[str, Any] = {}
# What every LogRecord has; the rest of a record's attributes came from `extra`.
_STANDARD = set(logging.LogRecord("", 0, "", 0, "", None, None).__dict__) | {
    "message",
    "asctime",
}


@contextlib.contextmanager
def log_context(**fields: Any) -> Iterator[None]:
    """Within the block, log lines carry `fields` (None values left out);
    `add_log_context` adds more until the block ends."""
    token = _context.set({**_context.get(), **_present(fields)})
    try:
        yield
    finally:
        _context.reset(token)


def add_log_context(**fields: Any) -> None:
    """Add `fields` to the current `log_context` block (they end with it)."""
    _context.set({**_context.get(), **_present(fields)})


def set_process_field(name: str, value: Any) -> None:
    """A field every later line of this process (and its forked children) carries."""
    _process_fields[name] = value


def _present(fields: Mapping[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in fields.items() if v is not None}


class ContextFilter(logging.Filter):
    """Puts the process's and the current run's fields on each record,
    where its `extra` did not set them."""

    def filter(self, record: logging.LogRecord) -> bool:
        for fields in (_context.get(), _process_fields):
            for key, value in fields.items():
                if not hasattr(record, key):
                    setattr(record, key, value)
        return True


class JsonFormatter(logging.Formatter):
    """One JSON object per record (see the module docstring); a traceback
    goes in `exc_info` as text, so a record is always one line."""

    _host = socket.gethostname()

    def format(self, record: logging.LogRecord) -> str:
        entry: dict[str, Any] = {
            "time": datetime.fromtimestamp(record.created, tz=UTC).isoformat(
                timespec="milliseconds"
            ),
            "level": record.levelname,
            "logger": record.name,
            "message": record.getMessage(),
            "host": self._host,
            "pid": record.process or os.getpid(),
        }
        for key, value in record.__dict__.items():
            if key not in _STANDARD and not key.startswith("_"):
                entry[key] = value
        if record.exc_info:
            entry["exc_info"] = self.formatException(record.exc_info)
        elif record.exc_text:
            entry["exc_info"] = record.exc_text
        if record.stack_info:
            entry["stack_info"] = self.formatStack(record.stack_info)
        return json.dumps(entry, default=str)


def use_json(logger: logging.Logger) -> None:
    """Make every handler of `logger` write JSON lines with the run's
    context (for the handlers Celery sets up itself)."""
    for handler in logger.handlers:
        handler.setFormatter(JsonFormatter())
        if not any(isinstance(f, ContextFilter) for f in handler.filters):
            handler.addFilter(ContextFilter())


def logging_config(*, log_format: str, level: str) -> dict[str, Any]:
    """Django's LOGGING for `log_format` ("text" or "json"); Takt's loggers
    ("takt.*") at `level`. With json, Django's own loggers and the root
    logger (a job's own loggers, gunicorn's) write JSON lines too."""
    takt = {"handlers": ["console"], "level": level, "propagate": False}
    if log_format == "text":
        return {
            "version": 1,
            "disable_existing_loggers": False,
            "formatters": {"plain": {"format": "%(asctime)s %(levelname)s %(name)s %(message)s"}},
            "handlers": {"console": {"class": "logging.StreamHandler", "formatter": "plain"}},
            "loggers": {"takt": takt},
        }
    django = {"handlers": ["console"], "level": "INFO", "propagate": False}
    return json_config({"takt": takt, "django": django, "django.server": django})


def json_config(loggers: dict[str, Any]) -> dict[str, Any]:
    """A dictConfig whose one handler, "console", writes JSON lines with the
    run's context to stderr, for the root logger and `loggers`."""
    return {
        "version": 1,
        "disable_existing_loggers": False,
        "formatters": {"json": {"()": JsonFormatter}},
        "filters": {"context": {"()": ContextFilter}},
        "handlers": {
            "console": {
                "class": "logging.StreamHandler",
                "formatter": "json",
                "filters": ["context"],
                "stream": "ext://sys.stderr",
            }
        },
        "root": {"handlers": ["console"], "level": "INFO"},
        "loggers": loggers,
    }
