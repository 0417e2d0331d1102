"""export_jobs and import_jobs (F-74, jobs.exchange): a round trip is exact,
the output is stable, a dry run shows the changes and writes nothing, and a
refused import changes nothing and names the job and the field."""

from __future__ import annotations

import json
from datetime import time
from io import StringIO
from pathlib import Path

import pytest
import time_machine
import yaml
from django.core.management import CommandError, call_command

from jobs import services
from jobs.models import HolidayCalendar, Job, Trigger
from tests.integration.conftest import make_job, make_trigger, utc

pytestmark = pytest.mark.django_db

T0 = utc(2025, 3, 29, 12, 0)  # a Saturday, the day before Berlin springs forward
JOB_SKIP = {"id", "created_at", "updated_at", "paused_at", "paused_by"}  # set by the import
TRIGGER_SKIP = {"id", "job", "created_at", "updated_at"}


@pytest.fixture
def jobs() -> list[Job]:
    """Jobs and triggers of every kind, with fields off their defaults."""
    Job.objects.all().delete()  # the migrations' jobs
    holidays = HolidayCalendar.objects.create(name="Bavaria", country="DE", subdivision="BY")
    office = HolidayCalendar.objects.create(name="Office", extra_dates="2025-12-24 Christmas Eve")
    nightly = make_job(
        "Nightly report",
        key="reports.nightly",
        description="Sends the report.\nTwo lines.",
        params={"to": ["ops@example.com"], "limit": 3, "ratio": 0.5},
        priority=2,
        queue="reports",
        timeout_s=900,
        overlap_policy="buffer_one",
        max_retries=3,
        retry_backoff_factor=1.5,
        non_retryable_exceptions="ValueError\nKeyError",
        notify={"on": ["failure", "long_run"], "long_run_s": 600},
        api_trigger_permission="token",
        owner="Ops ünd Co",
        paused=True,
        pause_note="until the mail server is back",
        paused_until=utc(2025, 4, 1, 8, 0),
    )
    make_trigger(
        nightly,
        created_at=T0,
        kind="cron",
        cron_expression="30 2 * * 1-5",
        timezone="Europe/Berlin",
        jitter_seconds=30,
    )
    trigger = make_trigger(
        nightly,
        created_at=T0,
        kind="calendar",
        calendar_rule="daily",
        at_time=time(8, 0),
        timezone="Europe/Berlin",
        weekdays="01234",
        window_start=time(7, 0),
        window_end=time(9, 0),
    )
    services.set_exclude_calendars(trigger, [holidays, office], now=T0)
    cleanup = make_job("Cleanup", enabled=False, heartbeat_deadline_s=120)
    make_trigger(
        cleanup,
        created_at=T0,
        kind="interval",
        interval_seconds=900,
        interval_anchor="from_finish",
        start_at=utc(2025, 3, 29, 11, 0),
    )
    make_trigger(cleanup, created_at=T0, kind="once", run_at=utc(2025, 4, 1, 6, 30))
    manual = make_job(  # a Celery task, as a django-celery-beat user has them
        "Manual only", key="manual", kind="callable", target="tests.celery_echo", args=[1, "x"]
    )
    return [nightly, cleanup, manual]


def snapshot() -> list[dict]:
    """Every stored field of every job and trigger, but ids and the
    import's own times; calendars by name."""
    rows = []
    for job in Job.objects.order_by("name"):
        row = {f.attname: getattr(job, f.attname) for f in Job._meta.concrete_fields}
        row = {k: v for k, v in row.items() if k not in JOB_SKIP}
        row["triggers"] = [
            {
                **{
                    f.name: getattr(t, f.attname)
                    for f in Trigger._meta.concrete_fields
                    if f.name not in TRIGGER_SKIP
                },
                "exclude_calendars": [c.name for c in t.exclude_calendars.all()],
            }
            for t in job.triggers.order_by("id")
        ]
        rows.append(row)
    return rows


def export(*args: str) -> str:
    out = StringIO()
    call_command("export_jobs", *args, stdout=out)
    return out.getvalue()


def import_file(path: Path, *args: str) -> list[str]:
    out = StringIO()
    call_command("import_jobs", str(path), *args, stdout=out)
    return out.getvalue().splitlines()


