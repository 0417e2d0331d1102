"""All measurements on one database, in a process of its own (started by
benchmarks.run with DATABASE_URL, REDIS_URL and benchmarks.settings).

    python -m benchmarks.suite --db sqlite --profile quick --out rows.json

Writes the result rows (every repetition's value) as JSON. The profiles
decide sizes and repetitions; `quick` fits ``make bench-quick`` into three
minutes for SQLite and PostgreSQL together.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import time
from pathlib import Path
from typing import Any

from benchmarks import infra

PROFILES: dict[str, dict[str, Any]] = {
    "quick": {
        "tick": {"sizes": [1_000, 10_000], "reps": 3, "probe_runs": 1, "beat_reps": 1},
        "dispatch": {"sizes": [1_000], "reps": 3},
        "e2e": {"n": 200, "reps": 3},
        "lag": {"sizes": [1_000], "period_s": 12.0, "windows": 3},
        "admin": {
            "jobs": 10_000,
            "runs": 100_000,
            "periodic_tasks": 10_000,
            "hot_runs": 5_000,
            "reps": 3,
        },
    },
    "full": {
        "tick": {"sizes": [1_000, 10_000, 100_000], "reps": 5, "probe_runs": 2, "beat_reps": 3},
        "dispatch": {"sizes": [1_000, 10_000], "reps": 5},
        "e2e": {"n": 2_000, "reps": 5},
        "lag": {"sizes": [2_000, 10_000], "period_s": 60.0, "windows": 3},
        "admin": {
            "jobs": 100_000,
            "runs": 1_000_000,
            "periodic_tasks": 100_000,
            "hot_runs": 50_000,
            "reps": 5,
        },
    },
}
SECTIONS = ("tick", "dispatch", "e2e", "lag", "admin")


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--db", required=True)
    parser.add_argument("--profile", choices=sorted(PROFILES), default="quick")
    parser.add_argument("--only", default=",".join(SECTIONS))
    parser.add_argument("--log-dir", required=True)
    parser.add_argument("--out", required=True)
    args = parser.parse_args()

    import django

    django.setup()
    from benchmarks.suite_ctx import Ctx

    env = {k: v for k, v in os.environ.items() if k != "DJANGO_SETTINGS_MODULE"}
    env["DJANGO_SETTINGS_MODULE"] = "scheduler_project.settings"
    ctx = Ctx(db=args.db, env=env, log_dir=Path(args.log_dir), redis_url=os.environ["REDIS_URL"])
    cfg = PROFILES[args.profile]
    wanted = [s for s in SECTIONS if s in args.only.split(",")]
    signal.signal(signal.SIGTERM, _on_sigterm)
    try:
        _run(ctx, cfg, wanted, Path(args.out))
    finally:
        infra.stop_all()


def _on_sigterm(signum: int, frame: Any) -> None:
    raise KeyboardInterrupt


def _run(ctx: Any, cfg: dict[str, Any], wanted: list[str], out: Path) -> None:
    from benchmarks import measure_admin, measure_dispatch, measure_e2e, measure_lag, measure_tick

    rows: list[dict[str, Any]] = []
    timings: dict[str, float] = {}
    for section in wanted:
        t0 = time.monotonic()
        c = cfg[section]
        if section == "tick":
            rows += measure_tick.run(ctx, c["sizes"], c["reps"], c["probe_runs"], c["beat_reps"])
        elif section == "dispatch":
            rows += measure_dispatch.run(ctx, c["sizes"], c["reps"])
        elif section == "e2e":
            rows += measure_e2e.run(ctx, c["n"], c["reps"])
        elif section == "admin":
            rows += measure_admin.run(ctx, c)
        else:
            rows += measure_lag.run(ctx, c["sizes"], c["period_s"], c["windows"])
        timings[section] = time.monotonic() - t0
        ctx.say(f"{section} done in {timings[section]:.0f} s")
        # Written after each section, so a later failure keeps what was measured.
        out.write_text(json.dumps({"rows": rows, "seconds": timings}))


if __name__ == "__main__":
    main()
