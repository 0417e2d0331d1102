"""5. The admin's list pages at scale: Takt's job list and run list (and a
run's page, the job editor) next to django-celery-beat's PeriodicTask list
on the same database at the same number of jobs.

The data set is seed_admin's (full profile: 100,000 jobs, 1,000,000 runs,
100,000 PeriodicTasks). Pages are requested by URL with Django's test
client in this process, logged in as a superuser, DEBUG off: the server's
whole work for a page (middleware, queries, rendering) without a network
or a web server. Each page: one warm-up request, whose SQL is captured
(CaptureQueriesContext: the number of queries, the statements repeated,
full COUNT(*)s); then `reps` timed requests of each page, in rounds over
all pages (fewer for a page slower than PAGE_BUDGET_S / reps, at least
2). Each SELECT of the warm-up is then run again on its own with its rows
fetched, which times it; the slowest one's plan (EXPLAIN QUERY PLAN on SQLite, EXPLAIN (ANALYZE, BUFFERS) on
PostgreSQL) goes into the log and the report. A page that answers an
error status is reported with it.
"""

from __future__ import annotations

import math
import os
import re
from collections import Counter
from dataclasses import dataclass, field
from datetime import UTC, datetime, time, timedelta
from time import perf_counter, process_time
from typing import Any
from urllib.parse import urlencode

from django.conf import settings
from django.db import DatabaseError, connection
from django.test import Client
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from benchmarks import seed, seed_admin
from benchmarks.suite_ctx import Ctx, row

PAGE_BUDGET_S = 60.0  # timed requests of one page stop after about this long
PLANS_LOGGED = 3  # the slowest statements of a page whose plans go to the log file


@dataclass(frozen=True)
class Page:
    label: str
    url: str
    system: str  # "takt" or "dcb"
    pair: str = ""  # pages with the same pair are compared Takt ÷ django-celery-beat


def _per_page(model: Any) -> int:
    from django.contrib import admin

    try:
        return int(admin.site.get_model_admin(model).list_per_page)
    except Exception:  # not registered (any more): Django's default
        return 100