@pytest.mark.parametrize("fmt", ["yaml", "json"])
def test_export_then_import_into_an_empty_database_gives_identical_jobs(jobs, tmp_path, fmt):
    path = tmp_path / f"jobs.{fmt}"
    with time_machine.travel(T0, tick=False):
        before = snapshot()
        call_command("export_jobs", "--output", str(path), stderr=StringIO())
        Job.objects.all().delete()

        lines = import_file(path)

    assert snapshot() == before
    assert before[2]["triggers"][1]["exclude_calendars"] == ["Bavaria", "Office"]
    assert before[1]["args"] == [1, "x"]
    assert lines[-1] == "3 create, 0 update, 0 unchanged"
    with time_machine.travel(T0, tick=False):  # a new export matches the new ids
        call_command("export_jobs", "--output", str(path), stderr=StringIO())
        assert import_file(path)[-1] == "0 create, 0 update, 3 unchanged"


def test_the_export_is_stable_and_the_same_in_yaml_and_json(jobs):
    with time_machine.travel(T0, tick=False):
        text = export()
        assert export() == text  # byte-identical
        as_json = export("--format", "json")

    data = yaml.safe_load(text)
    assert data == json.loads(as_json)
    assert [job["name"] for job in data] == ["Cleanup", "Manual only", "Nightly report"]
    nightly = data[2]
    assert list(nightly)[:3] == ["id", "name", "key"]  # the model's field order
    assert "next_run_at" not in nightly and "runs_done" not in nightly
    assert nightly["triggers"][0]["cron_expression"] == "30 2 * * 1-5"
    assert "id" not in nightly["triggers"][0]  # triggers are matched by schedule
    assert nightly["paused_until"] == "2025-04-01T10:00:00+02:00"  # in TIME_ZONE


def test_export_selects_by_key_and_leaves_jobs_declared_in_code_out_unless_asked(jobs):
    Job.objects.filter(pk=jobs[2].pk).update(code_managed=True)
    with time_machine.travel(T0, tick=False):
        assert [j["name"] for j in yaml.safe_load(export())] == ["Cleanup", "Nightly report"]
        assert len(yaml.safe_load(export("--all"))) == 3
        assert [j["key"] for j in yaml.safe_load(export("--key", "manual"))] == ["manual"]
        with pytest.raises(CommandError, match="no job has the key 'nope'"):
            export("--key", "manual", "nope")


def test_a_dry_run_shows_each_change_and_writes_nothing(jobs, tmp_path):
    with time_machine.travel(T0, tick=False):
        data = yaml.safe_load(export())
    data[2]["priority"] = 7  # Nightly report
    data[2]["triggers"].append({"kind": "cron", "cron_expression": "0 12 * * *"})
    data[2]["triggers"].pop(0)
    data.append({"name": "New one", "key": "new", "target": "tests.echo"})
    path = tmp_path / "jobs.yaml"
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    before = snapshot()

    with time_machine.travel(T0, tick=False):
        lines = import_file(path, "--dry-run")

    assert lines == [
        "unchanged  job 1 (name 'Cleanup')",
        "unchanged  job 2 (key 'manual', name 'Manual only')",
        "update     job 3 (key 'reports.nightly', name 'Nightly report')",
        "    priority: 2 → 7",
        "    trigger removed: At 02:30, Monday through Friday (Europe/Berlin)",
        "    trigger added: At 12:00 (Europe/Berlin)",  # the server's zone
        "create     job 4 (key 'new', name 'New one')",
        "dry run, nothing written: 1 create, 1 update, 2 unchanged",
    ]
    assert snapshot() == before
    assert not Job.objects.filter(key="new").exists()


