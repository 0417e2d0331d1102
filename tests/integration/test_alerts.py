"""Heartbeat states and alerts (F-60, F-62, F-63, F-106) against the real
database and Redis: runs executed in-process with an injected clock, the
overdue check with an injected `now`, notifications by Django's locmem mail
backend and to a small HTTP server started here."""

from __future__ import annotations

import logging
import threading
from collections.abc import Iterator
from datetime import timedelta
from typing import Any

import pytest
from django.db import connections, transaction

from heartbeats.alerts import mark_seen, raise_alert, resolve_alert
from heartbeats.core.status import OK_STATUS, HeartbeatState
from heartbeats.models import Alert, Heartbeat
from heartbeats.services import (
    check_overdue,
    failed_alert_key,
    on_run_finished,
    overdue_alert_key,
)
from jobs.models import Job
from runs.execution import execute
from runs.models import Run, RunStatus, RunTrigger
from runs.services import create_run, start_run
from tests.integration.conftest import SECOND, clock, make_job, utc
from tests.integration.webhook import Hook
from tests.processes import free_port

pytestmark = pytest.mark.django_db

T0 = utc(2026, 6, 1, 8, 0)
MINUTE, HOUR = 60 * SECOND, 3600 * SECOND
DEADLINE = HOUR
GRACE = 10 * MINUTE


def run_job(job: Job, at, *, ok: bool = True, seconds: int = 1) -> Run:
    """Run `job` once on this process's worker: started at `at`, ended
    `seconds` later, succeeding or failing as asked."""
    Job.objects.filter(pk=job.pk).update(target="tests.echo" if ok else "tests.fail")
    job.refresh_from_db()
    run = create_run(job, trigger=RunTrigger.MANUAL, now=at)
    execute(run.pk, worker="test", clock=clock(at, at + seconds * SECOND))
    run.refresh_from_db()
    assert run.status == (RunStatus.SUCCEEDED if ok else RunStatus.FAILED)
    return run


def heartbeat_of(job: Job) -> Heartbeat:
    return Heartbeat.objects.get(job=job)


@pytest.fixture(params=["upsert", "orm"])
def heartbeat_path(request, monkeypatch):
    """Both ways a heartbeat is written (see test_execution.py)."""
    if request.param == "orm":
        monkeypatch.setattr("heartbeats.services.UPSERT_VENDORS", ())
    return request.param


# --- Heartbeat rows and failure alerts -------------------------------------------


def test_the_core_knows_which_status_is_a_success():
    assert OK_STATUS == RunStatus.SUCCEEDED


def test_no_heartbeat_row_before_the_first_report(redis_client):
    job = make_job("nightly", heartbeat_deadline_s=3600)

    assert check_overdue(now=T0 + 100 * HOUR) == 0  # a job that never ran is not overdue
    assert not Heartbeat.objects.exists()
    assert not Alert.objects.exists()

    run_job(job, T0)

    beat = heartbeat_of(job)
    assert (beat.state, beat.run_count, beat.consecutive_failures) == (HeartbeatState.UP, 1, 0)
    assert (beat.last_started_at, beat.last_run_at) == (T0, T0 + SECOND)


def test_a_failed_run_keeps_the_last_success_and_raises_one_alert(redis_client, heartbeat_path):
    job = make_job("nightly")
    run_job(job, T0)
    bad = run_job(job, T0 + HOUR, ok=False)

    beat = heartbeat_of(job)
    assert (beat.last_success_at, beat.last_run_at) == (T0 + SECOND, T0 + HOUR + SECOND)
    assert (beat.state, beat.consecutive_failures, beat.failure_count) == (
        HeartbeatState.DOWN,
        1,
        1,
    )
    alert = Alert.objects.get()
    assert (alert.key, alert.severity, alert.title, alert.count, alert.seen) == (
        failed_alert_key(job.pk),
        "warning",
        "Run 'nightly' failed",
        1,
        False,
    )
    assert alert.message == f"Run #{bad.pk} ended failed: failed on purpose"
    assert alert.first_seen_at == alert.last_seen_at == T0 + HOUR + SECOND
    assert alert.resolved_at is None


def test_a_first_report_that_fails_creates_the_row_down_and_alerts(redis_client, heartbeat_path):
    job = make_job("nightly")
    run_job(job, T0, ok=False)

    beat = heartbeat_of(job)
    assert (beat.state, beat.consecutive_failures, beat.last_success_at) == ("down", 1, None)
    assert Alert.objects.get().key == failed_alert_key(job.pk)


