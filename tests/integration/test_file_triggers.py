"""File triggers and RUN files (F-16, F-17) against the real database,
Redis and file system, the watcher driven step by step with an injected
clock: a file written in chunks and renamed starts one run with its path;
a second watcher of the same folder starts nothing; a RUN file starts its
job once and is consumed; bad requests leave a `.error` file; bad
triggers are refused naming the field, with nothing stored."""

from __future__ import annotations

import os
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from django.core.exceptions import ValidationError
from django.test import override_settings

from jobs.models import Job, Trigger
from jobs.validation import watch_warnings
from runs.models import Run, RunStatus, RunTrigger
from runs.queue import set_maintenance
from runs.watching import Watcher
from tests.integration.api_helpers import SessionClient, user_with
from tests.integration.conftest import make_job

pytestmark = pytest.mark.django_db

S = timedelta(seconds=1)


class Clock:
    def __init__(self) -> None:
        self.now = datetime.now(UTC)

    def __call__(self) -> datetime:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += timedelta(seconds=seconds)


@pytest.fixture
def clock() -> Clock:
    return Clock()


@pytest.fixture
def watchers(redis_client, clock):
    made: list[Watcher] = []

    def make(name: str) -> Watcher:
        watcher = Watcher(name=name, clock=clock)
        made.append(watcher)
        return watcher

    yield make
    for watcher in made:
        watcher.release_all()


def file_trigger(job: Job, folder: Path, **fields: Any) -> Trigger:
    trigger = Trigger(job=job, kind="file", watch_folder=str(folder), **fields)
    trigger.full_clean(exclude=["job"])
    trigger.save()
    return trigger


def write_in_chunks(path: Path, chunks: list[bytes]) -> None:
    with open(path, "wb") as out:
        for chunk in chunks:
            out.write(chunk)
            out.flush()


def settle(watcher: Watcher, clock: Clock, seconds: float = 3) -> None:
    """Let the watcher look (refresh and scan), then pass the settle time."""
    watcher.refresh()
    for folder in watcher.held.values():
        folder.scan(folder.current())
    watcher.step()
    clock.advance(seconds)
    watcher.step()


def delivered(watcher: Watcher, path: Path) -> None:
    """Wait until the watcher's observer thread has handed over the events
    of the last write to `path` (at most 5 s): the test moves the injected
    clock next, and an event delivered after that would count as a change
    at the later time (seen on a slow host: a growing file's append arrived
    after the clock had moved on, so it had not settled when expected)."""
    size = path.stat().st_size
    deadline = time.monotonic() + 5
    quiet_since = None
    while True:
        seen = [
            w.settler.pending.get(str(path))
            for folder in watcher.held.values()
            for w in folder.current()
        ]
        queues = [f.observer.event_queue for f in watcher.held.values() if f.observer]
        idle = any(p is not None and p.size == size for p in seen) and not any(
            q.unfinished_tasks for q in queues
        )
        if not idle:
            quiet_since = None
        elif quiet_since is None:
            quiet_since = time.monotonic()
        elif time.monotonic() - quiet_since >= 0.3:  # a close follows its write's modify
            return
        assert time.monotonic() < deadline, f"the watcher saw no event of {path} in 5 s"
        time.sleep(0.01)


def test_a_file_written_in_chunks_and_renamed_starts_one_run_with_its_path(
    tmp_path, clock, watchers
):
    job = make_job("import orders", params={"mode": "full"})
    trigger = file_trigger(job, tmp_path, watch_pattern="*.csv")
    watcher = watchers("a")
    watcher.refresh()
    assert list(watcher.held) == [str(tmp_path)]

    partial = tmp_path / "orders.csv.part"
    write_in_chunks(partial, [b"id,qty\n", b"1,5\n", b"2,7\n"])
    os.rename(partial, tmp_path / "orders.csv")
    settle(watcher, clock)
    settle(watcher, clock)  # looked at again: the same file starts nothing more

    run = Run.objects.get(job=job)
    assert run.trigger == RunTrigger.FILE and run.source_trigger_id == trigger.pk
    assert run.params == {
        "mode": "full",
        "path": str(tmp_path / "orders.csv"),
        "event": run.params["event"],
        "size": 15,
    }
    assert run.params["event"] in ("found", "moved", "created")
    assert run.status == RunStatus.QUEUED