def pages(seeded: seed_admin.Seeded) -> list[Page]:
    """The pages measured, as URLs, so that they stay valid while the admin
    classes behind them change. "Later page" is the middle page."""
    from django_celery_beat.models import PeriodicTask

    from jobs.models import Job
    from runs.admin.filters import COUNT_CAP
    from runs.models import Run

    s, q = seeded.sizes, seed_admin.SEARCH_TERM
    mid_jobs = max(1, math.ceil(s.jobs / _per_page(Job)) // 2)
    # The run list counts at most COUNT_CAP runs: its last page is the deepest one.
    mid_runs = max(1, min(math.ceil(s.runs / _per_page(Run)) // 2, COUNT_CAP // _per_page(Run)))
    mid_tasks = max(1, math.ceil(s.periodic_tasks / _per_page(PeriodicTask)) // 2)
    day = datetime.combine((seeded.now - timedelta(days=3)).date(), time(), UTC)
    span = {"enqueued_from": day.strftime("%Y-%m-%d %H:%M"),
            "enqueued_to": (day + timedelta(days=1)).strftime("%Y-%m-%d %H:%M")}  # fmt: skip
    window = {"start": (seeded.now - timedelta(hours=24)).isoformat(),
              "end": seeded.now.isoformat()}  # fmt: skip
    jobs, runs, tasks = (
        "/admin/takt_jobs/job/",
        "/admin/takt_runs/run/",
        "/admin/django_celery_beat/periodictask/",
    )
    return [
        Page("job list: page 1", jobs, "takt", "page 1"),
        Page(f"job list: page {mid_jobs:,}", f"{jobs}?p={mid_jobs}", "takt", "later page"),
        Page(f"job list: search {q!r}", f"{jobs}?{urlencode({'q': q})}", "takt", "search"),
        Page("job list: disabled", f"{jobs}?enabled__exact=0", "takt"),
        Page("job list: enabled, kind callable", f"{jobs}?enabled__exact=1&kind__exact=callable", "takt"),
        Page("run list: page 1", runs, "takt"),
        Page(f"run list: page {mid_runs:,}", f"{runs}?p={mid_runs}", "takt"),
        Page(f"run list: job #{seeded.hot_job_id} ({s.hot_runs:,} runs)",
             f"{runs}?job={seeded.hot_job_id}", "takt"),
        Page("run list: status failed", f"{runs}?status__exact=failed", "takt"),
        Page("run list: status running", f"{runs}?status__exact=running", "takt"),
        Page("run list: trigger manual", f"{runs}?trigger__exact=manual", "takt"),
        Page("run list: past 24 hours", f"{runs}?enqueued=24h", "takt"),
        Page("run list: one day (from–to)", f"{runs}?{urlencode(span)}", "takt"),
        Page("timeline data: all jobs, 24 h", f"{jobs}timeline/data/?{urlencode(window)}", "takt"),
        # Counted on the warm-up request, then kept a minute: the timed ones are cached.
        Page("load forecast data: 7 days (cached)", f"{jobs}forecast/data/?tz=Europe/Berlin", "takt"),
        Page("landing page", "/admin/", "takt"),
        Page(f"run #{seeded.hot_run_id}", f"{runs}{seeded.hot_run_id}/change/", "takt"),
        Page(f"job editor: job #{seeded.hot_job_id} ({s.hot_runs:,} runs)",
             f"{jobs}{seeded.hot_job_id}/change/", "takt"),
        Page("PeriodicTask list: page 1", tasks, "dcb", "page 1"),
        Page(f"PeriodicTask list: page {mid_tasks:,}", f"{tasks}?p={mid_tasks}", "dcb", "later page"),
        Page(f"PeriodicTask list: search {q!r}", f"{tasks}?{urlencode({'q': q})}", "dcb", "search"),
    ]  # fmt: skip


def shape(sql: str) -> str:
    """A statement with its literals replaced: the same shape for every row."""
    return re.sub(r"\b\d+(?:\.\d+)?\b", "?", re.sub(r"'(?:[^']|'')*'", "?", sql))


def full_counts(statements: list[str]) -> list[str]:
    """The tables counted whole (a COUNT without any WHERE, and without a
    LIMIT that bounds it: `COUNT(*) FROM (SELECT … LIMIT n)` counts n)."""
    tables = []
    for sql in statements:
        upper = sql.upper()
        if "COUNT(" in upper and " WHERE " not in upper and " LIMIT " not in upper:
            found = re.search(r'FROM\s+"(\w+)"', sql)
            tables.append(found.group(1) if found else "?")
    return tables


def rerun(statements: list[str]) -> list[tuple[float, str]]:
    """(ms, sql) of each SELECT run again with its rows fetched, slowest first."""
    timed = []
    with connection.cursor() as cur:
        for sql in statements:
            if not sql.lstrip().upper().startswith(("SELECT", "WITH")):
                continue
            t0 = perf_counter()
            try:
                cur.execute(sql)
                cur.fetchall()
            except DatabaseError:  # e.g. a value the captured text does not render exactly
                continue
            timed.append((1000 * (perf_counter() - t0), sql))
    return sorted(timed, reverse=True)


def explain(sql: str) -> list[str]:
    """The plan as text lines (SQLite's tree indented by depth)."""
    with connection.cursor() as cur:
        if connection.vendor == "postgresql":
            cur.execute("EXPLAIN (ANALYZE, BUFFERS) " + sql)
            return [r[0] for r in cur.fetchall()]
        cur.execute("EXPLAIN QUERY PLAN " + sql)
        depth: dict[int, int] = {0: -1}
        lines = []
        for node, parent, _, detail in cur.fetchall():
            depth[node] = depth.get(parent, -1) + 1
            lines.append("  " * depth[node] + detail)
        return lines


def plan_summary(plan: list[str]) -> str:
    """The scans, sorts and aggregations of a plan, on one line."""
    if connection.vendor != "postgresql":
        return "; ".join(line.strip() for line in plan[:4])
    nodes = []
    for line in plan:
        if "(cost=" not in line:
            continue
        node = line.split("(cost=")[0].strip().removeprefix("->").strip()
        if not any(word in node for word in ("Scan", "Sort", "Aggregate", "Unique")):
            continue
        actual = re.search(r"rows=(\d+) loops=(\d+)", line.split("(actual", 1)[-1])
        rows = f" ({int(actual.group(1)) * int(actual.group(2)):,} rows)" if actual else ""
        nodes.append(node + rows)
    return "; ".join(nodes[:4])


@dataclass
class Visit:
    """A page's warm-up request: its status, duration, SQL and size."""

    page: Page
    status: int
    first_s: float
    statements: list[str]
    html_kb: float
    times_ms: list[float] = field(default_factory=list)
    cpu_ms: list[float] = field(default_factory=list)


def visit(client: Client, page: Page) -> Visit:
    with CaptureQueriesContext(connection) as captured:
        t0 = perf_counter()
        response = client.get(page.url)
        first_s = perf_counter() - t0
    # Copied now: the next request's request_started signal empties the log.
    statements = [q["sql"] for q in captured.captured_queries]
    return Visit(page, response.status_code, first_s, statements, len(response.content) / 1024)


def _backend_cpu_s() -> float:
    """CPU seconds of this connection's PostgreSQL backend process so far
    (Linux counts them in 10 ms ticks); 0 on SQLite, which runs in this
    process and is counted by process_time()."""
    if connection.vendor != "postgresql" or connection.connection is None:
        return 0.0
    import psutil

    times = psutil.Process(connection.connection.info.backend_pid).cpu_times()
    return float(times.user + times.system)


def time_rounds(client: Client, visits: list[Visit], reps: int) -> None:
    """`reps` timed requests per page (fewer for a slow one, at least 2),
    page after page in rounds, so that load from elsewhere on the machine
    spreads over all pages rather than falling on a few. Each request's
    wall time, and its CPU time: this process's and the PostgreSQL
    backend's, which other work on the machine does not inflate."""
    wanted = {id(v): max(2, min(reps, int(PAGE_BUDGET_S / max(v.first_s, 1e-3)))) for v in visits}
    for round_no in range(max(wanted.values(), default=0)):
        for v in visits:
            if v.status == 200 and round_no < wanted[id(v)]:
                cpu0, t0 = process_time() + _backend_cpu_s(), perf_counter()
                client.get(v.page.url)
                wall_s, cpu_s = perf_counter() - t0, process_time() + _backend_cpu_s() - cpu0
                v.times_ms.append(1000 * wall_s)
                v.cpu_ms.append(1000 * cpu_s)


def analyze(v: Visit, ctx: Ctx) -> dict[str, Any]:
    """The page's result row: its times and what its SQL shows."""
    page = v.page
    info: dict[str, Any] = {"url": page.url, "pair": page.pair, "status": v.status}
    if v.status != 200:
        ctx.say(f"admin: {page.label}: {page.url} answered HTTP {v.status}")
        return row("admin", page.label, "server time", page.system, "ms", [], **info)
    timed = rerun(v.statements)
    shapes = Counter(shape(sql) for sql in v.statements).most_common(1)
    plans = []
    for ms, sql in timed[:PLANS_LOGGED]:
        try:
            plans.append((ms, sql, explain(sql)))
        except Exception as exc:  # a statement the database will not EXPLAIN
            plans.append((ms, sql, [f"(EXPLAIN failed: {exc})"]))
    _log_plans(ctx, page, plans)
    slowest_ms, slowest_sql, plan = plans[0] if plans else (math.nan, "", [])
    info.update(
        queries=len(v.statements),
        repeated=shapes[0][1] if shapes else 0,
        repeated_sql=shapes[0][0][:20_000] if shapes else "",
        sql_ms=sum(ms for ms, _ in timed),
        slowest_ms=slowest_ms,
        slowest_sql=slowest_sql[:20_000],
        plan=plan,
        plan_summary=plan_summary(plan),
        full_counts=full_counts(v.statements),
        html_kb=v.html_kb,
        cpu_ms=v.cpu_ms,
    )
    median = sorted(v.times_ms)[len(v.times_ms) // 2]
    cpu = sorted(v.cpu_ms)[len(v.cpu_ms) // 2]
    ctx.say(f"admin: {page.label}: {median:,.0f} ms (CPU {cpu:,.0f} ms, n={len(v.times_ms)}), "
            f"{len(v.statements)} statements, slowest {slowest_ms:,.0f} ms")  # fmt: skip
    return row("admin", page.label, "server time", page.system, "ms", v.times_ms, **info)


def _log_plans(ctx: Ctx, page: Page, plans: list[tuple[float, str, list[str]]]) -> None:
    """The slowest statements with their plans: the slowest on the console,
    the first PLANS_LOGGED in admin-plans-<db>.txt in the log directory."""
    with (ctx.log_dir / f"admin-plans-{ctx.db}.txt").open("a") as out:
        out.write(f"\n=== {page.label}  {page.url}\n")
        for i, (ms, sql, plan) in enumerate(plans):
            text = f"-- {ms:.1f} ms\n{sql}\n" + "\n".join(f"   {line}" for line in plan) + "\n"
            out.write(text)
            if i == 0:
                ctx.say(f"admin: slowest of {page.label}: {text}")


def run(ctx: Ctx, cfg: dict[str, Any]) -> list[dict[str, Any]]:
    """Seed (cfg: jobs, runs, periodic_tasks, hot_runs), measure every page
    `cfg["reps"]` times, empty the tables again; returns the result rows."""
    from django.contrib.auth import get_user_model

    if settings.DEBUG:
        ctx.say("admin: warning: DEBUG is on; the pages are slower than in production")
    sizes = seed_admin.Sizes(jobs=cfg["jobs"], runs=cfg["runs"],
                             periodic_tasks=cfg["periodic_tasks"], hot_runs=cfg["hot_runs"])  # fmt: skip
    seed.wipe()
    seeded = seed_admin.seed(sizes, now=timezone.now().replace(microsecond=0), say=ctx.say)
    rows = [
        row("admin", "seed", what, "dcb" if "celery-beat" in what else "takt", "s", [secs],
            count=count)
        for what, (count, secs) in seeded.seconds.items()
    ]  # fmt: skip
    users = get_user_model().objects
    users.filter(username="bench-admin").delete()
    user = users.create_superuser("bench-admin", "bench@example.invalid", None)
    client = Client(HTTP_HOST="localhost", raise_request_exception=False)
    client.force_login(user)
    load = [os.getloadavg()[0]]
    visits = [visit(client, page) for page in pages(seeded)]
    time_rounds(client, visits, cfg["reps"])
    load.append(os.getloadavg()[0])
    rows.append(row("admin", "load", "load average (1 min)", "machine", "", load))
    rows += [analyze(v, ctx) for v in visits]
    seed.wipe()
    return rows
