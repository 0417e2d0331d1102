"""Watched folders (F-16 file triggers, F-17 RUN files): the engine.

Each beat process (and `manage.py watch_files`) runs one `Watcher` thread.
It reads the active file triggers and TAKT_RUN_FILE_FOLDERS every few
seconds and, for each folder this machine can read, competes for the
folder's lease in Redis (a key per folder path, SET NX with a TTL, renewed
by its holder's token): exactly one watcher in the cluster watches a
folder; when its holder dies, the lease lapses and another takes over
within LEASE_SECONDS, and scans the folder for what arrived meanwhile.

The holder watches with watchdog (inotify; its polling observer where
inotify is not available or TAKT_WATCH_POLLING is set). Every event, and a
rescan every RESCAN_SECONDS (inotify drops events when its queue
overflows), feeds the pure Settler (jobs/core/watch.py): a file starts a
run once it has been left alone for the trigger's settle time, so a file
written in chunks or renamed into place starts one run.

A run is recorded with a dedupe key made of the file's path, size and
modification time (the unique (job, dedupe_key) index): the same state of
a file seen twice (by a rescan, by a watcher that took over, by two
machines watching one network folder) starts one run; a changed file
starts another. The run is started as the engine starts a dependency's
run: the job's overlap policy, maintenance mode (recorded `skipped`,
refused), a paused queue and conditions apply.

A RUN file (`<prefix><job id>.RUN`) is consumed after its run is recorded
(deleted, or moved to TAKT_RUN_FILE_DONE_FOLDER); a crash in between
leaves the file, whose run the dedupe key then finds. A request for an
unknown or child job leaves `<name>.error` beside it saying why.
"""

from __future__ import annotations

import hashlib
import logging
import os
import secrets
import socket
import threading
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from django.conf import settings
from django.db import IntegrityError, close_old_connections, transaction
from django.utils import timezone
from redis.exceptions import RedisError

from jobs import capabilities
from jobs.core.watch import (
    FileSpec,
    Settler,
    dedupe_key,
    done_parts,
    printable,
    run_request,
    takes,
)
from jobs.models import Job, Trigger
from jobs.policies import INTERNAL_TARGETS, TriggerKind
from jobs.validation import folder_problem
from runs.decisions import Decision, record
from runs.folder_io import consume, is_link, list_files, regular_state, write_beside
from runs.locks import get_redis
from runs.models import Run, RunStatus, RunTrigger
from runs.outage import describe, is_db_outage
from runs.publish import publish_after_commit
from runs.services import create_run

log = logging.getLogger("takt.watching")

LEASE_SECONDS = 15.0  # a dead holder's folder is taken over within this
STEP_SECONDS = 0.25  # how often settled files are looked for
REFRESH_SECONDS = 3.0  # how often the triggers are read and leases renewed
RESCAN_SECONDS = 30.0  # a held folder is listed again (missed events)
RUN_FILE_SETTLE_SECONDS = 1
LINK = "a symbolic link (the watcher follows none)"

_RENEW = """
if redis.call('get', KEYS[1]) == ARGV[1] then
  return redis.call('pexpire', KEYS[1], ARGV[2])
end
return 0
"""
_RELEASE = """
if redis.call('get', KEYS[1]) == ARGV[1] then
  return redis.call('del', KEYS[1])
end
return 0
"""


def lease_key(folder: str) -> str:
    digest = hashlib.sha256(folder.encode("utf-8", "surrogateescape")).hexdigest()[:32]
    return f"{settings.TAKT_KEY_PREFIX}:watch:{digest}"


@dataclass
class Watch:
    """One thing to do with the files of a folder: start a trigger's job
    (trigger_id set) or read RUN requests (trigger_id None)."""

    spec: FileSpec
    trigger_id: int | None
    job_id: int | None
    since: datetime  # files last changed before this are not new to it
    settler: Settler = field(init=False)
    done: dict[str, tuple[int, int]] = field(default_factory=dict)  # path -> handled state

    def __post_init__(self) -> None:
        self.settler = Settler(timedelta(seconds=self.spec.settle_seconds))

    @property
    def key(self) -> tuple[Any, ...]:
        return (self.trigger_id, self.job_id, self.spec)

    def takes(self, path: str) -> bool:
        if self.trigger_id is None:
            name = os.path.basename(path)
            return os.path.dirname(path) == self.spec.folder and (
                run_request(name, settings.TAKT_RUN_FILE_PREFIX) is not None
            )
        return takes(self.spec, path)


