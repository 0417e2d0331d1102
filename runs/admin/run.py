"""Run history across jobs (F-51): the run list an operator scans and a
run's page, read-only. Fast with 1,000,000 runs: newest first on the
enqueued_at index (a job's runs on (job, enqueued_at), the queued/running
and failed ones on their partial indexes), a bounded count
(runs/admin/filters.py), a job filter you type into, no facets and no
sorting of the whole table. A run's page says what caused it, lists the
runs it caused (a parent run's children, the dependants its end started)
and, for a held run, what it waits for (runs/admin/caused.py); the list
shows that reason under a held run's status."""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.contrib import admin, messages
from django.contrib.admin import helpers
from django.db.models import QuerySet
from django.http import HttpRequest, HttpResponse, HttpResponseRedirect
from django.shortcuts import get_object_or_404
from django.urls import path, reverse
from django.utils import timezone
from django.utils.html import format_html
from django.utils.http import url_has_allowed_host_and_scheme
from django.utils.translation import gettext, ngettext, pgettext_lazy
from django.utils.translation import gettext_lazy as _
from django.views.decorators.http import require_POST

from jobs.admin.display import (
    ADMIN_CSS,
    ADMIN_JS,
    LocalTimes,
    run_duration_text,
    time_column,
    time_html,
    times_in_text,
)
from jobs.admin.lookups import refuse_regex_lookups
from jobs.errors import TaktError
from jobs.js_catalog import JS_CATALOG
from jobs.models import Job
from runs.admin.badges import status_badge
from runs.admin.cancelling import cancel_confirmation, confirmed
from runs.admin.caused import cause_html, caused_panels, waiting_html, waiting_text
from runs.admin.filters import (
    JOB_MATCHES,
    CappedPaginator,
    EnqueuedFilter,
    EnqueuedFromFilter,
    EnqueuedToFilter,
    GroupFilter,
    JobFilter,
    WaitingFilter,
)
from runs.admin.live import live_urls
from runs.admin.reruns import RerunActions
from runs.cancel import cancel_run
from runs.models import ACTIVE_STATUSES, AuditRecord, Run, RunStatus, RunTrigger, task_id_for

# The triggers of runs that something else started (F-04, F-33).
CAUSED_TRIGGERS = (RunTrigger.DEPENDENCY, RunTrigger.PARENT)


def flower_task_url(run: Run) -> str:
    """The run's Celery task in Flower (`TAKT_FLOWER_URL`/task/<task id>), or
    "" when no Flower is configured or the run's message was never sent (a
    task Flower cannot have seen)."""
    flower = getattr(settings, "TAKT_FLOWER_URL", "")
    if not flower or run.published_at is None:
        return ""
    return f"{flower.rstrip('/')}/task/{task_id_for(run.pk)}"


