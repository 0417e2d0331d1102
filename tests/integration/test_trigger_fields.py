"""Calendar presets (F-14), weekdays and time windows (F-15), jitter (F-18)
and excluded holiday calendars (F-105) on the Trigger model, in validation
and in the admin; bad input names its field and changes nothing stored
(section 11)."""

from __future__ import annotations

from datetime import datetime, time, timedelta
from io import StringIO

import pytest
import time_machine
from django.core.exceptions import ValidationError
from django.core.management import CommandError, call_command
from django.urls import reverse

from jobs import services, specs
from jobs.core import triggers as core
from jobs.models import HolidayCalendar, Job, Trigger
from tests.integration.conftest import SECOND, job_form_fields, make_job, make_trigger, utc

pytestmark = pytest.mark.django_db

T0 = utc(2025, 3, 29, 12, 0)  # Saturday, the day before Berlin springs forward
BERLIN = "Europe/Berlin"


def quarter_end(job: Job, *, created_at=T0, **fields) -> Trigger:
    values = {
        "kind": "calendar",
        "calendar_rule": "quarter_end",
        "at_time": time(23, 0),
        "timezone": BERLIN,
        **fields,
    }
    return make_trigger(job, created_at=created_at, **values)


def stored(trigger: Trigger) -> tuple[dict, list[int]]:
    """The trigger's row and its excluded calendars, as stored."""
    row = Trigger.objects.filter(pk=trigger.pk).values().get()
    return row, sorted(trigger.exclude_calendars.values_list("pk", flat=True))


def fire_times(trigger: Trigger, *, after, count: int = 5) -> list:
    """What the beat sees: the spec of the trigger as loaded from the database."""
    spec = specs.trigger_spec(Trigger.objects.get(pk=trigger.pk), now=after)
    return core.compute_fire_times(spec, after=after, count=count)


# --- calendar presets (F-14) ----------------------------------------------------


def test_a_last_day_of_quarter_trigger_fires_at_2300_berlin_time():
    trigger = quarter_end(make_job())

    # 31 March is summer time already (CEST, UTC+2); 31 December is not.
    assert trigger.next_run_at == utc(2025, 3, 31, 21, 0)
    assert [t.isoformat() for t in fire_times(trigger, after=T0, count=4)] == [
        "2025-03-31T23:00:00+02:00",
        "2025-06-30T23:00:00+02:00",
        "2025-09-30T23:00:00+02:00",
        "2025-12-31T23:00:00+01:00",
    ]
    assert str(trigger) == "on the last day of each quarter at 23:00 (Europe/Berlin)"


def test_a_calendar_trigger_saved_at_its_fire_time_fires_next_quarter():
    job = make_job()
    fire = utc(2025, 3, 31, 21, 0)

    assert quarter_end(job, created_at=fire - SECOND).next_run_at == fire
    assert quarter_end(job, created_at=fire).next_run_at == utc(2025, 6, 30, 21, 0)


@pytest.mark.parametrize(
    ("created_at", "expected"),
    [
        # 02:30 does not exist when clocks spring forward: it fires at 03:00 CEST.
        (T0, ["2025-03-30T03:00:00+02:00", "2025-03-31T02:30:00+02:00"]),
        # 02:30 occurs twice when they fall back: it fires once, at the first.
        (utc(2025, 10, 25, 12, 0), ["2025-10-26T02:30:00+02:00", "2025-10-27T02:30:00+01:00"]),
    ],
)
def test_a_daily_preset_follows_the_dst_rule_inside_its_window(created_at, expected):
    trigger = make_trigger(
        make_job(),
        created_at=created_at,
        kind="calendar",
        calendar_rule="daily",
        at_time=time(2, 30),
        timezone=BERLIN,
        window_start=time(2, 0),
        window_end=time(4, 0),
    )

    assert [t.isoformat() for t in fire_times(trigger, after=created_at, count=2)] == expected
    assert trigger.next_run_at == datetime.fromisoformat(expected[0])


def test_a_yearly_date_trigger_and_its_day_and_month():
    trigger = make_trigger(
        make_job(),
        created_at=T0,
        kind="calendar",
        calendar_rule="date",
        day_of_month=24,
        month=12,
        at_time=time(18, 0),
        timezone=BERLIN,
    )

    assert trigger.next_run_at == utc(2025, 12, 24, 17, 0)
    assert str(trigger) == "every year on 24 December at 18:00 (Europe/Berlin)"


