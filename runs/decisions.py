"""The scheduler's decision log (F-65): every decision about a run, kept
in a capped Redis stream and queryable by job (`manage.py decision_log`).

Each entry carries its kind, the job, run and trigger ids, the time and a
detail text. The kinds, with what the detail says:

Dispatch and the run's life (runs/dispatch.py, runs/starting.py,
runs/execution.py, runs/cancel.py, runs/delivery.py):

* `due`: the beat created a run for a fire time ("schedule run for <time>");
* `skipped`: the overlap or missed-run policy recorded a skipped run (its message);
* `refused`: maintenance mode refused a run whose target is not on the
  allow-list ("maintenance mode", or the skipped run's message);
* `held`: a run was made held behind the job's active run at dispatch
  (buffer policies: "schedule run for <time>"), or a worker put it back
  because the queue is paused ("the queue is paused");
* `catchup_capped`: a `run_all` catch-up left missed fire times out (how many);
* `stalled`: a trigger that can still fire had no next fire time and no
  run to set one; repaired (runs/stalled.py): "trigger #7 (every hour) of
  job #3 had no next fire time ...; repaired: it fires next at <time>";
* `rescheduled`: an interval anchored on a run's start or finish got no
  run that will start for its fire time (refused, skipped, condition not
  met): it counts from now ("... fires next at <time>");
* `busy`: an interval anchored on the enqueue (after_enqueue) was left
  due because its job is busy under a one-at-a-time overlap policy
  (runs/busy.py; written once per busy spell): "the job is busy (overlap
  policy 'skip'): its due time <time> stays due and is caught up once
  after its runs end";
* `lock_skip`, `lock_hold`, `lock_take_over`: the worker found the job's
  lock taken and did what the overlap policy says;
* `start`: a run passed every check and starts ("<trigger> run"), written
  in the round trip that took its slots;
* `detached`: a detached command's program started and its worker process
  was given back ("its program runs detached"; runs/detached.py);
* `end`: a run's end ("started <time>, ended <status>");
* `cancelled`: by whom, and what the run was ("by ops; it was running");
* `double_start_prevented`: a second delivery of a run lost the
  compare-and-set (why);
* `resent`: a published run whose message was gone was sent again (why).

Coordination (F-29, F-31..F-34, F-04; runs/starting.py, runs/waiting.py,
runs/variables.py, runs/dependencies.py, runs/children.py, runs/queue.py):

* `condition_not_met`: the job's condition held a fire time back (the beat,
  with the trigger and no run; written when the reason changes) or ended a
  run `skipped` at its start: "condition not met: variable 'Import done'
  is -1, it must be 0 or 200";
* `waiting_for_slot`: a run waits (held) for a slot of its concurrency
  group or the exclusive slot, with the run holding it: "its concurrency
  group is full; held by run #5";
* `limit_reached`: the same for TAKT_MAX_CONCURRENCY: "the global limit
  TAKT_MAX_CONCURRENCY is reached; held by run #5";
* `slot_granted`: a waiting run got its slot and was sent ("its group slot
  is free"; group, exclusive or limit);
* `variable_changed`: a result variable changed: "variable 'Import done':
  -1 → 0", with "(consumed by its start)" when a condition consumed it; by
  hand it is job 0 and says "set by <who>";
* `dependency_started`: an upstream run's end started (or recorded skipped)
  a dependant's run, on the dependant's job with its dependency trigger:
  "run #40 of job #3 ended succeeded: started run #41";
* `file_started`: a settled file or a RUN file started (or recorded
  skipped) a run of the job (runs/watching.py): "created /srv/in/a.csv
  (15 bytes): started run #43";
* `child_started`: a parent run started its next child's run, on the
  child's job: "child 'Transform' of parent run #40: run #42 queued";
* `maintenance`: maintenance mode went on or off, job 0 (cluster-wide):
  "maintenance mode on (lock file /srv/NoLock.ini): database upgrade".

Held back and the beat itself (runs/not_due.py, runs/beat.py):

* `not_due`: a due check found the job held back: the job is paused
  (with who paused it and why), or the queue is paused; written once per
  spell by the beat (runs/not_due.py), as `busy` is;
* `beat`: a beat's scheduler switched on or off, job 0: "beat started on
  host-a (pid 4711): scheduling on", "... scheduling OFF
  (TAKT_SCHEDULER_ENABLED=false)", "beat stopped on host-a (pid 4711)".

`manage.py decision_log` adds what the database says at print time: the
names of the jobs mentioned, the job of a run holding a slot, the group
and its limit or TAKT_MAX_CONCURRENCY of a slot decision. Entries of job 0
show only without --job. The admin shows the log per job (the job's
editor, under "Why didn't it run?") and across jobs (Runs › Scheduler
decisions); the API at /api/v1/decisions.

Where it is kept, and why there: two stores, one after the other.

1. Recording appends to a Redis stream, as before: one XADD per entry,
   pipelined per claim batch on the beat, and for a run's `start` and
   `end` inside the Lua script that takes or frees its slots (runs/slots.py,
   runs/metrics.py), in the round trip the worker makes anyway. The hot
   path gains nothing: no database write, no extra round trip. The stream
   is capped at TAKT_DECISION_LOG_SIZE entries (a buffer while no beat
   drains it). Recording never fails a run: a Redis error is logged and
   the entries are dropped.
2. Every beat tick, after it has published its runs, drains the stream
   into the table SchedulerDecision (`drain`), oldest first, 1000 entries
   a statement: read them (XRANGE), insert them in bulk keyed by their
   stream id (unique; a duplicate is ignored), and only after the insert
   has committed trim the stream up to the last entry read (XTRIM MINID:
   the acknowledgement; a later XADD always gets a larger id). A crash
   between the two reads the same entries again at the next drain and
   the unique key drops them: nothing is lost, nothing doubled; two beats
   draining at once are the same case. Readers (`query`, the admin, the
   API) drain before they read, so they see what was recorded a moment
   ago with no beat running.

A database table written in the beat's claim transaction was the other
way; it would move the `start` and `end` entries out of the Lua scripts
into a database write per run on the workers, and make a log write part
of every claim's transaction (whose row locks other beats wait on).
The price is paid after the publish, so no run leaves later: measured
with benchmarks/decision_drain.py (old path: the same tick without the
drain, interleaved in one process; on a loaded 8-core machine),
PostgreSQL: a tick claiming 500 due runs 497 -> 568 ms (x1.14), 2,000:
2,251 -> 2,932 ms (x1.30); an idle tick 0.15 -> 0.21 ms (one XRANGE on
the empty stream). SQLite: x1.19, x1.21, 0.08 -> 0.21 ms.

What a Redis restart without persistence loses is what no beat drained
yet: at most one tick's entries. (Stream ids are unique for the life of
Redis's data; a fresh Redis numbers from its clock again, so one could
repeat an id already stored, and be dropped as a duplicate, only if that
clock went back.) The table keeps every decision for
TAKT_DECISION_LOG_DAYS (default 30) days; the maintenance section
`decisions` (the hourly "Takt maintenance" job) deletes older ones.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

from django.conf import settings
from django.db import DatabaseError, transaction

from runs.locks import get_redis
from runs.models import SchedulerDecision

log = logging.getLogger("takt.decisions")

# Every kind, in the order the module docstring explains them.
KINDS = (
    "due", "skipped", "refused", "held", "catchup_capped", "stalled", "rescheduled", "busy",
    "lock_skip", "lock_hold", "lock_take_over", "start", "detached", "end", "cancelled",
    "double_start_prevented", "resent", "condition_not_met", "waiting_for_slot",
    "limit_reached", "slot_granted", "variable_changed", "dependency_started", "file_started",
    "child_started", "maintenance", "not_due", "beat",
)  # fmt: skip

DEFAULT_SIZE = 100_000
DEFAULT_DAYS = 30
DRAIN_BATCH = 1000
# A drain moves at most this many batches (a long backlog goes on at the
# next tick, so one tick is never held up by it).
DRAIN_MAX_BATCHES = 20


@dataclass(frozen=True)
class Decision:
    kind: str
    job_id: int
    run_id: int | None = None
    trigger_id: int | None = None
    detail: str = ""
    at: datetime | None = None


def decision_key() -> str:
    return f"{settings.TAKT_KEY_PREFIX}:decisions"


def log_size() -> int:
    return int(getattr(settings, "TAKT_DECISION_LOG_SIZE", DEFAULT_SIZE))


def retention_days() -> int:
    return int(getattr(settings, "TAKT_DECISION_LOG_DAYS", DEFAULT_DAYS))


def decision_fields(decision: Decision) -> dict[str, str]:
    at = decision.at or datetime.now(UTC)
    return {
        "kind": decision.kind,
        "job": str(decision.job_id),
        "run": "" if decision.run_id is None else str(decision.run_id),
        "trigger": "" if decision.trigger_id is None else str(decision.trigger_id),
        "at": at.isoformat(),
        "detail": decision.detail[:500],
    }


def record(decisions: Iterable[Decision]) -> None:
    """Append decisions to the log's stream (one pipelined round trip)."""
    items = list(decisions)
    if not items:
        return
    try:
        pipe = get_redis().pipeline(transaction=False)
        for decision in items:
            pipe.xadd(
                decision_key(), decision_fields(decision), maxlen=log_size(), approximate=True
            )
        pipe.execute()
    except Exception:
        log.exception("could not record %d scheduler decisions", len(items))


