"""``make bench`` / ``make bench-quick``: the whole benchmark.

    python -m benchmarks.run --profile quick|full [--only tick,dispatch,e2e,lag,admin]
                             [--db sqlite,postgresql] [--pg-url postgres://postgres@127.0.0.1:5432]

Starts a private redis-server on a free port, then for each database: a
fresh SQLite file in a temporary directory, or the PostgreSQL database
``takt_bench`` (created, then dropped; skipped with a note when PostgreSQL
does not answer); migrates it with benchmarks.settings; runs
benchmarks.suite in a child process; and finally prints the tables and
writes them to benchmarks/results/latest-<profile>.{md,json}. Every child
process is stopped and the temporary directory removed at the end, also
after an error or Ctrl-C (--keep keeps the directory with the logs).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from benchmarks import infra, report

RESULTS = Path(__file__).resolve().parent / "results"
SUITE_TIMEOUT_S = {"quick": 6 * 60, "full": 50 * 60}


def _on_sigterm(signum: int, frame: Any) -> None:
    raise KeyboardInterrupt


def run_db(
    db: str, url: str, redis_url: str, work: Path, args: argparse.Namespace
) -> list[dict[str, Any]]:
    var_dir = work / db
    var_dir.mkdir(exist_ok=True)
    log_dir = var_dir / "logs"
    log_dir.mkdir(exist_ok=True)
    env = infra.base_env(url, redis_url, var_dir)
    infra.migrate(env)
    out = var_dir / "rows.json"
    argv = [sys.executable, "-m", "benchmarks.suite", "--db", db, "--profile", args.profile,
            "--only", args.only, "--log-dir", str(log_dir), "--out", str(out)]  # fmt: skip
    env = {**env, "DJANGO_SETTINGS_MODULE": "benchmarks.settings"}
    try:
        subprocess.run(
            argv, cwd=infra.ROOT, env=env, check=True, timeout=SUITE_TIMEOUT_S[args.profile]
        )
    except (subprocess.CalledProcessError, subprocess.TimeoutExpired) as exc:
        print(f"[{db}] the suite failed ({exc}); logs in {log_dir}", file=sys.stderr)
        args.keep = True
    if not out.exists():
        return []
    data = json.loads(out.read_text())
    print(f"[{db}] sections took " + ", ".join(f"{k} {v:.0f} s" for k, v in data["seconds"].items()),
          file=sys.stderr)  # fmt: skip
    return [{**r, "db": db} for r in data["rows"]]


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--profile", choices=["quick", "full"], default="quick")
    parser.add_argument("--only", default="tick,dispatch,e2e,lag,admin")
    parser.add_argument("--db", default="sqlite,postgresql")
    parser.add_argument("--pg-url", default=infra.DEFAULT_PG_URL)
    parser.add_argument("--keep", action="store_true", help="keep the temporary directory (logs)")
    parser.add_argument("--label", default="latest", help="results file name: <label>-<profile>.md")
    args = parser.parse_args()
    signal.signal(signal.SIGTERM, _on_sigterm)

    started = time.monotonic()
    work = Path(tempfile.mkdtemp(prefix="takt-bench-"))
    notes: list[str] = []
    rows: list[dict[str, Any]] = []
    pg_created = False
    try:
        _, redis_url = infra.start_redis(work, work)
        for db in args.db.split(","):
            if db == "sqlite":
                url = infra.sqlite_url(work)
            else:
                pg = infra.create_postgres(args.pg_url)
                if pg is None:
                    notes.append(f"PostgreSQL rows skipped: nothing answered at {args.pg_url}.")
                    print(notes[-1], file=sys.stderr)
                    continue
                url, pg_created = pg, True
            print(f"== {report.DBS[db]}: {args.profile} profile", file=sys.stderr)
            rows += run_db(db, url, redis_url, work, args)
            if pg_created:
                infra.drop_postgres(args.pg_url)
                pg_created = False
    except KeyboardInterrupt:
        print("interrupted; cleaning up", file=sys.stderr)
        notes.append("interrupted: partial results")
    finally:
        infra.stop_all()
        if pg_created:
            infra.drop_postgres(args.pg_url)
        if args.keep:
            print(f"kept {work}", file=sys.stderr)
        else:
            shutil.rmtree(work, ignore_errors=True)
    took = time.monotonic() - started
    notes.append(
        f"`{' '.join(['python -m benchmarks.run', *sys.argv[1:]])}` took {took / 60:.1f} min."
    )
    extra = os.environ.get("BENCH_EXTRA_MODULES")
    if extra:
        notes.append(f"Every Takt process also imported `{extra}` (BENCH_EXTRA_MODULES).")
    stamp = time.strftime("%Y-%m-%d %H:%M %Z")
    text = report.render(rows, f"Takt benchmark ({args.profile}, {args.label}), {stamp}", notes)
    print(text)
    RESULTS.mkdir(exist_ok=True)
    name = f"{args.label}-{args.profile}"
    (RESULTS / f"{name}.md").write_text(text + "\n")
    (RESULTS / f"{name}.json").write_text(json.dumps(rows, indent=1) + "\n")


if __name__ == "__main__":
    main()