def test_a_day_left_over_from_another_rule_is_ignored():
    trigger = quarter_end(make_job(), day_of_month=15, month=2)

    trigger.full_clean()

    assert trigger.next_run_at == utc(2025, 3, 31, 21, 0)


def test_editing_a_calendar_field_recomputes_next_run():
    trigger = quarter_end(make_job())

    trigger.calendar_rule = "month_start"
    trigger.at_time = time(6, 30)
    with time_machine.travel(T0, tick=False):
        trigger.full_clean()
        trigger.save()

    assert Trigger.objects.get(pk=trigger.pk).next_run_at == utc(2025, 4, 1, 4, 30)


# --- weekdays and windows (F-15) ------------------------------------------------


def test_an_interval_fires_only_on_its_weekdays_inside_its_window():
    # Every 30 minutes from Friday 06:00 CET, Monday to Friday, 08:00-10:00 Berlin time.
    trigger = make_trigger(
        make_job(),
        created_at=T0,
        kind="interval",
        interval_seconds=1800,
        start_at=utc(2025, 3, 28, 5, 0),
        timezone=BERLIN,
        weekdays="01234",
        window_start=time(8, 0),
        window_end=time(10, 0),
    )

    # Saturday noon: the next allowed grid point is Monday 08:00 CEST.
    assert trigger.next_run_at == utc(2025, 3, 31, 6, 0)
    times = fire_times(trigger, after=T0, count=6)
    assert [t.strftime("%a %H:%M") for t in times] == [
        "Mon 08:00",
        "Mon 08:30",
        "Mon 09:00",
        "Mon 09:30",
        "Tue 08:00",
        "Tue 08:30",
    ]
    assert str(trigger).endswith(", Monday through Friday, between 08:00 and 10:00 (Europe/Berlin)")


def test_an_interval_window_is_read_in_the_trigger_time_zone():
    # No start_at, anchored on the run's start: the first allowed instant after now + N.
    trigger = make_trigger(
        make_job(),
        created_at=T0,
        kind="interval",
        interval_seconds=600,
        interval_anchor="from_start",
        timezone="America/New_York",
        window_start=time(9, 0),
        window_end=time(17, 0),
    )

    # 12:00 UTC is 08:00 in New York (EDT): the window opens at 09:00 EDT.
    assert trigger.next_run_at == utc(2025, 3, 29, 13, 0)


def test_a_window_across_midnight_on_a_cron_trigger():
    trigger = make_trigger(
        make_job(),
        created_at=T0,
        kind="cron",
        cron_expression="0 * * * *",
        timezone=BERLIN,
        window_start=time(22, 0),
        window_end=time(2, 0),
    )

    times = fire_times(trigger, after=T0, count=4)
    assert [t.strftime("%d %H:%M") for t in times] == [
        "29 22:00",
        "29 23:00",
        "30 00:00",
        "30 01:00",
    ]


def test_weekdays_are_stored_sorted():
    trigger = Trigger(
        job=make_job(), kind="cron", cron_expression="0 9 * * *", weekdays="4310", timezone=BERLIN
    )
    with time_machine.travel(T0, tick=False):
        trigger.full_clean()
        trigger.save()

    assert Trigger.objects.get(pk=trigger.pk).weekdays == "0134"
    assert trigger.next_run_at == utc(2025, 3, 31, 7, 0)  # Monday 09:00 CEST


def test_jitter_is_stored_and_does_not_move_next_run():
    trigger = quarter_end(make_job(), jitter_seconds=86400)

    trigger.full_clean()

    assert (trigger.jitter_seconds, trigger.next_run_at) == (86400, utc(2025, 3, 31, 21, 0))


# --- excluded holiday calendars (F-105) -----------------------------------------


def nine_am(job: Job, **fields) -> Trigger:
    return make_trigger(
        job, created_at=T0, kind="cron", cron_expression="0 9 * * *", timezone=BERLIN, **fields
    )


def office_closed(*days: str, name: str = "office closed") -> HolidayCalendar:
    calendar = HolidayCalendar(name=name, extra_dates="\n".join(f"{d} closed" for d in days))
    calendar.full_clean()
    calendar.save()
    return calendar


