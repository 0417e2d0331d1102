"""How the admin shows times, durations and statuses (jobs/admin/display.py)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from django.test.utils import override_settings

from jobs.admin.display import duration_text, status_badge, time_html

WHEN = datetime(2026, 12, 1, 16, 51, 10, tzinfo=UTC)


@pytest.mark.parametrize(
    ("seconds", "text"),
    [
        (None, "—"),
        (0, "0.00 s"),
        (0.254, "0.25 s"),
        (9.999, "10.00 s"),
        (12.34, "12.3 s"),
        (59.94, "59.9 s"),
        (60, "1 min 00 s"),
        (245, "4 min 05 s"),
        (3599.6, "1 h 00 min"),
        (7380, "2 h 03 min"),
        (86400 * 3 + 4 * 3600, "3 d 04 h"),
        (timedelta(minutes=2), "2 min 00 s"),
        (-1, "0.00 s"),
    ],
)
def test_durations_read_as_durations(seconds, text):
    assert duration_text(seconds) == text


@override_settings(TIME_ZONE="Europe/Berlin")
def test_a_time_carries_utc_for_the_browser_and_the_server_zone_as_its_text():
    html = str(time_html(WHEN))
    assert 'datetime="2026-12-01T16:51:10Z"' in html
    assert 'title="2026-12-01 16:51:10 UTC"' in html
    assert ">2026-12-01 17:51:10 CET</time>" in html
    assert 'data-precision="second"' in html


def test_no_time_is_a_dash_and_minutes_are_marked():
    assert str(time_html(None)) == "—"
    assert 'data-precision="minute"' in str(time_html(WHEN, seconds=False))
    assert "data-relative" in str(time_html(WHEN, relative=True))


def test_a_status_is_a_badge_with_its_own_class():
    assert str(status_badge("timed_out")) == (
        '<span class="takt-badge takt-status-timed_out">timed out</span>'
    )
    assert str(status_badge("")) == "—"


def test_utc_times_in_a_message_become_times_for_the_browser_and_the_rest_is_escaped():
    from jobs.admin.display import times_in_text

    html = str(
        times_in_text(
            "run #12 <b> ended at 2026-12-01 16:51:10 UTC; again 2026-12-01T17:00:00+00:00."
        )
    )
    assert html.startswith('run #12 &lt;b&gt; ended at <time class="takt-time"')
    assert 'datetime="2026-12-01T16:51:10Z"' in html
    assert 'datetime="2026-12-01T17:00:00Z"' in html
    assert html.endswith("</time>.")
    assert str(times_in_text("no time here & there")) == "no time here &amp; there"
