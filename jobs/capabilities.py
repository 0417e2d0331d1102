"""What a job can do beyond calling Takt's registered functions, and the
permission each needs (least privilege, docs/security.md).

`change_job` lets a user edit jobs; it does not let him run programs. Five
capabilities are permissions of their own, on the Job model
(``takt_jobs.<codename>``). A job *needs* a capability when it has it:

===================  =====================================================
``run_programs``     a command job (a program, its shell, cwd, env)
``run_celery_tasks`` a callable job whose target is not a function
                     registered with @takt_job: a Celery task by name, with
                     the job's positional args
``start_remote_runs`` a job with target ``takt.remote_run`` (it sends a
                     token from the worker's environment to a URL)
``watch_folders``    a job with a file trigger (it reads a folder)
``write_scripts``    a script job (Python source)
===================  =====================================================

A user may create, change, delete or start (Run now, the API, a bulk run,
a backfill) a job only while he holds every capability the job needs,
before and after the change; starting a parent also needs what its
children need (`needed_to_start`). A change of only the operator's fields
(enabled, the pause) needs none: whoever may change jobs may switch one
off. Superusers hold every permission; settings and code (TAKT_JOBS,
@takt_job(schedule=…), `manage.py import_jobs`) are trusted as the shell.
The checks are here; the admin, the API, imports and RUN files call them.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from django.utils.translation import gettext, gettext_noop

from jobs.policies import JobKind, TriggerKind

REMOTE_TARGET = "takt.remote_run"


@dataclass(frozen=True)
class Capability:
    codename: str
    label: str  # the permission's name, as the admin's user page lists it
    field: str  # the job field a refusal names

    @property
    def perm(self) -> str:
        return f"takt_jobs.{self.codename}"


PROGRAMS = Capability(
    "run_programs", gettext_noop("Can create, change and run command jobs (programs)"), "kind"
)
TASKS = Capability(
    "run_celery_tasks",
    gettext_noop("Can create, change and run jobs that call a Celery task by name"),
    "target",
)
REMOTE = Capability(
    "start_remote_runs",
    gettext_noop("Can create, change and run remote runs (takt.remote_run)"),
    "target",
)
FOLDERS = Capability(
    "watch_folders",
    gettext_noop("Can create, change and run jobs with file triggers"),
    "triggers",
)
SCRIPTS = Capability(
    "write_scripts", gettext_noop("Can create, change and run script jobs"), "kind"
)
ALL = (PROGRAMS, TASKS, REMOTE, FOLDERS, SCRIPTS)
# Job.Meta.permissions
PERMISSIONS = tuple((c.codename, c.label) for c in ALL)


def needed(kind: str, target: str, trigger_kinds: Iterable[str] = ()) -> frozenset[Capability]:
    """The capabilities a job of `kind` with `target` and triggers of
    `trigger_kinds` needs."""
    from jobs import registry

    caps: set[Capability] = set()
    if kind == JobKind.COMMAND:
        caps.add(PROGRAMS)
    elif kind == JobKind.SCRIPT:
        caps.add(SCRIPTS)
    elif kind == JobKind.CALLABLE:
        if target == REMOTE_TARGET:
            caps.add(REMOTE)
        elif not registry.is_registered(target):
            caps.add(TASKS)
    if TriggerKind.FILE in set(trigger_kinds):
        caps.add(FOLDERS)
    return frozenset(caps)


def needed_by_job(job: Any) -> frozenset[Capability]:
    """What a stored job needs (its triggers read from the database)."""
    if job is None or job.pk is None:
        return frozenset()
    kinds = job.triggers.values_list("kind", flat=True)
    return needed(job.kind, job.target, kinds)


def needed_to_start(job: Any) -> frozenset[Capability]:
    """What starting a stored job needs (Run now, the API, RUN files, a
    bulk run, a backfill): what it needs itself and, for a parent (F-04),
    what every job below it needs (its children, theirs, ...). The
    parent's run runs them, and a child's run never checks the starter
    again. One query per level of children."""
    caps = set(needed_by_job(job))
    if job is None or job.pk is None:
        return frozenset(caps)
    jobs = type(job)._default_manager  # the Job model (jobs.models imports this module)
    seen, level = {job.pk}, [job.pk]
    while level:
        children = list(jobs.filter(parent_id__in=level).exclude(pk__in=seen))
        level = [child.pk for child in children]
        seen.update(level)
        for child in children:
            caps |= needed_by_job(child)
    return frozenset(caps)


def needed_by_plan(plan: Any) -> frozenset[Capability]:
    """What a job planned by jobs.definitions needs: its new fields, and its
    new triggers (or its stored ones when the plan leaves them alone)."""
    job = plan.job
    if plan.triggers is None:
        kinds: Iterable[str] = (
            job.triggers.values_list("kind", flat=True) if job.pk is not None else ()
        )
    else:
        kinds = [t.trigger.kind for t in plan.triggers]
    return needed(job.kind, job.target, kinds)


def holds(user: Any, capability: Capability) -> bool:
    return bool(
        user is not None and getattr(user, "is_active", False) and user.has_perm(capability.perm)
    )


def granted_to(user: Any) -> frozenset[Capability]:
    return frozenset(c for c in ALL if holds(user, c))


def missing(user: Any, caps: Iterable[Capability]) -> list[Capability]:
    """The capabilities of `caps` that `user` lacks, in ALL's order."""
    wanted = set(caps)
    return [c for c in ALL if c in wanted and not holds(user, c)]


def refusal_text(capability: Capability) -> str:
    return gettext("this needs the permission “%(permission)s”") % {
        "permission": gettext(capability.label)
    }


def refusals(lacking: Iterable[Capability]) -> dict[str, list[str]]:
    """{field: [message]} for the lacking capabilities (an error naming the
    field, as validation errors do)."""
    errors: dict[str, list[str]] = {}
    for capability in lacking:
        errors.setdefault(capability.field, []).append(refusal_text(capability))
    return errors


def one_line(lacking: Iterable[Capability]) -> str:
    return "; ".join(f"{field}: {' '.join(m)}" for field, m in refusals(lacking).items())