# A file's modification time comes from the file system's coarse clock
# (Linux: the last timer tick, up to 10 ms behind; FAT and some network
# shares: 2 s steps): a file written just after its trigger was created may
# carry a time before it. Files changed less than this before the trigger
# count as new to it.
MTIME_SLACK_S = 2.0


def wanted_watches(*, now: datetime) -> dict[str, list[Watch]]:
    """folder -> what to do there: the active file triggers, and the RUN-file
    folders of the settings."""
    folders: dict[str, list[Watch]] = {}
    triggers = Trigger.objects.filter(kind=TriggerKind.FILE, active=True).values_list(
        "pk", "job_id", "watch_folder", "watch_pattern", "watch_recursive", "settle_seconds",
        "created_at",
    )  # fmt: skip
    for pk, job_id, folder, pattern, recursive, settle, created in triggers:
        spec = FileSpec(folder, pattern or "*", recursive, settle)
        folders.setdefault(folder, []).append(Watch(spec, pk, job_id, created))
    for folder in settings.TAKT_RUN_FILE_FOLDERS:
        spec = FileSpec(os.path.normpath(folder), "*", False, RUN_FILE_SETTLE_SECONDS)
        folders.setdefault(spec.folder, []).append(
            Watch(spec, None, None, datetime.min.replace(tzinfo=now.tzinfo))
        )
    return folders


class Watcher:
    """The watcher of one process: a thread that holds the leases of the
    folders it watches. `clock` returns aware datetimes (tests pass theirs)."""

    def __init__(self, *, name: str = "", clock: Callable[[], datetime] = timezone.now) -> None:
        self.token = f"{name or socket.gethostname()}:{os.getpid()}:{secrets.token_hex(4)}"
        self.clock = clock
        self.held: dict[str, _Folder] = {}
        self.lock = threading.Lock()
        self.stopping = threading.Event()
        self.thread: threading.Thread | None = None
        self._last_refresh = 0.0

    # --- the thread ------------------------------------------------------

    def start(self) -> None:
        self.thread = threading.Thread(target=self._loop, name="takt-watcher", daemon=True)
        self.thread.start()
        log.info("file watcher %s started", self.token)

    def stop(self) -> None:
        self.stopping.set()
        if self.thread is not None:
            self.thread.join(timeout=5)
        self.release_all()

    def _loop(self) -> None:
        paused = False  # by an outage of the database or Redis
        while not self.stopping.is_set():
            try:
                close_old_connections()  # a connection the database dropped is opened again
                self.step()
            except Exception as exc:
                if is_db_outage(exc) or isinstance(exc, RedisError):
                    if not paused:  # one line per outage, no traceback
                        log.warning("file watcher paused: %s; trying again", describe(exc))
                    paused = True
                else:
                    log.exception("file watcher: a step failed; trying again")
                self.stopping.wait(1.0)
            else:
                if paused:
                    log.info("file watcher going on: its files are looked at again")
                    paused = False
                    for folder in self.held.values():
                        folder.scanned = 0.0  # what settled meanwhile is found now
            self.stopping.wait(STEP_SECONDS)

    # --- one step --------------------------------------------------------

    def step(self) -> None:
        """Refresh the folders and leases when due, then start the runs of
        the settled files."""
        if time.monotonic() - self._last_refresh >= REFRESH_SECONDS:
            self.refresh()
            self._last_refresh = time.monotonic()
        for folder in list(self.held.values()):
            folder.maybe_rescan()
            self.fire_settled(folder)

    def refresh(self) -> None:
        for path in list(self.held):  # first, so a database outage does not lapse them
            if not self._renew(path):
                self._drop(path, release=False)  # lapsed (a Redis restart): taken again below
        wanted = wanted_watches(now=self.clock())
        for path in list(self.held):
            if path not in wanted:
                self._drop(path)
        for path, watches in wanted.items():
            held = self.held.get(path)
            if held is not None:
                held.update(watches)
                continue
            problem = folder_problem(path)
            if problem:
                _note_once(path, problem)
                continue
            if self._take(path):
                folder = _Folder(path, watches, self)
                try:
                    folder.start()
                except OSError as exc:
                    _note_once(path, f"cannot watch it: {exc}")
                    self._release(path)
                    continue
                self.held[path] = folder
                triggers = sum(1 for w in watches if w.trigger_id is not None)
                requests = " and RUN files" if len(watches) > triggers else ""
                log.info("watching %s: %d file trigger(s)%s", printable(path), triggers, requests)

    def fire_settled(self, folder: _Folder) -> None:
        now = self.clock()
        for watch in folder.current():
            with self.lock:
                ready = watch.settler.ready(now)
            for path, size, mtime_ns, event in ready:
                state = regular_state(path, folder.path)
                if state is None:
                    continue  # gone before it settled
                if state != (size, mtime_ns):
                    with self.lock:  # changed since: wait again
                        watch.settler.saw(
                            path, size=state[0], mtime_ns=state[1], event=event, now=now
                        )
                    continue
                if watch.done.get(path) == state:
                    continue
                if watch.trigger_id is None:
                    handle_run_file(path, size, mtime_ns, now=now)
                else:
                    start_for_file(watch, path, size, mtime_ns, event, now=now)
                watch.done[path] = state

    # --- leases ----------------------------------------------------------

    def _take(self, folder: str) -> bool:
        return bool(
            get_redis().set(lease_key(folder), self.token, nx=True, px=int(LEASE_SECONDS * 1000))
        )

    def _renew(self, folder: str) -> bool:
        renewed = get_redis().eval(
            _RENEW, 1, lease_key(folder), self.token, int(LEASE_SECONDS * 1000)
        )
        return bool(renewed)

    def _release(self, folder: str) -> None:
        try:
            get_redis().eval(_RELEASE, 1, lease_key(folder), self.token)
        except Exception:  # Redis gone: the lease lapses by itself
            log.warning("could not release the lease of %s", printable(folder))

    def _drop(self, folder: str, *, release: bool = True) -> None:
        held = self.held.pop(folder, None)
        if held is not None:
            held.stop()
            log.info("no longer watching %s", printable(folder))
        if release:
            self._release(folder)

    def release_all(self) -> None:
        for folder in list(self.held):
            self._drop(folder)