def _row(entry_id: bytes, raw: dict[bytes, bytes]) -> SchedulerDecision:
    fields = {k.decode(): v.decode(errors="replace") for k, v in raw.items()}

    def number(name: str) -> int | None:
        value = fields.get(name, "")
        return int(value) if value.isdigit() else None

    try:
        at = datetime.fromisoformat(fields.get("at", "")).astimezone(UTC)
    except ValueError:  # not Takt's: kept, at the time of its stream id
        at = datetime.fromtimestamp(int(entry_id.split(b"-")[0]) / 1000, UTC)
    return SchedulerDecision(
        stream_id=entry_id.decode(),
        at=at,
        kind=fields.get("kind", "?")[:32],
        job_id=number("job") or 0,
        run_id=number("run"),
        trigger_id=number("trigger"),
        detail=fields.get("detail", ""),
    )


def _after(entry_id: str) -> str:
    """The smallest stream id above `entry_id` ("1700000000000-4" -> "...-5")."""
    ms, seq = entry_id.split("-")
    return f"{ms}-{int(seq) + 1}"


def drain(*, batch: int = DRAIN_BATCH, max_batches: int = DRAIN_MAX_BATCHES) -> int:
    """Move the stream's entries into the table, oldest first (module
    docstring, step 2); returns how many were read. Raises redis.RedisError
    or a DatabaseError; what was not inserted stays in the stream."""
    client, key = get_redis(), decision_key()
    moved, start = 0, "-"
    for _ in range(max_batches):
        entries = client.xrange(key, start, "+", count=batch)
        if not entries:
            break
        last = entries[-1][0].decode()
        # On past this batch: inside a caller's transaction its entries
        # stay in the stream until the commit.
        start = "(" + last
        with transaction.atomic():
            SchedulerDecision.objects.bulk_create(
                [_row(entry_id, raw) for entry_id, raw in entries], ignore_conflicts=True
            )
            # The acknowledgement, after the rows are committed (at once
            # outside a transaction), never before: every entry up to the
            # last one read goes (a later XADD gets a larger id).
            transaction.on_commit(
                lambda last=last: client.xtrim(key, minid=_after(last), approximate=False),
                robust=True,
            )
        moved += len(entries)
        if len(entries) < batch:
            break
    return moved


