"""The job list's "Re-run failed runs since…" (issue 30): asks for a time,
then starts a `rerun_failed` operation (F-93, runs/operation_kinds.py) that
runs again each selected job's failed, timed-out and lost runs since then
that nothing repeats yet, and shows its run with the progress."""

from __future__ import annotations

from typing import Any

from django import forms
from django.contrib import admin
from django.db.models import QuerySet
from django.http import HttpRequest, HttpResponse
from django.utils import timezone
from django.utils.translation import gettext as _
from django.utils.translation import gettext_lazy, ngettext

from jobs.admin.imports import operation_form, start_operation_view
from jobs.input_zone import ZonedDateTimeInput, typed_text
from jobs.models import Job


class RerunFailedForm(forms.Form):
    since = forms.DateTimeField(
        label=gettext_lazy("Since"),
        widget=ZonedDateTimeInput(),
        help_text=gettext_lazy("Runs enqueued from then on (YYYY-MM-DD HH:MM); not in the future."),
    )

    def clean_since(self) -> Any:
        since = self.cleaned_data["since"]
        if since > timezone.now():  # shown in the zone it was typed in
            raise forms.ValidationError(_("%(at)s is in the future") % {"at": typed_text(since)})
        return since


class RerunFailedAction:
    """Mixed into JobAdmin (which gives runs_refused and message_user)."""

    @admin.action(description=gettext_lazy("Re-run failed runs since…"), permissions=["change"])
    def rerun_failed(self, request: HttpRequest, queryset: QuerySet[Job]) -> HttpResponse | None:
        if self.runs_refused(request, list(queryset)):  # type: ignore[attr-defined]
            return None
        form = RerunFailedForm(request.POST if "apply" in request.POST else None)
        if form.is_valid():
            ids = list(queryset.values_list("pk", flat=True))
            started = start_operation_view(
                self,  # type: ignore[arg-type]
                request,
                "rerun_failed",
                {"jobs": ids, "since": form.cleaned_data["since"]},
                what=ngettext(
                    "Re-run of the failed runs of %(n)d job",
                    "Re-run of the failed runs of %(n)d jobs",
                    len(ids),
                )
                % {"n": len(ids)},
                form=form,
            )
            if started is not None:
                return started
        return operation_form(
            self,  # type: ignore[arg-type]
            request,
            queryset,
            form,
            action="rerun_failed",
            title=_("Re-run failed runs"),
            intro=_(
                "Run again, with their parameters, each failed, timed-out or lost run of these"
                " jobs since a time that no retry or re-run repeats yet: new manual runs,"
                " oldest first, admitted as Run now is."
            ),
            submit=_("Re-run"),
        )
