"""The chaos schedule: a pure function of a seed and the profile, printed
before the chaos starts, so a failing run can be repeated exactly."""

from __future__ import annotations

import random
from dataclasses import dataclass

BEATS = 2
WORKERS = 3


@dataclass(frozen=True)
class Profile:
    """How long each phase lasts (seconds) and how much load there is."""

    name: str
    jobs: int  # jobs on 1- and 2-second triggers (plus two 10-second retry jobs)
    baseline_s: float  # before the first kill: the start lag without chaos
    chaos_s: float  # kills every 3-8 s, and the three big events
    db_outage_s: float
    beats_down_s: float = 8.0
    after_s: float = 60.0  # the minute after the chaos, then the checks


SHORT = Profile("short", jobs=12, baseline_s=15, chaos_s=50, db_outage_s=10)


def long_profile(minutes: float) -> Profile:
    """About `minutes` in all: 30 s of baseline, the minute after, and about
    a minute of start-up and checks around the chaos."""
    chaos_s = max(120.0, minutes * 60 - 30 - 60 - 60)
    return Profile("long", jobs=20, baseline_s=30, chaos_s=chaos_s, db_outage_s=30)


@dataclass(frozen=True)
class Event:
    """At `at_s` seconds after the chaos began: `action` on `target`.

    action: "kill" (SIGKILL; target "beat", "worker" (its process group:
    main process and pool), "worker-main" (the main process alone: its
    pool children are orphaned, and killed when it is restarted) with its
    index, or "child", one pool child of worker `index`), restarted
    `restart_after_s` later; "beats_down" (both beats, `restart_after_s` = how long);
    "redis_restart" (no persistence: the data is gone); "db_outage"
    (pg_ctl stop -m fast, started again after `restart_after_s`)."""

    at_s: float
    action: str
    target: str = ""
    index: int = 0
    restart_after_s: float = 0.0

    def describe(self) -> str:
        what = self.action if not self.target else f"{self.action} {self.target}[{self.index}]"
        tail = f", back after {self.restart_after_s:.1f} s" if self.restart_after_s else ""
        return f"t+{self.at_s:6.1f} s  {what}{tail}"


def plan_chaos(seed: int, profile: Profile) -> list[Event]:
    """Kills every 3-8 s over the chaos phase (a beat, a worker's main
    process or one pool child, each back 1-3 s later); both beats down
    together once (at 30 %), one Redis restart (at 50 %) and one database
    outage (at 65 %), all over before the chaos phase ends."""
    rng = random.Random(seed)
    events: list[Event] = []
    t = rng.uniform(3, 8)
    while t < profile.chaos_s - 3:
        target = rng.choice(("beat", "worker", "worker-main", "child"))
        index = rng.randrange(BEATS if target == "beat" else WORKERS)
        restart = 0.0 if target == "child" else round(rng.uniform(1, 3), 1)
        events.append(Event(round(t, 1), "kill", target, index, restart))
        t += rng.uniform(3, 8)
    span = profile.chaos_s
    events.append(Event(round(0.3 * span, 1), "beats_down", restart_after_s=profile.beats_down_s))
    events.append(Event(round(0.5 * span, 1), "redis_restart"))
    outage_at = min(0.65 * span, span - profile.db_outage_s - 2)
    events.append(Event(round(outage_at, 1), "db_outage", restart_after_s=profile.db_outage_s))
    return sorted(events, key=lambda e: e.at_s)
