"""What each long operation does when its run executes (F-93; started by
runs.operations.start_operation). Each reports a progress step per item
(a fire time, a job) and a log line per job, and ends the run `failed`
with a message naming what failed; what succeeded before stays done,
except for an import, which is all or nothing.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from typing import Any

from django.contrib.auth import get_user_model
from django.utils import timezone

from jobs import audit, capabilities
from jobs.errors import InvalidInput, QueuePaused, TaktError
from jobs.exchange import InvalidDefinition
from jobs.importing import action_counts, import_text, plan_lines, problem_texts, summary_line
from jobs.models import Job
from jobs.policies import INTERNAL_TARGETS
from runs.backfill import backfill, backfill_fire_times
from runs.context import JobFailed
from runs.models import Run, RunTrigger
from runs.operations import KINDS, moment
from runs.rerun import failed_since, rerun
from runs.services import enqueue_job


def perform(job: Any) -> dict[str, Any]:
    """The target of the operations job: run the operation its params name
    (``operation``). Fails the run when the params name none."""
    kind = job.params.get("operation")
    body = BODIES.get(kind) if isinstance(kind, str) else None
    if body is None:
        raise JobFailed(
            f"params.operation: must be one of {', '.join(KINDS)}, got {kind!r}"
            " (operations are started from the admin, or with runs.operations.start_operation)"
        )
    return body(job, job.params)


def _fail_if(job: Any, failures: list[str], *, what: str, of: int) -> None:
    for line in failures:
        job.log(f"failed: {line}")
    if failures:
        raise JobFailed(f"{what} failed for {len(failures)} of {of} job(s): " + "; ".join(failures))


def starter(job: Any) -> tuple[str, Any | None]:
    """Who started the operation: the run's `started_by` (a field no caller
    writes, runs.operations.start_operation) and that user as he is now
    (None when there is none: then he holds no capability)."""
    name = Run.objects.filter(pk=job.run_id).values_list("started_by", flat=True).first() or ""
    if not name:
        return "", None
    model = get_user_model()
    return name, model._default_manager.filter(**{model.USERNAME_FIELD: name}).first()


def refusal(user: Any, target: Job) -> str | None:
    """Why `user` may not start runs of `target` (None: he may): an
    internal target, or a capability he lacks now (jobs.capabilities)."""
    if target.target in INTERNAL_TARGETS:
        return f"runs only when Takt starts it ({target.target})"
    lacking = capabilities.missing(user, capabilities.needed_to_start(target))
    return capabilities.one_line(lacking) if lacking else None


def permitted_jobs(job: Any, ids: list[int]) -> tuple[list[Job], list[str]]:
    """The jobs of `ids` (in that order) whose runs the operation's starter
    may start now, and a failure line for each other one (gone, or
    `refusal`)."""
    found = Job.objects.in_bulk(ids)
    _name, user = starter(job)
    targets: list[Job] = []
    failures: list[str] = []
    for pk in ids:
        target = found.get(pk)
        refused = "no longer exists" if target is None else refusal(user, target)
        if refused or target is None:
            failures.append(f"{target or f'job #{pk}'}: {refused}")
        else:
            targets.append(target)
    return targets, failures


def backfill_jobs(job: Any, params: dict[str, Any]) -> dict[str, Any]:
    """A backfill (runs.backfill) of each job over [start, end]. Progress:
    fire times handled of all the jobs' fire times in the range; a job
    whose runs its starter may not start is left out (`refusal`)."""
    start, end = moment(params["start"], "start"), moment(params["end"], "end")
    ids: list[int] = params["jobs"]
    targets, failures = permitted_jobs(job, ids)
    planned: list[tuple[Job, list[Any]]] = []
    for target in targets:
        try:
            planned.append((target, backfill_fire_times(target, start=start, end=end)))
        except InvalidInput as exc:
            failures.append(f"{target}: {exc}")
    total = sum(len(times) for _, times in planned)
    job.log(f"backfill from {start.isoformat()} to {end.isoformat()}: {total} fire time(s)")
    job.progress(0, total, f"{total} fire time(s) in {len(planned)} job(s)")
    done, counts = 0, Counter[str]()
    for target, times in planned:
        result = backfill(
            target,
            start=start,
            end=end,
            now=timezone.now(),
            fire_times=times,
            on_progress=_offset(job, done, total, str(target)),
        )
        done += len(times)
        job.progress(done, total, f"{target}: done")
        for line in result.unlisted:
            job.log(f"{target}: not listed: {line}")
        counts.update(
            fire_times=len(times), created=len(result.created), already_ran=result.already_ran
        )
        created = f" (#{result.created[0]} to #{result.created[-1]})" if result.created else ""
        job.log(
            f"{target}: {len(times)} fire time(s), {result.already_ran} already had a run,"
            f" {len(result.created)} run(s) created{created}"
        )
        if result.skipped_reason:
            failures.append(f"{target}: nothing created: {result.skipped_reason}")
    _fail_if(job, failures, what="backfill", of=len(ids))
    return {"jobs": len(ids), **counts}


def _offset(job: Any, base: int, total: int, label: str) -> Callable[[int, int], None]:
    def report(handled: int, of: int) -> None:
        job.progress(base + handled, total, f"{label}: {handled} of {of} fire time(s)")

    return report


def run_jobs(job: Any, params: dict[str, Any]) -> dict[str, Any]:
    """A manual run of each job, as "Run now" starts it (also disabled
    jobs); a job only when whoever started it may start its runs now
    (`refusal`). Progress: jobs handled. A paused queue stops it."""
    ids: list[int] = params["jobs"]
    found = Job.objects.in_bulk(ids)
    failures: list[str] = []
    counts = Counter[str]()
    _name, user = starter(job)
    for n, pk in enumerate(ids, start=1):
        target = found.get(pk)
        label = str(target) if target is not None else f"job #{pk}"
        try:
            if target is None:
                raise TaktError("no longer exists")
            refused = refusal(user, target)
            if refused:
                raise TaktError(refused)
            run = enqueue_job(target, trigger=RunTrigger.MANUAL)
        except QueuePaused as exc:
            raise JobFailed(f"stopped after {n - 1} of {len(ids)} job(s): {exc}") from None
        except TaktError as exc:
            failures.append(f"{label}: {exc}")
        else:
            counts[run.status] += 1
            job.log(
                f"{label}: run #{run.pk} {run.status}" + (f": {run.message}" if run.message else "")
            )
        job.progress(n, len(ids), label)
    _fail_if(job, failures, what="run now", of=len(ids))
    return dict(counts)


def rerun_failed(job: Any, params: dict[str, Any]) -> dict[str, Any]:
    """Each job's runs that went wrong since `since` and that nothing
    repeats yet, run again (runs/rerun.py), oldest first; a job only when
    whoever started it may start its runs now (`refusal`). Progress: runs
    handled of all the jobs' such runs. A paused queue stops it."""
    since = moment(params["since"], "since")
    ids: list[int] = params["jobs"]
    targets, failures = permitted_jobs(job, ids)
    planned = [(target, failed_since(target.pk, since)) for target in targets]
    total = sum(len(runs) for _, runs in planned)
    job.log(f"re-run of the runs that went wrong since {since.isoformat()}: {total} run(s)")
    job.progress(0, total, f"{total} run(s) in {len(planned)} job(s)")
    done, counts = 0, Counter[str]()
    for target, run_ids in planned:
        for run_id in run_ids:
            try:
                new = rerun(run_id)
            except QueuePaused as exc:
                raise JobFailed(f"stopped after {done} of {total} run(s): {exc}") from None
            except TaktError as exc:
                failures.append(f"{target}: run #{run_id}: {exc}")
            else:
                counts[new.status] += 1
                job.log(f"{target}: run #{run_id} → run #{new.pk} {new.status}")
            done += 1
            job.progress(done, total, str(target))
    _fail_if(job, failures, what="re-run", of=len(ids))
    return {"runs": total, **counts}


