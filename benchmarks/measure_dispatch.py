"""2. Dispatch throughput: K jobs due at the same instant.

K jobs with daily triggers wait parked a day ahead while a real ``celery
beat -S runs.beat:TaktScheduler`` (1-second poll) runs with no worker. Each
repetition empties the run table and the queue, then moves all K triggers
to one fire time T about 1.5 s ahead (one UPDATE). The clock stops when the
private Redis holds K messages (LLEN over the priority lists, polled every
20 ms): the figure is that moment minus T, and K divided by it. The runs'
published_at is checked afterwards (every run recorded and marked sent).
The anchor, measured right after in the same process: K plain Celery
``delay()`` calls in a loop, i.e. the cost of publishing K messages alone.
"""

from __future__ import annotations

import time
from datetime import timedelta
from typing import Any

from django.db import connection
from django.utils import timezone

from benchmarks import seed
from benchmarks.infra import start_beat
from benchmarks.noop import noop_task
from benchmarks.suite_ctx import Ctx, row, wait_until
from jobs.models import Trigger
from runs.models import Run

LEAD_S = 1.5
TIMEOUT_S = 120


def _clear_runs() -> None:
    with connection.cursor() as cur:
        cur.execute(f"DELETE FROM {Run._meta.db_table}")


def _one(ctx: Ctx, k: int, trigger_ids: list[int]) -> tuple[float, float]:
    _clear_runs()
    ctx.drop_queued_messages()
    fire = timezone.now() + timedelta(seconds=LEAD_S)
    Trigger.objects.filter(pk__in=trigger_ids).update(next_run_at=fire)
    done_at = wait_until(
        lambda: ctx.queued_messages() >= k, timeout=TIMEOUT_S, what=f"{k} published runs"
    )
    elapsed = done_at - fire.timestamp()
    # The beat marks a batch published just after sending it.
    wait_until(
        lambda: Run.objects.filter(published_at__isnull=False).count() == k,
        timeout=30, every=0.1, what=f"{k} runs marked published",
    )  # fmt: skip
    if ctx.queued_messages() != k:
        raise RuntimeError(f"expected {k} messages, found {ctx.queued_messages()}")
    return elapsed, k / elapsed


def _plain_publish(ctx: Ctx, k: int) -> float:
    """The anchor: K plain ``delay()`` calls in a loop (the publishing floor)."""
    ctx.drop_queued_messages()
    t0 = time.perf_counter()
    for _ in range(k):
        noop_task.delay()
    elapsed = time.perf_counter() - t0
    ctx.drop_queued_messages()
    return elapsed


def run(ctx: Ctx, sizes: list[int], reps: int) -> list[dict[str, Any]]:
    rows: list[dict[str, Any]] = []
    for k in sizes:
        seed.wipe()
        ids = seed.add_due_jobs(k, parked_at=timezone.now() + timedelta(days=1))
        beat = start_beat(ctx.env, ctx.log_dir)
        try:
            time.sleep(1.5)  # first ticks done
            secs, rates = [], []
            for _ in range(reps):
                elapsed, rate = _one(ctx, k, ids)
                secs.append(elapsed)
                rates.append(rate)
                ctx.say(f"dispatch: {k:,} runs published {elapsed:.2f} s after the fire time")
                time.sleep(1.0)  # the claimed triggers are parked a day ahead again
        finally:
            beat.stop()
        plain = [_plain_publish(ctx, k) for _ in range(reps)]
        case = f"{k:,} due at once"
        rows.append(row("dispatch", case, "fire time → all published", "celery", "s", plain, k=k))
        rows.append(
            row(
                "dispatch",
                case,
                "runs published per second",
                "celery",
                "/s",
                [k / s for s in plain],
                k=k,
            )
        )
        rows.append(row("dispatch", case, "fire time → all published", "takt", "s", secs, k=k))
        rows.append(row("dispatch", case, "runs published per second", "takt", "/s", rates, k=k))
    ctx.drop_queued_messages()
    seed.wipe()
    return rows