def test_the_same_failure_twice_raises_the_count_not_a_second_alert(redis_client, heartbeat_path):
    job = make_job("nightly")
    run_job(job, T0, ok=False)
    alert = Alert.objects.get()
    assert mark_seen([alert.pk]) == 1

    second = run_job(job, T0 + HOUR, ok=False)

    alert.refresh_from_db()
    assert Alert.objects.count() == 1
    assert (alert.count, alert.seen) == (2, False)  # unseen again
    assert (alert.first_seen_at, alert.last_seen_at) == (T0 + SECOND, T0 + HOUR + SECOND)
    assert (
        alert.message == f"Run #{second.pk} ended failed (2 failures in a row): failed on purpose"
    )
    assert heartbeat_of(job).consecutive_failures == 2


def test_a_success_resolves_the_failure_alert_and_a_new_failure_reopens_it(
    redis_client, heartbeat_path
):
    job = make_job("nightly")
    run_job(job, T0, ok=False)
    ok = run_job(job, T0 + HOUR)

    alert = Alert.objects.get()
    assert alert.resolved_at == T0 + HOUR + SECOND
    assert alert.message == f"Run 'nightly' succeeded again (run #{ok.pk})."
    beat = heartbeat_of(job)
    assert (beat.state, beat.consecutive_failures) == (HeartbeatState.UP, 0)

    run_job(job, T0 + 2 * HOUR)  # a success after a success: nothing to resolve
    alert.refresh_from_db()
    assert alert.resolved_at == T0 + HOUR + SECOND

    run_job(job, T0 + 3 * HOUR, ok=False)
    alert.refresh_from_db()
    assert (alert.resolved_at, alert.count, Alert.objects.count()) == (None, 2, 1)


def test_alert_after_three_failures_raises_nothing_for_two_and_one_critical_on_the_third(
    redis_client, heartbeat_path
):
    job = make_job("nightly")
    run_job(job, T0)  # the first report creates the row, where the setting lives
    Heartbeat.objects.filter(job=job).update(alert_after_failures=3)

    run_job(job, T0 + 1 * HOUR, ok=False)
    run_job(job, T0 + 2 * HOUR, ok=False)
    assert not Alert.objects.exists()
    assert heartbeat_of(job).consecutive_failures == 2

    run_job(job, T0 + 3 * HOUR, ok=False)
    alert = Alert.objects.get()
    assert (alert.severity, alert.count) == ("critical", 1)
    assert "(3 failures in a row)" in alert.message

    run_job(job, T0 + 4 * HOUR, ok=False)
    alert.refresh_from_db()
    assert (alert.count, Alert.objects.count()) == (2, 1)


def test_a_success_in_between_starts_the_count_again(redis_client):
    job = make_job("nightly")
    run_job(job, T0)
    Heartbeat.objects.filter(job=job).update(alert_after_failures=2)
    run_job(job, T0 + 1 * HOUR, ok=False)
    run_job(job, T0 + 2 * HOUR)
    run_job(job, T0 + 3 * HOUR, ok=False)

    assert not Alert.objects.exists()
    assert heartbeat_of(job).consecutive_failures == 1


def test_a_paused_heartbeat_raises_no_failure_alert(redis_client):
    job = make_job("nightly")
    run_job(job, T0)
    Heartbeat.objects.filter(job=job).update(paused=True, state=HeartbeatState.PAUSED)

    run_job(job, T0 + HOUR, ok=False)

    assert not Alert.objects.exists()
    assert heartbeat_of(job).state == HeartbeatState.PAUSED


def test_a_success_after_a_success_costs_the_heartbeat_statement_only(
    redis_client, django_assert_num_queries
):
    job = make_job("nightly", heartbeat_deadline_s=3600)
    run_job(job, T0)
    run = run_job(job, T0 + HOUR)
    run.finished_at = T0 + 2 * HOUR  # reported once more
    assert run.job.name == "nightly"  # loaded, as the worker has it

    with django_assert_num_queries(1):
        on_run_finished(sender=Run, run=run)

    assert heartbeat_of(job).run_count == 3


