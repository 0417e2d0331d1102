"""The Load forecast (F-95): its page and the JSON its heat map draws, from
the active triggers in the database, in the browser's zone."""

from __future__ import annotations

from datetime import timedelta

import pytest
import time_machine
from django.urls import reverse

from jobs.admin import timeline_data
from jobs.models import HolidayCalendar, Trigger
from jobs.services import set_exclude_calendars, set_jobs_enabled
from tests.integration.conftest import make_job, make_trigger, utc

pytestmark = pytest.mark.django_db

NOW = utc(2026, 11, 20, 12, 0)  # a Friday; requests travel here
DATA = "admin:takt_jobs_job_forecast_data"


def get_data(client, now=NOW, **params):
    with time_machine.travel(now, tick=False):
        return client.get(reverse(DATA), params)


def cron(job, expression, zone="UTC", created_at=NOW - timedelta(minutes=1)) -> Trigger:
    return make_trigger(
        job, created_at=created_at, kind="cron", cron_expression=expression, timezone=zone
    )


def test_the_page_asks_for_the_forecast_in_the_browsers_zone(admin_client):
    page = admin_client.get(reverse("admin:takt_jobs_job_forecast")).content.decode()
    assert 'class="takt-forecast"' in page and f'data-url="{reverse(DATA)}"' in page
    assert 'data-scale="log"' in page  # the log-scale switch
    for script in ("takt/vendor/echarts/echarts.min.js", "takt/charts.js", "takt/forecast.js"):
        assert f'src="/static/{script}"' in page


def test_runs_per_hour_of_the_browsers_zone_with_the_busiest_triggers(admin_client):
    nightly, often = make_job("nightly"), make_job("often")
    cron(nightly, "0 3 * * *", "Europe/Berlin")
    every_ten = cron(often, "*/10 * * * *")

    data = get_data(admin_client, tz="America/New_York").json()

    assert data["zone"] == "America/New_York"
    assert data["days"][0] == "2026-11-20" and len(data["days"]) == 7
    assert data["now_cell"] == [0, 7]  # 07:00 EST
    # 03:00 in Berlin is 21:00 the evening before in New York.
    assert data["counts"][0][21] == 1 + 6 and data["counts"][0][20] == 6
    assert data["counts"][0][:7] == [0] * 7  # past hours
    assert data["total"] == 6 * (24 * 7 - 7) + 7  # six an hour from 07:00 on; 21:00 on 7 days
    assert data["triggers"] == 2 and data["invalid"] == [] and data["approximate"] == 0
    assert data["busiest"][0][21] == [
        {"trigger": every_ten.pk, "job": "often", "count": 6},
        {"trigger": nightly.triggers.get().pk, "job": "nightly", "count": 1},
    ]
    assert data["hour_seconds"][0] == [3600] * 24


def test_the_day_the_clocks_go_back_has_a_double_hour(admin_client):
    job = make_job("hourly")
    cron(job, "0 * * * *", created_at=utc(2026, 10, 23, 12))
    data = get_data(admin_client, now=utc(2026, 10, 23, 12), tz="Europe/Berlin").json()
    sunday = data["days"].index("2026-10-25")
    assert data["hour_seconds"][sunday][2] == 7200 and data["counts"][sunday][2] == 2
    assert sum(data["counts"][sunday]) == 25


def test_disabled_jobs_and_triggers_are_left_out(admin_client):
    on, off, paused = make_job("on"), make_job("off"), make_job("paused")
    cron(on, "0 * * * *")
    cron(off, "0 * * * *")
    cron(paused, "0 * * * *")
    set_jobs_enabled([off.pk], False)
    paused.paused = True
    paused.save()
    data = get_data(admin_client, tz="UTC").json()
    assert data["triggers"] == 1 and data["total"] == 24 * 7 - 12


def test_holiday_calendars_are_skipped(admin_client):
    job = make_job("weekdays")
    trigger = cron(job, "0 9 * * *")
    calendar = HolidayCalendar.objects.create(name="office", extra_dates="2026-11-23 closed")
    set_exclude_calendars(trigger, [calendar], now=NOW)
    data = get_data(admin_client, tz="UTC").json()
    monday = data["days"].index("2026-11-23")
    assert data["counts"][monday][9] == 0 and data["total"] == 5  # Sat..Thu without Monday


def test_a_trigger_that_cannot_be_evaluated_is_named_and_the_rest_counted(admin_client):
    good, bad = make_job("good"), make_job("bad")
    cron(good, "0 * * * *")
    broken = cron(bad, "0 * * * *")
    Trigger.objects.filter(pk=broken.pk).update(cron_expression="0 25 * * *")  # bypasses validation
    data = get_data(admin_client, tz="UTC").json()
    assert [item["trigger"] for item in data["invalid"]] == [broken.pk]
    assert "cron_expression" in data["invalid"][0]["error"]
    assert data["triggers"] == 1 and data["total"] == 24 * 7 - 12


@pytest.mark.parametrize(
    ("params", "field"),
    [
        ({"tz": "Mars/Olympus"}, "tz"),
        ({"days": "0"}, "days"),
        ({"days": "x"}, "days"),
        ({"days": "15"}, "days"),
    ],  # fmt: skip
)
def test_bad_input_gets_an_error_naming_the_parameter(admin_client, params, field):
    response = get_data(admin_client, **params)
    assert response.status_code == 400 and field in response.json()["errors"]


def test_without_a_zone_the_servers_is_used(admin_client):
    assert get_data(admin_client).json()["zone"] == "Europe/Berlin"  # the test session's


def test_triggers_are_read_in_chunks(admin_client, monkeypatch, django_assert_max_num_queries):
    monkeypatch.setattr(timeline_data, "TRIGGER_CHUNK", 4)
    for i in range(10):
        cron(make_job(f"job {i}"), f"{i} * * * *")
    get_data(admin_client, tz="UTC")  # the session and permissions are read once
    # 3 chunks (4 + 4 + 2), each with its calendars: 6 queries, plus the session's.
    with django_assert_max_num_queries(6 + 4):
        data = get_data(admin_client, tz="UTC").json()
    assert data["triggers"] == 10 and data["days"] == [f"2026-11-{d}" for d in range(20, 27)]


def test_the_forecast_is_counted_once_a_minute_until_a_trigger_changes(admin_client):
    job = make_job("hourly")
    first = get_data(admin_client, tz="UTC").json()
    assert first["cached"] is False
    again = get_data(admin_client, tz="UTC").json()
    assert again["cached"] is True and again["total"] == first["total"]
    cron(job, "0 * * * *")  # a new trigger: counted anew at once
    fresh = get_data(admin_client, tz="UTC").json()
    assert fresh["cached"] is False and fresh["total"] > first["total"]