@pytest.mark.parametrize(
    ("change", "message"),
    [
        (
            {"triggers": [{"kind": "cron", "cron_expression": "61 * * * *"}]},
            "job 2 (key 'manual', name 'Manual only'): triggers[0].cron_expression:"
            " minute: 61 is out of range 0-59",
        ),
        (
            {"triggers": [{"kind": "cron", "cron_expression": "0 * * * *", "timezone": "Mars/X"}]},
            "job 2 (key 'manual', name 'Manual only'): triggers[0].timezone: unknown time zone",
        ),
        (
            {"priority": 12},
            "job 2 (key 'manual', name 'Manual only'): priority: Ensure this value is less",
        ),
        ({"priorty": 1}, "job 2 (key 'manual', name 'Manual only'): priorty: unknown field"),
        (
            {
                "triggers": [
                    {"kind": "cron", "cron_expression": "0 * * * *", "exclude_calendars": ["Nope"]}
                ]
            },
            "job 2 (key 'manual', name 'Manual only'): triggers[0].exclude_calendars: ",
        ),
        ({"key": "bad key!"}, "job 2 (key 'bad key!', name 'Manual only'): key: letters, digits"),
        (
            {"target": "tests.echo"},  # its args [1, "x"] stay: an @takt_job function takes none
            "job 2 (key 'manual', name 'Manual only'): args: only a Celery task target takes"
            " positional arguments",
        ),
        ({"args": "1, x"}, "job 2 (key 'manual', name 'Manual only'): args: must be a JSON list"),
    ],
)
def test_an_invalid_job_refuses_the_whole_import_naming_job_and_field(
    jobs, tmp_path, change, message
):
    with time_machine.travel(T0, tick=False):
        data = yaml.safe_load(export())
    data[2]["priority"] = 7  # a valid change that must not be written either
    data[1].update(change)
    path = tmp_path / "jobs.yaml"
    path.write_text(yaml.safe_dump(data))
    before = snapshot()

    with time_machine.travel(T0, tick=False), pytest.raises(CommandError) as caught:
        import_file(path)

    assert message in str(caught.value)
    assert snapshot() == before


def test_a_job_declared_in_code_cannot_be_imported_over(jobs, tmp_path):
    Job.objects.filter(pk=jobs[2].pk).update(code_managed=True)
    path = tmp_path / "jobs.json"
    path.write_text(json.dumps([{"name": "Mine now", "key": "manual", "target": "tests.echo"}]))

    with pytest.raises(CommandError, match=r"job 1 \(key 'manual', name 'Mine now'\): key: job #"):
        import_file(path)
    assert Job.objects.get(pk=jobs[2].pk).name == "Manual only"


def test_a_job_without_key_updates_the_job_with_its_id_and_name_else_is_created(jobs, tmp_path):
    cleanup = jobs[1]
    path = tmp_path / "jobs.json"
    entries = [
        {"id": cleanup.pk, "name": "Cleanup", "target": "tests.echo", "priority": 1},
        {"id": cleanup.pk, "name": "Cleanup copy", "target": "tests.echo"},
    ]
    path.write_text(json.dumps(entries))

    with time_machine.travel(T0, tick=False):
        lines = import_file(path)

    assert lines[0] == "update     job 1 (name 'Cleanup')"
    assert lines[-1] == "1 create, 1 update, 0 unchanged"
    cleanup.refresh_from_db()
    assert (cleanup.priority, cleanup.triggers.count()) == (1, 0)  # a definition is complete
    assert Job.objects.filter(name="Cleanup copy").exclude(pk=cleanup.pk).exists()


def test_two_entries_for_one_job_and_unreadable_files_are_refused(jobs, tmp_path):
    path = tmp_path / "jobs.json"
    entry = {"key": "manual", "name": "Manual only", "target": "tests.echo"}
    path.write_text(json.dumps([entry, entry]))
    with pytest.raises(CommandError, match=r"job 2 \(key 'manual', name 'Manual only'\): matches"):
        import_file(path)

    path.write_text("{not json")
    with pytest.raises(CommandError, match="not valid JSON"):
        import_file(path)
    path.write_text(json.dumps({"name": "x"}))
    with pytest.raises(CommandError, match="expected a list of jobs"):
        import_file(path)
    with pytest.raises(CommandError, match="cannot read"):
        import_file(tmp_path / "missing.yaml")


def test_a_once_trigger_that_fired_round_trips_as_fired(tmp_path):
    """A new once trigger in the past is refused (as in the admin), but an
    exported one that fired already imports as fired: no next run."""
    job = make_job("One-off", key="one-off")
    make_trigger(job, created_at=T0, kind="once", run_at=utc(2025, 3, 30, 6, 0))
    later = utc(2025, 4, 2, 12, 0)
    path = tmp_path / "jobs.yaml"
    with time_machine.travel(later, tick=False):
        Trigger = job.triggers.model
        Trigger.objects.filter(job=job).update(
            next_run_at=None, last_fired_at=utc(2025, 3, 30, 6, 0)
        )
        call_command("export_jobs", "--key", "one-off", "--output", str(path), stderr=StringIO())
        job.delete()
        assert import_file(path)[-1] == "1 create, 0 update, 0 unchanged"
    [trigger] = Job.objects.get(key="one-off").triggers.all()
    assert trigger.run_at == utc(2025, 3, 30, 6, 0) and trigger.next_run_at is None