def test_a_heartbeat_or_alert_that_cannot_be_written_never_fails_the_run(
    redis_client, monkeypatch, caplog
):
    job = make_job("nightly")

    def broken(*args: Any, **kwargs: Any) -> None:
        raise RuntimeError("alert store down")

    monkeypatch.setattr("heartbeats.services.raise_alert", broken)
    run_job(job, T0, ok=False)  # asserts the run ended as its job did
    assert heartbeat_of(job).consecutive_failures == 1
    assert "alerting on run" in caplog.text

    monkeypatch.setattr("heartbeats.services.upsert_heartbeat", broken)
    monkeypatch.setattr("heartbeats.services.update_or_create_heartbeat", broken)
    run_job(job, T0 + HOUR)
    assert heartbeat_of(job).run_count == 1  # not written, and the run still succeeded
    assert "writing the heartbeat of run" in caplog.text


# --- The overdue check ------------------------------------------------------------


def overdue_alert(beat: Heartbeat) -> Alert:
    return Alert.objects.get(key=overdue_alert_key(beat.pk))


def test_an_overdue_heartbeat_is_alerted_on_state_changes_reminded_and_resolved(redis_client):
    job = make_job("hourly export", heartbeat_deadline_s=3600)
    run_job(job, T0 - SECOND)  # reported at T0
    Heartbeat.objects.filter(job=job).update(grace_s=600, reminder_s=1800)
    beat = heartbeat_of(job)

    assert check_overdue(now=T0 + DEADLINE) == 0  # at the deadline: still up
    assert not Alert.objects.exists()

    late_at = T0 + DEADLINE + SECOND
    assert check_overdue(now=late_at) == 1
    alert = overdue_alert(beat)
    assert (alert.title, alert.severity, alert.count) == (
        "Run 'hourly export' overdue",
        "warning",
        1,
    )
    assert "is late: last run 2026-06-01 08:00:00 UTC; deadline 3600 s" in alert.message
    beat.refresh_from_db()
    assert (beat.state, beat.last_alerted_at) == (HeartbeatState.LATE, late_at)

    assert check_overdue(now=T0 + DEADLINE + GRACE) == 1  # still late: no new alert
    alert.refresh_from_db()
    assert alert.count == 1

    down_at = T0 + DEADLINE + GRACE + SECOND
    assert check_overdue(now=down_at) == 1  # late → down: raised again, critical
    alert.refresh_from_db()
    assert (alert.severity, alert.count, alert.last_seen_at) == ("critical", 2, down_at)

    reminder = 1800 * SECOND
    check_overdue(now=down_at + reminder - SECOND)
    alert.refresh_from_db()
    assert alert.count == 2
    check_overdue(now=down_at + reminder)  # a reminder every reminder_s while down
    alert.refresh_from_db()
    assert (alert.count, alert.last_seen_at) == (3, down_at + reminder)
    check_overdue(now=down_at + 2 * reminder)
    alert.refresh_from_db()
    assert alert.count == 4

    back_at = down_at + 2 * reminder + MINUTE
    run_job(job, back_at)  # the recovery: the report resolves it at once
    alert.refresh_from_db()
    assert alert.resolved_at == back_at + SECOND
    beat.refresh_from_db()
    assert (beat.state, beat.last_alerted_at) == (HeartbeatState.UP, None)
    assert check_overdue(now=back_at + MINUTE) == 0
    alert.refresh_from_db()
    assert (alert.count, alert.resolved_at) == (4, back_at + SECOND)


def test_no_reminders_without_a_reminder_interval(redis_client):
    job = make_job("hourly export", heartbeat_deadline_s=3600)
    run_job(job, T0 - SECOND)
    Heartbeat.objects.filter(job=job).update(grace_s=0)

    for hours in (1, 2, 5, 50):
        check_overdue(now=T0 + hours * HOUR + SECOND)

    alert = overdue_alert(heartbeat_of(job))
    assert (alert.severity, alert.count) == ("critical", 1)  # no grace: straight to down


def test_the_default_grace_is_the_setting(redis_client, settings):
    settings.TAKT_HEARTBEAT_GRACE_SECONDS = 120
    job = make_job("hourly export", heartbeat_deadline_s=3600)
    run_job(job, T0 - SECOND)

    check_overdue(now=T0 + DEADLINE + 120 * SECOND)
    assert heartbeat_of(job).state == HeartbeatState.LATE
    check_overdue(now=T0 + DEADLINE + 121 * SECOND)
    assert heartbeat_of(job).state == HeartbeatState.DOWN


