"""Jobs declared in code (F-75): TAKT_JOBS, TAKT_JOBS_FILE and
@takt_job(schedule=...) synced into the database (jobs.declared), by
`manage.py sync_jobs` and when the beat starts; the admin shows them
read-only except the operator's fields."""

from __future__ import annotations

from datetime import timedelta
from io import StringIO

import pytest
import time_machine
from django.core.exceptions import ImproperlyConfigured
from django.core.management import CommandError, call_command
from django.test.utils import override_settings
from django.urls import reverse

from jobs import registry, takt_job
from jobs.declared import sync_declared_jobs
from jobs.models import Job, Trigger
from tests.integration.conftest import job_form_fields, utc

pytestmark = pytest.mark.django_db

T0 = utc(2025, 3, 29, 12, 0)  # a Saturday, the day before Berlin springs forward
NIGHTLY = {
    "name": "Nightly report",
    "target": "tests.echo",
    "priority": 3,
    "params": {"to": "ops@example.com"},
    "triggers": [{"kind": "cron", "cron_expression": "0 3 * * *", "timezone": "Europe/Berlin"}],
}


@pytest.fixture(autouse=True)
def _clean_declarations(monkeypatch):
    """Each test declares its own decorator jobs; registrations made in a
    test vanish with it."""
    monkeypatch.setattr(registry, "_DECLARED", {})
    monkeypatch.setattr(registry, "_REGISTRY", dict(registry._REGISTRY))


def sync(**settings) -> object:
    with override_settings(**{"TAKT_JOBS": {}, **settings}):
        return sync_declared_jobs(now=T0)


def sync_command(*args: str, **settings) -> list[str]:
    out = StringIO()
    with override_settings(**{"TAKT_JOBS": {}, **settings}):
        call_command("sync_jobs", *args, stdout=out)
    return out.getvalue().splitlines()


def declared_rows() -> list[dict]:
    return list(Job.objects.filter(key__isnull=False).order_by("key").values())


@time_machine.travel(T0, tick=False)
def test_a_job_in_the_settings_dict_is_created_code_managed_with_its_trigger():
    report = sync(TAKT_JOBS={"nightly": NIGHTLY})

    job = Job.objects.get(key="nightly")
    assert (job.name, job.target, job.priority, job.params) == (
        "Nightly report",
        "tests.echo",
        3,
        {"to": "ops@example.com"},
    )
    assert job.code_managed and job.enabled
    trigger = job.triggers.get()
    assert (trigger.cron_expression, trigger.timezone) == ("0 3 * * *", "Europe/Berlin")
    assert trigger.next_run_at == utc(2025, 3, 30, 1, 0)  # 03:00 CEST, after the switch
    assert report.created == ["nightly"]


def test_a_second_sync_of_unchanged_declarations_writes_nothing():
    with time_machine.travel(T0, tick=False):
        sync(TAKT_JOBS={"nightly": NIGHTLY})
    jobs_before = declared_rows()
    triggers_before = list(Trigger.objects.filter(job__key="nightly").values())

    with time_machine.travel(T0 + timedelta(hours=1), tick=False):
        lines = sync_command(TAKT_JOBS={"nightly": NIGHTLY})

    assert declared_rows() == jobs_before  # updated_at included
    assert list(Trigger.objects.filter(job__key="nightly").values()) == triggers_before
    assert lines == [
        "unchanged  nightly",
        "0 created, 0 updated, 1 unchanged, 0 disabled (no longer declared)",
    ]


