"""Login throttling (django-axes, scheduler_project/security.py): after
TAKT_LOGIN_FAILURE_LIMIT (5) failed logins in a row of one username from
one address, the admin's login page refuses that pair, the right password
too, with a 429 that says why, until TAKT_LOGIN_LOCKOUT_SECONDS (900) after
the last failure. Other users and other addresses still log in. Time is
moved with time-machine, never slept."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
import time_machine
from django.contrib.auth import get_user_model
from django.test import Client, RequestFactory, override_settings

from scheduler_project.security import login_client_address

pytestmark = pytest.mark.django_db

T0 = datetime(2026, 3, 29, 0, 30, tzinfo=UTC)  # the night Berlin moves to summer time
LOGIN = "/admin/login/?next=/admin/"
PASSWORD = "the-right-password-1"
LIMIT = 5
LOCKOUT = timedelta(seconds=900)


@pytest.fixture
def users() -> None:
    User = get_user_model()
    User.objects.create_superuser("alice", "", PASSWORD)
    User.objects.create_superuser("bob", "", PASSWORD)


def log_in(username: str, password: str, address: str = "127.0.0.1") -> int:
    """POST the admin's login form from `address`; the status: 302 logged in,
    200 the form again (wrong password), 429 locked out."""
    client = Client(REMOTE_ADDR=address)
    client.get(LOGIN)
    return client.post(LOGIN, {"username": username, "password": password}).status_code


def fail(username: str, times: int, address: str = "127.0.0.1") -> list[int]:
    """`times` wrong passwords; their statuses (the limit-th is already a 429)."""
    return [log_in(username, "wrong", address) for _ in range(times)]


def test_the_right_password_is_refused_after_the_limit_until_the_lockout_ends(users):
    with time_machine.travel(T0, tick=False) as clock:
        assert fail("alice", LIMIT) == [200] * (LIMIT - 1) + [429]
        client = Client()
        locked = client.post(LOGIN, {"username": "alice", "password": PASSWORD})
        assert locked.status_code == 429
        assert "Too many failed logins" in locked.content.decode()
        assert "15 minutes" in locked.content.decode()
        assert "_auth_user_id" not in client.session

        clock.shift(LOCKOUT - timedelta(seconds=1))
        assert log_in("alice", PASSWORD) == 429  # one second before its end

        clock.shift(timedelta(seconds=2))
        assert log_in("alice", PASSWORD) == 302  # one second after


def test_fewer_failures_than_the_limit_lock_nothing_and_a_login_clears_them(users):
    with time_machine.travel(T0, tick=False):
        assert fail("alice", LIMIT - 1) == [200] * (LIMIT - 1)
        assert log_in("alice", PASSWORD) == 302
        assert fail("alice", LIMIT - 1) == [200] * (LIMIT - 1)  # counted from zero again
        assert log_in("alice", PASSWORD) == 302


def test_a_lockout_holds_one_user_from_one_address_only(users):
    with time_machine.travel(T0, tick=False):
        assert fail("alice", LIMIT, address="203.0.113.7")[-1] == 429
        assert log_in("alice", PASSWORD, address="203.0.113.7") == 429
        assert log_in("bob", PASSWORD, address="203.0.113.7") == 302
        assert log_in("alice", PASSWORD, address="198.51.100.2") == 302


@override_settings(AXES_FAILURE_LIMIT=2)
def test_the_limit_is_the_setting(users):
    with time_machine.travel(T0, tick=False):
        assert fail("alice", 2) == [200, 429]
        assert log_in("alice", PASSWORD) == 429


def test_the_address_behind_the_tls_proxy_is_the_one_the_proxy_added():
    request = RequestFactory().post(
        LOGIN, REMOTE_ADDR="127.0.0.1", HTTP_X_FORWARDED_FOR="10.6.6.6, 192.0.2.44"
    )
    assert login_client_address(request) == "127.0.0.1"  # no proxy: the socket's
    with override_settings(SECURE_PROXY_SSL_HEADER=("HTTP_X_FORWARDED_PROTO", "https")):
        assert login_client_address(request) == "192.0.2.44"
        no_header = RequestFactory().post(LOGIN, REMOTE_ADDR="127.0.0.1")
        assert login_client_address(no_header) == "127.0.0.1"
