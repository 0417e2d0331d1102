"""Cancelling runs in the admin asks first, as Django asks before a delete
(issue 29, A.5): the run list's action "Cancel the selected queued or
running runs", the run page's "Cancel run" button and the job editor's
"Cancel run #N" (in "Why didn't it run?") each show a confirmation page
that names the runs; only its "Yes, cancel" (a POST with ``post=yes``)
cancels them (runs/cancel.py's cancel_run)."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from django.http import HttpRequest
from django.template.response import TemplateResponse
from django.utils.translation import gettext

from runs.models import ACTIVE_STATUSES, Run

CONFIRMED = "post"  # the confirmation page's answer, as in Django's delete_selected


def confirmed(request: HttpRequest) -> bool:
    """Whether the request is the confirmation page's "Yes, cancel"."""
    return request.POST.get(CONFIRMED) == "yes"


def cancel_confirmation(
    admin_site: Any,
    request: HttpRequest,
    runs: Iterable[Run],
    *,
    hidden: Iterable[tuple[str, str]],
    action_url: str,
    back: str,
) -> TemplateResponse:
    """The page that asks before cancelling `runs`: those still queued or
    running are cancelled on "Yes, cancel" (the form posts `hidden` and
    ``post=yes`` to `action_url`), the others are named as ended;
    "No, go back" returns to `back`."""
    runs = list(runs)
    context = {
        **admin_site.each_context(request),
        "title": gettext("Are you sure?"),
        "opts": Run._meta,
        "active": [run for run in runs if run.status in ACTIVE_STATUSES],
        "ended": [run for run in runs if run.status not in ACTIVE_STATUSES],
        "hidden": list(hidden),
        "action_url": action_url,
        "back": back,
    }
    return TemplateResponse(request, "admin/takt_runs/run/cancel_confirmation.html", context)
