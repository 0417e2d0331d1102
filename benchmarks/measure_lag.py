"""3. Scheduling lag: started_at − scheduled_for of runs of many jobs on
1-second to 1-minute fixed-rate schedules, with a real beat (1-second poll)
and a real worker (prefork, concurrency 2) running the no-op job.

Each trigger's grid has a random phase (as with independently created
jobs), so the load is spread over the minute. The measured period is cut
into `windows` equal parts; each part gives one p50/p99/max, and the table
shows the median and spread over the parts. Once the period is over the
beat stops and the worker gets up to DRAIN_S seconds to start what is
queued; a run of the period still not started then counts with the lag it
had at that moment (a lower bound), so a backlog shows instead of hiding.
Skipped runs (the job still busy: overlap policy `skip`) have no start and
are counted apart, as is the backlog when the period ended. The beat's own
share is shown apart: the p99 of published_at − scheduled_for (fire time
to message sent), which the workers' pace does not touch.
"""

from __future__ import annotations

import math
import time
from datetime import datetime, timedelta
from typing import Any

from django.db.models import F
from django.utils import timezone

from benchmarks import seed
from benchmarks.infra import start_beat, start_worker
from benchmarks.measure_e2e import plain_round
from benchmarks.suite_ctx import Ctx, row, wait_until
from jobs.models import Trigger
from runs.models import Run, RunStatus

# Shares of the jobs per interval (seconds): mostly minutely, a few fast ones.
MIX = ((0.001, 1), (0.009, 10), (0.04, 30), (0.95, 60))
WARMUP_S = 5.0
DRAIN_S = 30.0


def mix_for(n: int) -> list[tuple[int, int]]:
    counts = [(max(1, round(n * share)), secs) for share, secs in MIX]
    counts[-1] = (n - sum(c for c, _ in counts[:-1]), counts[-1][1])
    return counts


def runs_per_second(mix: list[tuple[int, int]]) -> float:
    return sum(count / secs for count, secs in mix)


def pct(sorted_values: list[float], p: float) -> float:
    if not sorted_values:
        return math.nan
    return sorted_values[max(0, math.ceil(p * len(sorted_values)) - 1)]


def _window_stats(start: datetime, end: datetime, cutoff: datetime) -> dict[str, Any]:
    rows = Run.objects.filter(scheduled_for__gte=start, scheduled_for__lt=end).values_list(
        "status", "scheduled_for", "started_at", "published_at"
    )
    lags, skipped, unstarted, sent = [], 0, 0, []
    for status, scheduled_for, started_at, published_at in rows:
        if published_at is not None:  # the beat's share: fire time → message sent
            sent.append((published_at - scheduled_for).total_seconds())
        if status == RunStatus.SKIPPED:
            skipped += 1
        elif started_at is None:
            unstarted += 1
            lags.append((cutoff - scheduled_for).total_seconds())
        else:
            lags.append((started_at - scheduled_for).total_seconds())
    lags.sort()
    sent.sort()
    return {
        "p50": pct(lags, 0.50), "p99": pct(lags, 0.99), "max": lags[-1] if lags else math.nan,
        "p99 sent": pct(sent, 0.99),
        "runs": len(lags), "skipped": skipped, "unstarted": unstarted,
    }  # fmt: skip


def run_case(ctx: Ctx, n: int, period_s: float, windows: int) -> list[dict[str, Any]]:
    seed.wipe()
    ctx.drop_queued_messages()
    mix = mix_for(n)
    parked = timezone.now() + timedelta(hours=1)
    seed.add_lag_jobs(mix, first_fire=parked)
    worker = start_worker(ctx.env, ctx.log_dir)
    beat = None
    try:
        plain_round(ctx, 20, timeout=60)  # the worker is up and warm
        beat = start_beat(ctx.env, ctx.log_dir)
        # Bring every grid from an hour ahead to start two seconds from now.
        shift = parked - (timezone.now() + timedelta(seconds=2))
        Trigger.objects.update(start_at=F("start_at") - shift, next_run_at=F("next_run_at") - shift)
        begin = parked - shift + timedelta(seconds=WARMUP_S)
        end = begin + timedelta(seconds=period_s)
        time.sleep(max(0.0, (end - timezone.now()).total_seconds()))
        beat.stop()
        backlog = Run.objects.filter(status=RunStatus.QUEUED, scheduled_for__lt=end).count()
        try:
            wait_until(
                lambda: not Run.objects.filter(status=RunStatus.QUEUED, scheduled_for__lt=end).exists(),
                timeout=DRAIN_S, every=0.25, what="the queue to drain",
            )  # fmt: skip
        except TimeoutError:
            ctx.say(f"lag: the worker did not catch up within {DRAIN_S:.0f} s")
        cutoff = timezone.now()
    finally:
        if beat is not None:
            beat.stop()
        worker.stop()
    step = timedelta(seconds=period_s / windows)
    parts = [
        _window_stats(begin + i * step, begin + (i + 1) * step, cutoff) for i in range(windows)
    ]
    ctx.drop_queued_messages()
    seed.wipe()
    rate = runs_per_second(mix)
    case = f"{n:,} jobs, {rate:.0f} runs/s due"
    extra = {"n": n, "due_per_s": rate, "backlog_at_end": backlog}
    rows = [
        row("lag", case, f"{key} lag", "takt", "s", [p[key] for p in parts], **extra)
        for key in ("p50", "p99", "max")
    ]
    rows.append(
        row("lag", case, "p99 publish lag", "takt", "s", [p["p99 sent"] for p in parts], **extra)
    )
    rows.append(
        row(
            "lag",
            case,
            "runs started",
            "takt",
            "",
            [p["runs"] - p["unstarted"] for p in parts],
            **extra,
        )
    )
    rows.append(
        row(
            "lag",
            case,
            "not started by the end",
            "takt",
            "",
            [p["unstarted"] for p in parts],
            **extra,
        )
    )
    rows.append(
        row("lag", case, "skipped (job busy)", "takt", "", [p["skipped"] for p in parts], **extra)
    )
    ctx.say(
        f"lag: {case}: p99 {sorted(p['p99'] for p in parts)[windows // 2]:.2f} s, backlog {backlog}"
    )
    return rows


def run(ctx: Ctx, sizes: list[int], period_s: float, windows: int) -> list[dict[str, Any]]:
    rows: list[dict[str, Any]] = []
    for n in sizes:
        rows += run_case(ctx, n, period_s, windows)
    return rows
