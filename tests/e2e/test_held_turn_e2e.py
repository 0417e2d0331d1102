"""The runs of one claim wait behind each other (F-23, issue 28 item 4),
with two real beats and a real worker: a held run is sent only once the
run ahead of it has freed the job's lock slot, not as soon as that run's
end is in the database. The worker frees each slot 0.6 s after the run's
end is recorded (tests/e2e/late_release.py), so the beats' sweeps (every
0.2 s) meet that window at every step; before the fix they sent the next
held run in it, and its worker ended it "skipped: job #n is locked by
another run". In a module of its own: its worker carries the fault."""

from __future__ import annotations

from datetime import timedelta

import pytest
import redis
from django.utils import timezone

from jobs.models import Job, Trigger
from runs.models import RunStatus
from tests.e2e.conftest import wait_until

pytestmark = [pytest.mark.e2e, pytest.mark.django_db(transaction=True)]

LATE_WORKER = {
    "TAKT_JOB_MODULES": "tests.sample_jobs,tests.e2e.late_release",
    "TAKT_E2E_RELEASE_DELAY_S": "0.6",
}
DUE = 6  # fire times due at the first claim: 5 missed (catch-up) and the on-time latest


def test_catch_up_runs_of_one_claim_wait_for_the_slot_and_each_runs_once(
    start_process, beat, redis_url
):
    key = "e2e:held-turn"
    job = Job.objects.create(
        name="e2e held turn",
        target="tests.count",
        params={"key": key, "seconds": 0.2},
        missed_run_policy="run_all",  # overlap policy skip (the default)
        catchup_max_runs=10,
    )
    trigger = Trigger.objects.create(job=job, kind="interval", interval_seconds=1)
    due_from = timezone.now() - timedelta(seconds=DUE - 0.5)
    Trigger.objects.filter(pk=trigger.pk).update(next_run_at=due_from)
    start_process("worker", **LATE_WORKER)
    beat()
    beat()

    def claimed() -> list:
        first = job.runs.order_by("enqueued_at").first()
        return list(job.runs.filter(enqueued_at=first.enqueued_at)) if first else []

    claim = wait_until(lambda: len(claimed()) >= DUE and claimed(), 20, "the first claim")
    Trigger.objects.filter(pk=trigger.pk).update(active=False)  # later fire times: not ours

    def claim_ended() -> bool:
        active = (RunStatus.QUEUED, RunStatus.RUNNING)
        return not job.runs.filter(pk__in=[r.pk for r in claim], status__in=active).exists()

    wait_until(claim_ended, 60, f"the {len(claim)} runs of the claim to end one after another")
    runs = list(job.runs.filter(pk__in=[r.pk for r in claim]).order_by("scheduled_for"))
    seen = [(r.pk, r.trigger, r.status, r.message) for r in runs]
    locked = [r for r in runs if "locked by another run" in r.message]
    assert not locked, seen
    assert [r.status for r in runs] == [RunStatus.SUCCEEDED] * len(runs), seen
    assert len({r.scheduled_for for r in runs}) == len(runs) >= DUE, seen
    assert sum(r.trigger == "catchup" for r in runs) >= DUE - 1, seen
    ordered = sorted(runs, key=lambda r: r.started_at)
    assert [r.pk for r in ordered] == [r.pk for r in runs], "oldest fire time first"
    for before, after in zip(ordered, ordered[1:], strict=False):
        assert after.started_at >= before.finished_at, (before.pk, after.pk)
    executions = int(redis.Redis.from_url(redis_url).get(key) or 0)
    assert executions == len(runs), (executions, seen)  # each fire time executed once
