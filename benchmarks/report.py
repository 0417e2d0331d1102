"""Turning result rows into the Markdown tables that ``make bench`` prints:
median and spread (min–max over the repetitions, n = how many), the ratio
to the anchor measured in the same run, and each target met or missed."""

from __future__ import annotations

import math
import platform
import re
import statistics
import subprocess
from pathlib import Path
from typing import Any

DBS = {"sqlite": "SQLite", "postgresql": "PostgreSQL"}
ROOT = Path(__file__).resolve().parent.parent
APP_DIRS = ("jobs", "runs", "heartbeats", "scheduler_project")


def fmt(x: float) -> str:
    if math.isnan(x):
        return "–"
    if x == int(x) and abs(x) < 1e6:
        return f"{int(x):,}"
    a = abs(x)
    if a >= 100:
        return f"{x:,.0f}"
    if a >= 10:
        return f"{x:.1f}"
    if a >= 1:
        return f"{x:.2f}"
    return f"{x:.3f}"


def med(r: dict[str, Any] | None) -> float:
    vals = [v for v in (r or {}).get("values", []) if not math.isnan(v)]
    return statistics.median(vals) if vals else math.nan


def cell(r: dict[str, Any] | None) -> str:
    vals = [v for v in (r or {}).get("values", []) if not math.isnan(v)]
    if not vals:
        return "–"
    if len(vals) == 1:
        return f"{fmt(vals[0])} (n=1)"
    return f"{fmt(statistics.median(vals))} ({fmt(min(vals))}–{fmt(max(vals))}, n={len(vals)})"


def ratio(a: float, b: float) -> str:
    return "–" if math.isnan(a) or math.isnan(b) or b == 0 else f"{a / b:.2g}×"


def verdict(ok: bool | None, text: str) -> str:
    return text if ok is None else f"{'✅' if ok else '❌'} {text}"


class Rows:
    def __init__(self, rows: list[dict[str, Any]]) -> None:
        self.rows = rows

    def find(self, **kw: Any) -> dict[str, Any] | None:
        for r in self.rows:
            if all(r.get(k) == v for k, v in kw.items()):
                return r
        return None

    def values(self, key: str, **kw: Any) -> list[Any]:
        seen: list[Any] = []
        for r in self.rows:
            if all(r.get(k) == v for k, v in kw.items()) and r.get(key) not in seen:
                seen.append(r.get(key))
        return seen


def tick_table(R: Rows) -> list[str]:
    out = ["| database | jobs | figure | Takt | django-celery-beat | Takt ÷ dcb | target |",
           "|---|---|---|---|---|---|---|"]  # fmt: skip
    for db in R.values("db", section="tick"):
        first = R.values("n", section="tick", db=db)[0]
        base = med(R.find(db=db, section="tick", n=first, metric="idle tick", system="takt"))
        for n in R.values("n", section="tick", db=db):
            for metric, unit in (("schedule build", "s"), ("idle tick", "ms"),
                                 ("tick after one edit", "ms"), ("beat memory (RSS)", "MB"),
                                 ("probe process RSS", "MB")):  # fmt: skip
                t = R.find(db=db, section="tick", n=n, metric=metric, system="takt")
                d = R.find(db=db, section="tick", n=n, metric=metric, system="dcb")
                m = med(t)
                target = ""
                if metric == "idle tick":
                    ok = m <= 1.5 and (n == first or m <= 2 * base)
                    target = verdict(
                        ok, f"≤ 1.5 ms; {ratio(m, base)} the {first:,}-job tick (≤ 2×)"
                    )
                elif metric == "tick after one edit":
                    target = verdict(m < 20, "< 20 ms")
                elif metric == "beat memory (RSS)":
                    target = verdict(m <= 70, "≤ 70 MB")
                    stack = R.find(db=db, section="tick", metric="the stack alone (RSS)")
                    if stack:
                        target += f" (the stack alone: {med(stack):.1f} MB)"
                out.append(f"| {DBS[db]} | {n:,} | {metric} ({unit}) | {cell(t)} | {cell(d)} "
                           f"| {ratio(m, med(d))} | {target} |")  # fmt: skip
    return out


