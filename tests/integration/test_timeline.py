"""The Timeline (F-94): its pages and the JSON its chart draws: runs as bars
and points, upcoming fire times as ticks, ranges, caps, permissions and a
bounded number of queries."""

from __future__ import annotations

from datetime import timedelta

import pytest
import time_machine
from django.contrib.auth.models import Permission, User
from django.urls import reverse

from jobs.admin import timeline_data
from runs.models import Run, RunStatus
from tests.integration.conftest import make_job, make_trigger, utc

pytestmark = pytest.mark.django_db

# Requests travel to a fixed past instant (the login session stays valid).
NOW = utc(2026, 11, 20, 12, 0)
MINUTE = timedelta(minutes=1)
DATA = "admin:takt_jobs_job_timeline_data"


def run(job, status, enqueued_at, started_after=None, lasted=None, **fields) -> Run:
    started = None if started_after is None else enqueued_at + started_after
    finished = None if lasted is None or started is None else started + lasted
    if status == RunStatus.SKIPPED:
        finished = enqueued_at
    return Run.objects.create(
        job=job, trigger=fields.pop("trigger", "schedule"), status=status,
        scheduled_for=fields.pop("scheduled_for", enqueued_at), enqueued_at=enqueued_at,
        started_at=started, finished_at=finished, **fields,
    )  # fmt: skip


def get_data(client, **params):
    with time_machine.travel(NOW, tick=False):
        return client.get(reverse(DATA), params)


def iso(moment) -> str:
    return timeline_data._iso(moment)


def staff(*permissions: str) -> User:
    user = User.objects.create_user("operator", password="x", is_staff=True)
    for name in permissions:
        app, codename = name.split(".")
        user.user_permissions.add(
            Permission.objects.get(content_type__app_label=app, codename=codename)
        )
    return user


# --- pages ---------------------------------------------------------------------------


def test_the_job_list_links_to_the_timeline_and_the_load_forecast(admin_client):
    page = admin_client.get(reverse("admin:takt_jobs_job_changelist")).content.decode()
    assert f'href="{reverse("admin:takt_jobs_job_timeline")}"' in page
    assert f'href="{reverse("admin:takt_jobs_job_forecast")}"' in page


def test_the_timeline_page_loads_the_chart_from_local_static_files(admin_client):
    page = admin_client.get(reverse("admin:takt_jobs_job_timeline")).content.decode()
    assert 'class="takt-timeline"' in page and f'data-url="{reverse(DATA)}"' in page
    assert "data-job" not in page
    for script in (
        "takt/admin.js",
        "takt/vendor/echarts/echarts.min.js",
        "takt/charts.js",
        "takt/timeline.js",
    ):
        assert f'src="/static/{script}"' in page
    assert "http://" not in page.split("<body")[0] and "https://" not in page.split("<body")[0]
    for label in ("1 h", "6 h", "24 h", "7 d"):
        assert f">{label}</button>" in page


def test_one_jobs_timeline_names_it_and_asks_for_its_row_only(admin_client):
    job = make_job("nightly report")
    page = admin_client.get(
        reverse("admin:takt_jobs_job_timeline"), {"job": job.pk}
    ).content.decode()
    assert "Timeline: nightly report" in page
    assert f'data-job="{job.pk}"' in page
    assert (
        admin_client.get(reverse("admin:takt_jobs_job_timeline"), {"job": 9999}).status_code == 404
    )


def test_the_job_editor_panel_shows_the_jobs_timeline(admin_client, rf):
    from django.template.loader import render_to_string

    job = make_job("panel job")
    html = render_to_string("admin/takt_jobs/job/timeline_panel.html", {"job": job})
    assert f'data-job="{job.pk}"' in html and "takt/timeline.js" in html
    assert f"{reverse('admin:takt_jobs_job_timeline')}?job={job.pk}" in html
    assert render_to_string("admin/takt_jobs/job/timeline_panel.html", {"job": None}).strip() == ""


# --- the data --------------------------------------------------------------------------


