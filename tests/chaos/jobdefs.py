"""The chaos jobs, in the import format of `manage.py import_jobs`
(docs/config-as-code.md): 1- and 2-second cron and interval triggers with
overlap `allow` and `skip`, with and without retries, plus two jobs on a
10-second interval whose retries have room before the next fire time (a
1- or 2-second job's retry is dropped by F-103: it would run into the next
fire time). Every job catches up every missed fire time (`run_all`), so
each fire time gets a row of its own and can be checked."""

from __future__ import annotations

from datetime import datetime
from itertools import cycle, islice
from typing import Any

# (trigger, overlap, retries): every combination, in an order that spreads
# them over a short list.
FAST_MIX = [
    (trigger, overlap, retries)
    for retries in (0, 2)
    for overlap in ("skip", "allow")
    for trigger in ("cron:1", "interval:1", "cron:2", "interval:2")
]
FAST_MIX = FAST_MIX[::2] + FAST_MIX[1::2]


def definitions(count: int, *, start_at: datetime) -> list[dict[str, Any]]:
    """`count` fast jobs and two 10-second retry jobs; interval triggers
    on the grid start_at + k * interval (start_at a whole second)."""
    jobs = [
        _job(f"chaos.{i:02d}", trigger, overlap, retries, start_at, max_ms=300)
        for i, (trigger, overlap, retries) in enumerate(islice(cycle(FAST_MIX), count))
    ]
    jobs.append(_job("chaos.retry-skip", "interval:10", "skip", 2, start_at, max_ms=1000))
    jobs.append(_job("chaos.retry-allow", "interval:10", "allow", 2, start_at, max_ms=1000))
    return jobs


def _job(
    key: str, trigger: str, overlap: str, retries: int, start_at: datetime, *, max_ms: int
) -> dict[str, Any]:
    kind, seconds = trigger.split(":")
    if kind == "cron":
        spec: dict[str, Any] = {
            "kind": "cron",
            "cron_expression": "* * * * * *" if seconds == "1" else f"*/{seconds} * * * * *",
            "timezone": "UTC",
        }
    else:
        spec = {
            "kind": "interval",
            "interval_seconds": int(seconds),
            "start_at": start_at.isoformat(),
        }
    return {
        "key": key,
        "name": f"{key} ({trigger}, {overlap}, {retries} retries)",
        "target": "chaos.work",
        "params": {"max_ms": max_ms},
        "timeout_s": 60,
        "overlap_policy": overlap,
        "max_instances": 2,
        "max_retries": retries,
        "retry_backoff_s": 1,
        "retry_backoff_factor": 1.0,
        "retry_jitter": 0.0,
        "missed_run_policy": "run_all",
        "catchup_max_runs": 1000,
        "triggers": [spec],
    }