class _Folder:
    """A folder this watcher holds: its watchdog observer and its watches."""

    def __init__(self, path: str, watches: list[Watch], watcher: Watcher) -> None:
        self.path = path
        self.watcher = watcher
        self.watches = {w.key: w for w in watches}
        self.observer: Any = None
        self.recursive = any(w.spec.recursive for w in watches)
        self.scanned = 0.0
        self.ignored: set[str] = set()  # paths the log said it does not take

    def current(self) -> list[Watch]:
        return list(self.watches.values())

    def update(self, watches: list[Watch]) -> None:
        fresh = {w.key: w for w in watches}
        added = [w for key, w in fresh.items() if key not in self.watches]
        self.watches = {key: self.watches.get(key, w) for key, w in fresh.items()}
        if any(w.spec.recursive for w in watches) != self.recursive:
            self.stop()
            self.recursive = not self.recursive
            self.start()
        elif added:
            self.scan(added)

    def start(self) -> None:
        from watchdog.observers import Observer
        from watchdog.observers.polling import PollingObserver

        handler = _Handler(self)
        observer: Any = None
        if not settings.TAKT_WATCH_POLLING:
            try:
                observer = Observer()
                observer.schedule(handler, self.path, recursive=self.recursive)
                observer.start()
            except OSError as exc:  # no inotify (limits, containers): poll instead
                log.warning("inotify unavailable for %s (%s): polling every second", self.path, exc)
                observer = None
        if observer is None:
            observer = PollingObserver(timeout=1)
            observer.schedule(handler, self.path, recursive=self.recursive)
            observer.start()
        self.observer = observer
        self.scan(self.current())

    def stop(self) -> None:
        if self.observer is not None:
            self.observer.stop()
            self.observer.join(timeout=5)
            self.observer = None

    def maybe_rescan(self) -> None:
        if time.monotonic() - self.scanned >= RESCAN_SECONDS:
            self.scan(self.current())

    def scan(self, watches: Iterable[Watch]) -> None:
        """Feed what is in the folder now: files that arrived while nobody
        watched, and events inotify dropped. A file is new to a watch when it
        changed after the watch began (a RUN request: always) and it has not
        handled that state of it."""
        self.scanned = time.monotonic()
        watches = list(watches)
        now = self.watcher.clock()
        present = set(list_files(self.path, recursive=self.recursive))
        self.ignored &= present
        for watch in watches:  # forget the files that are gone
            for path in [p for p in watch.done if p not in present]:
                del watch.done[path]
        for path in sorted(present):
            state = regular_state(path, self.path)
            if state is None:
                if is_link(path):
                    self.ignore(path, LINK)
                continue
            if not self.acceptable(path):
                continue
            for watch in watches:
                if not watch.takes(path) or watch.done.get(path) == state:
                    continue
                if state[1] < (watch.since.timestamp() - MTIME_SLACK_S) * 1e9:
                    continue
                with self.watcher.lock:
                    if path not in watch.settler.pending:
                        watch.settler.saw(
                            path, size=state[0], mtime_ns=state[1], event="found", now=now
                        )

    def acceptable(self, path: str) -> bool:
        """Whether a file that some watch may take has a name the watcher
        takes: its bytes are UTF-8 (it becomes a run's `path` in the
        database). The log says once why not, with the name escaped."""
        try:
            path.encode("utf-8")
        except UnicodeEncodeError:
            self.ignore(path, "its name is not UTF-8")
            return False
        return True

    def ignore(self, path: str, why: str) -> None:
        if path not in self.ignored and any(w.takes(path) for w in self.current()):
            self.ignored.add(path)
            log.warning("not taking %s: %s", printable(path), why)

    def event(self, path: str, event: str) -> None:
        now = self.watcher.clock()
        state = regular_state(path, self.path)
        if state is not None and not self.acceptable(path):
            return
        if state is None and is_link(path):
            self.ignore(path, LINK)
        for watch in self.current():
            if not watch.takes(path):
                continue
            with self.watcher.lock:
                if state is None:
                    watch.settler.gone(path)
                else:
                    watch.settler.saw(path, size=state[0], mtime_ns=state[1], event=event, now=now)


