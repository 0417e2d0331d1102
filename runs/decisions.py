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

`manage.py decision_log` adds what the database says at print time: the
names of the jobs mentioned, the job of a run holding a slot, the group
and its limit or TAKT_MAX_CONCURRENCY of a slot decision. Entries of job 0
show only without --job.

A stream, not a table: an entry costs one XADD (pipelined per claim batch on
the beat), and the log trims itself to TAKT_DECISION_LOG_SIZE entries, so
it never needs a cleanup. Recording never fails a run: a Redis error is
logged and dropped.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from django.conf import settings

from runs.locks import get_redis

log = logging.getLogger("takt.decisions")

DEFAULT_SIZE = 100_000


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
    """Append decisions to the log (one pipelined round trip)."""
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


def query(*, job_id: int | None = None, limit: int = 50) -> list[dict[str, Any]]:
    """The newest decisions first, optionally of one job (scans at most
    20 × limit entries back)."""
    out: list[dict[str, Any]] = []
    for entry_id, raw in get_redis().xrevrange(decision_key(), count=max(limit, 1) * 20):
        fields = {k.decode(): v.decode() for k, v in raw.items()}
        if job_id is not None and fields.get("job") != str(job_id):
            continue
        out.append({"id": entry_id.decode(), **fields})
        if len(out) >= limit:
            break
    return out