def test_an_excluded_calendar_skips_its_dates():
    trigger = nine_am(make_job())
    assert trigger.next_run_at == utc(2025, 3, 30, 7, 0)
    calendar = office_closed("2025-03-30", "2025-03-31", "2025-04-02")

    services.set_exclude_calendars(trigger, [calendar], now=T0)

    row, calendars = stored(trigger)
    assert (row["next_run_at"], row["has_exclusions"], calendars) == (
        utc(2025, 4, 1, 7, 0),
        True,
        [calendar.pk],
    )
    times = fire_times(trigger, after=T0, count=3)
    assert [t.strftime("%m-%d") for t in times] == ["04-01", "04-03", "04-04"]
    assert str(Trigger.objects.get(pk=trigger.pk)).endswith(
        "(Europe/Berlin), except 3 excluded days"
    )


def test_editing_or_deleting_a_calendar_recomputes_the_triggers_that_use_it(admin_client):
    trigger = nine_am(make_job())
    calendar = office_closed("2025-03-30")
    services.set_exclude_calendars(trigger, [calendar], now=T0)
    assert stored(trigger)[0]["next_run_at"] == utc(2025, 3, 31, 7, 0)
    url = reverse("admin:takt_jobs_holidaycalendar_change", args=[calendar.pk])
    data = {
        "name": calendar.name,
        "description": "",
        "country": "",
        "subdivision": "",
        "extra_dates": "2025-03-30\n2025-03-31 Inventory",
    }

    with time_machine.travel(T0, tick=False):
        assert admin_client.post(url, data).status_code == 302
        assert stored(trigger)[0]["next_run_at"] == utc(2025, 4, 1, 7, 0)
        page = admin_client.get(url).content.decode()
        assert "2025-03-30 extra date<br>2025-03-31 Inventory<br>" in page

        delete = reverse("admin:takt_jobs_holidaycalendar_delete", args=[calendar.pk])
        assert admin_client.post(delete, {"post": "yes"}).status_code == 302

    row, calendars = stored(trigger)
    assert (row["next_run_at"], row["has_exclusions"], calendars) == (
        utc(2025, 3, 30, 7, 0),
        False,
        [],
    )


def test_a_country_calendar_skips_its_public_holidays():
    calendar = HolidayCalendar(name="Bavaria", country="de", subdivision="by")
    calendar.full_clean()
    calendar.save()
    christmas_eve = utc(2025, 12, 24, 12, 0)
    trigger = make_trigger(
        make_job(),
        created_at=christmas_eve,
        kind="cron",
        cron_expression="0 9 * * *",
        timezone=BERLIN,
    )

    services.set_exclude_calendars(trigger, [calendar], now=christmas_eve)

    assert (calendar.country, calendar.subdivision) == ("DE", "BY")
    # 25 and 26 December are public holidays: the next run is on the 27th, 09:00 CET.
    assert stored(trigger)[0]["next_run_at"] == utc(2025, 12, 27, 8, 0)


def test_a_stale_instance_saved_later_keeps_the_exclusions():
    trigger = nine_am(make_job())
    stale_edit, stale_schedule = (Trigger.objects.get(pk=trigger.pk) for _ in range(2))
    services.set_exclude_calendars(trigger, [office_closed("2025-03-30")], now=T0)

    stale_edit.jitter_seconds = 30
    stale_edit.save()  # not a schedule edit: next_run_at and the flag stay
    assert stored(trigger)[0]["has_exclusions"] is True
    stale_schedule.cron_expression = "0 10 * * *"
    with time_machine.travel(T0, tick=False):
        stale_schedule.full_clean()
        stale_schedule.save()  # a schedule edit reads the stored calendars

    row, _ = stored(trigger)
    assert (row["next_run_at"], row["has_exclusions"], row["jitter_seconds"]) == (
        utc(2025, 3, 31, 8, 0),
        True,
        0,
    )


def test_an_unsaved_trigger_has_no_exclusions():
    trigger = Trigger(job=make_job(), kind="cron", cron_expression="0 9 * * *")

    assert specs.excluded_dates(trigger, range(2024, 2031)) == frozenset()
    assert specs.trigger_spec(trigger, now=T0) == core.CronSpec("0 9 * * *", BERLIN, None)


def test_calendars_are_resolved_by_name():
    office, bavaria = office_closed("2025-03-30"), office_closed("2025-12-24", name="Bavaria")

    assert services.resolve_calendars(["Bavaria", "office closed"]) == [bavaria, office]
    with pytest.raises(ValidationError) as caught:
        services.resolve_calendars(["office closed", "Atlantis"])
    assert caught.value.message_dict == {"exclude_calendars": ["unknown calendar 'Atlantis'"]}