def test_a_file_that_is_still_growing_waits_for_its_settle_time(tmp_path, clock, watchers):
    job = make_job("import")
    file_trigger(job, tmp_path, watch_pattern="*.csv", settle_seconds=5)
    watcher = watchers("a")
    watcher.refresh()
    path = tmp_path / "big.csv"
    path.write_bytes(b"x" * 10)
    settle(watcher, clock, seconds=3)
    assert not Run.objects.filter(job=job).exists()  # 3 s of the 5
    with open(path, "ab") as out:
        out.write(b"y" * 10)
    delivered(watcher, path)
    settle(watcher, clock, seconds=3)
    assert not Run.objects.filter(job=job).exists()  # it changed: waits again
    clock.advance(3)
    watcher.step()
    assert Run.objects.get(job=job).params["size"] == 20


def test_a_changed_file_starts_another_run(tmp_path, clock, watchers):
    job = make_job("import")
    file_trigger(job, tmp_path, watch_pattern="*.csv")
    watcher = watchers("a")
    path = tmp_path / "a.csv"
    path.write_bytes(b"one")
    settle(watcher, clock)
    path.write_bytes(b"one two")
    delivered(watcher, path)
    settle(watcher, clock)
    assert [r.params["size"] for r in Run.objects.filter(job=job).order_by("pk")] == [3, 7]


def test_a_second_watcher_of_the_folder_starts_nothing_and_takes_over_when_the_first_stops(
    tmp_path, clock, watchers
):
    job = make_job("import")
    file_trigger(job, tmp_path, watch_pattern="*.csv")
    first, second = watchers("first"), watchers("second")
    first.refresh()
    second.refresh()
    assert list(first.held) == [str(tmp_path)] and second.held == {}

    (tmp_path / "a.csv").write_bytes(b"a")
    settle(first, clock)
    settle(second, clock)
    assert Run.objects.filter(job=job).count() == 1

    first.release_all()  # stopped (a killed one's lease lapses after LEASE_SECONDS)
    (tmp_path / "b.csv").write_bytes(b"b")
    settle(second, clock)
    assert list(second.held) == [str(tmp_path)]
    assert sorted(Path(r.params["path"]).name for r in Run.objects.filter(job=job)) == [
        "a.csv",
        "b.csv",
    ]  # a.csv found again by the new watcher: its run exists, no second one


def test_two_watchers_that_both_see_a_file_start_one_run(tmp_path, clock, watchers):
    """As two machines watching one network folder would (the lease is per
    path, so here the second has no lease: its watch is driven directly)."""
    from jobs.core.watch import FileSpec
    from runs.watching import Watch, start_for_file

    job = make_job("import")
    trigger = file_trigger(job, tmp_path, watch_pattern="*.csv")
    path = tmp_path / "a.csv"
    path.write_bytes(b"abc")
    state = os.stat(path)
    watch = Watch(FileSpec(str(tmp_path), "*.csv"), trigger.pk, job.pk, clock())
    runs = [
        start_for_file(watch, str(path), 3, state.st_mtime_ns, "created", now=clock())
        for _ in range(2)
    ]
    assert runs[0] is not None and runs[1] is None
    assert Run.objects.filter(job=job).count() == 1


def test_a_disabled_job_or_trigger_is_not_watched(tmp_path, clock, watchers):
    job = make_job("import", enabled=False)
    file_trigger(job, tmp_path)
    watcher = watchers("a")
    (tmp_path / "a.csv").write_bytes(b"a")
    settle(watcher, clock)
    assert watcher.held == {} and not Run.objects.exists()


@pytest.fixture
def run_folder(tmp_path):
    folder = tmp_path / "requests"
    folder.mkdir()
    with override_settings(TAKT_RUN_FILE_FOLDERS=[str(folder)], TAKT_RUN_FILE_DONE_FOLDER=""):
        yield folder


def test_a_run_file_starts_its_job_once_and_is_consumed(run_folder, clock, watchers):
    job = make_job("report", enabled=False)  # requested like "Run now": disabled or not
    watcher = watchers("a")
    (run_folder / "upload.tmp").write_text("")
    os.rename(run_folder / "upload.tmp", run_folder / f"takt{job.pk}.run")
    settle(watcher, clock)
    settle(watcher, clock)

    run = Run.objects.get(job=job)
    assert (run.trigger, run.status, run.params) == (RunTrigger.FILE, RunStatus.QUEUED, {})
    assert list(run_folder.iterdir()) == []


