"""Production settings: with DJANGO_DEBUG=false a process refuses a public
secret key and an empty host list, naming the variable; `manage.py check
--deploy` is clean with what deploy/ sets; e-mail settings from EMAIL_URL
or Django's names, a bad value named. The processes are real `manage.py`
and `celery` runs of Takt's settings, not an import in the test's process."""

from __future__ import annotations

import re
import secrets
import subprocess
import sys

import pytest
import yaml
from django.core.exceptions import ImproperlyConfigured

from scheduler_project.mailconfig import email_settings
from tests.processes import ROOT, clean_env

MANAGE = [sys.executable, "manage.py"]
CELERY = [sys.executable, "-m", "celery", "-A", "scheduler_project"]


def run(argv: list[str], env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(argv, cwd=ROOT, env=env, capture_output=True, text=True, timeout=120)


def key() -> str:
    return secrets.token_urlsafe(50)


@pytest.mark.parametrize(
    ("variables", "named"),
    [
        ({}, "DJANGO_SECRET_KEY"),
        (
            {"DJANGO_SECRET_KEY": "takt-development-key-change-me-in-production"},
            "DJANGO_SECRET_KEY",
        ),
        ({"DJANGO_SECRET_KEY": "replace-with-50-random-characters"}, "DJANGO_SECRET_KEY"),
        ({"DJANGO_SECRET_KEY": "<key>"}, "DJANGO_ALLOWED_HOSTS"),
        ({"DJANGO_SECRET_KEY": "<key>", "DJANGO_ALLOWED_HOSTS": " , "}, "DJANGO_ALLOWED_HOSTS"),
    ],
)
@pytest.mark.parametrize("process", ["manage.py check", "celery worker", "celery beat"])
def test_debug_off_refuses_to_start_naming_the_variable(tmp_path, variables, named, process):
    variables = {k: key() if v == "<key>" else v for k, v in variables.items()}
    env = clean_env(tmp_path, DJANGO_DEBUG="false", **variables)
    argv = {
        "manage.py check": [*MANAGE, "check"],
        "celery worker": [*CELERY, "worker", "--pool=solo", "-Q", "takt"],
        "celery beat": [*CELERY, "beat", "-S", "runs.beat:TaktScheduler", "--pidfile="],
    }[process]

    result = run(argv, env)

    assert result.returncode != 0
    assert f"ImproperlyConfigured: {named}: " in result.stderr, result.stderr[-2000:]


WEAK_KEYS = {
    "changeme": "8 characters, at least 50",
    "<49 random>": "49 characters, at least 50",
    "ab" * 40: "fewer than 5 distinct characters",
    "changeme" * 8: "the guessable word 'changeme'",
    "django-insecure-" + "k3#9x!" * 8: "the guessable word 'django-insecure'",
    "My-Secret-Key-" + "0123456789" * 5: "the guessable word 'secret'",
}


@pytest.mark.parametrize(("weak", "reason"), WEAK_KEYS.items(), ids=range(len(WEAK_KEYS)))
def test_debug_off_refuses_a_short_or_weak_secret_key(tmp_path, weak, reason):
    """`manage.py check --deploy` (any process) stops at the settings, naming
    the variable and why, never printing the key."""
    weak = secrets.token_urlsafe(64)[:49] if weak == "<49 random>" else weak
    env = clean_env(
        tmp_path, DJANGO_DEBUG="false", DJANGO_SECRET_KEY=weak, DJANGO_ALLOWED_HOSTS="x.example"
    )

    result = run([*MANAGE, "check", "--deploy"], env)

    assert result.returncode != 0
    assert "ImproperlyConfigured: DJANGO_SECRET_KEY: " in result.stderr, result.stderr[-2000:]
    assert reason in result.stderr, result.stderr[-2000:]
    assert weak not in result.stderr


def test_debug_off_accepts_a_random_key_of_50_characters(tmp_path):
    env = clean_env(
        tmp_path,
        DJANGO_DEBUG="false",
        DJANGO_SECRET_KEY=secrets.token_urlsafe(64)[:50],
        DJANGO_ALLOWED_HOSTS="x.example",
    )
    result = run([*MANAGE, "check"], env)
    assert result.returncode == 0, result.stderr


def test_debug_on_keeps_the_development_defaults(tmp_path):
    result = run([*MANAGE, "check"], clean_env(tmp_path))
    assert result.returncode == 0, result.stderr


def systemd_env() -> dict[str, str]:
    """deploy/systemd/takt.env.example's variables."""
    lines = (ROOT / "deploy/systemd/takt.env.example").read_text().splitlines()
    pairs = [line.split("=", 1) for line in lines if re.match(r"^[A-Z_]+=", line)]
    return {name: value for name, value in pairs}


def compose_env() -> dict[str, str]:
    """deploy/compose.yaml's environment of the Takt services, each
    ${VAR:-default} at its default."""
    compose = yaml.safe_load((ROOT / "deploy/compose.yaml").read_text())
    environment = compose["x-takt"]["environment"]

    def default(value: object) -> str:
        match = re.fullmatch(r"\$\{[A-Z_]+(?::-(.*)|:\?.*)\}", str(value))
        return str(value) if match is None else (match.group(1) or "")

    return {name: default(value) for name, value in environment.items()}


@pytest.mark.parametrize("source", ["systemd", "compose"])
def test_check_deploy_is_clean_with_the_deploy_files_settings(tmp_path, source):
    deploy = systemd_env() if source == "systemd" else compose_env()
    assert deploy["DJANGO_DEBUG"] == "false" and deploy["DJANGO_SECURE_SSL_REDIRECT"] == "true"
    deploy.update(DJANGO_SECRET_KEY=key(), TAKT_VAR_DIR=str(tmp_path))  # the one thing to set
    env = {**clean_env(tmp_path), **deploy}

    result = run([*MANAGE, "check", "--deploy", "--fail-level", "WARNING"], env)

    assert result.returncode == 0, result.stdout + result.stderr
    assert "no issues" in result.stdout


def test_check_deploy_warns_without_the_https_settings(tmp_path):
    env = clean_env(
        tmp_path, DJANGO_DEBUG="false", DJANGO_SECRET_KEY=key(), DJANGO_ALLOWED_HOSTS="x.example"
    )
    result = run([*MANAGE, "check", "--deploy", "--fail-level", "WARNING"], env)
    assert result.returncode != 0
    for check in ("security.W004", "security.W008", "security.W012", "security.W016"):
        assert check in result.stderr


def test_email_url_smtp_with_starttls():
    assert email_settings(
        {
            "EMAIL_URL": "smtp://alerts%40example.com:p%40ss%3Aw@mail.example.com:587/?tls=1",
            "DEFAULT_FROM_EMAIL": "Takt <takt@example.com>",
        }
    ) == {
        "EMAIL_BACKEND": "django.core.mail.backends.smtp.EmailBackend",
        "EMAIL_HOST": "mail.example.com",
        "EMAIL_PORT": 587,
        "EMAIL_HOST_USER": "alerts@example.com",
        "EMAIL_HOST_PASSWORD": "p@ss:w",
        "EMAIL_USE_TLS": True,
        "EMAIL_USE_SSL": False,
        "DEFAULT_FROM_EMAIL": "Takt <takt@example.com>",
        "SERVER_EMAIL": "Takt <takt@example.com>",
    }


def test_email_url_smtps_and_console():
    smtps = email_settings({"EMAIL_URL": "smtps://mail.example.com?timeout=7"})
    assert (smtps["EMAIL_PORT"], smtps["EMAIL_USE_SSL"], smtps["EMAIL_USE_TLS"]) == (
        465,
        True,
        False,
    )
    assert smtps["EMAIL_TIMEOUT"] == 7.0
    assert email_settings({"EMAIL_URL": "console://"}) == {
        "EMAIL_BACKEND": "django.core.mail.backends.console.EmailBackend"
    }


def test_email_separate_variables():
    assert email_settings(
        {
            "EMAIL_HOST": "mail.example.com",
            "EMAIL_PORT": "2525",
            "EMAIL_HOST_USER": "u",
            "EMAIL_HOST_PASSWORD": "p",
            "EMAIL_USE_SSL": "yes",
            "EMAIL_TIMEOUT": "3",
        }
    ) == {
        "EMAIL_HOST": "mail.example.com",
        "EMAIL_PORT": 2525,
        "EMAIL_HOST_USER": "u",
        "EMAIL_HOST_PASSWORD": "p",
        "EMAIL_USE_SSL": True,
        "EMAIL_TIMEOUT": 3.0,
    }
    assert email_settings({}) == {}  # Django's defaults


@pytest.mark.parametrize(
    ("environ", "message"),
    [
        ({"EMAIL_URL": "http://mail.example.com"}, "EMAIL_URL: expected smtp://, smtps://"),
        ({"EMAIL_URL": "smtp://u:secret@/"}, "EMAIL_URL: no host in 'smtp://u:***@/'"),
        ({"EMAIL_URL": "smtp://mail.example.com:99999"}, "EMAIL_URL: Port out of range"),
        (
            {"EMAIL_URL": "smtp://mail.example.com/?tls=maybe"},
            "EMAIL_URL (tls=): expected a boolean",
        ),
        (
            {"EMAIL_URL": "smtp://mail.example.com/?starttls=1"},
            "EMAIL_URL: unknown option 'starttls'",
        ),
        ({"EMAIL_URL": "smtp://m.example.com/?tls=1&ssl=1"}, "EMAIL_URL: TLS (STARTTLS) and SSL"),
        (
            {"EMAIL_URL": "smtp://m.example.com", "EMAIL_HOST": "x"},
            "EMAIL_URL: set it or EMAIL_HOST",
        ),
        ({"EMAIL_PORT": "smtp"}, "EMAIL_PORT: expected a whole number, got 'smtp'"),
        ({"EMAIL_PORT": "0"}, "EMAIL_PORT: must be between 1 and 65535"),
        ({"EMAIL_USE_TLS": "sometimes"}, "EMAIL_USE_TLS: expected a boolean"),
        ({"EMAIL_USE_TLS": "1", "EMAIL_USE_SSL": "1"}, "EMAIL_USE_TLS: TLS (STARTTLS) and SSL"),
        ({"EMAIL_TIMEOUT": "soon"}, "EMAIL_TIMEOUT: expected a number"),
        ({"DEFAULT_FROM_EMAIL": "Takt"}, "DEFAULT_FROM_EMAIL: not an e-mail address: 'Takt'"),
    ],
)
def test_bad_email_settings_are_named(environ, message):
    with pytest.raises(ImproperlyConfigured) as raised:
        email_settings(environ)
    assert str(raised.value).startswith(message), str(raised.value)
    assert "secret" not in str(raised.value)


def test_a_bad_email_setting_stops_the_process(tmp_path):
    result = run([*MANAGE, "check"], clean_env(tmp_path, EMAIL_URL="smtp://mail.example.com:x"))
    assert result.returncode != 0
    assert "ImproperlyConfigured: EMAIL_URL: " in result.stderr
