"""Long operations as runs of the built-in "Takt operations" job (F-93):
start_operation checks its input and guards against double starts; each
operation (backfill, bulk run, import) reports progress per item and a
line per job, and fails with a clear message; an import is all or
nothing."""

from __future__ import annotations

import json

import pytest
from django.core.management import call_command
from django.test.utils import override_settings

from jobs.declared import sync_declared_jobs
from jobs.errors import InvalidInput, QueuePaused
from jobs.exchange import InvalidDefinition, export_queryset
from jobs.importing import import_jobs
from jobs.models import Job
from runs.context import JobContext, JobFailed
from runs.execution import execute
from runs.models import Run, RunStatus, RunTrigger
from runs.operation_kinds import perform
from runs.operations import GUARD_S, OPERATIONS_KEY, operations_job, start_operation
from runs.queue import pause_queue
from tests.integration.conftest import SECOND, make_job, make_trigger, utc

pytestmark = pytest.mark.django_db

T0 = utc(2026, 6, 1, 8, 0)
HOUR = 3600 * SECOND
NOW = T0 + 10 * HOUR


def hourly_job(name: str, **fields) -> Job:
    job = make_job(name, **fields)
    make_trigger(job, created_at=T0, kind="interval", interval_seconds=3600, start_at=T0)
    return job


class Recorder(JobContext):
    """A job context that keeps every progress value reported."""

    def __init__(self, params: dict) -> None:
        super().__init__(
            name="Takt operations", description="", trigger="manual", params=params,
            run_id=0, job_id=0,
        )  # fmt: skip
        self.steps: list[dict] = []
        self.on_change = self._record

    def _record(self) -> None:
        progress = self.snapshot()[2]
        if progress is not None and (not self.steps or self.steps[-1] != progress):
            self.steps.append(progress)


def performed(kind: str, **params) -> Recorder:
    job = Recorder({"operation": kind, **params, "by": "tester"})
    job.result = perform(job)
    return job


def executed(run: Run) -> Run:
    execute(run.pk, worker="test")
    run.refresh_from_db()
    return run


def assert_moves_to_the_end(steps: list[dict], total: int) -> None:
    done = [step["done"] for step in steps]
    assert done == sorted(done) and done[-1] == total and len(set(done)) > 2, done
    assert {step["total"] for step in steps} == {total}


# --- the built-in job -----------------------------------------------------------


def test_the_operations_job_exists_disabled_code_managed_without_triggers():
    job = operations_job()
    assert (job.key, job.name, job.target, job.enabled, job.code_managed) == (
        OPERATIONS_KEY, "Takt operations", "takt.operation", False, True,
    )  # fmt: skip
    assert (job.overlap_policy, job.max_instances, job.timeout_s) == ("allow", 10, 6 * 3600)
    assert not job.triggers.exists()


def test_the_sync_of_declared_jobs_leaves_the_builtin_jobs_alone():
    with override_settings(TAKT_JOBS={}):
        report = sync_declared_jobs(now=NOW)
    assert OPERATIONS_KEY not in report.retired
    job = operations_job()
    assert job.code_managed and job.notes == ""


def test_exports_leave_the_operations_job_out_and_imports_cannot_change_it():
    assert not export_queryset().filter(key=OPERATIONS_KEY).exists()
    with pytest.raises(InvalidDefinition) as caught:
        import_jobs(
            [{"key": OPERATIONS_KEY, "name": "mine", "target": "tests.echo"}], now=NOW, by="t"
        )
    assert "declared in code" in str(caught.value)
    assert operations_job().name == "Takt operations"


def test_a_run_of_the_operations_job_without_an_operation_fails_saying_how_to_start_one(
    redis_client,
):
    from runs.services import enqueue_job

    run = executed(enqueue_job(operations_job(), trigger=RunTrigger.MANUAL))
    assert run.status == RunStatus.FAILED
    assert run.message.startswith(
        "params.operation: must be one of backfill, bulk_run, rerun_failed, import_jobs, got None"
    )


# --- start_operation ------------------------------------------------------------