def dispatch_table(R: Rows) -> list[str]:
    out = ["| database | due at once | Takt: fire time → all published (s) | Takt: runs published per second "
           "| anchor: K plain `delay()` calls (s) | Takt ÷ anchor | target |",
           "|---|---|---|---|---|---|---|"]  # fmt: skip
    for db in R.values("db", section="dispatch"):
        for k in R.values("k", section="dispatch", db=db):
            secs = R.find(
                db=db, section="dispatch", k=k, metric="fire time → all published", system="takt"
            )
            rate = R.find(
                db=db, section="dispatch", k=k, metric="runs published per second", system="takt"
            )
            plain = R.find(
                db=db, section="dispatch", k=k, metric="fire time → all published", system="celery"
            )
            target = verdict(med(secs) <= 6, "≤ 6 s") if k == 10_000 else "(target: 10,000 in 6 s)"
            out.append(f"| {DBS[db]} | {k:,} | {cell(secs)} | {cell(rate)} | {cell(plain)} "
                       f"| {ratio(med(secs), med(plain))} | {target} |")  # fmt: skip
    return out


def lag_table(R: Rows) -> list[str]:
    out = ["| database | load | p50 lag (s) | p99 lag (s) | max lag (s) | runs started | not started by the end | skipped (job busy) | p99 fire time → sent (s): the beat's share | target |",
           "|---|---|---|---|---|---|---|---|---|---|"]  # fmt: skip
    for db in R.values("db", section="lag"):
        for case in R.values("case", section="lag", db=db):

            def get(m: str, db: str = db, case: str = case) -> dict[str, Any] | None:
                return R.find(db=db, section="lag", case=case, metric=m)

            p99 = get("p99 lag")
            behind = (
                med(get("not started by the end")) > 0 or (p99 or {}).get("backlog_at_end", 0) > 0
            )
            target = ("workers fell behind: not the scheduler's lag" if behind
                      else verdict(med(p99) <= 0.25, "p99 ≤ 0.25 s"))  # fmt: skip
            cells = " | ".join(cell(get(m)) for m in ("p50 lag", "p99 lag", "max lag", "runs started",
                                                      "not started by the end", "skipped (job busy)",
                                                      "p99 publish lag"))  # fmt: skip
            out.append(f"| {DBS[db]} | {case} | {cells} | {target} |")
    return out


def e2e_table(R: Rows) -> list[str]:
    out = ["| database | runs | Takt (runs/s) | plain Celery (tasks/s) | Takt ÷ Celery | target "
           "| Takt: enqueue_job() calls/s | Takt: worker side (runs/s) |",
           "|---|---|---|---|---|---|---|---|"]  # fmt: skip
    for db in R.values("db", section="e2e"):
        for case in R.values("case", section="e2e", db=db):

            def get(m: str, system: str, db: str = db, case: str = case) -> dict[str, Any] | None:
                return R.find(db=db, section="e2e", case=case, metric=m, system=system)

            t, c = get("runs per second", "takt"), get("runs per second", "celery")
            # Issue 16: PostgreSQL ≥ 0.5× and ≥ 400 runs/s; SQLite ≥ 0.6×.
            share, floor = (0.5, 400.0) if db == "postgresql" else (0.6, 0.0)
            ok = med(t) >= share * med(c) and med(t) >= floor
            wanted = f"≥ {share:g}×" + (f", ≥ {floor:.0f}/s" if floor else "")
            extra = f"{cell(get('enqueue_job() calls per second', 'takt'))} | {cell(get('worker side: runs per second', 'takt'))}"
            out.append(f"| {DBS[db]} | {case} | {cell(t)} | {cell(c)} | {ratio(med(t), med(c))} "
                       f"| {verdict(ok, wanted)} | {extra} |")  # fmt: skip
    cpu = ["", "CPU time per run in milliseconds (all cores; median over the repetitions): the "
           "whole machine, and of it the producer (this process), the worker's processes, the "
           "PostgreSQL server's processes and Redis's; the rest is the system (and, in results "
           "recorded before the database and Redis columns, them too).", "",
           "| database | runs | side | machine | producer | worker | database server | Redis | rest |",
           "|---|---|---|---|---|---|---|---|---|"]  # fmt: skip
    for db in R.values("db", section="e2e"):
        for case in R.values("case", section="e2e", db=db):
            for system, label in (("takt", "Takt"), ("celery", "plain Celery")):
                parts = [med(R.find(db=db, section="e2e", case=case, metric=f"CPU per run: {p}",
                                    system=system))
                         for p in ("machine", "producer", "worker", "database server", "redis")]  # fmt: skip
                if all(math.isnan(p) for p in parts):
                    continue
                known = [p for p in parts[1:] if not math.isnan(p)]
                cells = " | ".join(fmt(p) for p in [*parts, parts[0] - sum(known)])
                cpu.append(f"| {DBS[db]} | {case} | {label} | {cells} |")
    mem = ["", "Worker memory (RSS, MB) after the rounds: the main process and each pool child "
           "(prefork, concurrency 2); plain Celery is a worker of a Celery app with no Django "
           "(benchmarks/plain_app.py) after as many no-op tasks.", "",
           "| database | runs | side | main process | pool child |", "|---|---|---|---|---|"]  # fmt: skip
    for db in R.values("db", section="e2e"):
        for case in R.values("case", section="e2e", db=db):
            for system, label in (("takt", "Takt"), ("celery", "plain Celery")):
                main = R.find(db=db, section="e2e", case=case, metric="worker RSS: main process",
                              system=system)  # fmt: skip
                child = R.find(db=db, section="e2e", case=case, metric="worker RSS: pool child",
                               system=system)  # fmt: skip
                if main:
                    mem.append(f"| {DBS[db]} | {case} | {label} | {cell(main)} | {cell(child)} |")
    return out + (cpu if len(cpu) > 5 else []) + (mem if len(mem) > 5 else [])