def test_a_change_in_code_updates_the_job_and_keeps_next_run_at_when_the_schedule_is_the_same():
    with time_machine.travel(T0, tick=False):
        sync(TAKT_JOBS={"nightly": NIGHTLY})
    trigger = Trigger.objects.get(job__key="nightly")
    advanced = utc(2025, 4, 2, 1, 0)  # as if the beat had fired a few nights
    Trigger.objects.filter(pk=trigger.pk).update(next_run_at=advanced, missed_count=2)

    with time_machine.travel(T0 + timedelta(hours=1), tick=False):
        lines = sync_command(TAKT_JOBS={"nightly": {**NIGHTLY, "priority": 1, "queue": "reports"}})

    job = Job.objects.get(key="nightly")
    assert (job.priority, job.queue, job.code_managed) == (1, "reports", True)
    kept = job.triggers.get()
    assert (kept.pk, kept.next_run_at, kept.missed_count) == (trigger.pk, advanced, 2)
    assert lines[:3] == [
        "update     nightly",
        "    priority: 3 → 1",
        "    queue: 'takt' → 'reports'",
    ]


@time_machine.travel(T0, tick=False)
def test_a_declared_celery_task_job_keeps_its_positional_args():
    beat_task = {"name": "Beat task", "target": "tests.celery_echo", "args": [1, "x"]}
    sync(TAKT_JOBS={"beat": beat_task})

    assert Job.objects.get(key="beat").args == [1, "x"]
    assert sync_command(TAKT_JOBS={"beat": {**beat_task, "args": [2]}})[:2] == [
        "update     beat",
        '    args: [1, "x"] → [2]',
    ]
    assert Job.objects.get(key="beat").args == [2]


@time_machine.travel(T0, tick=False)
def test_a_changed_schedule_replaces_the_trigger():
    sync(TAKT_JOBS={"nightly": NIGHTLY})
    weekly = {**NIGHTLY, "triggers": [{"kind": "cron", "cron_expression": "0 3 * * 1"}]}

    lines = sync_command(TAKT_JOBS={"nightly": weekly})

    trigger = Trigger.objects.get(job__key="nightly")
    assert (trigger.cron_expression, trigger.timezone) == ("0 3 * * 1", "")
    assert "    trigger removed: At 03:00 (Europe/Berlin)" in lines
    assert any(line.startswith("    trigger added: At 03:00") for line in lines)


@time_machine.travel(T0, tick=False)
def test_the_operators_pause_and_enabled_flag_survive_a_sync():
    sync(TAKT_JOBS={"nightly": NIGHTLY})
    Job.objects.filter(key="nightly").update(enabled=False, paused=True, pause_note="db upgrade")

    sync(TAKT_JOBS={"nightly": {**NIGHTLY, "priority": 7}})

    job = Job.objects.get(key="nightly")
    assert (job.enabled, job.paused, job.pause_note, job.priority) == (False, True, "db upgrade", 7)


@time_machine.travel(T0, tick=False)
def test_a_job_no_longer_declared_is_disabled_noted_and_handed_to_the_admin_not_deleted():
    sync(TAKT_JOBS={"nightly": NIGHTLY, "weekly": {**NIGHTLY, "name": "Weekly"}})
    builtin = Job.objects.get(target="takt.maintenance")  # code-managed, but no key

    lines = sync_command(TAKT_JOBS={"nightly": NIGHTLY})

    job = Job.objects.get(key="weekly")
    assert (job.enabled, job.code_managed) == (False, False)
    assert "no longer declared in code" in job.notes
    assert not job.triggers.get().active
    assert "disable    weekly (no longer declared)" in lines
    assert Job.objects.get(pk=builtin.pk).code_managed  # the migrations' own job stays

    sync(TAKT_JOBS={"nightly": NIGHTLY, "weekly": {**NIGHTLY, "name": "Weekly"}})
    job = Job.objects.get(key="weekly")
    assert (job.enabled, job.code_managed) == (True, True)  # declared again: taken back