def test_a_run_under_way_is_not_overdue_until_it_overruns_the_deadline(redis_client):
    job = make_job("hourly export", heartbeat_deadline_s=3600)
    run_job(job, T0 - SECOND)
    run = create_run(job, trigger=RunTrigger.MANUAL, now=T0 + 50 * MINUTE)
    assert start_run(run, worker="test", now=T0 + 50 * MINUTE)

    assert check_overdue(now=T0 + DEADLINE + SECOND) == 0
    beat = heartbeat_of(job)
    assert beat.state == HeartbeatState.RUNNING
    assert not Alert.objects.exists()

    assert check_overdue(now=T0 + 50 * MINUTE + DEADLINE) == 0
    assert check_overdue(now=T0 + 50 * MINUTE + DEADLINE + SECOND) == 1
    assert overdue_alert(beat).severity == "warning"
    beat.refresh_from_db()
    assert beat.state == HeartbeatState.LATE


def test_a_failed_job_that_stops_reporting_is_still_found_overdue(redis_client):
    job = make_job("hourly export", heartbeat_deadline_s=3600)
    run_job(job, T0 - SECOND, ok=False)
    assert heartbeat_of(job).state == HeartbeatState.DOWN

    assert check_overdue(now=T0 + DEADLINE + SECOND) == 1

    assert Alert.objects.filter(key=overdue_alert_key(heartbeat_of(job).pk)).exists()
    assert Alert.objects.filter(key=failed_alert_key(job.pk)).exists()


def test_pausing_an_overdue_heartbeat_resolves_its_alert_and_silences_it(redis_client):
    job = make_job("hourly export", heartbeat_deadline_s=3600)
    run_job(job, T0 - SECOND)
    check_overdue(now=T0 + 2 * HOUR)
    beat = heartbeat_of(job)
    Heartbeat.objects.filter(pk=beat.pk).update(paused=True)

    assert check_overdue(now=T0 + 3 * HOUR) == 0

    alert = overdue_alert(beat)
    assert (alert.resolved_at, alert.message) == (T0 + 3 * HOUR, "Run 'hourly export' is paused.")
    beat.refresh_from_db()
    assert (beat.state, beat.last_alerted_at) == (HeartbeatState.PAUSED, None)


def test_an_external_heartbeat_goes_overdue_and_a_start_ping_counts_as_life():
    beat = Heartbeat.objects.create(
        name="offsite backup",
        last_run_at=T0,
        last_status=OK_STATUS,
        deadline_s=3600,
        grace_s=0,
        run_count=1,
        state=HeartbeatState.UP,
    )
    Heartbeat.objects.filter(pk=beat.pk).update(last_started_at=T0 + DEADLINE - MINUTE)

    assert check_overdue(now=T0 + DEADLINE + SECOND) == 0  # started after its last report
    beat.refresh_from_db()
    assert beat.state == HeartbeatState.RUNNING

    assert check_overdue(now=T0 + 2 * DEADLINE) == 1
    assert overdue_alert(beat).title == "Run 'offsite backup' overdue"


def test_a_check_that_finds_nothing_new_writes_nothing(redis_client, django_assert_num_queries):
    for i in range(5):
        job = make_job(f"job {i}", heartbeat_deadline_s=3600)
        run_job(job, T0)
    make_job("never ran", heartbeat_deadline_s=60)

    with django_assert_num_queries(1):
        assert check_overdue(now=T0 + MINUTE) == 0


# --- Alerts and notifications -----------------------------------------------------


@pytest.fixture
def hook() -> Iterator[Hook]:
    server = Hook()
    yield server
    server.close()


@pytest.fixture
def notifying(settings, hook, mailoutbox):
    """Alerts go to ops@example.com and to the local hook."""
    settings.TAKT_ALERT_EMAILS = ["ops@example.com"]
    settings.TAKT_ALERT_WEBHOOK_URL = hook.url
    settings.TAKT_ALERT_MIN_SEVERITY = "warning"
    return hook


@pytest.fixture
def committed(django_capture_on_commit_callbacks):
    """`with committed():` runs the after-commit callbacks registered inside
    it when it ends (the test's own transaction never commits)."""
    return lambda: django_capture_on_commit_callbacks(execute=True)


def subjects(outbox) -> list[str]:
    return [m.subject for m in outbox]