ADMIN_SEED = (
    "jobs and triggers",
    "runs",
    "heartbeats",
    "django-celery-beat PeriodicTasks",
    "ANALYZE",
)
N_PLUS_ONE = 10  # a statement run this often for one page is one per row


def short_sql(sql: str) -> str:
    """A statement as the report shows it: long column lists (SELECT, GROUP
    BY) cut to their count and their expressions."""

    def cols(text: str) -> str:
        if len(text) <= 160:
            return text
        plain = r'(?:^|, )"\w+"\."\w+"(?=,|$)'
        rest = re.sub(plain, "", text).lstrip(", ")
        return f"… {len(re.findall(plain, text))} columns" + (f", {rest}" if rest else "")

    sql = re.sub(r"SELECT (DISTINCT )?(.+?) FROM ",
                 lambda m: f"SELECT {m.group(1) or ''}{cols(m.group(2))} FROM ", sql)  # fmt: skip
    return re.sub(r"GROUP BY (.+?)(?= ORDER BY | HAVING | LIMIT |\)|$)",
                  lambda m: f"GROUP BY {cols(m.group(1))}", sql)  # fmt: skip


def _admin_cells(r: dict[str, Any]) -> str:
    if r.get("status") != 200:
        return f"HTTP {r.get('status')} | – | – | – | – | – | – | – | –"
    repeated = r.get("repeated", 0)
    same = ("–" if repeated < 2 else
            verdict(False, f"×{repeated} (one per row)") if repeated >= N_PLUS_ONE else f"×{repeated}")  # fmt: skip
    counts = r.get("full_counts") or []
    full = "–" if not counts else ", ".join(
        verdict(False, t) if t == "takt_runs_run" else t for t in sorted(set(counts))
    ) + (f" (×{len(counts)})" if len(counts) > 1 else "")  # fmt: skip
    return (f"{cell(r)} | {cell({'values': r.get('cpu_ms', [])})} | {r['queries']} | {same} | {fmt(r['sql_ms'])} | {fmt(r['slowest_ms'])} "
            f"| {full} | {fmt(r['html_kb'])} | {r.get('plan_summary', '')[:160]}")  # fmt: skip