@time_machine.travel(T0, tick=False)
def test_a_job_declared_with_the_decorator_runs_the_decorated_function():
    @takt_job("tests.declared_cleanup", every=timedelta(minutes=5), priority=8)
    def cleanup(job):
        return "clean"

    @takt_job("tests.declared_nightly", schedule="30 2 * * *", timezone="Europe/Berlin")
    def nightly(job):
        return "report"

    @takt_job("tests.not_declared")
    def plain(job):
        return None

    sync()

    cleanup_job = Job.objects.get(key="tests.declared_cleanup")
    assert (cleanup_job.name, cleanup_job.target, cleanup_job.priority) == (
        "tests.declared_cleanup",
        "tests.declared_cleanup",
        8,
    )
    assert cleanup_job.triggers.get().interval_seconds == 300
    nightly_trigger = Trigger.objects.get(job__key="tests.declared_nightly")
    assert nightly_trigger.next_run_at == utc(2025, 3, 30, 1, 0)  # 02:30 does not exist
    assert not Job.objects.filter(target="tests.not_declared").exists()
    assert cleanup(None) == "clean" and registry.resolve("tests.declared_nightly")[0] is nightly


@time_machine.travel(T0, tick=False)
def test_jobs_in_a_yaml_file_are_synced(tmp_path):
    path = tmp_path / "jobs.yaml"
    path.write_text(
        "- key: nightly\n"
        "  name: Nightly report\n"
        "  target: tests.echo\n"
        "  triggers:\n"
        "  - kind: calendar\n"
        "    calendar_rule: daily\n"
        "    at_time: '08:00'\n"
        "    weekdays: '01234'\n"
        "    timezone: Europe/Berlin\n"
    )

    sync(TAKT_JOBS_FILE=str(path))

    trigger = Trigger.objects.get(job__key="nightly", job__code_managed=True)
    assert trigger.next_run_at == utc(2025, 3, 31, 6, 0)  # Monday 08:00 CEST


@pytest.mark.parametrize(
    ("bad", "message"),
    [
        (
            {"triggers": [{"kind": "cron", "cron_expression": "61 * * * *"}]},
            "TAKT_JOBS['bad'].triggers[0].cron_expression: minute: 61 is out of range 0-59",
        ),
        (
            {"priority": 12},
            "TAKT_JOBS['bad'].priority: Ensure this value is less than or equal to 9",
        ),
        ({"priorty": 1}, "TAKT_JOBS['bad'].priorty: unknown field"),
        ({"target": "tests.nowhere"}, "TAKT_JOBS['bad'].target: no job callable or Celery task"),
        (
            {"args": [1, "x"]},  # tests.echo is an @takt_job function
            "TAKT_JOBS['bad'].args: only a Celery task target takes positional arguments",
        ),
        ({"key": "other"}, "TAKT_JOBS['bad'].key: 'other' differs from the key 'bad'"),
    ],
)
def test_an_invalid_declaration_names_key_and_field_and_changes_nothing(bad, message):
    with time_machine.travel(T0, tick=False):
        sync(TAKT_JOBS={"nightly": NIGHTLY})
    before = declared_rows()

    with time_machine.travel(T0, tick=False), pytest.raises(ImproperlyConfigured) as caught:
        sync(TAKT_JOBS={"nightly": {**NIGHTLY, "priority": 1}, "bad": {**NIGHTLY, **bad}})

    assert message in str(caught.value)
    assert declared_rows() == before


def test_a_key_declared_twice_is_refused_naming_both_places():
    @takt_job("nightly", schedule="0 3 * * *")
    def nightly(job):
        return None

    with pytest.raises(
        ImproperlyConfigured, match=r"@takt_job\('nightly'\)\.key: 'nightly' is also"
    ):
        sync(TAKT_JOBS={"nightly": NIGHTLY})


def test_sync_jobs_dry_run_shows_the_changes_and_writes_nothing():
    with time_machine.travel(T0, tick=False):
        lines = sync_command("--dry-run", TAKT_JOBS={"nightly": NIGHTLY})

    assert lines[0] == "create     nightly"
    assert lines[1:3] == ["    name: 'Nightly report'", "    key: 'nightly'"]
    assert "    priority: 3" in lines
    assert lines[-1].startswith("dry run, nothing written: 1 created")
    assert not Job.objects.filter(key="nightly").exists()


