"""F-63 per-job notifications and F-62's long-run alert."""

from __future__ import annotations

import pytest
from django.core import mail
from django.core.exceptions import ValidationError
from django.test import override_settings

from heartbeats.models import Alert
from runs.execution import execute
from runs.models import RunTrigger
from runs.services import create_run
from runs.signals import run_running_long
from tests.integration.conftest import SECOND, clock, make_job, utc

pytestmark = pytest.mark.django_db

T0 = utc(2026, 6, 1, 8, 0)


@override_settings(
    TAKT_ALERT_EMAILS=["ops@example.com"],
    EMAIL_BACKEND="django.core.mail.backends.locmem.EmailBackend",
)
def test_a_job_is_told_about_start_end_and_failure(
    redis_client, django_capture_on_commit_callbacks
):
    job = make_job("told", target="tests.fail", notify={"on": ["start", "end", "failure"]})
    run = create_run(job, trigger=RunTrigger.MANUAL, now=T0)
    with django_capture_on_commit_callbacks(execute=True):
        execute(run.pk, worker="w", clock=clock(T0, T0 + SECOND))
    subjects = sorted(m.subject for m in mail.outbox)
    assert subjects == [
        "[Takt] Run 'told' failed (warning)",  # the failure alert, as for every job
        "[Takt] told: run end",
        "[Takt] told: run failure",
        "[Takt] told: run start",
    ]


@override_settings(TAKT_ALERT_EMAILS=["ops@example.com"])
def test_a_job_that_asks_for_nothing_is_told_nothing(
    redis_client, django_capture_on_commit_callbacks
):
    job = make_job("quiet")
    run = create_run(job, trigger=RunTrigger.MANUAL, now=T0)
    with django_capture_on_commit_callbacks(execute=True):
        execute(run.pk, worker="w", clock=clock(T0, T0 + SECOND))
    assert mail.outbox == []


def test_a_long_run_raises_an_alert_resolved_when_it_ends(redis_client):
    job = make_job("slow", notify={"on": ["long_run"], "long_run_s": 60})
    run = create_run(job, trigger=RunTrigger.MANUAL, now=T0)
    run_running_long.send(sender=type(run), run=run, seconds=61.0)
    alert = Alert.objects.get()
    assert alert.title == "Run 'slow' running long" and alert.resolved_at is None
    execute(run.pk, worker="w", clock=clock(T0, T0 + SECOND))
    alert.refresh_from_db()
    assert alert.resolved_at is not None


@pytest.mark.parametrize(
    "notify",
    [
        {"on": ["sometimes"]},
        {"on": "start"},
        {"on": ["long_run"]},
        {"on": ["long_run"], "long_run_s": 0},
        {"email": "x@example.com"},
        ["start"],
    ],
)
def test_a_bad_notify_setting_names_the_field(notify):
    job = make_job("bad notify")
    job.notify = notify
    with pytest.raises(ValidationError) as err:
        job.full_clean()
    assert "notify" in err.value.message_dict
