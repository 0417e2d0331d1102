"""Who may ping which heartbeat and how often a ping may notify (issue 25):
the pure core, with exact boundaries."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from heartbeats.core.pings import (
    bearer_token,
    compute_notification_due,
    compute_ping_allowed,
    is_process_name,
    token_digest,
    token_matches,
)

S = timedelta(seconds=1)
T0 = datetime(2026, 10, 25, 0, 30, tzinfo=UTC)  # the night Berlin falls back
MINUTE = timedelta(seconds=60)
OWN = token_digest("own-token")


@pytest.mark.parametrize(
    ("name", "process"),
    [
        ("worker:celery@w1", True),
        ("beat@host-a", True),
        ("nightly-backup", False),
        ("my-worker:1", False),
        ("Beat@host", False),
    ],
)
def test_process_names(name, process):
    assert is_process_name(name) is process


@pytest.mark.parametrize(
    ("header", "token"),
    [
        ("Bearer abc", "abc"),
        ("bearer abc", "abc"),
        ("Bearer ", None),
        ("Basic abc", None),
        ("abc", None),
        ("", None),
    ],
)
def test_bearer_token(header, token):
    assert bearer_token(header) == token


@pytest.mark.parametrize(
    ("presented", "global_token", "own", "debug", "allowed"),
    [
        # Nothing configured: DEBUG decides, whatever is sent.
        (None, "", "", True, True),
        ("anything", "", "", True, True),
        (None, "", "", False, False),
        ("anything", "", "", False, False),
        # The global token, with or without DEBUG.
        ("g", "g", "", False, True),
        ("g", "g", "", True, True),
        (None, "g", "", True, False),
        ("G", "g", "", False, False),
        ("g ", "g", "", False, False),
        # The heartbeat's own token; the global one still reaches it.
        ("own-token", "", OWN, False, True),
        ("own-token", "g", OWN, False, True),
        ("g", "g", OWN, False, True),
        (None, "", OWN, True, False),
        ("other-token", "", OWN, False, False),
    ],
)
def test_compute_ping_allowed(presented, global_token, own, debug, allowed):
    assert (
        compute_ping_allowed(presented, global_token=global_token, own_digest=own, debug=debug)
        is allowed
    )


def test_token_matches():
    assert token_matches("s3cret", "s3cret")
    assert not token_matches("s3cre", "s3cret")
    assert not token_matches(None, "s3cret")
    assert not token_matches("ſ3cret", "s3cret")  # not ASCII: compared, not an error


@pytest.mark.parametrize(
    ("last", "now", "due"),
    [
        (None, T0, True),
        (T0, T0, False),
        (T0, T0 + MINUTE - S, False),
        (T0, T0 + MINUTE, True),  # exactly one interval later
        (T0, T0 + MINUTE + S, True),
        (T0 + S, T0, False),  # a clock behind the last notification's
    ],
)
def test_compute_notification_due(last, now, due):
    assert compute_notification_due(last, now=now, interval=MINUTE) is due