def test_runs_become_bars_and_points_and_triggers_ticks(admin_client):
    busy, idle = make_job("busy"), make_job("idle")
    done = run(
        busy, RunStatus.SUCCEEDED, NOW - 50 * MINUTE, MINUTE / 60, 4 * MINUTE + timedelta(seconds=5)
    )
    failed = run(busy, RunStatus.FAILED, NOW - 20 * MINUTE, MINUTE / 60, 2 * MINUTE, message="boom")
    running = run(busy, RunStatus.RUNNING, NOW - 5 * MINUTE, MINUTE / 60)
    skipped = run(busy, RunStatus.SKIPPED, NOW - 10 * MINUTE)
    queued = run(
        busy, RunStatus.QUEUED, NOW - MINUTE, scheduled_for=NOW + 2 * MINUTE, trigger="manual"
    )
    make_trigger(idle, created_at=NOW - timedelta(days=1), kind="cron", cron_expression="*/15 * * * *",
                 timezone="UTC")  # fmt: skip

    data = get_data(
        admin_client, start=iso(NOW - timedelta(hours=1)), end=iso(NOW + timedelta(hours=1))
    ).json()

    assert data["start"] == "2026-11-20T11:00:00.000Z" and data["now"] == "2026-11-20T12:00:00.000Z"
    assert [row["name"] for row in data["rows"]] == ["busy", "idle"]
    assert data["rows"][0]["url"] == reverse("admin:takt_jobs_job_change", args=[busy.pk])
    by_id = {r["id"]: r for r in data["runs"]}
    assert [r["id"] for r in data["runs"]] == [
        queued.pk,
        running.pk,
        skipped.pk,
        failed.pk,
        done.pk,
    ]
    assert by_id[done.pk] == {
        "id": done.pk, "job": busy.pk, "status": "succeeded", "trigger": "schedule",
        "start": "2026-11-20T11:10:01.000Z", "end": "2026-11-20T11:14:06.000Z",
        "running": False, "duration": "4 min 05 s",
    }  # fmt: skip
    assert by_id[running.pk]["end"] == data["now"] and by_id[running.pk]["running"] is True
    assert by_id[running.pk]["duration"] == "4 min 59 s"
    assert by_id[skipped.pk]["at"] == iso(NOW - 10 * MINUTE) and "start" not in by_id[skipped.pk]
    assert by_id[queued.pk]["at"] == iso(NOW + 2 * MINUTE)  # when it is due
    assert data["run_url"].replace("{id}", str(done.pk)) == reverse(
        "admin:takt_runs_run_change", args=[done.pk]
    )
    ticks = [t["at"] for t in data["ticks"]]
    assert ticks == [iso(NOW + k * 15 * MINUTE) for k in range(4)]
    assert {t["job"] for t in data["ticks"]} == {idle.pk}
    assert not data["runs_truncated"] and not data["ticks_truncated"]


def test_the_range_keeps_runs_that_overlap_it_and_drops_the_rest(admin_client):
    job = make_job("long", timeout_s=3600)
    before = run(job, RunStatus.SUCCEEDED, NOW - 3 * 3600 * MINUTE / 60, MINUTE, 10 * MINUTE)
    into = run(job, RunStatus.SUCCEEDED, NOW - 70 * MINUTE, MINUTE, 30 * MINUTE)  # ends 11:21
    after = run(job, RunStatus.QUEUED, NOW + 2 * 3600 * MINUTE / 60)
    endless = make_job("endless", timeout_action="continue")
    still = run(endless, RunStatus.RUNNING, NOW - timedelta(days=2), MINUTE)

    data = get_data(
        admin_client, start=iso(NOW - timedelta(hours=1)), end=iso(NOW + timedelta(hours=1))
    ).json()

    ids = {r["id"] for r in data["runs"]}
    assert into.pk in ids and still.pk in ids
    assert before.pk not in ids and after.pk not in ids
    bar = next(r for r in data["runs"] if r["id"] == still.pk)
    assert bar["start"] == iso(NOW - timedelta(days=2) + MINUTE) and bar["end"] == iso(NOW)


def test_the_newest_runs_up_to_the_cap_are_sent_and_the_cut_is_said(admin_client):
    job = make_job("dense")
    Run.objects.bulk_create(
        Run(job=job, trigger="manual", status="succeeded", scheduled_for=NOW - k * timedelta(seconds=0.5),
            enqueued_at=NOW - k * timedelta(seconds=0.5), started_at=NOW - k * timedelta(seconds=0.5),
            finished_at=NOW - k * timedelta(seconds=0.5) + timedelta(seconds=0.1))
        for k in range(1, timeline_data.RUN_CAP + 11)
    )  # fmt: skip
    data = get_data(admin_client, start=iso(NOW - timedelta(hours=1)), end=iso(NOW)).json()
    assert len(data["runs"]) == data["run_cap"] == 5000
    assert data["runs_truncated"] is True
    assert data["runs"][0]["start"] == iso(NOW - timedelta(seconds=0.5))  # the newest first
    narrow = get_data(admin_client, start=iso(NOW - MINUTE), end=iso(NOW)).json()
    assert len(narrow["runs"]) == 120 and not narrow["runs_truncated"]  # a zoom gets them all