class _Handler:
    """watchdog's callbacks (its observer thread) into the folder's settlers."""

    def __init__(self, folder: _Folder) -> None:
        self.folder = folder

    def dispatch(self, event: Any) -> None:
        if event.is_directory:
            return
        kind = event.event_type
        if kind in ("created", "modified", "closed"):
            self.folder.event(_text(event.src_path), "modified" if kind == "closed" else kind)
        elif kind == "moved":
            self.folder.event(_text(event.src_path), "deleted")
            self.folder.event(_text(event.dest_path), "moved")
        elif kind == "deleted":
            self.folder.event(_text(event.src_path), "deleted")


def _text(path: str | bytes) -> str:
    return os.fsdecode(path)


_NOTED: dict[str, str] = {}


def _note_once(folder: str, problem: str) -> None:
    if _NOTED.get(folder) != problem:
        _NOTED[folder] = problem
        log.warning("not watching %s: %s", printable(folder), printable(problem))


# --- what a settled file starts -------------------------------------------


def start_for_file(
    watch: Watch, path: str, size: int, mtime_ns: int, event: str, *, now: datetime
) -> Run | None:
    """The run a settled file starts for its file trigger, once per state of
    the file (None when that state already started one, or the trigger is
    no longer active)."""
    trigger = (
        Trigger.objects.filter(pk=watch.trigger_id, active=True, kind=TriggerKind.FILE)
        .select_related("job")
        .first()
    )
    if trigger is None or trigger.job.parent_id is not None:
        return None
    job = trigger.job
    params = {**job.params, "path": path, "event": event, "size": size}
    key = dedupe_key(path, size, mtime_ns)
    run = _record(job, params, key, now=now, path=path, source_trigger=trigger)
    if run is not None:
        what = "started" if run.status == RunStatus.QUEUED else f"recorded {run.status}"
        detail = f"{event} {printable(path)} ({size} bytes): {what} run #{run.pk}"
        if run.status == RunStatus.SKIPPED:
            detail += f" ({run.message})"
        record([Decision("file_started", job.pk, run.pk, trigger.pk, detail, now)])
    return run


