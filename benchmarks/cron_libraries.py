"""croniter and cronsim against Takt's cron rules, and their speed.

    .venv/bin/python -m benchmarks.cron_libraries [--calls 10000] [--reps 5]

Needs croniter, which Takt does not depend on (`pip install croniter`, the
bench extra). No database, no Redis.

Correctness: the cases are Takt's own unit-test tables, with Takt's expected
values as the reference: DST_CASES and LATEST_CASES imported from
tests/unit/test_triggers.py, and NEXT_CASES below, restated from that file's
inline table for test_cron_next_fire. Each library gets the expression as
Takt stores it (normalize_cron: "?" -> "*", "FRIL" -> "5L") and the start
instant in the trigger's zone:

* Takt:     jobs.core.triggers.compute_fire_times / compute_latest_fire;
* cronsim:  CronSim(expression, start) iterated, without Takt's DST walk
            (jobs/core/cron.py): what Takt would do with cronsim alone;
* croniter: croniter(expression, start).get_next()/get_prev(), with
            second_at_beginning=True for 6 fields and its spelling "L5" for
            "5L" (the last Friday). "LW" has no croniter spelling.

A case is right when a library's first len(expected) fire times equal
Takt's, instant for instant.
"""

from __future__ import annotations

import argparse
import platform
import statistics
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from importlib.metadata import version
from itertools import islice
from typing import Any

from cronsim import CronSim

from jobs.core.cron import normalize_cron, zone_of
from jobs.core.triggers import (
    CronSpec,
    compute_fire_times,
    compute_latest_fire,
    compute_next_fire,
    iter_fire_times,
)
from tests.unit.test_triggers import DST_CASES, LATEST_CASES

try:
    from croniter import croniter
except ImportError:  # pragma: no cover - a message, not a crash
    sys.exit("benchmarks.cron_libraries needs croniter: .venv/bin/pip install croniter")

_SECOND = timedelta(seconds=1)
LIBRARIES = ("Takt", "cronsim", "croniter")


def utc(*parts: int) -> datetime:
    return datetime(*parts, tzinfo=UTC)  # type: ignore[misc]


# Restated from tests/unit/test_triggers.py::test_cron_next_fire (an inline table there).
NEXT_CASES = [
    ("step", "*/15 * * * *", "UTC", utc(2026, 1, 5, 10, 15), utc(2026, 1, 5, 10, 30)),
    ("step-offset", "5/10 * * * *", "UTC", utc(2026, 1, 5, 10, 55), utc(2026, 1, 5, 11, 5)),
    ("range-step", "0 9-17/4 * * *", "UTC", utc(2026, 1, 5, 17), utc(2026, 1, 6, 9)),
    ("lists", "0 0,12 1,15 * *", "UTC", utc(2026, 1, 1, 12), utc(2026, 1, 15)),
    ("month-name", "0 0 1 JAN *", "UTC", utc(2026, 1, 1), utc(2027, 1, 1)),
    ("day-name", "0 0 * * MON", "UTC", utc(2026, 1, 1), utc(2026, 1, 5)),
    ("sunday-7", "0 0 * * 7", "UTC", utc(2026, 1, 1), utc(2026, 1, 4)),
    ("dom-or-dow", "0 0 13 * FRI", "UTC", utc(2026, 1, 1), utc(2026, 1, 2)),
    ("L", "0 0 L * *", "UTC", utc(2026, 2, 1), utc(2026, 2, 28)),
    ("L-leap", "0 0 L * *", "UTC", utc(2028, 2, 1), utc(2028, 2, 29)),
    ("LW", "0 0 LW * *", "UTC", utc(2026, 5, 1), utc(2026, 5, 29)),
    ("last-friday", "0 0 * * 5L", "UTC", utc(2026, 1, 1), utc(2026, 1, 30)),
    ("nth-friday", "0 0 * * FRI#2", "UTC", utc(2026, 1, 1), utc(2026, 1, 9)),
    ("feb-29", "0 0 29 2 *", "UTC", utc(2026, 1, 1), utc(2028, 2, 29)),
    ("6-fields", "30 * * * * *", "UTC", utc(2026, 1, 5, 10, 0, 30), utc(2026, 1, 5, 10, 1, 30)),
    ("6-fields-step", "*/20 * * * * *", "UTC", utc(2026, 1, 5, 10, 0, 40), utc(2026, 1, 5, 10, 1)),
    ("6-fields-days", "0 0 8 * * MON-FRI", "UTC", utc(2026, 1, 2, 8), utc(2026, 1, 5, 8)),
    ("berlin-weekday", "0 8 * * MON-FRI", "Europe/Berlin", utc(2026, 1, 9, 7), utc(2026, 1, 12, 7)),
    ("new-york-summer", "0 9 * * *", "America/New_York", utc(2026, 7, 6), utc(2026, 7, 6, 13)),
    ("kolkata", "0 0 * * *", "Asia/Kolkata", utc(2026, 1, 5), utc(2026, 1, 5, 18, 30)),
    ("sub-second", "* * * * * *", "UTC", utc(2026, 1, 5, 10, 0, 0, 500_000), utc(2026, 1, 5, 10, 0, 1)),
]  # fmt: skip