@pytest.mark.parametrize(
    ("kind", "params", "field", "message"),
    [
        ("rebuild", {}, "kind", "must be one of backfill, bulk_run, rerun_failed, import_jobs"),
        ("bulk_run", {"jobs": []}, "jobs", "choose at least one job"),
        ("bulk_run", {"jobs": ["1"]}, "jobs", "must be job ids (whole numbers), got '1'"),
        ("bulk_run", {"jobs": [99999]}, "jobs", "no job with id 99999"),
        ("backfill", {"start": "yesterday", "end": "2026-06-01T10:00+00:00"}, "start",
         "not an ISO-8601 date and time: 'yesterday'"),
        ("backfill", {"start": "2026-06-01T10:00", "end": "2026-06-01T11:00+00:00"}, "start",
         "must include a time zone"),
        ("backfill", {"start": "2026-06-01T12:00+00:00", "end": "2026-06-01T10:00+00:00"}, "end",
         "must not be before the start"),
        ("backfill", {"start": "2026-06-01T12:00+00:00", "end": "2026-06-02T10:00+00:00"}, "end",
         "must not be in the future"),
        ("import_jobs", {"text": "  "}, "text", "give the jobs to import"),
        ("import_jobs", {"text": "[]", "format": "xml"}, "format", "must be one of yaml, json"),
    ],
)  # fmt: skip
def test_start_operation_refuses_bad_input_naming_the_field_and_starts_nothing(
    kind, params, field, message
):
    if kind == "backfill":
        params = {"jobs": [hourly_job("a").pk], **params}
    with pytest.raises(InvalidInput) as caught:
        start_operation(kind, params, by="tester", now=NOW)
    assert caught.value.field == field and message in caught.value.message
    assert not Run.objects.exists()


def test_start_operation_queues_a_manual_run_of_the_disabled_operations_job():
    job = hourly_job("a")
    run = start_operation(
        "backfill", {"jobs": [job.pk, job.pk], "start": T0, "end": T0 + HOUR}, by="ada", now=NOW
    )
    assert (run.job.key, run.trigger, run.status, run.priority) == (
        OPERATIONS_KEY, RunTrigger.MANUAL, RunStatus.QUEUED, 0,
    )  # fmt: skip
    assert run.params == {
        "operation": "backfill",
        "jobs": [job.pk],  # repeats dropped
        "start": T0.isoformat(),
        "end": (T0 + HOUR).isoformat(),
    }
    assert run.started_by == "ada"  # not a param: a caller cannot write it


def test_a_double_start_returns_the_first_run_and_a_later_one_starts_anew():
    jobs = {"jobs": [make_job("a").pk]}
    first = start_operation("bulk_run", jobs, by="ada", now=NOW)
    again = start_operation("bulk_run", jobs, by="bob", now=NOW + SECOND)
    other = start_operation("bulk_run", {"jobs": [make_job("b").pk]}, by="ada", now=NOW)
    assert again.pk == first.pk and again.deduplicated
    assert other.pk != first.pk

    Run.objects.filter(pk=first.pk).update(status=RunStatus.SUCCEEDED, finished_at=NOW + SECOND)
    assert start_operation("bulk_run", jobs, by="ada", now=NOW + 5 * SECOND).pk == first.pk
    later = NOW + (GUARD_S + 1) * SECOND
    fresh = start_operation("bulk_run", jobs, by="ada", now=later)
    assert fresh.pk != first.pk and not getattr(fresh, "deduplicated", False)
    # While it is queued or running, the same operation is that run, however late.
    assert start_operation("bulk_run", jobs, by="ada", now=later + 5 * 60 * SECOND).pk == fresh.pk


def test_start_operation_in_a_paused_queue_raises_and_starts_nothing():
    pause_queue(note="deploy", by="ops", now=NOW)
    with pytest.raises(QueuePaused):
        start_operation("bulk_run", {"jobs": [make_job("a").pk]}, by="ada", now=NOW)
    assert not Run.objects.exists()


# --- backfill -------------------------------------------------------------------


