"""Production safety: what a process refuses to start with when
DJANGO_DEBUG=false, and the HTTPS settings from the environment.

`manage.py check --deploy` is clean with the values deploy/ sets
(deploy/README.md, "Production settings"); tests/e2e/test_production_e2e.py
runs it on them.
"""

from __future__ import annotations

from datetime import timedelta
from typing import TYPE_CHECKING, Any

from django.core.exceptions import ImproperlyConfigured

from scheduler_project.envconfig import env_bool, env_int, env_str

if TYPE_CHECKING:  # the settings import this module before Django is set up
    from django.http import HttpRequest

# The default of DJANGO_SECRET_KEY: fine with DEBUG on, refused without.
DEVELOPMENT_SECRET_KEY = "takt-development-key-change-me-in-production"
# Keys that are public too: the development one and deploy/'s placeholders.
PUBLIC_SECRET_KEYS = {
    DEVELOPMENT_SECRET_KEY,
    "replace-with-50-random-characters",  # deploy/systemd/takt.env.example
    "change-me-to-a-long-random-string",  # deploy/compose.yaml before it asked for one
}
# Django's own bar (`check --deploy`, security.W009): a key shorter than
# this, or of fewer distinct characters, can be guessed; made as the
# examples say (token_urlsafe(50)) it has 67 characters.
SECRET_KEY_MIN_LENGTH = 50
SECRET_KEY_MIN_DISTINCT = 5
# Words people type for a key "for now", refused however they are padded
# or repeated to reach the length (changemechangeme…). Six letters or more:
# a random key of 67 characters holds one by chance about once in 10^7.
WEAK_SECRET_WORDS = (
    "changeme",
    "change-me",
    "change_me",
    "secret",
    "password",
    "django-insecure",
    "insecure",
    "development",
    "example",
    "replace",
    "default",
    "qwerty",
)
DEVELOPMENT_HOSTS = "127.0.0.1,localhost"
YEAR_S = 365 * 86400


def host_list(debug: bool) -> list[str]:
    """DJANGO_ALLOWED_HOSTS as a list; unset, the local names with DEBUG
    on and nothing without (which `check_production` refuses)."""
    raw = env_str("DJANGO_ALLOWED_HOSTS", DEVELOPMENT_HOSTS if debug else "")
    return [host.strip() for host in raw.split(",") if host.strip()]


def secret_key_weakness(secret_key: str) -> str:
    """Why `secret_key` is unfit for production, or "" when it is fit: none,
    a public one (the development key, an example's), shorter than
    SECRET_KEY_MIN_LENGTH characters, fewer than SECRET_KEY_MIN_DISTINCT
    distinct characters, or built on a word of WEAK_SECRET_WORDS. Never
    quotes the key (it ends up in logs)."""
    key = secret_key.strip()
    if not key:
        return "not set"
    if key in PUBLIC_SECRET_KEYS:
        return "the development key and the examples' keys are public"
    if len(key) < SECRET_KEY_MIN_LENGTH:
        return f"{len(key)} characters, at least {SECRET_KEY_MIN_LENGTH} are needed"
    if len(set(key)) < SECRET_KEY_MIN_DISTINCT:
        return f"fewer than {SECRET_KEY_MIN_DISTINCT} distinct characters"
    lowered = key.lower()
    for word in WEAK_SECRET_WORDS:
        if word in lowered:
            return f"contains the guessable word {word!r}"
    return ""


def check_production(*, debug: bool, secret_key: str, allowed_hosts: list[str]) -> None:
    """With DEBUG off, refuse a weak secret key (`secret_key_weakness`: none,
    a public one, too short, or a guessable word) and an empty host list: ImproperlyConfigured naming the variable, raised when
    the settings are imported, so every process (web, worker, beat,
    manage.py) stops before it does anything."""
    if debug:
        return
    weakness = secret_key_weakness(secret_key)
    if weakness:
        raise ImproperlyConfigured(
            f"DJANGO_SECRET_KEY: {weakness}; set a long random value when DJANGO_DEBUG=false, "
            "e.g. python3 -c 'import secrets; print(secrets.token_urlsafe(50))'"
        )
    if not allowed_hosts:
        raise ImproperlyConfigured(
            "DJANGO_ALLOWED_HOSTS: set the host names the web answers to (comma-separated, "
            "e.g. takt.example.com) when DJANGO_DEBUG=false"
        )