def test_a_dense_trigger_gets_a_bounded_number_of_ticks(admin_client):
    job = make_job("every second")
    make_trigger(job, created_at=NOW - MINUTE, kind="interval", interval_seconds=1)
    data = get_data(
        admin_client, start=iso(NOW - timedelta(days=6)), end=iso(NOW + timedelta(days=1))
    ).json()
    assert len(data["ticks"]) == timeline_data.TICKS_PER_TRIGGER
    assert data["ticks_truncated"] is True
    assert data["ticks"][0]["at"] == iso(NOW - MINUTE + timedelta(seconds=1))


def test_a_due_time_not_fired_yet_is_an_overdue_tick(admin_client):
    job = make_job("late")
    make_trigger(
        job,
        created_at=NOW - timedelta(hours=2),
        kind="cron",
        cron_expression="0 * * * *",
        timezone="UTC",
    )
    data = get_data(
        admin_client, start=iso(NOW - timedelta(hours=3)), end=iso(NOW + timedelta(hours=2))
    ).json()
    assert [(t["at"], t["overdue"]) for t in data["ticks"]] == [
        (iso(NOW - timedelta(hours=1)), True),  # the beat has not claimed it
        (iso(NOW), False),
        (iso(NOW + timedelta(hours=1)), False),
    ]


def test_one_jobs_data_has_its_row_even_when_nothing_happened(admin_client):
    job, other = make_job("quiet"), make_job("other")
    run(other, RunStatus.SUCCEEDED, NOW - MINUTE, MINUTE / 60, MINUTE / 6)
    data = get_data(admin_client, job=job.pk).json()
    assert [row["id"] for row in data["rows"]] == [job.pk] and data["runs"] == []
    assert data["start"] == iso(NOW - timedelta(hours=20)) and data["end"] == iso(
        NOW + timedelta(hours=4)
    )


@pytest.mark.parametrize(
    ("params", "field", "words"),
    [
        ({"start": "yesterday"}, "start", "is not an ISO 8601 date and time"),
        ({"start": "2026-11-20T10:00:00"}, "start", "needs a time zone"),
        (
            {"start": "2026-11-20T10:00:00Z", "end": "2026-11-20T09:00:00Z"},
            "end",
            "at least a minute",
        ),
        ({"start": "2026-11-10T10:00:00Z", "end": "2026-11-20T10:00:00Z"}, "end", "at most 7 days"),
        ({"job": "abc"}, "job", "no job with id 'abc'"),
        ({"job": "9999"}, "job", "no job with id '9999'"),
    ],
)
def test_bad_input_gets_an_error_naming_the_parameter(admin_client, params, field, words):
    response = get_data(admin_client, **params)
    assert response.status_code == 400
    assert words in response.json()["errors"][field]


# --- permissions and queries -------------------------------------------------------------


def test_staff_without_view_job_is_refused(client):
    client.force_login(staff())
    for name in (
        "admin:takt_jobs_job_timeline",
        DATA,
        "admin:takt_jobs_job_forecast",
        "admin:takt_jobs_job_forecast_data",
    ):
        assert client.get(reverse(name)).status_code == 403, name


def test_anonymous_users_are_sent_to_the_login_page(client):
    response = client.get(reverse(DATA))
    assert response.status_code == 302 and reverse("admin:login") in response["Location"]


def test_without_view_run_the_timeline_shows_fire_times_but_no_runs(client):
    client.force_login(staff("takt_jobs.view_job"))
    job = make_job("secret runs")
    run(job, RunStatus.SUCCEEDED, NOW - MINUTE, MINUTE / 60, MINUTE / 6)
    make_trigger(
        job, created_at=NOW - MINUTE, kind="cron", cron_expression="0 * * * *", timezone="UTC"
    )
    data = get_data(client).json()
    assert data["runs"] == [] and data["runs_shown"] is False
    assert data["ticks"] and data["rows"][0]["name"] == "secret runs"
    client.force_login(User.objects.get(username="operator"))
    User.objects.get(username="operator").user_permissions.add(
        Permission.objects.get(codename="view_run")
    )
    assert get_data(client).json()["runs_shown"] is True


def test_the_data_costs_the_same_few_queries_for_many_jobs_runs_and_triggers(
    admin_client, django_assert_max_num_queries
):
    jobs = [make_job(f"job {i}") for i in range(30)]
    for i, job in enumerate(jobs):
        make_trigger(
            job,
            created_at=NOW - MINUTE,
            kind="cron",
            cron_expression=f"{i} * * * *",
            timezone="UTC",
        )
        for k in range(5):
            run(job, RunStatus.SUCCEEDED, NOW - (k * 7 + i) * MINUTE, MINUTE / 60, MINUTE / 2)
    get_data(admin_client)  # the session and permissions are read once
    with django_assert_max_num_queries(10):
        data = get_data(admin_client).json()
    assert len(data["rows"]) == 30 and len(data["runs"]) == 150
