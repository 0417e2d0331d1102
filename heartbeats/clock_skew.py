"""Machines whose clock is off (issue 28): each live beat and worker
reports how far its own clock is from the database's with its heartbeat
(runs.clock, heartbeats.processes `clock=`). The beat, with its own
heartbeat (every REPORT_EVERY_S), raises one warning alert per process
off by more than TAKT_CLOCK_SKEW_WARN_SECONDS, naming it and the offset,
and resolves it when the process is back within the limit or no longer
live. Takt keeps deciding correctly meanwhile (it reads the database's
clock); the alert is there because everything else on that machine (its
logs, cron, TLS) still reads the wrong time.
"""

from __future__ import annotations

from datetime import datetime

from django.conf import settings

from heartbeats.alerts import raise_alert, resolve_all_but
from heartbeats.processes import BEAT_PREFIX, WORKER_PREFIX, LiveProcess, live_processes

ALERT_PREFIX = "clock-skew:"


def skewed(processes: list[LiveProcess]) -> list[tuple[LiveProcess, float]]:
    """The processes whose reported skew is over the limit, with it."""
    limit = float(settings.TAKT_CLOCK_SKEW_WARN_SECONDS)
    found = []
    for process in processes:
        skew = process.clock_skew_s
        if skew is not None and abs(skew) > limit:
            found.append((process, skew))
    return found


def skew_phrase(skew_s: float) -> str:
    return f"{abs(skew_s):.1f} s {'ahead of' if skew_s > 0 else 'behind'}"


def check_clock_skew(*, now: datetime) -> list[str]:
    """Raise or repeat the alert of each live process whose clock is off,
    resolve the others; returns the names of the skewed processes."""
    live = live_processes(BEAT_PREFIX, now=now) + live_processes(WORKER_PREFIX, now=now)
    off = skewed(live)
    limit = float(settings.TAKT_CLOCK_SKEW_WARN_SECONDS)
    for process, skew in off:
        raise_alert(
            f"{ALERT_PREFIX}{process.name}",
            severity="warning",
            title=f"The clock of {process.name} is {skew_phrase(skew)} the database's",
            message=f"{process.name} reported its clock {skew_phrase(skew)} the database's"
            f" (more than TAKT_CLOCK_SKEW_WARN_SECONDS, {limit:g} s). Takt decides on the"
            " database's clock, so its runs still start on time; fix the machine's time"
            " sync (NTP, chrony: deploy/README.md).",
            now=now,
        )
    names = {process.name for process, _ in off}
    resolve_all_but(
        ALERT_PREFIX, names, message="its clock is within the limit again, or it is gone", now=now
    )
    return sorted(names)
