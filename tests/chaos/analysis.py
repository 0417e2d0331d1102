"""The checks of the chaos test: the run rows, the side channel of
executions and the kill log in, a Report out. Plain functions of the
collected data (no processes, no clock), so they can be re-run on a saved
chaos directory.

A fire time is each point of a trigger's schedule inside the window
(computed here from the schedule, not from Takt's trigger code). Its run
row is the `schedule` or `catchup` run with that scheduled_for; its chain
is that run and its retries (retry_of). Each fire time gets exactly one
class: succeeded (an "end" line in the side channel for a run of its
chain), lost by policy (killed mid-execution, the chain ends `lost` with
no retry), skipped behind a live run (the overlap policy at work), skipped
behind a dead run (the blocking run's process had been killed longer than
TTL + poll + 2 s before: a failure), skipped by the missed-run policy, a
hole (no row: a failure) or without a successful execution (a failure)."""

from __future__ import annotations

import re
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

from tests.chaos.report import Report
from tests.chaos.schedule import Event

FIRE_TRIGGERS = ("schedule", "catchup")
MISSED_SPAN = re.compile(r"missed fire time\(s\) (?:at (\S+)|from (\S+) to (\S+)) \(")
LAG_LIMIT_S = 2.0


@dataclass(frozen=True)
class Timeline:
    window_start: datetime  # fire times from here ...
    window_end: datetime  # ... to here are counted
    chaos_start: datetime
    chaos_end: datetime  # the last action done and every process back
    checked_at: datetime  # a minute later: what is still queued or running
    events: list[tuple[datetime, Event]] = field(default_factory=list)
    dead_after_s: float = 5.5  # TTL + poll + 2 s


def expected_fire_times(trigger: dict[str, Any], lo: datetime, hi: datetime) -> list[datetime]:
    """The trigger's fire times in [lo, hi]: a cron of the form "* ..." or
    "*/n ..." (seconds first) or a fixed-rate interval from start_at."""
    if trigger["kind"] == "interval":
        start, every = trigger["start_at"], int(trigger["interval_seconds"])
        k = max(0, -(-int((lo - start).total_seconds()) // every))
        times, t = [], start + timedelta(seconds=k * every)
        while t <= hi:
            if t >= lo:
                times.append(t)
            t += timedelta(seconds=every)
        return times
    seconds = trigger["cron_expression"].split()[0]
    if seconds == "*":
        step = 1
    elif seconds.startswith("*/"):
        step = int(seconds[2:])
    else:
        raise ValueError(f"the chaos analysis knows no cron {trigger['cron_expression']!r}")
    t = lo.replace(microsecond=0) + (timedelta(seconds=1) if lo.microsecond else timedelta(0))
    times = []
    while t <= hi:
        if t.second % step == 0:
            times.append(t)
        t += timedelta(seconds=1)
    return times


def _wall(ts: float) -> datetime:
    return datetime.fromtimestamp(ts, UTC)


def _p(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))] if ordered else 0.0


class _Deaths:
    """When the process that ran a run was killed (None: not killed)."""

    def __init__(
        self, kills: list[dict[str, Any]], starts: dict[int, list[dict[str, Any]]]
    ) -> None:
        self.by_pid = {pid: _wall(k["wall"]) for k in kills for pid in k.get("pids", ())}
        self.worker_kills: dict[str, list[datetime]] = defaultdict(list)
        for k in kills:
            if k["action"] == "kill worker":
                self.worker_kills[k["worker"]].append(_wall(k["wall"]))
        self.starts = starts

    def death_of(self, run: dict[str, Any]) -> datetime | None:
        for line in self.starts.get(run["id"], ()):
            killed = self.by_pid.get(line["pid"])
            if killed is not None and killed >= _wall(line["start_wall"]):
                return killed
        if run["started_at"] is None or not run["worker"]:
            return None
        name = run["worker"].split("@")[0]
        later = [t for t in self.worker_kills.get(name, ()) if t >= run["started_at"]]
        return min(later) if later else None