def import_jobs(job: Any, params: dict[str, Any]) -> dict[str, Any]:
    """An import of jobs (jobs.importing), all or nothing. Progress: a step
    per job checked and per job saved. The output is the plan, as
    `import_jobs` prints it; refused, the problems, one per line. A job
    that needs a capability only when whoever started it holds it now."""
    name, user = starter(job)
    by = f"{name or 'an operator'} (import, run #{job.run_id})"
    source = params.get("source") or "pasted text"
    job.log(f"importing jobs from {source}")
    try:
        # Started in the admin: its changes are recorded as from there (F-120).
        with audit.recording(audit.Source.ADMIN, by=by, user=user):
            items = import_text(
                params["text"],
                params["format"],
                now=timezone.now(),
                by=by,
                on_progress=job.progress,
                # What its starter may do, as he is now (jobs.capabilities).
                granted=capabilities.granted_to(user),
            )
    except InvalidDefinition as exc:
        problems = problem_texts(exc)
        for text in problems:
            job.log(text)
        one_line = "; ".join(" ".join(text.split()) for text in problems)
        raise JobFailed(f"nothing imported: {len(problems)} problem(s): {one_line}") from None
    for line in plan_lines(items):
        job.log(line)
    job.log(summary_line(items, dry_run=False))
    return action_counts(items)


BODIES: dict[str, Callable[[Any, dict[str, Any]], dict[str, Any]]] = {
    "backfill": backfill_jobs,
    "bulk_run": run_jobs,
    "rerun_failed": rerun_failed,
    "import_jobs": import_jobs,
}