# --- bad input: the field is named, nothing stored changes ------------------------


@pytest.mark.parametrize(
    ("changes", "field", "message"),
    [
        # a fixed time outside the window
        (
            {"window_start": time(10, 0), "window_end": time(12, 0)},
            "window_start",
            "the fixed time 09:00 is outside the window 10:00-12:00",
        ),
        # every fire time of a cron outside the window
        (
            {"cron_expression": "*/5 9 * * *", "window_start": time(10), "window_end": time(11)},
            "cron_expression",
            "never fires",
        ),
        ({"window_start": time(8, 0)}, "window_end", "is required when window_start is set"),
        ({"window_start": time(8), "window_end": time(8)}, "window_end", "must differ"),
        ({"weekdays": ""}, "weekdays", "choose at least one weekday"),
        ({"weekdays": "017"}, "weekdays", "'7' is not a weekday"),
        ({"cron_expression": "0 9 * * 6", "weekdays": "01234"}, "weekdays", "never fires"),
        ({"jitter_seconds": 86401}, "jitter_seconds", "between 0 and 86400"),
        ({"jitter_seconds": -1}, "jitter_seconds", "greater than or equal to 0"),
        (
            {"kind": "once", "run_at": T0 + timedelta(days=1), "window_start": time(8)},
            "window_start",
            "leave the window empty",
        ),
        # a fixed-rate interval whose phase (from now, 13:00) never meets the window
        (
            {
                "kind": "interval",
                "interval_seconds": 86400,
                "window_start": time(8),
                "window_end": time(9),
            },
            "window_start",
            "set start_at",
        ),
        ({"kind": "calendar", "at_time": time(23)}, "calendar_rule", "required"),
        ({"kind": "calendar", "calendar_rule": "daily"}, "at_time", "required"),
        (
            {"kind": "calendar", "calendar_rule": "weekly", "at_time": time(23)},
            "calendar_rule",
            "not a valid choice",
        ),
        (
            {"kind": "calendar", "calendar_rule": "date", "at_time": time(8), "month": 2},
            "day_of_month",
            "is required for this calendar rule",
        ),
        (
            {
                "kind": "calendar",
                "calendar_rule": "date",
                "at_time": time(8),
                "day_of_month": 31,
                "month": 2,
            },
            "day_of_month",
            "31 February never occurs",
        ),
        (
            {
                "kind": "calendar",
                "calendar_rule": "date",
                "at_time": time(8),
                "day_of_month": 1,
                "month": 13,
            },
            "month",
            "not a valid choice",
        ),
        (
            {"kind": "calendar", "calendar_rule": "day_of_month", "at_time": time(8)},
            "day_of_month",
            "is required",
        ),
        (
            {
                "kind": "calendar",
                "calendar_rule": "daily",
                "at_time": time(23),
                "window_start": time(8),
                "window_end": time(17),
            },
            "window_start",
            "the fixed time 23:00 is outside the window 08:00-17:00",
        ),
    ],
)
def test_bad_input_names_its_field_and_the_stored_row_stays(changes, field, message):
    trigger = nine_am(make_job())
    before = stored(trigger)
    edited = Trigger.objects.get(pk=trigger.pk)
    for name, value in changes.items():
        setattr(edited, name, value)

    with time_machine.travel(T0 + 3600 * SECOND, tick=False), pytest.raises(ValidationError) as exc:
        edited.full_clean()

    assert set(exc.value.error_dict) == {field}
    assert any(message in m for m in exc.value.message_dict[field]), exc.value.message_dict
    assert stored(trigger) == before


def test_saving_without_validation_refuses_an_interval_that_never_meets_its_window():
    job = make_job()
    with pytest.raises(ValidationError) as caught:
        make_trigger(
            job,
            created_at=T0,
            kind="interval",
            interval_seconds=86400,
            timezone=BERLIN,
            window_start=time(8),
            window_end=time(9),
        )

    assert list(caught.value.message_dict) == ["window_start"]
    assert not job.triggers.exists()


def test_a_calendar_that_excludes_every_fire_time_is_refused_and_nothing_changes():
    trigger = make_trigger(
        make_job(),
        created_at=T0,
        kind="calendar",
        calendar_rule="date",
        day_of_month=24,
        month=12,
        at_time=time(18),
        timezone=BERLIN,
    )
    before = stored(trigger)
    every_year = office_closed(*(f"{year}-12-24" for year in range(2025, 2031)))

    with pytest.raises(ValidationError) as caught:
        services.set_exclude_calendars(trigger, [every_year], now=T0)

    assert list(caught.value.message_dict) == ["exclude_calendars"]
    assert stored(trigger) == before


