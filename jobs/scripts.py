"""Who may touch script jobs, and the audit of every change of a script
(F-02 `script`).

* Only users with `takt_jobs.write_scripts` (superusers, and whom they
  grant it) create, change, delete or run script jobs, in the admin,
  through the API and by importing; `may_write_scripts` says whether a
  user may, `superuser_named` the same for the user name an operation
  (an import started in the admin) carries. `touches_scripts` says whether
  a change concerns a script job: the job is one, or becomes one.
* Every create, change and delete of a script's source is recorded with who
  and a unified diff: the writes (jobs.definitions.save_definition, the
  admin's save and delete, the API's delete) call `record_script_change`,
  which sends `script_changed`; runs/script_audit.py, connected when the
  runs app is ready, writes the row of the audit table (runs.AuditRecord)
  in the writer's transaction. The signal keeps the dependency one way:
  the jobs app does not import the runs app.
"""

from __future__ import annotations

import logging
from typing import Any

from django.contrib.auth import get_user_model
from django.dispatch import Signal
from django.utils.translation import gettext_noop

from jobs.capabilities import SCRIPTS, holds
from jobs.core.script import script_diff
from jobs.models import Job
from jobs.policies import JobKind

log = logging.getLogger("takt.jobs")

# Marked, not translated here: the API and operations keep it as it is;
# the admin shows gettext(SUPERUSERS_ONLY).
SUPERUSERS_ONLY = gettext_noop(
    "only users with the permission “Can create, change and run script jobs”"
    " may create, change, delete or run script jobs"
)

# Sent with job_id, job_name, action ("create script", "change script",
# "delete script"), diff (unified) and by (who).
script_changed = Signal()


def may_write_scripts(user: Any) -> bool:
    """Whether `user` (a Django user, or None) may create, change, delete or
    run script jobs: an active user with `takt_jobs.write_scripts`
    (jobs.capabilities; superusers have it)."""
    return holds(user, SCRIPTS)


def superuser_named(username: object) -> bool:
    """Whether `username` names an active user who may write scripts (for
    an operation that carries the name of who started it)."""
    if not isinstance(username, str) or not username:
        return False
    model = get_user_model()
    user = model._default_manager.filter(**{model.USERNAME_FIELD: username}).first()
    return may_write_scripts(user)


def touches_scripts(stored_kind: str | None, new_kind: str | None) -> bool:
    """Whether a change of a job concerns a script job: the stored job is
    one (`stored_kind`; None for a new job) or the change makes it one."""
    return JobKind.SCRIPT in (stored_kind, new_kind)


def stored_script(job_pk: int | None) -> str:
    """The script as stored for this job ("" for a new job or none)."""
    if job_pk is None:
        return ""
    return Job.objects.filter(pk=job_pk).values_list("script", flat=True).first() or ""


def record_script_change(job: Any, before: str, *, by: str, deleted: bool = False) -> bool:
    """Record a change of `job`'s script from `before` to its current
    `script` (to "" with `deleted`) in the audit table, in the caller's
    transaction. Nothing when the source did not change. Returns whether
    a change was recorded."""
    after = "" if deleted else (job.script or "")
    if before == after:
        return False
    if deleted:
        action = "delete script"
    elif not before:
        action = "create script"
    else:
        action = "change script"
    label = f"job #{job.pk} {job.name}"
    diff = script_diff(before, after, label=label)
    script_changed.send(
        sender=type(job), job_id=job.pk, job_name=job.name, action=action, diff=diff, by=by
    )
    log.info("%s of job %s by %s", action, job.pk, by, extra={"job_id": job.pk})
    return True