def https_settings() -> dict[str, Any]:
    """Django's HTTPS settings from DJANGO_BEHIND_TLS_PROXY,
    DJANGO_SECURE_SSL_REDIRECT, DJANGO_SECURE_COOKIES, DJANGO_HSTS_SECONDS
    (with DJANGO_HSTS_INCLUDE_SUBDOMAINS, DJANGO_HSTS_PRELOAD) and
    DJANGO_CSRF_TRUSTED_ORIGINS. Every one is off by default: plain HTTP on
    a development machine; deploy/ turns them on."""
    values: dict[str, Any] = {
        "SECURE_SSL_REDIRECT": env_bool("DJANGO_SECURE_SSL_REDIRECT", False),
        "SESSION_COOKIE_SECURE": env_bool("DJANGO_SECURE_COOKIES", False),
        "CSRF_COOKIE_SECURE": env_bool("DJANGO_SECURE_COOKIES", False),
        "SECURE_HSTS_SECONDS": env_int("DJANGO_HSTS_SECONDS", 0, minimum=0, maximum=2 * YEAR_S),
        "SECURE_HSTS_INCLUDE_SUBDOMAINS": env_bool("DJANGO_HSTS_INCLUDE_SUBDOMAINS", False),
        "SECURE_HSTS_PRELOAD": env_bool("DJANGO_HSTS_PRELOAD", False),
        "CSRF_TRUSTED_ORIGINS": trusted_origins(env_str("DJANGO_CSRF_TRUSTED_ORIGINS", "")),
    }
    # The proxy ends TLS and says so in X-Forwarded-Proto; only behind one
    # that sets (and overwrites) the header may Django believe it.
    if env_bool("DJANGO_BEHIND_TLS_PROXY", False):
        values["SECURE_PROXY_SSL_HEADER"] = ("HTTP_X_FORWARDED_PROTO", "https")
    return values


def login_throttle_settings(*, failure_limit: int, lockout_s: int) -> dict[str, Any]:
    """django-axes's settings: after `failure_limit` failed logins in a row
    of one username from one client address, that pair is refused (HTTP 429,
    the right password too) until `lockout_s` seconds after the last
    failure; a successful login clears the count. Other users, and the same
    user from another address, still log in. Covers every login that goes
    through Django's `authenticate()` with its request: the admin's login
    page and DRF's session login (API tokens are not passwords)."""
    minutes = max(1, round(lockout_s / 60))
    return {
        "AXES_ENABLED": True,
        "AXES_FAILURE_LIMIT": failure_limit,
        "AXES_COOLOFF_TIME": timedelta(seconds=lockout_s),
        "AXES_LOCKOUT_PARAMETERS": [["username", "ip_address"]],
        "AXES_RESET_ON_SUCCESS": True,
        # The lockout ends `lockout_s` after the failure that caused it: an
        # attempt while locked out (the owner retrying) does not extend it.
        "AXES_RESET_COOL_OFF_ON_FAILURE_DURING_LOCKOUT": False,
        "AXES_CLIENT_IP_CALLABLE": "scheduler_project.security.login_client_address",
        "AXES_COOLOFF_MESSAGE": (
            f"Too many failed logins for this user from your address: try again in "
            f"{minutes} minute{'s' if minutes != 1 else ''}, or ask an administrator "
            "to unlock it (manage.py axes_reset_username USERNAME)."
        ),
    }


def login_client_address(request: HttpRequest) -> str:
    """The address a login came from, for the throttle: behind the TLS proxy
    (DJANGO_BEHIND_TLS_PROXY) the last X-Forwarded-For entry, the one the
    proxy added (earlier entries are the client's to forge); else the
    socket's REMOTE_ADDR."""
    from django.conf import settings

    forwarded = request.META.get("HTTP_X_FORWARDED_FOR", "")
    if getattr(settings, "SECURE_PROXY_SSL_HEADER", None) and forwarded.strip():
        return forwarded.split(",")[-1].strip()
    return str(request.META.get("REMOTE_ADDR", ""))


def trusted_origins(raw: str) -> list[str]:
    """`https://takt.example.com,https://*.example.com` as a list; each must
    carry its scheme (Django compares whole origins)."""
    origins = [origin.strip() for origin in raw.split(",") if origin.strip()]
    for origin in origins:
        if not origin.startswith(("http://", "https://")):
            raise ImproperlyConfigured(
                f"DJANGO_CSRF_TRUSTED_ORIGINS: {origin!r} must start with https:// (or http://)"
            )
    return origins


# HSTS for every subdomain (security.W005) and in the browsers' preload list
# (W021) commit the whole domain: its owner's choice, not Takt's, so
# `check --deploy` does not ask for them; DJANGO_HSTS_INCLUDE_SUBDOMAINS and
# DJANGO_HSTS_PRELOAD turn them on.
SILENCED_DEPLOY_CHECKS = ["security.W005", "security.W021"]