@dataclass(frozen=True)
class Case:
    group: str  # "next" (strictly after) or "latest" (at or before)
    name: str
    expression: str
    zone: str
    start: datetime
    expected: tuple[datetime, ...]


def all_cases() -> list[Case]:
    cases = [Case("next", n, e, z, a, (x,)) for n, e, z, a, x in NEXT_CASES]
    cases += [Case("next", n, e, z, a, tuple(x)) for n, e, z, a, x in DST_CASES]
    cases += [
        Case("latest", f"latest-{i}", e, z, a, (x,))
        for i, (e, z, a, x) in enumerate(LATEST_CASES, 1)
    ]
    return cases


# --- the three libraries, each as "next n" and "latest" --------------------


def _croniter_expression(expression: str) -> str:
    # croniter writes the last Friday "L5" where Takt (and Quartz) write "5L".
    *rest, dow = expression.split()
    if dow.endswith("L") and dow[:-1].isdigit():
        dow = f"L{dow[:-1]}"
    return " ".join([*rest, dow])


def _croniter(expression: str, start: datetime) -> Any:
    return croniter(
        _croniter_expression(expression),
        start,
        ret_type=datetime,
        second_at_beginning=len(expression.split()) == 6,
    )


def _one_second_later(at_or_before: datetime, zone: str) -> datetime:
    # Both libraries' reverse walks are strictly before their start.
    return (at_or_before.replace(microsecond=0) + _SECOND).astimezone(zone_of(zone))


def takt_next(expression: str, zone: str, after: datetime, count: int) -> list[datetime]:
    times = compute_fire_times(CronSpec(expression, zone), after=after, count=count)
    return [t.astimezone(UTC) for t in times]


def takt_latest(expression: str, zone: str, at_or_before: datetime) -> datetime | None:
    return compute_latest_fire(CronSpec(expression, zone), at_or_before=at_or_before)


def cronsim_next(expression: str, zone: str, after: datetime, count: int) -> list[datetime]:
    fires = CronSim(expression, after.astimezone(zone_of(zone)))
    return [t.astimezone(UTC) for t in islice(fires, count)]


def cronsim_latest(expression: str, zone: str, at_or_before: datetime) -> datetime | None:
    fires = CronSim(expression, _one_second_later(at_or_before, zone), reverse=True)
    return next(fires).astimezone(UTC)


def croniter_next(expression: str, zone: str, after: datetime, count: int) -> list[datetime]:
    fires = _croniter(expression, after.astimezone(zone_of(zone)))
    return [fires.get_next().astimezone(UTC) for _ in range(count)]


def croniter_latest(expression: str, zone: str, at_or_before: datetime) -> datetime | None:
    fires = _croniter(expression, _one_second_later(at_or_before, zone))
    return fires.get_prev().astimezone(UTC)


NEXT: dict[str, Callable[[str, str, datetime, int], list[datetime]]] = {
    "Takt": takt_next,
    "cronsim": cronsim_next,
    "croniter": croniter_next,
}
LATEST: dict[str, Callable[[str, str, datetime], datetime | None]] = {
    "Takt": takt_latest,
    "cronsim": cronsim_latest,
    "croniter": croniter_latest,
}


def verdict(library: str, case: Case) -> str:
    """ "yes", or "no: <first wrong instant> (want <Takt's>)", or "error: <type>"."""
    expression = normalize_cron(case.expression)
    try:
        if case.group == "next":
            got = NEXT[library](expression, case.zone, case.start, len(case.expected))
        else:
            got = [LATEST[library](expression, case.zone, case.start)]  # type: ignore[list-item]
    except Exception as error:  # a library refusing the expression is a wrong answer
        return f"error: {type(error).__name__}"
    for have, want in zip(got, case.expected, strict=True):
        if have != want:
            return f"no: {_short(have)} (want {_short(want)})"
    return "yes"


def _short(instant: datetime | None) -> str:
    return "none" if instant is None else instant.strftime("%Y-%m-%d %H:%M:%SZ")


