"""Takt's own settings (TAKT_*), wherever Takt runs.

Each setting's value is, in this order: the environment variable of the
same name; the project's Django setting; Takt's default. Every value is
checked, and a bad one raises ImproperlyConfigured naming the setting, so a
typo never becomes a silent default.

Takt's own project (scheduler_project.settings) takes them from here; a
project that embeds Takt (docs/embedding.md) has them filled in when the
`jobs` app loads (`apply_to`), so it sets only what it wants to change.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from typing import Any

from django.core.exceptions import ImproperlyConfigured, ValidationError
from django.core.validators import URLValidator, validate_email

from jobs.core.watch import done_parts

Parse = Callable[[str, Any], Any]
MISSING = object()


def _number(kind: type, minimum: float, maximum: float, *, none_below: bool = False) -> Parse:
    word = "a whole number" if kind is int else "a number"

    def parse(name: str, value: Any) -> Any:
        if value is None and none_below:
            return None
        try:
            number = kind(value)
        except (TypeError, ValueError):
            raise ImproperlyConfigured(f"{name}: expected {word}, got {value!r}") from None
        if isinstance(value, bool) or (kind is int and isinstance(value, float)):
            raise ImproperlyConfigured(f"{name}: expected {word}, got {value!r}")
        if none_below and number == 0:
            return None  # 0: unset (no limit)
        if not minimum <= number <= maximum:
            raise ImproperlyConfigured(
                f"{name}: must be between {minimum:g} and {maximum:g}, got {value!r}"
            )
        return number

    return parse


def _bool(name: str, value: Any) -> bool:
    if isinstance(value, bool):
        return value
    text = str(value).strip().lower()
    if text in {"1", "true", "yes", "on"}:
        return True
    if text in {"0", "false", "no", "off"}:
        return False
    raise ImproperlyConfigured(
        f"{name}: expected a boolean (true/false, 1/0, on/off), got {value!r}"
    )


def _text(name: str, value: Any) -> str:
    if not isinstance(value, str):
        raise ImproperlyConfigured(f"{name}: expected a text, got {value!r}")
    return value.strip()


def _choice(*choices: str) -> Parse:
    def parse(name: str, value: Any) -> str:
        text = _text(name, value).lower()
        if text not in choices:
            raise ImproperlyConfigured(
                f"{name}: expected {', '.join(choices[:-1])} or {choices[-1]}, got {value!r}"
            )
        return text

    return parse


# jobs.capabilities' codenames (listed here: settings load before the apps).
CAPABILITY_CODENAMES = (
    "run_programs",
    "run_celery_tasks",
    "start_remote_runs",
    "watch_folders",
    "write_scripts",
)


def _capability(name: str, value: Any) -> str:
    if value not in CAPABILITY_CODENAMES:
        raise ImproperlyConfigured(
            f"{name}: unknown capability {value!r} (one of {', '.join(CAPABILITY_CODENAMES)})"
        )
    return str(value)


def _list(separator: str, item: Parse | None = None) -> Parse:
    def parse(name: str, value: Any) -> list[str]:
        if isinstance(value, str):
            values = [v.strip() for v in value.split(separator) if v.strip()]
        elif isinstance(value, list | tuple):
            values = [_text(name, v) for v in value]
        else:
            raise ImproperlyConfigured(f"{name}: expected a list, got {value!r}")
        return [item(name, v) if item else v for v in values]

    return parse


def _absolute(name: str, folder: str) -> str:
    if not folder.startswith("/"):
        raise ImproperlyConfigured(f"{name}: {folder!r} must be an absolute path (starting with /)")
    return folder


def _email(name: str, address: str) -> str:
    try:
        validate_email(address)
    except ValidationError:
        raise ImproperlyConfigured(f"{name}: not an e-mail address: {address!r}") from None
    return address


def _webhook(name: str, value: Any) -> str:
    url = _text(name, value)
    if url:
        try:
            URLValidator(schemes=["http", "https"])(url)
        except ValidationError:
            raise ImproperlyConfigured(
                f"{name}: expected an http:// or https:// URL, got {url!r}"
            ) from None
    return url


def _run_file_prefix(name: str, value: Any) -> str:
    prefix = _text(name, value)
    plain = prefix.replace("_", "a").replace(".", "a").replace("-", "a")
    if not plain.isalnum() or len(prefix) > 50:
        raise ImproperlyConfigured(
            f"{name}: must be 1 to 50 letters, digits, '_', '.' or '-', got {prefix!r}"
        )
    return prefix


def _jobs(name: str, value: Any) -> dict[str, Any]:
    if isinstance(value, str):
        raise ImproperlyConfigured(f"{name}: set it in the settings module, not the environment")
    if not isinstance(value, dict):
        raise ImproperlyConfigured(f"{name}: expected a dict {{key: job}}, got {value!r}")
    return value


DAY = 86400
# name -> (default, parse). Comments: docs and README's settings table.
SETTINGS: dict[str, tuple[Any, Parse]] = {
    "TAKT_POLL_SECONDS": (1.0, _number(float, 0.05, 60)),
    "TAKT_DEFAULT_TIMEOUT": (300, _number(int, 1, 7 * DAY)),
    "TAKT_SCHEDULER_ENABLED": (True, _bool),
    "TAKT_BEAT_NAME": ("", _text),
    "TAKT_LOCK_TTL_SECONDS": (30, _number(int, 3, 3600)),
    "TAKT_CLOCK": ("database", _choice("database", "local")),
    "TAKT_BEAT_IDLE_IN_TRANSACTION_SECONDS": (5.0, _number(float, 0, 3600)),
    "TAKT_BEAT_STATEMENT_TIMEOUT_SECONDS": (60.0, _number(float, 0, 3600)),
    "TAKT_CLOCK_SKEW_WARN_SECONDS": (2.0, _number(float, 0.1, 3600)),
    "TAKT_LOST_CHECK_SECONDS": (5, _number(int, 1, 3600)),
    "TAKT_REPUBLISH_AFTER_SECONDS": (15, _number(int, 1, 3600)),
    "TAKT_RESEND_AFTER_SECONDS": (30, _number(int, 1, DAY)),
    "TAKT_RESEND_CHECK_SECONDS": (5.0, _number(float, 0.1, 3600)),
    "TAKT_WORKER_ALIVE_TTL_SECONDS": (10, _number(int, 3, 3600)),
    "TAKT_CANCEL_GRACE_SECONDS": (10, _number(int, 1, 3600)),
    "TAKT_COMMAND_KILL_GRACE_SECONDS": (5, _number(int, 1, 25)),
    "TAKT_SCRIPTS_ENABLED": (False, _bool),
    "TAKT_DB_OUTAGE_MAX_SECONDS": (300, _number(int, 1, DAY)),
    "TAKT_DB_PREPARED_STATEMENTS": (True, _bool),
    "TAKT_OUTPUT_LIMIT_BYTES": (256 * 1024, _number(int, 1024, 64 * 1024 * 1024)),
    "TAKT_MAX_CONCURRENCY": (None, _number(int, 1, 100_000, none_below=True)),
    "TAKT_CLAIM_BATCH": (500, _number(int, 1, 100_000)),
    "TAKT_JOB_MODULES": ([], _list(",")),
    "TAKT_KEY_PREFIX": ("takt", _text),
    "TAKT_RETENTION_DAYS": (14, _number(int, 1, 3650)),
    "TAKT_EXPIRE_AFTER_DAYS": (7, _number(int, 1, 3650)),
    "TAKT_MAINTENANCE_LOCK_FILE": ("", _text),
    "TAKT_PING_TOKEN": ("", _text),
    "TAKT_PING_NOTIFY_INTERVAL_SECONDS": (60, _number(int, 1, DAY)),
    "TAKT_METRICS_TOKEN": ("", _text),
    "TAKT_DECISION_LOG_SIZE": (100_000, _number(int, 100, 10_000_000)),
    "TAKT_DECISION_LOG_DAYS": (30, _number(int, 1, 3650)),
    "TAKT_DEDUPE_WINDOW_SECONDS": (DAY, _number(int, 1, 365 * DAY)),
    "TAKT_WATCH_FILES": (True, _bool),
    "TAKT_WATCH_POLLING": (False, _bool),
    "TAKT_RUN_FILE_FOLDERS": ([], _list(":", _absolute)),
    "TAKT_RUN_FILE_PREFIX": ("Takt", _run_file_prefix),
    "TAKT_RUN_FILE_DONE_FOLDER": ("", _text),
    "TAKT_RUN_FILES_MAY_START": ([], _list(",", _capability)),
    "TAKT_REMOTE_ALLOW_HTTP": (False, _bool),
    "TAKT_WATCH_ROOTS": ([], _list(":", _absolute)),
    "TAKT_JOBS": ({}, _jobs),
    "TAKT_JOBS_FILE": ("", _text),
    "TAKT_CELERY_BEAT_SCHEDULE": ("sync", _choice("sync", "refuse")),
    "TAKT_HEARTBEAT_GRACE_SECONDS": (3600, _number(int, 0, 30 * DAY)),
    "TAKT_ALERT_MIN_SEVERITY": ("warning", _choice("info", "warning", "critical")),
    "TAKT_ALERT_EMAILS": ([], _list(",", _email)),
    "TAKT_ALERT_WEBHOOK_URL": ("", _webhook),
    "TAKT_ALERT_TIMEOUT_SECONDS": (5.0, _number(float, 0.1, 60)),
    "TAKT_FLOWER_URL": ("", _webhook),
    "TAKT_LOG_FORMAT": ("text", _choice("text", "json")),
    # Bounds (issue 25): what one request, job or file may make Takt hold.
    "TAKT_API_MAX_PAGE_SIZE": (1000, _number(int, 1, 100_000)),
    "TAKT_LOG_JOB_OUTPUT": (False, _bool),
    "TAKT_MAX_PARAMS_BYTES": (64 * 1024, _number(int, 1024, 16 * 1024 * 1024)),
    "TAKT_IMPORT_MAX_BYTES": (1_000_000, _number(int, 1000, 100_000_000)),
    "TAKT_IMPORT_MAX_NODES": (200_000, _number(int, 100, 10_000_000)),
}


def takt_settings(
    project: Mapping[str, Any] | None = None, environ: Mapping[str, str] | None = None
) -> dict[str, Any]:
    """Every TAKT_* setting: the environment's value (a non-empty variable),
    else the project's, else the default; checked (ImproperlyConfigured
    naming the setting)."""
    environ = os.environ if environ is None else environ
    project = project or {}
    values = {}
    for name, (default, parse) in SETTINGS.items():
        raw = environ.get(name, "")
        if raw != "" and name != "TAKT_JOBS":
            values[name] = parse(name, raw)
        elif name in project:
            values[name] = parse(name, project[name])
        else:
            values[name] = parse(name, default) if default is not None else None
    _check_done_folder(values)
    return values


def _check_done_folder(values: dict[str, Any]) -> None:
    """TAKT_RUN_FILE_DONE_FOLDER lies inside every RUN-file folder: a
    consumed request never leaves its folder (docs/watched-folders.md)."""
    for folder in values["TAKT_RUN_FILE_FOLDERS"]:
        try:
            done_parts(folder, values["TAKT_RUN_FILE_DONE_FOLDER"])
        except ValueError as exc:
            raise ImproperlyConfigured(f"TAKT_RUN_FILE_DONE_FOLDER: {exc}") from None


def apply_to(settings: Any, app_broker: Callable[[], Any] = lambda: None) -> None:
    """Fill in a project's Django settings: every TAKT_* setting (the
    environment over the project's value over the default), and REDIS_URL
    (Takt's locks and marks) when the project has none: the environment's,
    else the Celery broker's URL if it is a Redis one (CELERY_BROKER_URL, or
    `app_broker()`: the broker the project's Celery app was given in code),
    else redis://127.0.0.1:6379/0."""
    project = {name: getattr(settings, name) for name in SETTINGS if hasattr(settings, name)}
    for name, value in takt_settings(project).items():
        setattr(settings, name, value)
    if not hasattr(settings, "REDIS_URL"):
        broker = str(getattr(settings, "CELERY_BROKER_URL", "") or "")
        if not broker and not os.environ.get("REDIS_URL"):
            broker = str(app_broker() or "")
        fallback = broker if broker.startswith(("redis://", "rediss://")) else ""
        settings.REDIS_URL = os.environ.get("REDIS_URL") or fallback or "redis://127.0.0.1:6379/0"