def drain_quietly() -> None:
    """drain() for a reader: an error is logged and what the table holds
    is shown."""
    try:
        drain()
    except Exception as exc:
        log.warning("could not move the scheduler decisions into the database: %s", exc)


def entry(row: SchedulerDecision) -> dict[str, Any]:
    """A row as the log's entries read (all text, as the stream holds them)."""
    return {
        "id": row.stream_id,
        "kind": row.kind,
        "job": str(row.job_id),
        "run": "" if row.run_id is None else str(row.run_id),
        "trigger": "" if row.trigger_id is None else str(row.trigger_id),
        "at": row.at.astimezone(UTC).isoformat(),
        "detail": row.detail,
    }


def query(*, job_id: int | None = None, limit: int = 50) -> list[dict[str, Any]]:
    """The newest decisions first, optionally of one job, after a drain.
    When the database cannot be read (down, or not migrated yet), what
    the stream holds: the entries no drain has moved."""
    drain_quietly()
    rows = SchedulerDecision.objects.order_by("-id")
    if job_id is not None:
        rows = rows.filter(job_id=job_id)
    try:
        return [entry(row) for row in rows[: max(limit, 1)]]
    except DatabaseError as exc:
        log.warning("could not read the decision log (%s): showing what Redis holds", exc)
        return _from_stream(job_id=job_id, limit=limit)


def _from_stream(*, job_id: int | None, limit: int) -> list[dict[str, Any]]:
    """The newest entries of the stream first (scans at most 20 x limit)."""
    out: list[dict[str, Any]] = []
    for entry_id, raw in get_redis().xrevrange(decision_key(), count=max(limit, 1) * 20):
        fields = {k.decode(): v.decode(errors="replace") for k, v in raw.items()}
        if job_id is not None and fields.get("job") != str(job_id):
            continue
        out.append({"id": entry_id.decode(), **fields})
        if len(out) >= limit:
            break
    return out


def delete_expired(*, now: datetime, batch: int = 1000) -> int:
    """Delete the decisions older than TAKT_DECISION_LOG_DAYS before `now`,
    `batch` rows a statement (by id, on the time index); returns how many."""
    cutoff = now - timedelta(days=retention_days())
    deleted = 0
    while True:
        ids = list(
            SchedulerDecision.objects.filter(at__lt=cutoff)
            .order_by("at", "id")
            .values_list("pk", flat=True)[:batch]
        )
        if not ids:
            return deleted
        deleted += SchedulerDecision.objects.filter(pk__in=ids).delete()[0]


def count_expired(*, now: datetime) -> int:
    cutoff = now - timedelta(days=retention_days())
    return SchedulerDecision.objects.filter(at__lt=cutoff).count()
