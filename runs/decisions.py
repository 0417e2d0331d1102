"""The scheduler's decision log (F-65): every decision about a run, kept
in a capped Redis stream and queryable by job (`manage.py decision_log`).

Kinds: `due` (the beat created a run for a fire time), `skipped` (the
overlap or missed-run policy recorded a skipped run), `refused` (maintenance
mode), `held` (waiting for the job or a paused queue), `start`, `end`,
`cancelled` (runs/cancel.py), and `double_start_prevented` (a second delivery of a run lost the
compare-and-set). Each entry carries the job, run and trigger ids, the time
and a detail text.

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