@pytest.mark.parametrize(
    ("fields", "field", "message"),
    [
        ({"country": "XX"}, "country", "unknown country 'XX'"),
        ({"country": "DE", "subdivision": "ZZ"}, "subdivision", "unknown subdivision 'ZZ' of DE"),
        ({"subdivision": "BY"}, "subdivision", "needs a country"),
        (
            {"extra_dates": "2025-12-24 Christmas Eve\n2025-02-30 no such day"},
            "extra_dates",
            "line 2: '2025-02-30 no such day' does not start with a date",
        ),
    ],
)
def test_a_bad_holiday_calendar_names_its_field_and_the_stored_row_stays(fields, field, message):
    calendar = office_closed("2025-03-30")
    before = HolidayCalendar.objects.filter(pk=calendar.pk).values().get()
    edited = HolidayCalendar.objects.get(pk=calendar.pk)
    for name, value in fields.items():
        setattr(edited, name, value)

    with pytest.raises(ValidationError) as caught:
        edited.full_clean()

    assert list(caught.value.message_dict) == [field]
    assert message in caught.value.message_dict[field][0]
    assert HolidayCalendar.objects.filter(pk=calendar.pk).values().get() == before


# --- the admin -------------------------------------------------------------------


def job_form(job: Job, trigger: Trigger, **row) -> dict:
    """POST data of the job change form with one trigger in the inline."""
    data = {
        **job_form_fields(job),
        "triggers-TOTAL_FORMS": 1,
        "triggers-INITIAL_FORMS": 1,
        "triggers-MIN_NUM_FORMS": 0,
        "triggers-MAX_NUM_FORMS": 1000,
    }
    fields = {
        "id": trigger.pk,
        "job": job.pk,
        "kind": trigger.kind,
        "enabled": "on",
        "timezone": trigger.timezone,
        "cron_expression": trigger.cron_expression,
        "interval_anchor": trigger.interval_anchor,
        "calendar_rule": trigger.calendar_rule,
        "at_time": trigger.at_time.strftime("%H:%M") if trigger.at_time else "",
        "weekdays": list(trigger.weekdays),
        "weekdays__shown": "1",
        "jitter_seconds": trigger.jitter_seconds,
        "watch_pattern": trigger.watch_pattern,  # a file trigger's, posted as the page has them
        "settle_seconds": trigger.settle_seconds,
        **row,
    }
    data.update({f"triggers-0-{name}": value for name, value in fields.items()})
    return data


def change_url(job: Job) -> str:
    return reverse("admin:takt_jobs_job_change", args=[job.pk])


def test_the_editor_of_a_job_with_a_calendar_trigger_renders(admin_client):
    job = make_job("quarterly report")
    trigger = quarter_end(job, weekdays="01234")
    services.set_exclude_calendars(trigger, [office_closed("2025-06-30")], now=T0)

    with time_machine.travel(T0, tick=False):
        page = admin_client.get(change_url(job)).content.decode()

    assert "Calendar preset" in page
    assert '<option value="quarter_end" selected>Last day of each quarter</option>' in page
    assert 'name="triggers-0-weekdays" value="6"' in page  # Sunday's box
    assert "Sun</label>" in page
    assert 'name="triggers-0-exclude_calendars"' in page and "office closed" in page
    # The preview skips the excluded 30 June 2025.
    upcoming = page[page.index("fieldBox field-upcoming") :].split("</div>")[0]
    assert [part.split('"')[0] for part in upcoming.split('datetime="')[1:]] == [
        "2025-03-31T21:00:00Z",
        "2025-09-30T21:00:00Z",
        "2025-12-31T22:00:00Z",
        "2026-03-31T21:00:00Z",
        "2026-06-30T21:00:00Z",
    ]
    assert "jobs/trigger_inline.js" in page


