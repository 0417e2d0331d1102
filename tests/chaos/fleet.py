"""The processes the chaos test starts and kills: slots of beats and
workers (a slot is restarted under the same name, as a supervisor would
restart a service). Its redis-server is tests.processes.RedisServer."""

from __future__ import annotations

import os
import signal
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

from tests.processes import Proc

READY = {"worker": "ready.", "beat": "beat: Starting"}
CRASH_RESTART_S = 1.0  # a process that died by itself comes back after this


def children_of(pid: int) -> list[int]:
    """The child processes of `pid`, from /proc/<pid>/task/*/children."""
    found: list[int] = []
    for task in Path(f"/proc/{pid}/task").glob("*"):
        try:
            found += [int(p) for p in (task / "children").read_text().split()]
        except OSError:
            continue
    return sorted(set(found))


@dataclass
class Slot:
    """One beat or worker, restarted under the same name after each death."""

    kind: str  # "beat" or "worker"
    index: int
    argv: list[str]
    env: dict[str, str]
    log_dir: Path
    proc: Proc | None = None
    down_until: float = 0.0  # monotonic: held down (killed) until then
    starts: int = 0
    crashes: list[str] = field(default_factory=list)
    orphans: list[int] = field(default_factory=list)  # pool children left by a main-only kill

    @property
    def name(self) -> str:
        return f"{self.kind}{self.index}"

    def start(self) -> list[int]:
        """Start it again; first SIGKILL the pool children a main-only kill
        left (as a supervisor clears the service's cgroup). Returns their
        pids (the orphans still alive, which a run may have been using)."""
        alive = [pid for pid in self.orphans if Path(f"/proc/{pid}").exists()]
        for pid in alive:
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        self.orphans = []
        if self.proc is not None:
            self.proc.stop()  # a dead one: closes its log
        self.starts += 1
        self.proc = Proc(f"{self.name}-{self.starts}", self.argv, self.env, self.log_dir)
        return alive

    def alive(self) -> bool:
        return self.proc is not None and self.proc.popen.poll() is None

    def pids(self) -> list[int]:
        if not self.alive():
            return []
        assert self.proc is not None
        return [self.proc.pid, *children_of(self.proc.pid)]

    def kill(self, hold_s: float, *, main_only: bool = False) -> list[int]:
        """SIGKILL the whole process group (main process and pool), or with
        `main_only` the main process alone (its pool children are orphaned
        and go on with the run they have); it is restarted by `supervise`
        after `hold_s` seconds. Returns the pids killed."""
        pids = self.pids()
        if self.proc is not None and pids:
            try:
                if main_only:
                    os.kill(self.proc.pid, signal.SIGKILL)
                    self.orphans, pids = pids[1:], pids[:1]
                else:
                    os.killpg(self.proc.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            self.proc.popen.wait(timeout=10)
        self.down_until = time.monotonic() + hold_s
        return pids

    def supervise(self) -> tuple[str | None, list[int]]:
        """Restart the process if it is dead and not held down; returns why
        when it died by itself (not killed by the chaos), and the orphans
        killed before the restart."""
        if self.alive() or time.monotonic() < self.down_until:
            return None, []
        crashed = None
        if self.proc is not None and self.down_until == 0.0:
            crashed = f"{self.name} exited with {self.proc.popen.returncode}"
            self.crashes.append(crashed)
            self.down_until = time.monotonic() + CRASH_RESTART_S
            return crashed, []
        self.down_until = 0.0
        return None, self.start()

    def stop(self) -> None:
        if self.proc is not None:
            self.proc.stop()


def make_slots(env: dict[str, str], log_dir: Path, *, beats: int, workers: int) -> list[Slot]:
    """Celery command lines as tests/live_fixtures.py's start_process has
    them: prefork workers of concurrency 2 on queue takt, and beats with
    Takt's scheduler."""
    celery = [sys.executable, "-m", "celery", "-A", "scheduler_project"]
    slots = []
    for i in range(beats):
        argv = celery + ["beat", "-l", "info", "-S", "runs.beat:TaktScheduler", "--pidfile="]
        argv += ["-s", str(log_dir / f"beat{i}-schedule")]
        slots.append(Slot("beat", i, argv, env, log_dir))
    for i in range(workers):
        argv = celery + ["worker", "-l", "info", "--pool=prefork", "--concurrency=2"]
        argv += ["-Q", "takt", "-n", f"chaos-w{i}@%h", "--without-gossip", "--without-mingle"]
        slots.append(Slot("worker", i, argv, env, log_dir))
    return slots
