"""Django's e-mail settings from the environment (the alert e-mails of
heartbeats/notify.py and heartbeats/job_events.py go through them).

Either one URL,

    EMAIL_URL=smtp://user:password@mail.example.com:587/?tls=1
    EMAIL_URL=smtps://user:password@mail.example.com        (SSL, port 465)
    EMAIL_URL=console://                                    (printed, for trying out)

or Django's own names: EMAIL_HOST, EMAIL_PORT, EMAIL_HOST_USER,
EMAIL_HOST_PASSWORD, EMAIL_USE_TLS, EMAIL_USE_SSL, EMAIL_TIMEOUT; not both.
DEFAULT_FROM_EMAIL is the sender. A bad value raises ImproperlyConfigured
naming the variable.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from email.utils import parseaddr
from typing import Any
from urllib.parse import parse_qsl, unquote, urlsplit

from django.core.exceptions import ImproperlyConfigured, ValidationError
from django.core.validators import validate_email

SMTP_BACKEND = "django.core.mail.backends.smtp.EmailBackend"
SCHEMES = {
    "smtp": (SMTP_BACKEND, 25, False),  # backend, default port, SSL
    "smtps": (SMTP_BACKEND, 465, True),
    "console": ("django.core.mail.backends.console.EmailBackend", None, False),
}
SEPARATE = (
    "EMAIL_HOST",
    "EMAIL_PORT",
    "EMAIL_HOST_USER",
    "EMAIL_HOST_PASSWORD",
    "EMAIL_USE_TLS",
    "EMAIL_USE_SSL",
)
TRUE, FALSE = {"1", "true", "yes", "on"}, {"0", "false", "no", "off"}


def email_settings(environ: Mapping[str, str] | None = None) -> dict[str, Any]:
    """The EMAIL_* settings (and DEFAULT_FROM_EMAIL, SERVER_EMAIL when
    DEFAULT_FROM_EMAIL is set) for Django, from `environ` (default: the
    process's environment). Raises ImproperlyConfigured naming the variable."""
    environ = os.environ if environ is None else environ
    url = environ.get("EMAIL_URL", "").strip()
    given = [name for name in SEPARATE if environ.get(name, "").strip()]
    if url and given:
        raise ImproperlyConfigured(f"EMAIL_URL: set it or {', '.join(given)}, not both")
    values = _from_url(url) if url else _from_separate(environ)
    timeout = environ.get("EMAIL_TIMEOUT", "").strip()
    if timeout:
        values["EMAIL_TIMEOUT"] = _number("EMAIL_TIMEOUT", timeout, 0.1, 600, float)
    sender = environ.get("DEFAULT_FROM_EMAIL", "").strip()
    if sender:
        _check_address("DEFAULT_FROM_EMAIL", sender)
        values["DEFAULT_FROM_EMAIL"] = values["SERVER_EMAIL"] = sender
    if values.get("EMAIL_USE_TLS") and values.get("EMAIL_USE_SSL"):
        raise ImproperlyConfigured(
            f"{'EMAIL_URL' if url else 'EMAIL_USE_TLS'}: TLS (STARTTLS) and SSL exclude each other"
        )
    return values


def _from_url(url: str) -> dict[str, Any]:
    name = "EMAIL_URL"
    try:
        parts = urlsplit(url)
        port = parts.port
    except ValueError as exc:
        raise ImproperlyConfigured(f"{name}: {exc}") from None
    if parts.scheme not in SCHEMES:
        raise ImproperlyConfigured(
            f"{name}: expected smtp://, smtps:// or console://, got {parts.scheme or url!r}"
        )
    backend, default_port, ssl = SCHEMES[parts.scheme]
    values: dict[str, Any] = {"EMAIL_BACKEND": backend}
    if backend != SMTP_BACKEND:
        return values
    if not parts.hostname:
        raise ImproperlyConfigured(f"{name}: no host in {_masked(url)!r}")
    values.update(
        EMAIL_HOST=parts.hostname,
        EMAIL_PORT=port or default_port,
        EMAIL_HOST_USER=unquote(parts.username or ""),
        EMAIL_HOST_PASSWORD=unquote(parts.password or ""),
        EMAIL_USE_SSL=ssl,
        EMAIL_USE_TLS=False,
    )
    for key, raw in parse_qsl(parts.query, keep_blank_values=True):
        if key in ("tls", "ssl"):
            values[f"EMAIL_USE_{key.upper()}"] = _flag(f"{name} ({key}=)", raw)
        elif key == "timeout":
            values["EMAIL_TIMEOUT"] = _number(f"{name} (timeout=)", raw, 0.1, 600, float)
        else:
            raise ImproperlyConfigured(
                f"{name}: unknown option {key!r} (expected tls, ssl or timeout)"
            )
    return values


def _from_separate(environ: Mapping[str, str]) -> dict[str, Any]:
    """Django's names; an unset one keeps Django's default."""
    values: dict[str, Any] = {}
    host = environ.get("EMAIL_HOST", "").strip()
    if host:
        values["EMAIL_HOST"] = host
    port = environ.get("EMAIL_PORT", "").strip()
    if port:
        values["EMAIL_PORT"] = _number("EMAIL_PORT", port, 1, 65535, int)
    for key in ("EMAIL_HOST_USER", "EMAIL_HOST_PASSWORD"):
        if environ.get(key, ""):
            values[key] = environ[key]
    for key in ("EMAIL_USE_TLS", "EMAIL_USE_SSL"):
        if environ.get(key, "").strip():
            values[key] = _flag(key, environ[key])
    return values


def _flag(name: str, raw: str) -> bool:
    value = raw.strip().lower()
    if value in TRUE:
        return True
    if value in FALSE:
        return False
    raise ImproperlyConfigured(f"{name}: expected a boolean (true/false, 1/0, on/off), got {raw!r}")


def _number(name: str, raw: str, minimum: float, maximum: float, kind: type) -> Any:
    try:
        value = kind(raw)
    except ValueError:
        word = "a whole number" if kind is int else "a number"
        raise ImproperlyConfigured(f"{name}: expected {word}, got {raw!r}") from None
    if not minimum <= value <= maximum:
        raise ImproperlyConfigured(
            f"{name}: must be between {minimum:g} and {maximum:g}, got {raw!r}"
        )
    return value


def _check_address(name: str, value: str) -> None:
    """`ops@example.com` or `Takt <ops@example.com>`."""
    _, address = parseaddr(value)
    try:
        validate_email(address)
    except ValidationError:
        raise ImproperlyConfigured(f"{name}: not an e-mail address: {value!r}") from None


def _masked(url: str) -> str:
    parts = urlsplit(url)
    if parts.password:
        return url.replace(f":{parts.password}@", ":***@", 1)
    return url
