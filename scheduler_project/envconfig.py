"""Typed reading of settings from the environment.

Every value is checked when the process starts; a bad one raises
ImproperlyConfigured naming the variable, so a typo never becomes a silent
default.
"""

from __future__ import annotations

import os

from django.core.exceptions import ImproperlyConfigured


def env_str(name: str, default: str) -> str:
    return os.environ.get(name, default)


def env_bool(name: str, default: bool) -> bool:
    raw = os.environ.get(name)
    if raw is None or raw == "":
        return default
    value = raw.strip().lower()
    if value in {"1", "true", "yes", "on"}:
        return True
    if value in {"0", "false", "no", "off"}:
        return False
    raise ImproperlyConfigured(f"{name}: expected a boolean (true/false, 1/0, on/off), got {raw!r}")


def env_float(name: str, default: float, *, minimum: float, maximum: float) -> float:
    raw = os.environ.get(name)
    if raw is None or raw == "":
        return default
    try:
        value = float(raw)
    except ValueError:
        raise ImproperlyConfigured(f"{name}: expected a number, got {raw!r}") from None
    if not minimum <= value <= maximum:
        raise ImproperlyConfigured(
            f"{name}: must be between {minimum:g} and {maximum:g}, got {raw!r}"
        )
    return value


def env_int(name: str, default: int, *, minimum: int, maximum: int) -> int:
    raw = os.environ.get(name)
    if raw is None or raw == "":
        return default
    try:
        value = int(raw)
    except ValueError:
        raise ImproperlyConfigured(f"{name}: expected a whole number, got {raw!r}") from None
    if not minimum <= value <= maximum:
        raise ImproperlyConfigured(f"{name}: must be between {minimum} and {maximum}, got {raw!r}")
    return value
