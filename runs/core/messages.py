"""The texts runs carry when the engine refuses or defers them, shared by
the beat, the workers and the admin (which recognises the UTC times in
them and shows them in the reader's zone). Pure."""

from __future__ import annotations

from datetime import UTC, datetime

MAINTENANCE_REFUSAL = "refused in maintenance mode: the job is not allowed during maintenance"


def utc_text(value: datetime) -> str:
    return value.astimezone(UTC).strftime("%Y-%m-%d %H:%M:%S UTC")