def correctness_table(cases: list[Case]) -> tuple[list[str], dict[str, list[str]]]:
    """The Markdown rows, and each library's verdicts in the order of `cases`."""
    lines = [
        "| case | expression | zone | start (UTC) | " + " | ".join(LIBRARIES) + " |",
        "|---|---|---|---|" + "---|" * len(LIBRARIES),
    ]
    verdicts: dict[str, list[str]] = {library: [] for library in LIBRARIES}
    for case in cases:
        said = [verdict(library, case) for library in LIBRARIES]
        for library, one in zip(LIBRARIES, said, strict=True):
            verdicts[library].append(one)
        start = case.start.isoformat(" ", "microseconds" if case.start.microsecond else "seconds")
        cells = [case.name, f"`{case.expression}`", case.zone, start[:-6], *said]
        lines.append("| " + " | ".join(cells) + " |")
    return lines, verdicts


# --- speed -------------------------------------------------------------------

SPEED_EXPRESSIONS = [
    ("*/15 * * * *", "Europe/Berlin"),
    ("30 2 * * *", "Europe/Berlin"),
    ("0 8 * * MON-FRI", "America/New_York"),
    ("0 0 L * *", "UTC"),
    ("0 30 2 * * *", "Europe/Berlin"),
]
SPEED_START = utc(2026, 1, 1)


def _iterate(library: str, expression: str, zone: str) -> Iterator[datetime]:
    """One iterator from SPEED_START: each `next` is one library call."""
    start = SPEED_START.astimezone(zone_of(zone))
    if library == "Takt":
        return iter_fire_times(CronSpec(expression, zone), after=SPEED_START)
    if library == "cronsim":
        return CronSim(expression, start)
    fires = _croniter(expression, start)
    return iter(fires.get_next, None)


def _fresh(library: str, expression: str, zone: str) -> Callable[[datetime], datetime]:
    """The next fire time after a given instant, the walk built anew: what
    the beat does for a trigger (compute_next_fire(after=previous fire))."""
    spec, tz = CronSpec(expression, zone), zone_of(zone)
    if library == "Takt":
        return lambda after: compute_next_fire(spec, after=after, now=after)  # type: ignore[return-value]
    if library == "cronsim":
        return lambda after: next(CronSim(expression, after.astimezone(tz)))
    return lambda after: _croniter(expression, after.astimezone(tz)).get_next()


def time_calls(library: str, expression: str, zone: str, calls: int, mode: str) -> float:
    """Seconds for `calls` next-fire-time calls, one repetition."""
    if mode == "iterate":
        fires = _iterate(library, expression, zone)
        begin = time.perf_counter()
        for _ in range(calls):
            next(fires)
        return time.perf_counter() - begin
    step, after = _fresh(library, expression, zone), SPEED_START
    begin = time.perf_counter()
    for _ in range(calls):
        after = step(after)
    return time.perf_counter() - begin


def speed_table(calls: int, reps: int) -> list[str]:
    lines = [
        "| expression | zone | mode | " + " | ".join(f"{lib} µs/call" for lib in LIBRARIES) + " |",
        "|---|---|---|" + "---:|" * len(LIBRARIES),
    ]
    for expression, zone in SPEED_EXPRESSIONS:
        for mode in ("iterate", "fresh"):
            runs: dict[str, list[float]] = {library: [] for library in LIBRARIES}
            for _ in range(reps):  # libraries take turns: a busy moment hits them alike
                for library in LIBRARIES:
                    runs[library].append(time_calls(library, expression, zone, calls, mode))
            cells = [f"{statistics.median(runs[lib]) / calls * 1e6:.1f}" for lib in LIBRARIES]
            lines.append(f"| `{expression}` | {zone} | {mode} | " + " | ".join(cells) + " |")
    return lines


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--calls", type=int, default=10_000, help="next calls per repetition")
    parser.add_argument("--reps", type=int, default=5, help="repetitions (the median is shown)")
    args = parser.parse_args(argv)

    print(
        f"Python {platform.python_version()}, cronsim {version('cronsim')}, "
        f"croniter {version('croniter')}, {platform.machine()}\n"
    )
    cases = all_cases()
    lines, verdicts = correctness_table(cases)
    print(f"## Right answers ({len(cases)} cases from tests/unit/test_triggers.py)\n")
    print("\n".join(lines))
    print()
    for group in ("next", "latest", "all"):
        chosen = [i for i, c in enumerate(cases) if group in ("all", c.group)]
        counts = ", ".join(
            f"{lib} {sum(verdicts[lib][i] == 'yes' for i in chosen)}/{len(chosen)}"
            for lib in LIBRARIES
        )
        print(f"right, {group}: {counts}")
    print(
        f"\n## Speed: {args.calls:,} next-fire-time calls per expression, median of "
        f"{args.reps} repetitions, the libraries taking turns (time.perf_counter, one "
        "process, GC on)\n"
        "iterate: one iterator from 2026-01-01, `next` called each time; "
        "fresh: built anew from the previous fire time each call "
        "(Takt: compute_next_fire, as the beat does)\n"
    )
    print("\n".join(speed_table(args.calls, args.reps)))


if __name__ == "__main__":
    main()