def test_sync_jobs_turns_a_bad_declaration_into_a_command_error():
    with pytest.raises(CommandError, match=r"TAKT_JOBS\['bad'\]\.priorty: unknown field"):
        sync_command(TAKT_JOBS={"bad": {**NIGHTLY, "priorty": 1}})


def test_the_beat_syncs_at_start_and_refuses_to_start_on_a_bad_declaration():
    from runs.beat import TaktScheduler
    from scheduler_project.celery import app

    with time_machine.travel(T0, tick=False), override_settings(TAKT_JOBS={"nightly": NIGHTLY}):
        TaktScheduler(app=app)
    assert Job.objects.get(key="nightly").code_managed

    bad = {"nightly": {**NIGHTLY, "timeout_s": 0}}
    with override_settings(TAKT_JOBS=bad), pytest.raises(ImproperlyConfigured, match="timeout_s"):
        TaktScheduler(app=app)


# --- the admin ------------------------------------------------------------------


def test_the_admin_shows_a_code_managed_job_read_only_except_the_operators_fields(admin_client):
    with time_machine.travel(T0, tick=False):
        sync(TAKT_JOBS={"nightly": NIGHTLY})
    job = Job.objects.get(key="nightly")
    url = reverse("admin:takt_jobs_job_change", args=[job.pk])

    page = admin_client.get(url).content.decode()

    assert 'name="enabled"' in page and 'name="pause_note"' in page
    assert 'name="target"' not in page and 'name="priority"' not in page
    assert 'name="triggers-0-cron_expression"' not in page
    assert 'name="triggers-__prefix__-kind"' not in page  # no "add another trigger"
    listing = admin_client.get(reverse("admin:takt_jobs_job_changelist") + "?code_managed__exact=1")
    assert "Nightly report" in listing.content.decode()


def test_a_post_to_a_code_managed_job_changes_only_the_operators_fields(admin_client):
    with time_machine.travel(T0, tick=False):
        sync(TAKT_JOBS={"nightly": NIGHTLY})
    job = Job.objects.get(key="nightly")
    trigger = job.triggers.get()
    data = {
        **job_form_fields(job),
        "target": "tests.count",
        "priority": 9,
        "pause_note": "waiting for the new mail server",
        "triggers-TOTAL_FORMS": 1,
        "triggers-INITIAL_FORMS": 1,
        "triggers-MIN_NUM_FORMS": 0,
        "triggers-MAX_NUM_FORMS": 1000,
        "triggers-0-id": trigger.pk,
        "triggers-0-job": job.pk,
        "triggers-0-cron_expression": "* * * * *",
    }
    del data["enabled"]  # unticked

    response = admin_client.post(reverse("admin:takt_jobs_job_change", args=[job.pk]), data)

    assert response.status_code == 302
    job.refresh_from_db()
    assert (job.target, job.priority, job.enabled) == ("tests.echo", 3, False)
    assert job.pause_note == "waiting for the new mail server"
    assert Trigger.objects.get(pk=trigger.pk).cron_expression == "0 3 * * *"


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"schedule": "0 3 * * *", "every": 60}, r"\.every: give one of schedule, every, triggers"),
        ({"timezone": "Europe/Berlin"}, r"\.timezone: goes with schedule= or every="),
        ({"every": 1.5}, r"\.every: whole seconds or a timedelta"),
        ({"schedule": "0 3 * * *", "target": "x"}, r"\.target: set by the decorator"),
        ({"args": [1]}, r"\.args: only a Celery task target takes positional arguments"),
    ],
)
def test_a_bad_decorator_declaration_is_refused_naming_the_option(options, message):
    @takt_job("tests.bad_declaration", **options)
    def bad(job):
        return None

    with pytest.raises(
        ImproperlyConfigured, match=r"@takt_job\('tests.bad_declaration'\)" + message
    ):
        sync()
    assert not Job.objects.filter(key="tests.bad_declaration").exists()