def test_a_backfill_reports_each_fire_time_and_a_line_per_job():
    a, b = hourly_job("a"), hourly_job("b")
    Run.objects.create(job=a, trigger=RunTrigger.SCHEDULE, scheduled_for=T0 + HOUR,
                       enqueued_at=T0, status=RunStatus.SUCCEEDED)  # fmt: skip

    job = performed("backfill", jobs=[a.pk, b.pk], start=T0.isoformat(),
                    end=(T0 + 2 * HOUR).isoformat())  # fmt: skip

    assert_moves_to_the_end(job.steps, 6)
    assert job.result == {"jobs": 2, "fire_times": 6, "created": 5, "already_ran": 1}
    lines = job.output().splitlines()
    assert lines[0].startswith("backfill from 2026-06-01T08:00:00+00:00 to ")
    assert lines[1].startswith(
        f"a (#{a.pk}): 3 fire time(s), 1 already had a run, 2 run(s) created"
    )
    assert lines[2].startswith(f"b (#{b.pk}): 3 fire time(s), 0 already had a run, 3 run(s)")
    assert Run.objects.filter(trigger=RunTrigger.CATCHUP).count() == 5


def test_a_backfill_that_fails_for_one_job_does_the_others_and_ends_failed_naming_it():
    ok, busy = hourly_job("ok"), hourly_job("busy")
    Run.objects.create(job=busy, trigger="manual", scheduled_for=T0, enqueued_at=T0,
                       status=RunStatus.RUNNING)  # fmt: skip
    every_second = make_job("every second")
    make_trigger(every_second, created_at=T0, kind="interval", interval_seconds=1, start_at=T0)

    with pytest.raises(JobFailed) as caught:
        performed("backfill", jobs=[ok.pk, busy.pk, every_second.pk], start=T0.isoformat(),
                  end=(T0 + HOUR).isoformat())  # fmt: skip

    message = str(caught.value)
    assert message.startswith("backfill failed for 2 of 3 job(s): ")
    assert f"every second (#{every_second.pk}): end: the range holds more than 1000" in message
    assert f"busy (#{busy.pk}): nothing created: " in message
    assert ok.runs.filter(trigger=RunTrigger.CATCHUP).count() == 2


def test_a_backfill_operation_on_a_worker_stores_its_final_progress(redis_client):
    job = hourly_job("a")
    run = start_operation("backfill", {"jobs": [job.pk], "start": T0, "end": T0 + 3 * HOUR},
                          by="ada", now=NOW)  # fmt: skip

    run = executed(run)

    assert run.status == RunStatus.SUCCEEDED, run.message
    assert run.progress == {"done": 4, "total": 4, "note": f"{job}: done"}
    assert run.result == {"jobs": 1, "fire_times": 4, "created": 4, "already_ran": 0}


# --- bulk run -------------------------------------------------------------------


def test_a_bulk_run_starts_a_manual_run_per_job_with_progress_per_job():
    jobs = [make_job(f"job {n}", enabled=n % 2 == 0) for n in range(25)]

    job = performed("bulk_run", jobs=[j.pk for j in jobs])

    assert_moves_to_the_end(job.steps, 25)
    assert job.result == {"queued": 25}
    assert Run.objects.filter(trigger=RunTrigger.MANUAL, status=RunStatus.QUEUED).count() == 25
    first_run = Run.objects.get(job=jobs[0])
    assert job.output().splitlines()[0] == f"{jobs[0]}: run #{first_run.pk} queued"


def test_a_bulk_run_stops_when_the_queue_is_paused_and_counts_a_skipped_run_as_started():
    busy, idle = make_job("busy"), make_job("idle")
    Run.objects.create(job=busy, trigger="manual", scheduled_for=T0, enqueued_at=T0,
                       status=RunStatus.RUNNING)  # fmt: skip
    job = performed("bulk_run", jobs=[busy.pk, idle.pk])
    assert job.result == {"skipped": 1, "queued": 1}
    assert job.output().splitlines()[0].startswith(f"{busy}: run #")

    pause_queue(note="deploy", by="ops", now=NOW)
    with pytest.raises(JobFailed, match=r"^stopped after 0 of 2 job\(s\): the queue is paused"):
        performed("bulk_run", jobs=[busy.pk, idle.pk])


# --- import ---------------------------------------------------------------------


def import_text(*entries: dict) -> str:
    return json.dumps(list(entries))


