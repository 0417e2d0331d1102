"""What the Timeline (F-94) and Load forecast (F-95) pages draw: the JSON
of jobs.admin.timeline's data views, from bounded reads.

The timeline reads at most RUN_CAP runs (the newest in the range, on the
run table's (job, enqueued_at) index for one job) and the TRIGGER_CAP
triggers due first, and says when a cap cut something; the forecast reads
the active triggers in chunks of TRIGGER_CHUNK and counts them with the
pure core (jobs.core.forecast). Times go out as UTC ISO 8601.
"""

from __future__ import annotations

import itertools
import logging
import time
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

from django.core.exceptions import ValidationError
from django.db.models import Max, prefetch_related_objects
from django.urls import reverse
from django.utils.translation import gettext as _

from jobs.admin import display
from jobs.core.forecast import LoadTrigger, compute_forecast
from jobs.core.triggers import TriggerError, iter_fire_times
from jobs.models import Job, Trigger
from jobs.policies import TimeoutAction
from jobs.specs import SCHEDULE_FIELDS, trigger_spec
from runs.models import Run, RunStatus

log = logging.getLogger("takt.jobs")

RUN_CAP = 5000  # runs per timeline request, the newest in the range
TRIGGER_CAP = 2000  # triggers whose upcoming fire times one request reads
TICK_CAP = 5000  # upcoming fire times per request
TICKS_PER_TRIGGER = 500
TRIGGER_CHUNK = 2000  # triggers per query for the forecast
MIN_RANGE = timedelta(minutes=1)
MAX_RANGE = timedelta(days=7)
DEFAULT_PAST, DEFAULT_FUTURE = timedelta(hours=20), timedelta(hours=4)
# The fields trigger_spec reads; has_exclusions last.
SPEC_FIELDS = (*SCHEDULE_FIELDS, "has_exclusions")
# A run stopped at its timeout is killed 30 s later: runs that began longer
# ago than the longest timeout and this have ended (or are still running).
KILL_GRACE = timedelta(seconds=60)
_US = timedelta(microseconds=1)


class BadInput(ValueError):
    """A request parameter the data views refuse; `field` names it."""

    def __init__(self, field: str, message: str) -> None:
        super().__init__(f"{field}: {message}")
        self.field, self.message = field, message


