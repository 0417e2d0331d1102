"""Re-running from the run pages (issue 30, runs/rerun.py): the run page's
"Re-run" button and the run list's "Re-run the selected runs". Whoever may
use "Run now" on a run's job may re-run its runs: the job's change
permission, as the job's admin grants it (a script job: its script
writers), and the capabilities the job needs (jobs.capabilities) — the
job admin's own checks, asked here."""

from __future__ import annotations

from typing import Any

from django.contrib import admin, messages
from django.db.models import QuerySet
from django.http import HttpRequest, HttpResponse, HttpResponseRedirect
from django.shortcuts import get_object_or_404
from django.urls import path, reverse
from django.utils.html import format_html
from django.utils.translation import gettext, ngettext
from django.utils.translation import gettext_lazy as _
from django.views.decorators.http import require_POST

from jobs.admin.display import times_in_text
from jobs.admin.imports import INLINE_RUN_NOW_MAX
from jobs.errors import TaktError
from jobs.models import Job
from jobs.policies import INTERNAL_TARGETS
from runs.models import ACTIVE_STATUSES, Run
from runs.rerun import rerun


class RerunActions:
    """Mixed into RunAdmin (a ModelAdmin)."""

    admin_site: admin.AdminSite

    def has_rerun_permission(self, request: HttpRequest) -> bool:
        """The run list's action and the button: who sees runs and may
        start jobs (each run's job is checked again, rerun_refused)."""
        user = request.user
        return bool(user.has_perm("takt_runs.view_run") and user.has_perm("takt_jobs.change_job"))

    def can_rerun(self, request: HttpRequest, run: Run) -> bool:
        """Whether the run page shows "Re-run": an ended run of a job the
        user may start (without saying why not: the button is left out)."""
        if run.status in ACTIVE_STATUSES or run.job.target in INTERNAL_TARGETS:
            return False
        if not self.has_rerun_permission(request):
            return False
        jobs_admin = self.admin_site._registry[Job]
        return bool(jobs_admin.has_change_permission(request, run.job))

    def rerun_refused(self, request: HttpRequest, runs: list[Run]) -> bool:
        """True, with an error message, when a run's job is one the user may
        not start (the job admin's "Run now" checks)."""
        jobs_admin = self.admin_site._registry[Job]
        jobs = list({run.job_id: run.job for run in runs}.values())
        barred = [job for job in jobs if not jobs_admin.has_change_permission(request, job)]
        if barred:
            names = ", ".join(str(job) for job in barred)
            self.message_user(  # type: ignore[attr-defined]
                request,
                gettext("Nothing was re-run: you may not start runs of %(jobs)s") % {"jobs": names},
                messages.ERROR,
            )
            return True
        return bool(jobs_admin.runs_refused(request, jobs))

    @admin.action(description=_("Re-run the selected runs"), permissions=["rerun"])
    def rerun_selected(self, request: HttpRequest, queryset: QuerySet[Run]) -> None:
        """Up to INLINE_RUN_NOW_MAX runs here; more with the job list's
        "Re-run failed runs since…" (an operation) or `manage.py rerun`."""
        runs = list(queryset.select_related("job")[: INLINE_RUN_NOW_MAX + 1])
        if len(runs) > INLINE_RUN_NOW_MAX:
            text = gettext(
                "Select at most %(max)d runs to re-run here; for more, use the job list's"
                " 'Re-run failed runs since…' or manage.py rerun."
            )
            self.message_user(request, text % {"max": INLINE_RUN_NOW_MAX}, messages.ERROR)  # type: ignore[attr-defined]
            return
        if self.rerun_refused(request, runs):
            return
        done, refused = [], []
        for run in sorted(runs, key=lambda r: r.pk):
            try:
                new = rerun(run)
            except TaktError as exc:
                refused.append(f"#{run.pk}: {times_in_text(str(exc))}")
            else:
                done.append(f"#{run.pk} → #{new.pk} ({new.status})")
        if done:
            text = ngettext(
                "Re-ran %(count)d run: %(runs)s.", "Re-ran %(count)d runs: %(runs)s.", len(done)
            )
            self.message_user(request, text % {"count": len(done), "runs": ", ".join(done)})  # type: ignore[attr-defined]
        for text in refused[:10]:
            self.message_user(request, text, messages.WARNING)  # type: ignore[attr-defined]

    def rerun_urls(self) -> list[Any]:
        view = self.admin_site.admin_view(require_POST(self.rerun_view))
        return [path("<int:run_id>/rerun/", view, name="takt_runs_run_rerun")]

    def rerun_view(self, request: HttpRequest, run_id: int) -> HttpResponse:
        """The run page's "Re-run": to the new run's page, or back with why not."""
        run = get_object_or_404(Run.objects.select_related("job"), pk=run_id)
        back = HttpResponseRedirect(reverse("admin:takt_runs_run_change", args=[run.pk]))
        if not self.has_rerun_permission(request) or self.rerun_refused(request, [run]):
            return back
        try:
            new = rerun(run)
        except TaktError as exc:
            self.message_user(request, times_in_text(str(exc)), messages.ERROR)  # type: ignore[attr-defined]
            return back
        link = reverse("admin:takt_runs_run_change", args=[new.pk])
        text = format_html(
            "{} <a href='{}'>{}</a> ({}).",
            gettext("Re-run of run #%(id)s:") % {"id": run.pk},
            link,
            gettext("run #%(id)s") % {"id": new.pk},
            new.status,
        )
        level = messages.SUCCESS if new.status != "skipped" else messages.WARNING
        self.message_user(request, text, level)  # type: ignore[attr-defined]
        return HttpResponseRedirect(link)