GOOD = {"key": "reports.nightly", "name": "Nightly", "target": "tests.echo",
        "triggers": [{"kind": "cron", "cron_expression": "0 3 * * *"}]}  # fmt: skip


def test_an_import_creates_the_jobs_with_progress_per_check_and_save_and_the_plan_as_output():
    other = {**GOOD, "key": "reports.weekly", "name": "Weekly"}

    job = performed("import_jobs", text=import_text(GOOD, other), format="json", source="x.json")

    assert_moves_to_the_end(job.steps, 4)
    assert job.result == {"create": 2, "update": 0, "unchanged": 0}
    assert job.output().splitlines() == [
        "importing jobs from x.json",
        "create     job 1 (key 'reports.nightly', name 'Nightly')",
        "create     job 2 (key 'reports.weekly', name 'Weekly')",
        "2 create, 0 update, 0 unchanged",
    ]
    assert set(Job.objects.filter(key__startswith="reports.").values_list("name", flat=True)) == {
        "Nightly", "Weekly",
    }  # fmt: skip


def test_an_import_with_one_bad_job_imports_nothing_and_fails_naming_the_job_and_field():
    existing = make_job("Backup", key="backup", priority=5)
    bad = {**GOOD, "key": "broken", "triggers": [{"kind": "cron", "cron_expression": "61 * * * *"}]}
    text = import_text(GOOD, {"key": "backup", "name": "Backup", "target": "tests.echo",
                              "priority": 1}, bad)  # fmt: skip

    with pytest.raises(JobFailed) as caught:
        performed("import_jobs", text=text, format="json")

    assert str(caught.value).startswith(
        "nothing imported: 1 problem(s): job 3 (key 'broken', name 'Nightly'):"
        " triggers[0].cron_expression: minute: 61"
    )
    assert not Job.objects.filter(key__in=["reports.nightly", "broken"]).exists()
    assert Job.objects.get(pk=existing.pk).priority == 5


def test_an_import_operation_on_a_worker_ends_failed_and_changes_nothing(redis_client):
    run = start_operation("import_jobs", {"text": "- name: [unclosed", "format": "yaml"},
                          by="ada", now=NOW)  # fmt: skip

    run = executed(run)

    assert run.status == RunStatus.FAILED
    assert run.message.startswith("nothing imported: 1 problem(s): file: not valid YAML")
    assert not Job.objects.exclude(key__startswith="takt.").exclude(key__isnull=True).exists()


def test_the_import_command_prints_the_plan_on_stdout_and_progress_on_stderr(tmp_path, capsys):
    path = tmp_path / "jobs.json"
    path.write_text(import_text(*[{**GOOD, "key": f"k{n}", "name": f"n{n}"} for n in range(10)]))

    call_command("import_jobs", str(path), "--dry-run")

    out, err = capsys.readouterr()
    assert out.splitlines()[-1] == "dry run, nothing written: 10 create, 0 update, 0 unchanged"
    assert "import_jobs" not in out
    progress = err.splitlines()
    assert progress[0] == "import_jobs: 0 of 10 (0 %): checking job 1 (key 'k0', name 'n0')"
    assert progress[-1] == "import_jobs: 10 of 10 (100 %): checked 10 job(s), 0 problem(s)"
    assert len(progress) == 11  # a line per 10 %


def test_a_backfill_of_a_job_whose_only_trigger_is_anchored_on_a_run_fails_naming_it():
    ok = hourly_job("ok")
    anchored = make_job("after the end")
    trigger = make_trigger(anchored, created_at=T0, kind="interval", interval_seconds=3600,
                           interval_anchor="from_finish")  # fmt: skip

    with pytest.raises(JobFailed) as caught:
        performed("backfill", jobs=[ok.pk, anchored.pk], start=T0.isoformat(),
                  end=(T0 + HOUR).isoformat())  # fmt: skip

    message = str(caught.value)
    assert message.startswith("backfill failed for 1 of 2 job(s): ")
    assert f"after the end (#{anchored.pk}): interval_anchor: trigger #{trigger.pk} (" in message
    assert "an interval anchored 'from_finish' has no fire times of its own" in message
    assert ok.runs.count() == 2 and not anchored.runs.exists()
