"""Saving a running run's output and progress while it runs (F-93), so the
run's page shows them live without a database write per `job.log()` line
or `job.progress()` call.

A change marks the run's `Autosave` due; the process's one saver thread
writes it at most once per SAVE_EVERY_S (the first time no sooner than
SAVE_EVERY_S after the start: a short run costs no write before its end,
which records the output with the final status). A burst of changes is
one write a second; the last change of a burst is written within a second
too; a flush with nothing new writes nothing. The writes are the saver's
alone: the lock keeper's thread only wakes it (runs.execution), so a write
that waits for the database (SQLite's one writer, while the job holds a
long transaction) never holds up the renewal of the job's lock.

Writes go only to a run that is still `running`, so a run that ended (or
was cancelled) is never overwritten. `close()` stops the saving and writes
the final progress if it changed since the last write.

While the database is down a save waits for the next change or renewal;
the outage is logged once per process (runs.outage), and `close()` then
keeps the progress last saved rather than fail the run's end.
"""

from __future__ import annotations

import logging
import os
import threading
import time
from typing import Any

from runs.context import JobContext
from runs.models import Run, RunStatus
from runs.outage import OUTAGE, drop_connection, is_db_outage

log = logging.getLogger("takt.execution")

SAVE_EVERY_S = 1.0


def _save(run_id: int, **fields: Any) -> bool:
    """Write `fields` to the run if it is still running; whether it was."""
    return bool(Run.objects.filter(pk=run_id, status=RunStatus.RUNNING).update(**fields))


class Autosave:
    """Saves one run's context (see the module docstring): at most once
    per `every_s` seconds, until `close()`."""

    def __init__(self, run_id: int, ctx: JobContext, *, every_s: float = SAVE_EVERY_S) -> None:
        self.run_id, self.ctx, self.every_s = run_id, ctx, every_s
        self.saved_at = time.monotonic()  # moved on by the saver as it takes this up
        self._saved_version = 0
        self._saved_progress: dict[str, Any] | None = None
        self._closed = False
        self._io = threading.Lock()  # one flush at a time; close() waits for it
        _saver().add(self)

    def changed(self) -> None:
        """The context changed: save it within `every_s`. Cheap, never
        waits on the database."""
        if not self._closed:
            _saver().schedule(self)

    def flush(self) -> bool:
        """Write the output and progress if they changed since the last
        write. Returns whether it wrote."""
        with self._io:
            if self._closed:
                return False
            version, output, progress = self.ctx.snapshot()
            if version == self._saved_version:
                return False
            _save(self.run_id, output=output, progress=progress)
            self._saved_version, self._saved_progress = version, progress
            return True

    def close(self) -> None:
        """Stop saving (no write happens after this returns) and store the
        final progress if it is not stored yet; the output goes with the
        run's end."""
        _saver().discard(self)
        with self._io:
            self._closed = True
            progress = self.ctx.snapshot()[2]
            if progress == self._saved_progress:
                return
            try:
                _save(self.run_id, progress=progress)
            except Exception as exc:
                if not is_db_outage(exc):
                    raise
                OUTAGE.failed(exc, what=f"saving the progress of run {self.run_id}")
                drop_connection()
                return
            self._saved_progress = progress


class _Saver(threading.Thread):
    """The process's one saver thread: sleeps until the next due Autosave;
    closes its database connection while no run of the process saves."""

    def __init__(self) -> None:
        super().__init__(name="takt-autosave", daemon=True)
        self._live: set[Autosave] = set()
        self._due: dict[Autosave, float] = {}
        self._wake = threading.Condition()

    def add(self, item: Autosave) -> None:
        with self._wake:
            self._live.add(item)

    def schedule(self, item: Autosave) -> None:
        with self._wake:
            if item in self._due or item not in self._live:  # due already, or closed
                return
            self._due[item] = item.saved_at + item.every_s
            self._wake.notify()

    def discard(self, item: Autosave) -> None:
        with self._wake:
            self._due.pop(item, None)
            self._live.discard(item)
            self._wake.notify()

    def run(self) -> None:
        from django.db import close_old_connections, connection

        connected = False
        while True:
            with self._wake:
                now = time.monotonic()
                ready = [item for item, at in self._due.items() if at <= now]
                for item in ready:
                    del self._due[item]
                    item.saved_at = now  # its next save: every_s from now
                idle = not ready and not self._live and connected
                if not ready and not idle:
                    wake_at = min(self._due.values(), default=now + 60)
                    self._wake.wait(timeout=max(wake_at - now, 0.01))
                    continue
            if idle:  # the next run's first save connects again
                connection.close()
                connected = False
                continue
            connected = True
            for item in ready:
                try:
                    close_old_connections()
                    if item.flush():
                        OUTAGE.recovered()
                except Exception as exc:
                    if is_db_outage(exc):  # down, or SQLite busy: the next change tries again
                        OUTAGE.failed(exc, what=f"saving the output of run {item.run_id}")
                        drop_connection()
                    else:
                        log.exception("saving the output of run %s failed", item.run_id,
                                      extra={"run_id": item.run_id})  # fmt: skip


_SAVER: _Saver | None = None
_SAVER_PID = 0
_SAVER_LOCK = threading.Lock()


def _saver() -> _Saver:
    """The saver thread of this process (a forked pool child starts its own)."""
    global _SAVER, _SAVER_PID
    with _SAVER_LOCK:
        if _SAVER is None or _SAVER_PID != os.getpid() or not _SAVER.is_alive():
            _SAVER, _SAVER_PID = _Saver(), os.getpid()
            _SAVER.start()
        return _SAVER