def test_a_calendar_trigger_with_weekdays_and_calendars_saved_in_the_admin(admin_client):
    job = make_job("quarterly report")
    trigger = quarter_end(job)
    calendar = office_closed("2025-03-31")
    data = job_form(
        job,
        trigger,
        calendar_rule="month_end",
        weekdays=["0", "1", "2", "3", "4"],
        window_start="22:00",
        window_end="23:30",
        jitter_seconds="600",
        exclude_calendars=[calendar.pk],
    )

    with time_machine.travel(T0, tick=False):
        response = admin_client.post(change_url(job), data)

    assert response.status_code == 302, response.context and response.context["errors"]
    row, calendars = stored(trigger)
    # 31 March is excluded, 30 April is a Wednesday.
    assert (row["calendar_rule"], row["weekdays"], row["jitter_seconds"], calendars) == (
        "month_end",
        "01234",
        600,
        [calendar.pk],
    )
    assert (row["next_run_at"], row["has_exclusions"]) == (utc(2025, 4, 30, 21, 0), True)


@pytest.mark.parametrize(
    ("row", "field", "message"),
    [
        (
            {"window_start": "08:00", "window_end": "17:00"},
            "window_start",
            "the fixed time 23:00 is outside the window 08:00-17:00",
        ),
        ({"weekdays": []}, "weekdays", "choose at least one weekday"),
        ({"jitter_seconds": "90000"}, "jitter_seconds", "86400"),
        (
            {"calendar_rule": "date", "day_of_month": "31", "month": "2"},
            "day_of_month",
            "never occurs",
        ),
    ],
)
def test_bad_trigger_input_in_the_admin_shows_the_error_and_saves_nothing(
    admin_client, row, field, message
):
    job = make_job("quarterly report")
    trigger = quarter_end(job)
    calendar = office_closed("2025-06-30")
    before = stored(trigger)
    data = job_form(job, trigger, exclude_calendars=[calendar.pk], **row)

    with time_machine.travel(T0, tick=False):
        response = admin_client.post(change_url(job), data)

    assert response.status_code == 200
    errors = response.context["inline_admin_formsets"][0].formset.errors[0]
    assert list(errors) == [field]
    assert message in " ".join(errors[field])
    assert message in response.content.decode()
    assert stored(trigger) == before


def test_a_form_without_the_weekday_boxes_keeps_the_stored_weekdays(admin_client):
    job = make_job("weekly")
    trigger = nine_am(job, weekdays="024")
    data = job_form(job, trigger, cron_expression="0 10 * * *")
    del data["triggers-0-weekdays"], data["triggers-0-weekdays__shown"]

    with time_machine.travel(T0, tick=False):
        assert admin_client.post(change_url(job), data).status_code == 302

    row, _ = stored(trigger)
    assert (row["cron_expression"], row["weekdays"]) == ("0 10 * * *", "024")
    assert row["next_run_at"] == utc(2025, 3, 31, 8, 0)  # Monday 10:00 CEST


def test_the_holiday_calendar_pages_render_with_the_next_days(admin_client):
    calendar = office_closed(*(f"2025-{m:02}-01" for m in range(1, 13)))

    with time_machine.travel(T0, tick=False):
        page = admin_client.get(
            reverse("admin:takt_jobs_holidaycalendar_change", args=[calendar.pk])
        ).content.decode()
        listing = admin_client.get(reverse("admin:takt_jobs_holidaycalendar_changelist"))

    assert "Next 10 days" in page
    assert "2025-04-01 closed<br>" in page and "2025-03-01" not in page.split("Next 10 days")[1]
    assert listing.status_code == 200 and "office closed" in listing.content.decode()


# --- check_schedule (F-19) -------------------------------------------------------


def test_check_schedule_prints_a_saved_calendar_trigger_with_its_constraints():
    trigger = quarter_end(make_job(), weekdays="0")  # Mondays only
    out = StringIO()

    call_command(
        "check_schedule",
        "--trigger",
        str(trigger.pk),
        "--after",
        "2025-03-29",
        "--count",
        "3",
        stdout=out,
    )

    # The next quarter to end on a Monday after June 2025 is December 2029.
    assert out.getvalue().splitlines() == [
        "2025-03-31T23:00:00+02:00",
        "2025-06-30T23:00:00+02:00",
        "2029-12-31T23:00:00+01:00",
    ]


@pytest.mark.parametrize(
    ("args", "field"),
    [
        (["--trigger", "999999"], "trigger"),
        (["0 9 * * *", "--trigger", "1"], "trigger"),
        ([], "cron_expression"),
    ],
)
def test_check_schedule_with_a_bad_trigger_names_the_field(args, field):
    with pytest.raises(CommandError) as exc:
        call_command("check_schedule", *args, stdout=StringIO())
    assert str(exc.value).startswith(f"{field}: ")