@admin.register(Run)
@refuse_regex_lookups
class RunAdmin(LocalTimes, RerunActions, admin.ModelAdmin):
    list_display = (
        "run", "job_link", "trigger", "status_in_list", "scheduled_in_list", "started_in_list",
        "duration", "attempt", "worker",
    )  # fmt: skip
    list_display_links = ("run",)
    list_filter = (
        JobFilter, "status", "trigger", WaitingFilter, GroupFilter, EnqueuedFilter,
        EnqueuedFromFilter, EnqueuedToFilter,
    )  # fmt: skip
    list_select_related = ("job", "job__concurrency_group")
    search_fields = ("job__name",)
    search_help_text = _("A run's id (#123 or 123), or part of its job's name.")
    ordering = ("-enqueued_at", "-id")
    sortable_by = ()
    show_full_result_count = False
    show_facets = admin.ShowFacets.NEVER
    paginator = CappedPaginator
    list_per_page = 100
    actions = ["cancel_selected", "rerun_selected"]
    change_list_template = "admin/takt_runs/run/change_list.html"
    change_form_template = "admin/takt_runs/run/change_form.html"
    fieldsets = (
        (
            None,
            {
                "fields": (
                    ("job_link", "status_badge"),
                    ("trigger", "attempt", "priority"),
                    "cause_text",
                    "waiting",
                    "message_text",
                )
            },
        ),
        (
            _("Times"),
            {
                "fields": (
                    ("scheduled", "enqueued"),
                    ("published", "started"),
                    ("finished", "duration"),
                )
            },
        ),
        (
            _("Details"),
            {
                "fields": (
                    ("worker", "result_code"),
                    "result",
                    "params",
                    ("retry_of", "rerun_of", "missed_count", "held"),
                    ("dedupe_key", "cancelled_by"),
                    "source_trigger",
                )
            },
        ),
    )
    readonly_fields = (
        "job_link", "status_badge", "trigger", "attempt", "priority", "cause_text", "waiting",
        "message_text", "scheduled",
        "enqueued", "published", "started", "finished", "duration", "worker", "result_code",
        "result", "params", "retry_of", "rerun_of", "missed_count", "held", "dedupe_key",
        "cancelled_by",
        "source_trigger",
    )  # fmt: skip

    class Media:
        css = {"all": ADMIN_CSS}
        js = (JS_CATALOG, *ADMIN_JS)  # the scripts' texts in the reader's language

    def get_queryset(self, request: HttpRequest) -> QuerySet[Run]:
        runs = super().get_queryset(request)
        if request.resolver_match and request.resolver_match.url_name == "runs_run_changelist":
            runs = runs.defer("output", "params", "result")
        return runs

    def get_fieldsets(self, request: HttpRequest, obj: Run | None = None) -> Any:
        """The cause and the waiting reason only for the runs they concern."""
        (title, first), *rest = super().get_fieldsets(request, obj)
        hidden = set()
        if obj is None or (obj.cause_id is None and obj.trigger not in CAUSED_TRIGGERS):
            hidden.add("cause_text")
        if obj is None or not (obj.held and obj.status == RunStatus.QUEUED):
            hidden.add("waiting")
        fields = tuple(f for f in first["fields"] if f not in hidden)
        return ((title, {**first, "fields": fields}), *rest)

    def get_search_results(
        self, request: HttpRequest, queryset: QuerySet[Run], search_term: str
    ) -> tuple[QuerySet[Run], bool]:
        """A number is a run id; text matches job names (at most
        JOB_MATCHES jobs), never a scan of the run table's text."""
        term = search_term.strip().lstrip("#")
        if not term:
            return queryset, False
        if term.isdigit():
            return queryset.filter(pk=int(term)), False
        ids = list(
            Job.objects.filter(name__icontains=term).values_list("pk", flat=True)[:JOB_MATCHES]
        )
        return queryset.filter(job_id__in=ids), False

    # --- columns and fields ---------------------------------------------------
    @admin.display(description=pgettext_lazy("a run", "Run"))
    def run(self, obj: Run) -> str:
        return f"#{obj.pk}"

    @admin.display(description=_("Job"))
    def job_link(self, obj: Run) -> Any:
        return format_html(
            "<a href='{}'>{}</a>",
            reverse("admin:takt_jobs_job_change", args=[obj.job_id]),
            obj.job.name,
        )

    @admin.display(description=_("Status"))
    def status_badge(self, obj: Run) -> Any:
        return status_badge(obj.status)

    scheduled = time_column("scheduled_for", _("Scheduled for"))
    scheduled_in_list = time_column("scheduled_for", _("Scheduled for"), compact=True)
    enqueued = time_column("enqueued_at", _("Enqueued"))
    published = time_column("published_at", _("Published"))
    started = time_column("started_at", _("Started"))
    started_in_list = time_column("started_at", _("Started"), compact=True)
    finished = time_column("finished_at", _("Finished"))

    @admin.display(description=_("Status"))
    def status_in_list(self, obj: Run) -> Any:
        """The badge; under a held run's, what it waits for (F-31, F-34)."""
        if not (obj.held and obj.status == RunStatus.QUEUED):
            return status_badge(obj.status)
        return format_html(
            "{}<br><span class='takt-muted takt-waiting'>{}</span>",
            status_badge(obj.status),
            format_html(gettext("held: {reason}"), reason=waiting_text(obj)),
        )

    @admin.display(description=_("Cause"))
    def cause_text(self, obj: Run) -> Any:
        """F-04, F-33: the upstream run whose end started it, or its parent run."""
        return cause_html(obj)

    @admin.display(description=_("Held"))
    def waiting(self, obj: Run) -> Any:
        return waiting_html(obj)

    @admin.display(description=_("Message"))
    def message_text(self, obj: Run) -> Any:
        return times_in_text(obj.message) if obj.message else "—"

    @admin.display(description=_("Duration"))
    def duration(self, obj: Run) -> str:
        return run_duration_text(obj.status, obj.duration_s)

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: Run | None = None) -> bool:
        return False

    def has_delete_permission(self, request: HttpRequest, obj: Run | None = None) -> bool:
        """A queued or running run is cancelled, not deleted: deleting its row
        would leave its process running and its job's lock held."""
        if obj is not None and obj.status in ACTIVE_STATUSES:
            return False
        return super().has_delete_permission(request, obj)

    def has_cancel_permission(self, request: HttpRequest) -> bool:
        return bool(request.user.has_perm("takt_runs.cancel_run"))

    # --- cancelling (runs/cancel.py) ---------------------------------------------
    @admin.action(
        description=_("Cancel the selected queued or running runs"), permissions=["cancel"]
    )
    def cancel_selected(self, request: HttpRequest, queryset: QuerySet[Run]) -> HttpResponse | None:
        if not confirmed(request):  # first the confirmation page, as for a delete
            runs = list(queryset.select_related("job").order_by("pk")[:1000])
            picked = [(helpers.ACTION_CHECKBOX_NAME, str(run.pk)) for run in runs]
            return cancel_confirmation(
                self.admin_site,
                request,
                runs,
                hidden=[("action", "cancel_selected"), *picked],
                action_url="",
                back=request.get_full_path(),
            )
        done, refused = [], []
        for run_id in queryset.values_list("pk", flat=True)[:1000]:
            try:
                cancel_run(run_id, by=request.user.get_username(), now=timezone.now())
                done.append(f"#{run_id}")
            except TaktError as exc:
                refused.append(times_in_text(str(exc)))
        if done:
            # English keeps "run(s)" for both forms; German has its plural.
            text = ngettext(
                "Cancelled %(count)d run(s): %(runs)s.",
                "Cancelled %(count)d run(s): %(runs)s.",
                len(done),
            )
            self.message_user(request, text % {"count": len(done), "runs": ", ".join(done)})
        for text in refused[:10]:
            self.message_user(request, text, messages.WARNING)
        return None

    def get_urls(self) -> list[Any]:
        cancel = self.admin_site.admin_view(require_POST(self.cancel_view))
        return [
            path("<int:run_id>/cancel/", cancel, name="takt_runs_run_cancel"),
            *live_urls(self.admin_site),  # F-93: <id>/live/, the run's live JSON
            *self.rerun_urls(),  # <id>/rerun/ (runs/admin/reruns.py)
            *super().get_urls(),
        ]

    def cancel_view(self, request: HttpRequest, run_id: int) -> HttpResponse:
        """The "Cancel run" button (the run's page, the job editor's "Why
        didn't it run?"): its confirmation page, whose "Yes, cancel" cancels
        the run; back to `next` when it is one of this site's pages."""
        run = get_object_or_404(Run, pk=run_id)
        back = request.POST.get("next", "")
        if not url_has_allowed_host_and_scheme(back, {request.get_host()}):
            back = reverse("admin:takt_runs_run_change", args=[run.pk])
        if not self.has_cancel_permission(request):
            self.message_user(request, gettext("You may not cancel runs."), messages.ERROR)
            return HttpResponseRedirect(back)
        if not confirmed(request):  # the button asks first, as Django does before a delete
            return cancel_confirmation(
                self.admin_site,
                request,
                [run],
                hidden=[("next", back)],
                action_url=request.path,
                back=back,
            )
        try:
            cancel_run(run.pk, by=request.user.get_username(), now=timezone.now())
        except TaktError as exc:
            self.message_user(request, times_in_text(str(exc)), messages.ERROR)
        else:
            text = gettext("Run #%(id)s cancelled.") % {"id": run.pk}
            self.message_user(request, text, messages.SUCCESS)
        return HttpResponseRedirect(back)

    def change_view(
        self, request: HttpRequest, object_id: str, form_url: str = "", extra_context: Any = None
    ) -> HttpResponse:
        run = self.get_object(request, object_id)
        extra = dict(extra_context or {})
        extra["can_cancel"] = bool(
            run is not None
            and run.status in ACTIVE_STATUSES
            and self.has_cancel_permission(request)
        )
        extra["can_rerun"] = run is not None and self.can_rerun(request, run)
        extra["caused_panels"] = caused_panels(run) if run is not None else []
        extra["flower_task_url"] = flower_task_url(run) if run is not None else ""
        return super().change_view(request, object_id, form_url, extra_context=extra)


@admin.register(AuditRecord)
@refuse_regex_lookups
class AuditRecordAdmin(LocalTimes, admin.ModelAdmin):
    """The audit trail of retention cleanup (F-52, F-72): read only."""

    list_display = ("recorded", "action", "count", "first_id", "last_id", "by")
    readonly_fields = [f.name for f in AuditRecord._meta.fields]

    class Media:
        css = {"all": ADMIN_CSS}
        js = (JS_CATALOG, *ADMIN_JS)  # the scripts' texts in the reader's language

    @admin.display(description=_("Recorded at"), ordering="recorded_at")
    def recorded(self, obj: AuditRecord) -> Any:
        return time_html(obj.recorded_at)

    def has_add_permission(self, request: Any) -> bool:
        return False

    def has_change_permission(self, request: Any, obj: Any = None) -> bool:
        return False
