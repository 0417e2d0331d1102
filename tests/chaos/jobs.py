"""The chaos jobs' target: sleeps 0-300 ms and appends one line per
execution to a side channel outside Takt's tables, the file named by
TAKT_CHAOS_LOG (opened O_APPEND: each line is one write(2), so lines of
concurrent pool children never interleave).

Two lines per execution: "start" before the sleep and "end" after it; a
start without its end is an execution killed mid-way. The run's fire time
and attempt are not looked up here (that would need the database, which
the chaos takes away): the analysis joins the run id with the run rows."""

from __future__ import annotations

import json
import os
import random
import time
from pathlib import Path
from typing import Any

from jobs import takt_job

SIDE_CHANNEL_VARIABLE = "TAKT_CHAOS_LOG"


def append_line(path: str, record: dict[str, Any]) -> None:
    """One JSON line, written with a single write(2) on an O_APPEND file."""
    data = (json.dumps(record, separators=(",", ":")) + "\n").encode()
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        os.write(fd, data)
    finally:
        os.close(fd)


def read_lines(path: Path) -> list[dict[str, Any]]:
    """The side channel's records (a last line still being written is left
    out: a reader can see a write(2) half done on some file systems)."""
    if not path.exists():
        return []
    records = []
    for line in path.read_text().splitlines():
        try:
            records.append(json.loads(line))
        except ValueError:
            continue
    return records


def executing_pids(path: Path, tail_bytes: int = 65536) -> set[int]:
    """Pids with a "start" line for a run and no "end" line yet, from the
    file's last `tail_bytes` (an execution lasts well under a second)."""
    open_runs: set[tuple[int, int]] = set()
    try:
        with path.open("rb") as f:
            f.seek(max(0, path.stat().st_size - tail_bytes))
            lines = f.read().decode(errors="replace").splitlines()[1:]
    except OSError:
        return set()
    for text in lines:
        try:
            line = json.loads(text)
        except ValueError:
            continue
        key = (line["run"], line["pid"])
        if line["ev"] == "start":
            open_runs.add(key)
        else:
            open_runs.discard(key)
    return {pid for _, pid in open_runs}


@takt_job("chaos.work")
def work(job: Any) -> str:
    path = os.environ[SIDE_CHANNEL_VARIABLE]
    line = {
        "job": job.job_id,
        "run": job.run_id,
        "trigger": job.trigger,
        "pid": os.getpid(),
        "start_mono": time.monotonic(),
        "start_wall": time.time(),
    }
    append_line(path, {"ev": "start", **line})
    time.sleep(random.uniform(0, float(job.params.get("max_ms", 300)) / 1000))
    append_line(path, {"ev": "end", **line, "end_mono": time.monotonic(), "end_wall": time.time()})
    return "ok"