def test_a_run_file_can_be_kept_in_a_done_folder(run_folder, clock, watchers):
    job = make_job("report")
    with override_settings(TAKT_RUN_FILE_DONE_FOLDER="done"):
        watcher = watchers("a")
        (run_folder / f"Takt{job.pk}.RUN").write_text("please")
        settle(watcher, clock)
    assert Run.objects.filter(job=job).count() == 1
    assert [p.name for p in (run_folder / "done").iterdir()] == [f"Takt{job.pk}.RUN"]


def test_a_run_file_for_an_unknown_or_child_job_leaves_an_error_file(run_folder, clock, watchers):
    parent = make_job("parent")
    child = make_job("child", parent=parent)
    watcher = watchers("a")
    for name in ("Takt999999.RUN", f"Takt{child.pk}.RUN", "TaktX.RUN", "notes.txt"):
        (run_folder / name).write_text("")
    settle(watcher, clock)

    assert not Run.objects.exists()
    assert sorted(p.name for p in run_folder.iterdir()) == sorted(
        [
            "Takt999999.RUN.error",
            f"Takt{child.pk}.RUN.error",
            "TaktX.RUN.error",
            "notes.txt",  # not a request: left alone
        ]
    )
    assert "no job with id 999999" in (run_folder / "Takt999999.RUN.error").read_text()
    assert (
        f"request the parent instead (Takt{parent.pk}.RUN)"
        in (run_folder / f"Takt{child.pk}.RUN.error").read_text()
    )
    assert "name it Takt<job id>.RUN" in (run_folder / "TaktX.RUN.error").read_text()


def test_a_run_file_during_maintenance_is_recorded_refused(run_folder, clock, watchers):
    job = make_job("report")
    set_maintenance(True, now=clock())
    watcher = watchers("a")
    (run_folder / f"Takt{job.pk}.RUN").write_text("")
    settle(watcher, clock)

    run = Run.objects.get(job=job)
    assert run.status == RunStatus.SKIPPED and "maintenance" in run.message
    assert list(run_folder.iterdir()) == []


@pytest.mark.parametrize(
    ("fields", "field", "words"),
    [
        ({"watch_folder": ""}, "watch_folder", "required for a file trigger"),
        ({"watch_folder": "inbox"}, "watch_folder", "must be an absolute path"),
        ({"watch_folder": "/nonexistent/takt-inbox"}, "watch_folder", "does not exist on"),
        ({"watch_pattern": "in/*.csv"}, "watch_pattern", "is a path"),
        ({"settle_seconds": 4000}, "settle_seconds", "3600"),
    ],
)
def test_a_bad_file_trigger_is_refused_naming_the_field(tmp_path, fields, field, words):
    job = make_job("import")
    trigger = Trigger(job=job, kind="file", **{"watch_folder": str(tmp_path), **fields})
    with pytest.raises(ValidationError) as caught:
        trigger.full_clean(exclude=["job"])
    assert any(words in m for m in caught.value.message_dict[field]), caught.value.message_dict


def test_a_folder_that_is_a_file_is_refused(tmp_path):
    (tmp_path / "plain").write_text("")
    trigger = Trigger(job=make_job("import"), kind="file", watch_folder=str(tmp_path / "plain"))
    with pytest.raises(ValidationError) as caught:
        trigger.full_clean(exclude=["job"])
    assert "is a file, not a folder" in caught.value.message_dict["watch_folder"][0]


def test_a_pattern_that_matches_nothing_there_is_warned_not_refused(tmp_path):
    (tmp_path / "ORDERS.CSV").write_text("")
    job = make_job("import", overlap_policy="buffer_all")
    trigger = file_trigger(job, tmp_path, watch_pattern="*.csv")
    (warning,) = watch_warnings(trigger)
    assert "no file in" in warning and "case-sensitively" in warning and "ORDERS.CSV" in warning


def test_a_file_trigger_on_a_job_that_skips_while_busy_is_warned(tmp_path):
    trigger = file_trigger(make_job("import"), tmp_path)  # overlap policy skip
    (warning,) = watch_warnings(trigger)
    assert "is recorded skipped; 'buffer_all' runs each file in turn" in warning


def test_the_api_refuses_a_file_trigger_on_a_missing_folder_and_stores_nothing():
    client = SessionClient(
        user_with("takt_jobs.view_job", "takt_jobs.add_job", "takt_jobs.change_job")
    )
    body = {
        "name": "import",
        "target": "tests.echo",
        "triggers": [{"kind": "file", "watch_folder": "/nonexistent/takt-inbox"}],
    }
    response = client.send("post", "/api/v1/jobs", body)
    assert response.status_code == 400, response.json()
    assert "does not exist on" in str(response.json())
    assert not Job.objects.filter(name="import").exists()