def analyse(
    *,
    jobs: list[dict[str, Any]],
    triggers: list[dict[str, Any]],
    runs: list[dict[str, Any]],
    stuck: list[dict[str, Any]],
    executions: list[dict[str, Any]],
    kills: list[dict[str, Any]],
    timeline: Timeline,
    crashes: list[str],
) -> Report:
    job_ids = {j["id"] for j in jobs}
    policy = {j["id"]: j["overlap_policy"] for j in jobs}
    runs = [r for r in runs if r["job_id"] in job_ids]
    by_id = {r["id"]: r for r in runs}
    fire_rows: dict[tuple[int, datetime], list[dict[str, Any]]] = defaultdict(list)
    for r in runs:
        if r["trigger"] in FIRE_TRIGGERS:
            fire_rows[(r["job_id"], r["scheduled_for"])].append(r)
    duplicates = sum(len(rows) - 1 for rows in fire_rows.values() if len(rows) > 1)
    spans = _missed_spans(runs)
    chains: dict[int, list[dict[str, Any]]] = defaultdict(list)
    for r in runs:
        root = r
        while root["trigger"] not in FIRE_TRIGGERS and root["retry_of_id"] in by_id:
            root = by_id[root["retry_of_id"]]
        chains[root["id"]].append(r)
    starts: dict[int, list[dict[str, Any]]] = defaultdict(list)
    ends: Counter[int] = Counter()
    for line in executions:
        if line["ev"] == "start":
            starts[line["run"]].append(line)
        else:
            ends[line["run"]] += 1
    deaths = _Deaths(kills, starts)
    retried = {r["retry_of_id"] for r in runs if r["retry_of_id"]}

    classes: Counter[str] = Counter()
    examples: dict[str, list[str]] = defaultdict(list)
    twice = executions_in_window = killed_midway = 0
    lags: list[tuple[datetime, float]] = []
    for trigger in triggers:
        job = trigger["job_id"]
        for t in expected_fire_times(trigger, timeline.window_start, timeline.window_end):
            rows = fire_rows.get((job, t))
            if not rows:
                cls = "missed_policy" if any(a <= t <= b for a, b in spans[job]) else "hole"
                classes[cls] += 1
                if len(examples[cls]) < 5:
                    examples[cls].append(f"job {job} at {t:%H:%M:%S}")
                continue
            row = rows[0]
            chain = chains[row["id"]]
            done = sum(ends[r["id"]] for r in chain)
            executions_in_window += done
            killed_midway += sum(len(starts[r["id"]]) for r in chain) - done
            twice += done > 1
            if row["started_at"] is not None:
                lags.append((t, (row["started_at"] - t).total_seconds()))
            cls = _classify(row, chain, done, retried, runs, deaths, timeline)
            if cls == "skipped_dead" and policy[job] != "skip":
                cls = "skipped_dead_other"  # `allow` at max_instances: shown, not a criterion
            classes[cls] += 1
            if len(examples[cls]) < 5:
                examples[cls].append(
                    f"run {row['id']} (job {job} at {t:%H:%M:%S}, {row['status']})"
                )
    same_run_twice = sum(1 for lines in starts.values() if len(lines) > 1)
    report = Report(examples=examples)
    total = sum(classes.values())
    report.row("fire times in the window", total)
    report.row("executions (completed, side channel)", executions_in_window)
    report.row("executions killed mid-way", killed_midway)
    report.row("fire times executed twice", twice, 0)
    report.row("runs started twice (same run id)", same_run_twice, 0)
    report.row("duplicate run rows (job, fire time)", duplicates, 0)
    report.row("holes in the fire times (no row)", classes["hole"], 0)
    stuck_mine = [r for r in stuck if r["job_id"] in job_ids]
    report.row("runs queued/running 1 min after the chaos", len(stuck_mine), 0)
    examples["stuck"] = [
        f"run {r['id']} ({r['status']}, since {r['enqueued_at']:%H:%M:%S})" for r in stuck_mine[:5]
    ]
    report.row("fire times succeeded", classes["succeeded"])
    report.row(
        "lost by policy (killed mid-execution, no retry per the job's policy)",
        classes["lost_by_policy"],
    )
    report.row("skipped behind an active run not dead (overlap policy)", classes["skipped_live"])
    report.row("skipped by the missed-run policy", classes["missed_policy"])
    report.row(
        f"skip jobs: skipped behind a run dead > {timeline.dead_after_s:g} s",
        classes["skipped_dead"],
        0,
    )
    report.row(
        f"other jobs: skipped behind a run dead > {timeline.dead_after_s:g} s",
        classes["skipped_dead_other"],
    )
    report.row("without a successful execution (other)", classes["no_success"], 0)
    report.row(
        "retry runs executed", sum(1 for r in runs if r["trigger"] == "retry" and ends[r["id"]])
    )
    kinds = Counter(k["action"] for k in kills)
    report.row("chaos actions", ", ".join(f"{n}× {a}" for a, n in sorted(kinds.items())))
    report.row("processes that died by themselves (restarted)", len(crashes))
    _lag_rows(report, lags, timeline)
    return report