def test_a_failure_is_notified_once_then_its_recovery(
    redis_client, notifying, mailoutbox, committed
):
    job = make_job("nightly")
    with committed():
        run_job(job, T0, ok=False)
        run_job(job, T0 + HOUR, ok=False)  # a repeat: counted, not sent again
        run_job(job, T0 + 2 * HOUR)

    assert subjects(mailoutbox) == [
        "[Takt] Run 'nightly' failed (warning)",
        "[Takt] Resolved: Run 'nightly' failed (warning)",
    ]
    assert mailoutbox[0].to == ["ops@example.com"]
    assert "Count:      1" in mailoutbox[0].body
    assert notifying.events() == [
        ("raised", "Run 'nightly' failed"),
        ("resolved", "Run 'nightly' failed"),
    ]
    first, resolved = notifying.received
    assert first["key"] == failed_alert_key(job.pk)
    assert (first["severity"], first["count"], first["resolved_at"]) == ("warning", 1, None)
    assert resolved["resolved_at"] == (T0 + 2 * HOUR + SECOND).isoformat()
    assert Alert.objects.get().notified_at == T0 + 2 * HOUR + SECOND


def test_a_reopened_alert_is_notified_again(notifying, mailoutbox, committed):
    with committed():
        raise_alert("disk", severity="warning", title="Disk full", message="97 %", now=T0)
        resolve_alert("disk", message="cleaned up", now=T0 + HOUR)
        raise_alert(
            "disk", severity="warning", title="Disk full", message="98 %", now=T0 + 2 * HOUR
        )

    assert notifying.events() == [
        ("raised", "Disk full"),
        ("resolved", "Disk full"),
        ("raised", "Disk full"),
    ]
    assert notifying.received[-1]["count"] == 2
    with committed():
        assert resolve_alert("disk", message="again", now=T0 + 3 * HOUR) is not None
        assert resolve_alert("disk", message="twice", now=T0 + 4 * HOUR) is None  # none open
    assert len(mailoutbox) == 4


def test_overdue_alerts_are_notified_on_changes_and_reminders(
    redis_client, notifying, mailoutbox, committed
):
    job = make_job("hourly export", heartbeat_deadline_s=3600)
    run_job(job, T0 - SECOND)
    Heartbeat.objects.filter(job=job).update(grace_s=600, reminder_s=3600)

    with committed():
        for now in (
            T0 + DEADLINE + SECOND,  # late
            T0 + DEADLINE + 2 * SECOND,  # still late
            T0 + DEADLINE + GRACE + SECOND,  # down
            T0 + DEADLINE + GRACE + SECOND + HOUR,  # a reminder
        ):
            check_overdue(now=now)
        run_job(job, T0 + 3 * HOUR)

    assert subjects(mailoutbox) == [
        "[Takt] Run 'hourly export' overdue (warning)",
        "[Takt] Run 'hourly export' overdue (critical)",
        "[Takt] Reminder: Run 'hourly export' overdue (critical)",
        "[Takt] Resolved: Run 'hourly export' overdue (critical)",
    ]
    assert [e for e, _ in notifying.events()] == ["raised", "raised", "reminder", "resolved"]


@pytest.mark.parametrize(
    ("minimum", "sent"),
    [
        ("info", ["info", "warning", "critical"]),
        ("warning", ["warning", "critical"]),
        ("critical", ["critical"]),
    ],
)
def test_only_alerts_at_or_above_the_minimum_severity_are_sent(
    minimum, sent, notifying, mailoutbox, settings, committed
):
    settings.TAKT_ALERT_MIN_SEVERITY = minimum
    with committed():
        for severity in ("info", "warning", "critical"):
            raise_alert(severity, severity=severity, title=severity, message="", now=T0)
            resolve_alert(severity, message="over", now=T0 + HOUR)

    assert [m.subject for m in mailoutbox] == [
        subject
        for severity in sent
        for subject in (
            f"[Takt] {severity} ({severity})",
            f"[Takt] Resolved: {severity} ({severity})",
        )
    ]
    assert [r["severity"] for r in notifying.received] == [s for s in sent for _ in range(2)]


def test_an_escalation_is_notified_a_repeat_is_not(notifying, mailoutbox, committed):
    with committed():
        raise_alert("k", severity="warning", title="T", message="", now=T0)
        raise_alert("k", severity="warning", title="T", message="", now=T0 + SECOND)
        raise_alert("k", severity="critical", title="T", message="", now=T0 + 2 * SECOND)
        raise_alert("k", severity="warning", title="T", message="", now=T0 + 3 * SECOND)

    assert subjects(mailoutbox) == ["[Takt] T (warning)", "[Takt] T (critical)"]
    assert Alert.objects.get().count == 4