def admin_table(R: Rows) -> list[str]:
    out = ["Seeding (bulk inserts; the same data on both databases):", "",
           "| database | data | rows | time (s) |", "|---|---|---|---|"]  # fmt: skip
    for db in R.values("db", section="admin"):
        for what in ADMIN_SEED:
            r = R.find(db=db, section="admin", case="seed", metric=what)
            if r:
                rows = f"{r['count']:,}" if r.get("count") else ""
                out.append(f"| {DBS[db]} | {what} | {rows} | {fmt(med(r))} |")
    for db in R.values("db", section="admin"):
        load = (R.find(db=db, section="admin", case="load") or {}).get("values", [])
        if len(load) == 2:
            out += ["", f"{DBS[db]}: load average (1 min) {fmt(load[0])} when the timed requests "
                    f"began, {fmt(load[1])} when they ended."]  # fmt: skip
    out += ["", "Each page with Django's test client (logged in, DEBUG off): the server's wall "
            "time, and its CPU time (this process, and on PostgreSQL the connection's backend); "
            "the SQL of one request: statements, the most repeated one, all SELECTs re-run with "
            "their rows fetched, the slowest of them, tables counted whole; the page's size.", "",
            "| database | page | server time (ms) | server CPU (ms) | SQL statements | same statement | SQL time (ms) "
            "| slowest statement (ms) | full COUNT(*) of | HTML (kB) | plan of the slowest statement |",
            "|---|---|---|---|---|---|---|---|---|---|---|"]  # fmt: skip
    pages = [r for r in R.rows if r["section"] == "admin" and r["case"] not in ("seed", "load")]
    for r in pages:
        out.append(f"| {DBS[r['db']]} | {r['case']} | {_admin_cells(r)} |")
    out += ["", "| database | page | Takt job list (ms) | django-celery-beat PeriodicTask list (ms) "
            "| Takt ÷ dcb | Takt ÷ dcb, CPU |", "|---|---|---|---|---|---|"]  # fmt: skip
    for db in R.values("db", section="admin"):
        for pair in ("page 1", "later page", "search"):
            t = R.find(db=db, section="admin", system="takt", pair=pair)
            d = R.find(db=db, section="admin", system="dcb", pair=pair)
            if t and d:
                cpu = ratio(
                    med({"values": t.get("cpu_ms", [])}), med({"values": d.get("cpu_ms", [])})
                )
                out.append(f"| {DBS[db]} | {pair} | {cell(t)} | {cell(d)} "
                           f"| {ratio(med(t), med(d))} | {cpu} |")  # fmt: skip
    out += ["", "The slowest statement of each page with its plan (PostgreSQL: EXPLAIN (ANALYZE, "
            "BUFFERS); SQLite: EXPLAIN QUERY PLAN), and the statement repeated most:", ""]  # fmt: skip
    for r in pages:
        if r.get("status") != 200:
            continue
        out += [f"<details><summary>{DBS[r['db']]} · {r['case']}: {fmt(r['slowest_ms'])} ms "
                f"(<code>{r['url']}</code>)</summary>", "", "```sql", short_sql(r["slowest_sql"]),
                "```", "", "```", *r.get("plan", []), "```", ""]  # fmt: skip
        if r.get("repeated", 0) >= 2:
            out += [f"×{r['repeated']}: `{short_sql(r['repeated_sql'])}`", ""]
        out += ["</details>", ""]
    return out


def _version(argv: list[str]) -> str:
    try:
        return subprocess.run(argv, capture_output=True, text=True, timeout=10).stdout.strip()
    except Exception:
        return "?"


def machine() -> str:
    import sqlite3
    from importlib.metadata import version

    import psutil

    cpu = "?"
    try:
        cpu = next(line.split(":", 1)[1].strip() for line in open("/proc/cpuinfo")
                   if line.startswith("model name"))  # fmt: skip
    except Exception:
        pass
    libs = ", ".join(f"{p} {version(p)}" for p in ("django", "celery", "kombu", "redis", "psycopg", "django-celery-beat"))  # fmt: skip
    return (f"{psutil.cpu_count()} cores ({cpu}), {psutil.virtual_memory().total / 2**30:.0f} GB RAM, "
            f"{platform.platform()}; Python {platform.python_version()}; {libs}; "
            f"{_version(['redis-server', '--version']).split(' sha')[0]}; SQLite {sqlite3.sqlite_version}; "
            f"{_version(['psql', '--version'])}")  # fmt: skip


def revision() -> str:
    """The commit measured, and whether the app code differed from it."""
    head = _version(["git", "-C", str(ROOT), "rev-parse", "--short", "HEAD"]) or "?"
    dirty = _version(["git", "-C", str(ROOT), "status", "--porcelain", "--", *APP_DIRS])
    return f"{head}{' + uncommitted changes in the app code' if dirty else ''}"


def render(rows: list[dict[str, Any]], title: str, notes: list[str]) -> str:
    R = Rows(rows)
    parts = [f"## {title}", "", f"Code: {revision()}.", "", f"Machine: {machine()}", ""]
    parts += [f"- {n}" for n in notes] + [""] if notes else []
    sections = (("1. Tick cost against the number of idle jobs", "tick", tick_table),
                ("2. Dispatch throughput: K jobs due at the same instant", "dispatch", dispatch_table),
                ("3. Scheduling lag (started_at − scheduled_for)", "lag", lag_table),
                ("4. End-to-end no-op throughput", "e2e", e2e_table),
                ("5. Admin pages at scale", "admin", admin_table))  # fmt: skip
    for heading, key, table in sections:
        if any(r["section"] == key for r in rows):
            parts += [f"### {heading}", "", *table(R), ""]
    return "\n".join(parts)
