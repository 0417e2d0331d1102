"""1. Tick cost against the number of idle jobs, Takt next to
django-celery-beat's DatabaseScheduler (same database, same N).

For each N the database holds N enabled Takt jobs (hourly triggers, next due
30-60 minutes later) and N enabled PeriodicTasks on the same schedule. Each
scheduler is measured in a fresh process (benchmarks.probe): schedule build
(construct + first tick), idle ticks, and a tick right after one job was
edited. Memory: for Takt the RSS of a real ``celery beat -S
runs.beat:TaktScheduler`` after a few ticks; for django-celery-beat the RSS
of its probe process after its ticks (it holds the whole schedule in memory).
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from typing import Any

from django.utils import timezone

from benchmarks import seed
from benchmarks.infra import ROOT, start_beat
from benchmarks.suite_ctx import Ctx, row

BEAT_SETTLE_S = 3.5  # a few 1-second ticks before the RSS is read


def _child_json(module: str, *args: str, env: dict[str, str], timeout: float) -> dict[str, Any]:
    """Run `python -m module args` and read the JSON line it prints last."""
    done = subprocess.run(
        [sys.executable, "-m", module, *args], cwd=ROOT, env=env,
        capture_output=True, text=True, timeout=timeout, check=False,
    )  # fmt: skip
    if done.returncode != 0:
        raise RuntimeError(f"{module} {' '.join(args)} failed:\n{done.stderr[-3000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def _probe(ctx: Ctx, kind: str, reps: int, timeout: float) -> dict[str, Any]:
    settings = "scheduler_project.settings" if kind == "takt" else "benchmarks.settings"
    env = {**ctx.env, "DJANGO_SETTINGS_MODULE": settings}
    return _child_json("benchmarks.probe", kind, "--reps", str(reps), env=env, timeout=timeout)


def _stack_rss(ctx: Ctx) -> float:
    """The floor under the beat's memory (benchmarks/stack_probe.py, which
    configures Django itself)."""
    return (
        float(_child_json("benchmarks.stack_probe", env=ctx.env, timeout=120)["rss_bytes"]) / 2**20
    )


def _beat_rss(ctx: Ctx) -> float:
    beat = start_beat(ctx.env, ctx.log_dir)
    try:
        time.sleep(BEAT_SETTLE_S)
        samples = []
        for _ in range(5):
            samples.append(beat.rss_bytes())
            time.sleep(0.2)
        return max(samples) / 2**20
    finally:
        beat.stop()


def run(
    ctx: Ctx, sizes: list[int], reps: int, probe_runs: int, beat_reps: int
) -> list[dict[str, Any]]:
    rows: list[dict[str, Any]] = []
    seed.wipe()
    stack = [_stack_rss(ctx) for _ in range(beat_reps)]
    rows.append(row("tick", "the stack", "the stack alone (RSS)", "stack", "MB", stack, n=sizes[0]))
    for n in sizes:
        now = timezone.now()
        t0 = time.monotonic()
        seed.grow_idle_takt(n, now)
        seed.grow_idle_dcb(n, now)
        ctx.say(f"tick: {n:,} jobs seeded in {time.monotonic() - t0:.1f} s")
        case = f"{n:,} jobs"
        for kind in ("takt", "dcb"):
            # django-celery-beat reloads everything after an edit: ~15 s at 100k.
            timeout = 120 + reps * (3 + n / 2000)
            got: dict[str, list[float]] = {"build": [], "idle": [], "edit": [], "rss": []}
            for _ in range(probe_runs):
                p = _probe(ctx, kind, reps, timeout)
                got["build"].append(p["build_s"])
                got["idle"] += [1000 * v for v in p["idle_s"]]
                got["edit"] += [1000 * v for v in p["edit_s"]]
                got["rss"].append(p["rss_bytes"] / 2**20)
            rows.append(row("tick", case, "schedule build", kind, "s", got["build"], n=n))
            rows.append(row("tick", case, "idle tick", kind, "ms", got["idle"], n=n))
            rows.append(row("tick", case, "tick after one edit", kind, "ms", got["edit"], n=n))
            rows.append(row("tick", case, "probe process RSS", kind, "MB", got["rss"], n=n))
            if kind == "dcb":
                rows.append(row("tick", case, "beat memory (RSS)", kind, "MB", got["rss"], n=n))
            idle = sorted(got["idle"])[len(got["idle"]) // 2]
            ctx.say(f"tick: {kind} at {n:,}: idle tick median {idle:.2f} ms")
        rss = [_beat_rss(ctx) for _ in range(beat_reps)]
        rows.append(row("tick", case, "beat memory (RSS)", "takt", "MB", rss, n=n))
    seed.wipe()
    return rows