def handle_run_file(path: str, size: int, mtime_ns: int, *, now: datetime) -> Run | None:
    """A settled RUN file: record the run it requests (once per state of the
    file) and consume the file; or leave `<name>.error` saying why not."""
    name = os.path.basename(path)
    wanted = run_request(name, settings.TAKT_RUN_FILE_PREFIX)
    if wanted is None:
        return None
    if isinstance(wanted, str):
        return _refuse(path, wanted)
    job = Job.objects.filter(pk=wanted).first()
    if job is None:
        return _refuse(path, f"no job with id {wanted}")
    if job.target in INTERNAL_TARGETS:
        return _refuse(path, f"job #{job.pk} runs only when Takt starts it ({job.target})")
    # The setting's names were checked at start (scheduler_project/takt_settings.py).
    granted = settings.TAKT_RUN_FILES_MAY_START
    lacking = [c for c in capabilities.needed_to_start(job) if c.codename not in granted]
    if lacking:
        # A file drop is no user: it starts what needs a capability only
        # where the operator granted it to RUN files (docs/security.md).
        names = ", ".join(sorted(c.codename for c in lacking))
        return _refuse(
            path,
            f"job #{job.pk} needs {names}, which RUN files may not start"
            " (TAKT_RUN_FILES_MAY_START)",
        )
    if job.parent_id is not None:
        return _refuse(
            path,
            f"job #{job.pk} is a child of job #{job.parent_id}: it runs only as part of its"
            f" parent's run; request the parent instead ({settings.TAKT_RUN_FILE_PREFIX}"
            f"{job.parent_id}.RUN)",
        )
    run = _record(job, None, dedupe_key(path, size, mtime_ns), now=now, path=path)
    if run is not None:
        what = "started" if run.status == RunStatus.QUEUED else f"recorded {run.status}"
        detail = f"run file {printable(path)}: {what} run #{run.pk}"
        if run.status == RunStatus.SKIPPED:
            detail += f" ({run.message})"
        record([Decision("file_started", job.pk, run.pk, None, detail, now)])
    _consume(path)
    return run


def _record(
    job: Job,
    params: dict[str, Any] | None,
    key: str,
    *,
    now: datetime,
    path: str,
    source_trigger: Trigger | None = None,
) -> Run | None:
    if Run.objects.filter(job_id=job.pk, dedupe_key=key).exists():
        return None  # this state of the file already started its run
    try:
        with transaction.atomic():
            run = create_run(
                job,
                trigger=RunTrigger.FILE,
                now=now,
                params=params,
                dedupe_key=key,
                source_trigger=source_trigger,
                refuse=False,
            )
    except IntegrityError:  # another watcher recorded it first
        return None
    if run.status == RunStatus.QUEUED and not run.held:
        publish_after_commit([run])
    log.info(
        "file %s started run %s of job %s (%s)",
        printable(path),
        run.pk,
        job.pk,
        run.status,
        extra={"job_id": job.pk, "run_id": run.pk},
    )
    return run


def _refuse(path: str, why: str) -> None:
    """Leave `<path>.error` saying why (never through a link planted under
    that name: runs/folder_io.py), log it, and consume the request."""
    text = f"{timezone.now().isoformat(timespec='seconds')} not started: {why}\n"
    unwritten = write_beside(path, ".error", text)
    if unwritten:
        log.warning("did not write %s.error: %s", printable(path), unwritten)
    log.warning("run file %s refused: %s", printable(path), printable(why))
    _consume(path)
    return None


def _consume(path: str) -> None:
    try:  # checked when the settings are read
        done = done_parts(os.path.dirname(path), settings.TAKT_RUN_FILE_DONE_FOLDER)
    except ValueError as exc:
        log.warning("TAKT_RUN_FILE_DONE_FOLDER: %s; deleting the run file", exc)
        done = ()
    consume(path, done, stamp=timezone.now().strftime("%Y%m%dT%H%M%S%f"))