def _iso(value: datetime | None) -> str | None:
    """Aware `value` as UTC ISO 8601 to the millisecond: "2026-12-01T09:00:00.000Z"."""
    if value is None:
        return None
    return value.astimezone(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


# --- the timeline's data ------------------------------------------------------


def _run_item(run: dict[str, Any], now: datetime) -> dict[str, Any]:
    """A run as a bar (it started: to its end, or to now while it runs) or
    as a point (queued at its due time; skipped or ended unstarted when
    recorded)."""
    started, finished = run["started_at"], run["finished_at"]
    item = {
        "id": run["id"],
        "job": run["job_id"],
        "status": run["status"],
        "trigger": run["trigger"],
    }
    if started is None:
        at = run["scheduled_for"] if run["status"] == RunStatus.QUEUED else finished
        return {**item, "at": _iso(at or run["enqueued_at"])}
    end = finished or (now if run["status"] == RunStatus.RUNNING else started)
    text = display.run_duration_text(run["status"], end - started)
    running = finished is None and run["status"] == RunStatus.RUNNING
    return {**item, "start": _iso(started), "end": _iso(end), "running": running, "duration": text}


def _runs(start: datetime, end: datetime, now: datetime, job: Job | None) -> tuple[list[Any], bool]:
    """The runs that overlap [start, end), newest first, at most RUN_CAP
    (and whether the cap cut some). Three queries, on the (job,
    enqueued_at) and (job, status) indexes when `job` is given."""
    scope = Run.objects.filter(job=job) if job else Run.objects.all()
    longest = job.timeout_s if job else Job.objects.aggregate(t=Max("timeout_s"))["t"] or 0
    since = start - timedelta(seconds=longest) - KILL_GRACE
    fields = ("id", "job_id", "status", "trigger", "scheduled_for", "enqueued_at")
    fields += ("started_at", "finished_at")
    recent = (
        scope.filter(enqueued_at__gte=since, enqueued_at__lt=end)
        .exclude(finished_at__lt=start)
        .order_by("-enqueued_at", "-id")
        .values(*fields)[: RUN_CAP + 1]
    )
    rows = list(recent)
    # Runs still going that began before `since`: only a job whose timeout
    # action is "continue" has them (a stuck run is recovered as lost). On
    # the (job, status) index.
    if job is None:
        scope = Run.objects.filter(
            job__in=Job.objects.filter(timeout_action=TimeoutAction.CONTINUE)
        )
    seen = {row["id"] for row in rows}
    older = scope.filter(status=RunStatus.RUNNING).order_by("-enqueued_at").values(*fields)
    rows += [row for row in older[:RUN_CAP] if row["id"] not in seen]
    return [_run_item(r, now) for r in rows[:RUN_CAP]], len(rows) > RUN_CAP


def _with_calendars(triggers: list[Trigger]) -> list[Trigger]:
    """`triggers`, those with excluded calendars holding them (one query)."""
    prefetch_related_objects([t for t in triggers if t.has_exclusions], "exclude_calendars")
    return triggers


def _ticks(
    start: datetime, end: datetime, now: datetime, job: Job | None
) -> tuple[list[Any], bool]:
    """Fire times in [start, end) of the active triggers: each one's
    next_run_at (`overdue` when past: due, not fired yet) and those after it
    and after now; and whether a cap cut some. At most TICK_CAP, shared
    by the TRIGGER_CAP triggers due first (at most TICKS_PER_TRIGGER and
    at least one each)."""
    triggers = Trigger.objects.filter(active=True, next_run_at__lt=end)
    if job:
        triggers = triggers.filter(job=job)
    chosen = list(triggers.order_by("next_run_at", "id")[: TRIGGER_CAP + 1])
    cut = len(chosen) > TRIGGER_CAP
    chosen = _with_calendars(chosen[:TRIGGER_CAP])
    # Share the cap: many triggers get a few fire times each, few get many.
    each = min(TICKS_PER_TRIGGER, max(1, TICK_CAP // max(len(chosen), 1)))
    ticks: list[Any] = []
    for trigger in chosen:
        first = trigger.next_run_at
        assert first is not None
        # A past next_run_at is due and shown; the fire times after it that
        # are past too are the missed-run policy's, so ticks go on from now.
        after = max(first, start - _US, now - _US)
        try:
            later = iter_fire_times(trigger_spec(trigger, now=now), after=after)
        except (TriggerError, ValueError, ValidationError):
            later = iter([])  # shown as its next run only
        times = itertools.chain([first] if first >= start else [], later)
        mine = list(itertools.islice(itertools.takewhile(lambda t: t < end, times), each + 1))
        cut |= len(mine) > each
        for at in mine[:each]:
            ticks.append(
                {"job": trigger.job_id, "trigger": trigger.pk, "at": _iso(at), "overdue": at < now}
            )
    return ticks, cut


def timeline_payload(
    *, start: datetime, end: datetime, now: datetime, job: Job | None, with_runs: bool
) -> dict[str, Any]:
    """The timeline's JSON: one row per job with runs or fire times in
    [start, end) (or the one `job`), its runs and upcoming fire times."""
    if end - start < MIN_RANGE:
        raise BadInput("end", _("must be at least a minute after start"))
    if end - start > MAX_RANGE:
        raise BadInput("end", _("must be at most 7 days after start"))
    runs, runs_cut = _runs(start, end, now, job) if with_runs else ([], False)
    ticks, ticks_cut = _ticks(start, end, now, job)
    ids = {r["job"] for r in runs} | {t["job"] for t in ticks} | ({job.pk} if job else set())
    rows = Job.objects.filter(pk__in=ids).order_by("name", "id").values_list("id", "name")
    change = reverse("admin:takt_jobs_job_change", args=[0]).replace("/0/", "/{id}/")
    return {
        "start": _iso(start),
        "end": _iso(end),
        "now": _iso(now),
        "rows": [{"id": pk, "name": name, "url": change.format(id=pk)} for pk, name in rows],
        "runs": runs,
        "runs_shown": with_runs,
        "runs_truncated": runs_cut,
        "run_cap": RUN_CAP,
        "run_url": reverse("admin:takt_runs_run_change", args=[0]).replace("/0/", "/{id}/"),
        "ticks": ticks,
        "ticks_truncated": ticks_cut,
        "tick_cap": TICK_CAP,
    }


# --- the forecast's data ------------------------------------------------------


def _active_triggers(now: datetime, unreadable: list[tuple[int, str]]) -> Iterator[LoadTrigger]:
    """The active triggers as the pure core reads them, in id order,
    TRIGGER_CHUNK per query as plain rows (and those with holiday calendars
    once more, with their calendars). Rows with the same schedule share one
    spec. A trigger whose fields make no spec goes to `unreadable` with the
    reason."""
    specs: dict[tuple[Any, ...], Any] = {}
    after = 0
    while True:
        rows = list(
            Trigger.objects.filter(active=True, pk__gt=after)
            .order_by("pk")
            .values_list("pk", "next_run_at", "job__name", *SPEC_FIELDS)[:TRIGGER_CHUNK]
        )
        calendared = {row[0] for row in rows if row[-1]}  # has_exclusions
        full = {t.pk: t for t in _with_calendars(list(Trigger.objects.filter(pk__in=calendared)))}
        for pk, next_at, job_name, *fields in rows:
            key = tuple(fields)
            if pk in full or key not in specs:
                trigger = full.get(pk) or Trigger(
                    pk=pk, **dict(zip(SPEC_FIELDS, fields, strict=True))
                )
                try:
                    spec: Any = trigger_spec(trigger, now=now)
                except (ValueError, ValidationError) as exc:
                    spec = "; ".join(getattr(exc, "messages", [str(exc)]))
                if pk not in full:
                    specs[key] = spec
            else:
                spec = specs[key]
            if isinstance(spec, str):
                unreadable.append((pk, spec))
            else:
                yield LoadTrigger(pk, spec, next_at, job_name)
        if len(rows) < TRIGGER_CHUNK:
            return
        after = rows[-1][0]


def forecast_payload(*, zone: str, days: int, now: datetime) -> dict[str, Any]:
    """The load forecast's JSON (see jobs.core.forecast.compute_forecast), with
    how long it took. Raises BadInput("tz") or BadInput("days")."""
    started = time.perf_counter()
    unreadable: list[tuple[int, str]] = []
    try:
        result = compute_forecast(_active_triggers(now, unreadable), zone=zone, now=now, days=days)
    except TriggerError as exc:
        raise BadInput("tz" if exc.field == "timezone" else exc.field, exc.message) from None
    invalid = sorted(unreadable + result.invalid)
    if invalid:
        log.warning("load forecast: %d trigger(s) cannot be evaluated", len(invalid))
    return {
        "zone": result.zone,
        "now": _iso(now),
        "starts_at": _iso(result.starts_at),
        "ends_at": _iso(result.ends_at),
        "days": [day.isoformat() for day in result.days],
        "counts": result.counts,
        "hour_seconds": result.hour_seconds,
        "now_cell": list(result.now_cell),
        "busiest": [
            [
                [{"trigger": b.trigger_id, "job": b.label, "count": b.count} for b in cell]
                for cell in day
            ]
            for day in result.busiest
        ],
        "total": result.total,
        "triggers": result.triggers,
        "approximate": len(result.approximate),
        "invalid": [{"trigger": pk, "error": message} for pk, message in invalid],
        "elapsed_ms": round((time.perf_counter() - started) * 1000),
    }