def test_the_api_creates_a_file_trigger_and_reads_it_back(tmp_path):
    client = SessionClient(
        user_with(
            "takt_jobs.view_job",
            "takt_jobs.add_job",
            "takt_jobs.change_job",
            "takt_jobs.watch_folders",
        )
    )
    trigger = {
        "kind": "file",
        "watch_folder": str(tmp_path),
        "watch_pattern": "*.csv",
        "watch_recursive": True,
        "settle_seconds": 5,
    }
    response = client.send("post", "/api/v1/jobs", {"name": "import", "target": "tests.echo",
                                                    "triggers": [trigger]})  # fmt: skip
    assert response.status_code == 201, response.json()
    (stored,) = client.get(f"/api/v1/jobs/{response.json()['id']}").json()["triggers"]
    assert {k: stored[k] for k in trigger} == trigger
    assert stored["next_run_at"] is None


def test_a_redis_that_lost_its_data_costs_the_watcher_its_lease_for_one_refresh_only(
    tmp_path, clock, watchers, redis_client
):
    job = make_job("import", overlap_policy="buffer_all")
    file_trigger(job, tmp_path, watch_pattern="*.csv")
    watcher = watchers("a")
    watcher.refresh()
    redis_client.flushdb()  # restarted without persistence: the lease is gone

    watcher.refresh()  # the renewal fails: dropped, and taken again at once
    assert list(watcher.held) == [str(tmp_path)]
    assert redis_client.get(next(iter(redis_client.scan_iter("*:watch:*"))))
    (tmp_path / "a.csv").write_bytes(b"a")
    settle(watcher, clock)
    assert Run.objects.filter(job=job).count() == 1


def test_a_file_stamped_a_moment_before_its_trigger_by_a_coarse_clock_is_new(
    tmp_path, clock, watchers
):
    """The file system stamps a file with its coarse clock (the last timer
    tick): a file written right after its trigger was saved can carry a time
    a few milliseconds before it. It is found by the scan all the same; a
    file that was there long before is not."""
    job = make_job("import")
    trigger = file_trigger(job, tmp_path, watch_pattern="*.csv")
    created_ns = int(trigger.created_at.timestamp() * 1e9)
    fresh, old = tmp_path / "fresh.csv", tmp_path / "old.csv"
    fresh.write_bytes(b"fresh")
    old.write_bytes(b"old")
    os.utime(fresh, ns=(created_ns - 4_000_000, created_ns - 4_000_000))  # one tick before
    os.utime(old, ns=(created_ns - 3600 * 10**9, created_ns - 3600 * 10**9))  # an hour before
    settle(watchers("a"), clock)
    assert [r.params["path"] for r in Run.objects.filter(job=job)] == [str(fresh)]


def test_a_run_file_for_a_parent_starts_the_parent(run_folder, clock, watchers):
    """Issue 27, defect 4: the child's refusal says "request the parent
    instead (Takt<parent>.RUN)", and that request starts the parent."""
    parent = make_job("Nightly", target="takt.children")
    make_job("Import", parent=parent)
    watcher = watchers("a")
    (run_folder / f"Takt{parent.pk}.RUN").write_text("")
    settle(watcher, clock)

    run = Run.objects.get(job=parent)
    assert (run.trigger, run.status) == (RunTrigger.FILE, RunStatus.QUEUED)
    assert list(run_folder.iterdir()) == []


def test_a_run_file_for_a_parent_of_a_command_job_needs_run_programs(run_folder, clock, watchers):
    parent = make_job("Nightly", target="takt.children")
    Job.objects.create(name="sh", kind="command", command=["id"], parent=parent)
    watcher = watchers("a")
    (run_folder / f"Takt{parent.pk}.RUN").write_text("")
    settle(watcher, clock)

    assert not Run.objects.exists()
    assert "needs run_programs" in (run_folder / f"Takt{parent.pk}.RUN.error").read_text()
    with override_settings(TAKT_RUN_FILES_MAY_START=["run_programs"]):
        (run_folder / f"Takt{parent.pk}.RUN").write_text("again")
        # Its events handed over before the clock moves (CI: the modify
        # arrived after the settle time had passed, and no run was made).
        delivered(watcher, run_folder / f"Takt{parent.pk}.RUN")
        settle(watcher, clock)
    assert Run.objects.get(job=parent).status == RunStatus.QUEUED