def test_mail_only_or_webhook_only(settings, hook, mailoutbox, committed):
    settings.TAKT_ALERT_EMAILS = []
    settings.TAKT_ALERT_WEBHOOK_URL = hook.url
    with committed():
        raise_alert("a", severity="critical", title="A", message="", now=T0)
    assert (len(hook.received), len(mailoutbox)) == (1, 0)

    settings.TAKT_ALERT_EMAILS = ["ops@example.com", "oncall@example.com"]
    settings.TAKT_ALERT_WEBHOOK_URL = ""
    with committed():
        raise_alert("b", severity="critical", title="B", message="", now=T0)
    assert (len(hook.received), len(mailoutbox)) == (1, 1)
    assert mailoutbox[0].to == ["ops@example.com", "oncall@example.com"]


def test_nothing_is_sent_for_an_alert_that_was_rolled_back(notifying, mailoutbox, committed):
    with committed() as callbacks, pytest.raises(ZeroDivisionError):
        with transaction.atomic():
            raise_alert("gone", severity="critical", title="Gone", message="", now=T0)
            1 / 0  # noqa: B018

    assert callbacks == []

    assert not Alert.objects.exists()
    assert (mailoutbox, notifying.received) == ([], [])


@pytest.mark.parametrize("broken", ["error status", "nobody listening"])
def test_a_broken_webhook_fails_nothing(
    broken, redis_client, notifying, mailoutbox, caplog, committed
):
    if broken == "error status":
        notifying.status = 500
    else:
        notifying.close()
    job = make_job("nightly")

    with caplog.at_level(logging.ERROR, logger="takt.heartbeats"), committed():
        run = run_job(job, T0, ok=False)  # the run ends as its job did

    assert run.status == RunStatus.FAILED
    assert Alert.objects.get().count == 1
    assert subjects(mailoutbox) == ["[Takt] Run 'nightly' failed (warning)"]  # mail still went
    assert "webhook about alert run-failed:job:" in caplog.text


def test_a_broken_mail_server_fails_nothing(notifying, settings, caplog, committed):
    settings.EMAIL_BACKEND = "django.core.mail.backends.smtp.EmailBackend"
    settings.EMAIL_HOST, settings.EMAIL_PORT = "127.0.0.1", free_port()  # nobody listening

    with committed():
        alert = raise_alert("k", severity="critical", title="T", message="", now=T0)

    assert alert.pk is not None
    assert "e-mail about alert k failed" in caplog.text
    assert [e for e, _ in notifying.events()] == ["raised"]


def test_bad_input_to_raise_alert_is_refused():
    with pytest.raises(ValueError, match="severity must be one of info, warning, critical"):
        raise_alert("k", severity="fatal", title="T", message="", now=T0)
    with pytest.raises(ValueError, match="key must be 1 to 200 characters"):
        raise_alert("", severity="info", title="T", message="", now=T0)
    assert not Alert.objects.exists()


def test_mark_seen_counts_what_changed():
    a = raise_alert("a", severity="info", title="A", message="", now=T0)
    b = raise_alert("b", severity="info", title="B", message="", now=T0)
    assert mark_seen([a.pk]) == 1
    assert mark_seen([a.pk, b.pk]) == 1
    assert set(Alert.objects.values_list("seen", flat=True)) == {True}


# --- Races ------------------------------------------------------------------------


@pytest.mark.django_db(transaction=True)
def test_two_first_raises_of_one_key_at_once_make_one_alert_counted_twice():
    barrier = threading.Barrier(4, timeout=30)
    errors: list[BaseException] = []

    def body(i: int) -> None:
        try:
            barrier.wait()
            raise_alert(
                "race", severity="warning", title="Race", message=str(i), now=T0 + i * SECOND
            )
        except BaseException as exc:  # re-raised in the test thread
            errors.append(exc)
        finally:
            connections.close_all()

    threads = [threading.Thread(target=body, args=(i,)) for i in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)
    assert not errors, errors
    alert = Alert.objects.get()
    assert alert.count == 4


@pytest.mark.django_db(transaction=True)
def test_two_overdue_checks_at_once_raise_one_alert():
    beat = Heartbeat.objects.create(
        name="offsite backup",
        last_run_at=T0,
        last_status=OK_STATUS,
        deadline_s=60,
        state=HeartbeatState.UP,
    )
    barrier = threading.Barrier(2, timeout=30)
    results: list[int] = []

    def body() -> None:
        try:
            barrier.wait()
            results.append(check_overdue(now=T0 + timedelta(minutes=5)))
        finally:
            connections.close_all()

    threads = [threading.Thread(target=body) for _ in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)
    assert results == [1, 1]
    assert overdue_alert(beat).count == 1