def _classify(
    row: dict[str, Any],
    chain: list[dict[str, Any]],
    done: int,
    retried: set[int],
    runs: list[dict[str, Any]],
    deaths: _Deaths,
    timeline: Timeline,
) -> str:
    if done:
        return "succeeded"
    last = max(chain, key=lambda r: (r["attempt"], r["id"]))
    if last["status"] == "lost" and last["id"] not in retried:
        return "lost_by_policy"
    if row["status"] == "skipped":
        if "missed fire time" in row["message"]:
            return "missed_policy"
        dead = _dead_blocker(row, runs, deaths, timeline.dead_after_s)
        return "skipped_dead" if dead else "skipped_live"
    return "no_success"


def _dead_blocker(
    skipped: dict[str, Any], runs: list[dict[str, Any]], deaths: _Deaths, dead_after_s: float
) -> bool:
    """Was one of the job's runs active when `skipped` was decided, and its
    process killed more than `dead_after_s` before? The skip message does
    not name the blocking run, so the blockers are the runs whose
    [enqueued_at, finished_at) contains the skip."""
    at = skipped["finished_at"] or skipped["enqueued_at"]
    for other in runs:
        if other["job_id"] != skipped["job_id"] or other["id"] == skipped["id"]:
            continue
        if other["status"] == "skipped" or other["enqueued_at"] > at:
            continue
        if other["finished_at"] is not None and other["finished_at"] <= at:
            continue
        died = deaths.death_of(other)
        if died is not None and (at - died).total_seconds() > dead_after_s:
            return True
    return False


def _missed_spans(runs: list[dict[str, Any]]) -> dict[int, list[tuple[datetime, datetime]]]:
    """The fire times a missed-run record stands for (runs.dispatch
    _skipped_record: "missed fire time(s) at X" or "from X to Y")."""
    spans: dict[int, list[tuple[datetime, datetime]]] = defaultdict(list)
    for r in runs:
        found = MISSED_SPAN.search(r["message"] or "") if r["status"] == "skipped" else None
        if found:
            first = datetime.fromisoformat(found.group(1) or found.group(2))
            last = datetime.fromisoformat(found.group(1) or found.group(3))
            spans[r["job_id"]].append((first, last))
    return spans


def _lag_rows(report: Report, lags: list[tuple[datetime, float]], timeline: Timeline) -> None:
    """Start lag (started_at − fire time) by phase of the fire time; the
    pass criterion is the second half of the minute after the chaos."""
    special = []
    for at, event in timeline.events:
        if event.action == "beats_down":
            special.append(
                ("both beats down (+2 s)", at, at + timedelta(seconds=event.restart_after_s + 2))
            )
        elif event.action == "redis_restart":
            special.append(("Redis restart (+10 s)", at, at + timedelta(seconds=10)))
        elif event.action == "db_outage":
            special.append(
                ("database outage (+5 s)", at, at + timedelta(seconds=event.restart_after_s + 5))
            )
    half = timeline.chaos_end + timedelta(seconds=30)
    phases: dict[str, list[float]] = {"baseline (no chaos)": [], "kills": []}
    phases.update({name: [] for name, _, _ in special})
    phases["after the chaos, 0-30 s"] = []
    phases["after the chaos, 30-60 s"] = []
    for t, lag in lags:
        if t < timeline.chaos_start:
            name = "baseline (no chaos)"
        elif t >= half:
            name = "after the chaos, 30-60 s"
        elif t >= timeline.chaos_end:
            name = "after the chaos, 0-30 s"
        else:
            name = next((n for n, a, b in special if a <= t < b), "kills")
        phases[name].append(lag)
    for name, values in phases.items():
        report.lag(name, len(values), _p(values, 0.5), _p(values, 0.99), max(values, default=0.0))
    after = phases["after the chaos, 30-60 s"]
    report.row(
        "start lag p99, 30-60 s after the chaos (s)",
        round(_p(after, 0.99), 2),
        f"< {LAG_LIMIT_S:g}",
        ok=bool(after) and _p(after, 0.99) < LAG_LIMIT_S,
    )
