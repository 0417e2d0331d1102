"""Who may start a run of a job through the API (F-42, F-02, and the job's
capabilities, jobs.capabilities): a run request (`POST /api/v1/jobs/<id>/run`) and a re-run
(`POST /api/v1/runs/<id>/rerun`) ask the same."""

from __future__ import annotations

from django.utils.translation import gettext as _
from rest_framework.exceptions import PermissionDenied
from rest_framework.request import Request

from jobs import capabilities
from jobs.api.auth import is_user, job_token
from jobs.models import Job
from jobs.policies import INTERNAL_TARGETS, ApiTriggerPermission, JobKind
from jobs.scripts import SUPERUSERS_ONLY, may_write_scripts


def check_may_start(request: Request, job: Job) -> None:
    """Whether the caller may start a run of `job` through the API (a run
    request, a re-run): never one of Takt's own operations; as the job's
    API trigger permission says; a script job only for a script writer;
    with the capabilities the job needs. Raises PermissionDenied naming
    the field."""
    if job.target in INTERNAL_TARGETS:
        # the admin's long operations carry who started them: not from outside
        raise PermissionDenied(
            {"target": [f"job #{job.pk} runs only when Takt starts it ({job.target})"]}
        )
    _check_trigger_permission(request, job)
    if job.kind == JobKind.SCRIPT and not may_write_scripts(request.user):
        # F-02: a script writer's run, never a token's (whatever the job permits)
        raise PermissionDenied({"kind": [_(SUPERUSERS_ONLY)]})
    _check_capabilities(request, job)


def _check_capabilities(request: Request, job: Job) -> None:
    """A user starts a job only with the capabilities it needs
    (jobs.capabilities); a job's token acts for its user when it has
    one, and else for whoever made it (the token admin checked him)."""
    token = job_token(request)
    if token is not None and token.job_id == job.pk:
        if token.user is None:
            return
        user = token.user
    else:
        user = request.user
    lacking = capabilities.missing(user, capabilities.needed_to_start(job))
    if lacking:
        raise PermissionDenied(capabilities.refusals(lacking))


def _check_trigger_permission(request: Request, job: Job) -> None:
    token = job_token(request)
    if token is not None and token.job_id != job.pk and not is_user(request):
        raise PermissionDenied(_("this token is for job #%(id)s only") % {"id": token.job_id})
    own_token = token is not None and token.job_id == job.pk
    permission = job.api_trigger_permission
    if permission == ApiTriggerPermission.OFF:
        refusal = _(
            "starting this job through the API is off (set it to 'authenticated' or 'token')"
        )
    elif permission == ApiTriggerPermission.TOKEN and not own_token:
        refusal = _("this job starts only with an API token scoped to it")
    elif permission == ApiTriggerPermission.AUTHENTICATED and not (own_token or is_user(request)):
        refusal = _("this job starts only for authenticated callers")
    else:
        return
    raise PermissionDenied({"api_trigger_permission": [refusal]})
