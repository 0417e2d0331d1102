"""The heartbeats and alerts API (F-41, F-60..F-62)."""

from __future__ import annotations

from typing import Any


def register(router: Any) -> list[Any]:
    return []
