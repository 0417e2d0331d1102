"""Who may touch script jobs, and the audit of every change of a script
(F-02 `script`).

* Only users with `takt_jobs.write_scripts` (superusers, and whom they
  grant it) create, change, delete or run script jobs, in the admin,
  through the API and by importing; `may_write_scripts` says whether a
  user may, `superuser_named` the same for the user name an operation
  (an import started in the admin) carries. `touches_scripts` says whether
  a change concerns a script job: the job is one, or becomes one.
* Every create, change and delete of a script's source is on the job's
  audit trail (F-120, jobs.audit: who, from where, before and after),
  whose History shows the script's unified diff (jobs.history). Until
  issue 29 it was a row of runs.AuditRecord; those rows stay.
"""

from __future__ import annotations

from typing import Any

from django.contrib.auth import get_user_model
from django.utils.translation import gettext_noop

from jobs.capabilities import SCRIPTS, holds
from jobs.policies import JobKind

# Marked, not translated here: the API and operations keep it as it is;
# the admin shows gettext(SUPERUSERS_ONLY).
SUPERUSERS_ONLY = gettext_noop(
    "only users with the permission “Can create, change and run script jobs”"
    " may create, change, delete or run script jobs"
)


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
