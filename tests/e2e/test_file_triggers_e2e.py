"""Watched folders (F-16, F-17) with real beat and worker processes: a file
written in three chunks and renamed into a watched folder starts exactly
one run, which gets its path; a `Takt<id>.RUN` file starts its job once
and is consumed; two beats watching the same folder start one run per
file, and when the one holding the folder is killed (SIGKILL), the other
takes the folder over and goes on; a restart of Redis without persistence
(the leases gone) costs the watcher its folder for a moment only."""

from __future__ import annotations

import os
import signal
import time
from pathlib import Path

import pytest

from jobs.models import Job, Trigger
from runs.models import Run, RunStatus, RunTrigger
from runs.watching import LEASE_SECONDS
from tests.e2e.conftest import wait_until
from tests.processes import RedisServer, free_port

pytestmark = [pytest.mark.e2e, pytest.mark.django_db(transaction=True)]

SETTLE_S = 1


def watched_job(folder: Path, name: str = "Import orders") -> Job:
    # each file waits its turn (with the default `skip`, a file arriving
    # while a run is active is recorded skipped)
    job = Job.objects.create(
        name=name, target="tests.echo", overlap_policy="buffer_all", max_buffered=100
    )
    trigger = Trigger(
        job=job, kind="file", watch_folder=str(folder), watch_pattern="*.csv",
        settle_seconds=SETTLE_S,
    )  # fmt: skip
    trigger.full_clean(exclude=["job"])
    trigger.save()
    return job


def watching(beat_proc, folder: Path) -> None:
    beat_proc.wait_for(f"watching {folder}", 15)


def test_a_file_written_in_three_chunks_and_renamed_starts_exactly_one_run(tmp_path, worker, beat):
    job = watched_job(tmp_path)
    watching(beat(), tmp_path)

    part = tmp_path / "orders.csv.part"
    with open(part, "wb") as out:
        for chunk in (b"id,qty\n", b"1,5\n", b"2,7\n"):
            out.write(chunk)
            out.flush()
            time.sleep(0.4)  # slower than the settle time would forgive without the rename
    os.rename(part, tmp_path / "orders.csv")

    run = wait_until(
        lambda: Run.objects.filter(job=job, status=RunStatus.SUCCEEDED).first(), 20, "the run"
    )
    time.sleep(SETTLE_S + 2)  # a second run would have started by now
    assert Run.objects.filter(job=job).count() == 1
    assert run.trigger == RunTrigger.FILE
    assert run.params["path"] == str(tmp_path / "orders.csv") and run.params["size"] == 15
    assert f"('path', '{tmp_path / 'orders.csv'}')" in run.output


def test_a_run_file_starts_its_job_once_and_is_consumed(tmp_path, worker, beat):
    job = Job.objects.create(name="Monthly report", target="tests.echo")
    folder = tmp_path / "requests"
    folder.mkdir()
    watching(beat(TAKT_RUN_FILE_FOLDERS=str(folder)), folder)

    (folder / f"Takt{job.pk}.RUN").write_text("")

    run = wait_until(
        lambda: Run.objects.filter(job=job, status=RunStatus.SUCCEEDED).first(), 20, "the run"
    )
    wait_until(lambda: not any(folder.iterdir()), 5, "the RUN file to be consumed")
    time.sleep(2)
    assert Run.objects.filter(job=job).count() == 1
    assert run.trigger == RunTrigger.FILE


# two beats, a kill and the lock's TTL: about 20 s alone
@pytest.mark.timeout(120)
def test_two_beats_on_one_folder_start_one_run_per_file_and_survive_the_holder_killed(
    tmp_path, worker, beat
):
    job = watched_job(tmp_path)
    first, second = beat(), beat()
    deadline = time.monotonic() + 15
    while time.monotonic() < deadline and f"watching {tmp_path}" not in first.log() + second.log():
        time.sleep(0.1)
    holder, other = (first, second) if f"watching {tmp_path}" in first.log() else (second, first)
    assert f"watching {tmp_path}" not in other.log()  # one watcher per folder

    for name in ("a.csv", "b.csv", "c.csv"):
        (tmp_path / name).write_text(name)
    wait_until(
        lambda: Run.objects.filter(job=job, status=RunStatus.SUCCEEDED).count() == 3, 20, "3 runs"
    )

    os.kill(holder.pid, signal.SIGKILL)
    (tmp_path / "d.csv").write_text("d")
    other.wait_for(f"watching {tmp_path}", LEASE_SECONDS + 10)  # the lease lapsed: taken over
    wait_until(
        lambda: Run.objects.filter(job=job, status=RunStatus.SUCCEEDED).count() == 4,
        20,
        "the file dropped while nobody watched",
    )
    time.sleep(SETTLE_S + 2)
    paths = sorted(Path(r.params["path"]).name for r in Run.objects.filter(job=job))
    assert paths == ["a.csv", "b.csv", "c.csv", "d.csv"]  # each once, none again


def test_a_redis_restart_without_persistence_loses_no_file_and_runs_none_twice(
    tmp_path, start_process, beat
):
    redis_dir = tmp_path / "redis"
    redis_dir.mkdir()
    server = RedisServer(free_port(), redis_dir)
    server.start()
    folder = tmp_path / "inbox"
    folder.mkdir()
    try:
        job = watched_job(folder)
        worker = start_process("worker", REDIS_URL=server.url)
        watcher = beat(REDIS_URL=server.url)
        watching(watcher, folder)
        (folder / "before.csv").write_text("before")
        wait_until(
            lambda: Run.objects.filter(job=job, status=RunStatus.SUCCEEDED).count() == 1,
            20,
            "the run of the file before the restart",
        )

        server.stop()  # its data is gone: no RDB, no AOF, so the lease too
        server.start()
        (folder / "after.csv").write_text("after")

        wait_until(
            lambda: Run.objects.filter(job=job, status=RunStatus.SUCCEEDED).count() == 2,
            40,
            "the run of the file dropped at the restart",
        )
        time.sleep(SETTLE_S + 4)  # a rescan after the re-take would have doubled by now
        paths = sorted(Path(r.params["path"]).name for r in Run.objects.filter(job=job))
        assert paths == ["after.csv", "before.csv"]
        assert watcher.log().count(f"takt.watching watching {folder}") == 2  # taken again
        assert "Traceback" not in watcher.log()
        worker.stop()
    finally:
        server.stop()
