"""The Django admin for jobs (F-90, F-91): the job list an operator scans,
the job editor with its triggers inline and a live "check schedule"
(F-19), "Run now" (also on disabled jobs), the run history (F-51), "Why
didn't it run?" (F-66); enable, disable, pause, resume and backfill as
actions. Each action calls one service."""

from __future__ import annotations

from typing import Any

from django import forms
from django.contrib import admin, messages
from django.contrib.admin.utils import flatten_fieldsets
from django.db.models import QuerySet
from django.http import HttpRequest, HttpResponse, HttpResponseRedirect
from django.shortcuts import get_object_or_404
from django.urls import path, reverse
from django.utils import timezone
from django.utils.html import format_html
from django.utils.translation import gettext as _
from django.utils.translation import gettext_lazy, ngettext
from django.views.decorators.http import require_POST
from redis import RedisError

from heartbeats.explaining import explain_job  # the admin is glue over all three apps
from jobs import services, specs
from jobs.admin.calendars import HolidayCalendarAdmin  # noqa: F401  (registers it)
from jobs.admin.capabilities import CapabilityAdmin
from jobs.admin.coordination import CoordinationFields, GroupFilter, JobForm
from jobs.admin.display import (
    ADMIN_CSS,
    ADMIN_JS,
    EMPTY,
    LocalTimes,
    breakable,
    run_duration_text,
    state_badge,
    status_badge,
    time_html,
    times_in_text,
)
from jobs.admin.history import AuditedAdmin
from jobs.admin.imports import (
    INLINE_RUN_NOW_MAX,
    import_urls,
    operation_form,
    start_operation_view,
)
from jobs.admin.job_list import JobChangeList, with_page_relations
from jobs.admin.lookups import refuse_regex_lookups
from jobs.admin.panels import (
    command_summary,
    coordination_summary,
    dispatch_summary,
    explanation_view,
    job_decisions,
    limit_text,
    operations_summary,
    pause_summary,
    retries_summary,
    run_history,
    titled,
)
from jobs.admin.queue import QueueStateAdmin  # noqa: F401  (registers the queue page)
from jobs.admin.reruns import RerunFailedAction
from jobs.admin.scripts import ScriptAdmin, script_fieldsets, script_summary
from jobs.admin.timeline import timeline_urls
from jobs.admin.triggers import TriggerInline
from jobs.definitions import OPERATOR_FIELDS
from jobs.errors import TaktError
from jobs.input_zone import ZonedDateTimeInput, typed_text
from jobs.js_catalog import JS_CATALOG
from jobs.models import Job
from jobs.policies import JobKind, TriggerKind
from jobs.validation import watch_warnings
from runs.connectivity import redis_unreachable_message
from runs.labels import trigger_word
from runs.models import Run, RunTrigger
from runs.services import enqueue_job


class BackfillForm(forms.Form):
    start = forms.DateTimeField(
        label=gettext_lazy("From"),
        widget=ZonedDateTimeInput(),
        help_text=gettext_lazy("Date and time (YYYY-MM-DD HH:MM)."),
    )
    end = forms.DateTimeField(
        label=gettext_lazy("To"),
        widget=ZonedDateTimeInput(),
        help_text=gettext_lazy("Not in the future."),
    )

    def clean(self) -> dict[str, Any]:
        data = super().clean() or {}
        if data.get("start") and data.get("end") and data["end"] < data["start"]:
            self.add_error("end", _("must not be before the start"))
        now = timezone.now()
        for name in ("start", "end"):
            if data.get(name) and data[name] > now:  # shown in the zone it was typed in
                self.add_error(name, _("%(at)s is in the future") % {"at": typed_text(data[name])})
        return data


@admin.register(Job)
@refuse_regex_lookups
class JobAdmin(
    AuditedAdmin,
    LocalTimes,
    CapabilityAdmin,
    ScriptAdmin,
    CoordinationFields,
    RerunFailedAction,
    admin.ModelAdmin,
):
    form = JobForm
    inlines = [TriggerInline]
    list_display = (
        "name", "enabled", "schedule", "next_run", "last_run", "heartbeat_state", "group",
        "what",
    )  # fmt: skip
    list_filter = ("enabled", "paused", "kind", "queue", GroupFilter, "code_managed")
    search_fields = ("name", "key", "target")
    sortable_by = ("name",)  # any other column would sort every job to show one page
    show_full_result_count = False
    show_facets = admin.ShowFacets.NEVER
    list_per_page = 100
    actions = ["run_now", "enable", "disable", "pause", "resume", "backfill", "rerun_failed"]
    readonly_fields = (
        "code_managed",
        "created_at",
        "updated_at",
        "dropped_retries",
        "paused_by",
        "paused_at",
        "consecutive_failures",
        "run_limit",
        "children_tree",
        "maintenance_allowed",
    )
    autocomplete_fields = ("parent",)
    change_form_template = "admin/takt_jobs/job/change_form.html"

    class Media:
        css = {"all": ADMIN_CSS}
        js = (JS_CATALOG, *ADMIN_JS)  # the scripts' texts in the reader's language

    @admin.display(description=gettext_lazy("Runs"), ordering=None)
    def what(self, obj: Job) -> str:
        """A callable's target, a command job's command line, a script's size;
        "declared in code" under it for a job declared in code (F-75; a
        column of its own would not fit a 1280-pixel window)."""
        if obj.kind == JobKind.COMMAND:
            text = breakable(command_summary(obj))
        elif obj.kind == JobKind.SCRIPT:
            text = breakable(_("script: %(summary)s") % {"summary": script_summary(obj)})
        else:
            text = breakable(obj.target)
        if not obj.code_managed:
            return text
        return format_html('{}<br><span class="takt-muted">{}</span>', text, _("declared in code"))

    def get_fieldsets(self, request: HttpRequest, obj: Job | None = None) -> Any:
        """What most jobs need first; the policies in collapsed sections whose
        headings say what they hold (F-91)."""
        job = obj or Job()
        collapsed = ("collapse",)
        command = job.kind == JobKind.COMMAND
        script = job.kind == JobKind.SCRIPT
        fieldsets = (
            (
                None,
                {
                    "fields": (
                        ("name", "enabled"),
                        # A command job runs its command, a script job its script.
                        *(() if command or script else ("target",)),
                        "params",
                        *(() if command or script else ("args",)),  # a Celery task's
                        "description",
                        ("key", "kind"),
                    )
                },
            ),
            (
                titled(gettext_lazy("Command"), command_summary(job)),
                {
                    # A command job's command comes before its triggers.
                    "classes": ("takt-leading",) if command else collapsed,
                    "fields": (
                        "command",
                        "shell",
                        ("cwd", "nice"),
                        "env",
                        "success_codes",
                        ("detached", "result_code_at"),
                    ),
                },
            ),
            *script_fieldsets(job, request.user),
            (
                titled(gettext_lazy("Dispatch"), dispatch_summary(job)),
                {
                    "classes": collapsed,
                    "fields": (
                        ("priority", "queue"),
                        ("api_trigger_permission", "caller_params"),
                        ("timeout_s", "timeout_action"),
                        ("overlap_policy", "max_instances", "max_buffered"),
                        (
                            "missed_run_policy",
                            "catchup_pick",
                            "catchup_max_runs",
                            "catchup_window_s",
                        ),
                    ),
                },
            ),
            (
                titled(gettext_lazy("Coordination"), coordination_summary(job)),
                {
                    "classes": collapsed,
                    "fields": (
                        ("concurrency_group", "exclusive"),
                        ("condition_variable", "condition_values", "condition_consume"),
                        "result_variable",
                        ("parent", "child_order", "stop_on_child_failure"),
                        "children_tree",
                        "maintenance_allowed",
                    ),
                },
            ),
            (
                titled(gettext_lazy("Retries"), retries_summary(job)),
                {
                    "classes": collapsed,
                    "fields": (
                        ("max_retries", "retry_on_timeout"),
                        ("retry_backoff_s", "retry_backoff_factor", "retry_backoff_max_s"),
                        "retry_jitter",
                        "non_retryable_exceptions",
                        "dropped_retries",
                    ),
                },
            ),
            (
                titled(gettext_lazy("Pause and limits"), pause_summary(job)),
                {
                    "classes": collapsed,
                    "fields": (
                        ("paused", "paused_until"),
                        "pause_note",
                        ("paused_by", "paused_at"),
                        ("pause_after_failures", "consecutive_failures"),
                        ("max_runs", "run_limit"),
                    ),
                },
            ),
            (
                titled(gettext_lazy("Operations"), operations_summary(job)),
                {
                    "classes": collapsed,
                    "fields": (
                        "heartbeat_deadline_s",
                        "notify",
                        "owner",
                        "notes",
                        "code_managed",
                        ("created_at", "updated_at"),
                    ),
                },
            ),
        )
        return self.capability_fieldsets(request, obj, fieldsets)

    def get_queryset(self, request: HttpRequest) -> QuerySet[Job]:
        return with_page_relations(super().get_queryset(request))

    def get_changelist(self, request: HttpRequest, **kwargs: Any) -> type[JobChangeList]:
        return JobChangeList

    def get_readonly_fields(self, request: HttpRequest, obj: Job | None = None) -> Any:
        """F-75: a job declared in code is edited there; the operator keeps
        enabled and the pause fields."""
        fields = super().get_readonly_fields(request, obj)
        if obj is None or not obj.code_managed:
            return fields
        shown = flatten_fieldsets(self.get_fieldsets(request, obj))
        return (*fields, *(f for f in shown if f not in OPERATOR_FIELDS and f not in fields))

    # --- list columns -----------------------------------------------------------
    @admin.display(description=gettext_lazy("Schedule"))
    def schedule(self, obj: Job) -> str:
        words = [specs.trigger_description(t) for t in obj.triggers.all() if t.enabled]
        return (
            times_in_text("; ".join(words), wrap=True) if words else EMPTY
        )  # a once time in your zone

    @admin.display(description=gettext_lazy("Next run"))
    def next_run(self, obj: Job) -> Any:
        value = getattr(obj, "_next_run", None)
        return time_html(value, relative=True, compact=True) if value else EMPTY

    @admin.display(description=gettext_lazy("Last run"))
    def last_run(self, obj: Job) -> Any:
        run = getattr(obj, "_last_run", None)
        if run is None:
            return EMPTY
        return format_html(
            "{} <a href='{}'>{}</a> {}",
            status_badge(run.status),
            reverse("admin:takt_runs_run_change", args=[run.pk]),
            time_html(run.started_at or run.enqueued_at, compact=True),
            run_duration_text(run.status, run.duration_s, empty=""),
        )

    @admin.display(description=gettext_lazy("Heartbeat"))
    def heartbeat_state(self, obj: Job) -> Any:
        heartbeat = getattr(obj, "heartbeat", None)
        if heartbeat is None:
            return state_badge("new")
        return state_badge(heartbeat.state_at(now=timezone.now()))  # as every page says it

    @admin.display(description=gettext_lazy("Run limit"))
    def run_limit(self, obj: Job) -> str:
        return limit_text(obj)

    # --- the editor ----------------------------------------------------------------
    def change_view(
        self, request: HttpRequest, object_id: str, form_url: str = "", extra_context: Any = None
    ) -> HttpResponse:
        job = self.get_object(request, object_id)
        extra = dict(extra_context or {})
        if job is not None and request.user.has_perm("takt_runs.view_run"):
            # Runs' output and messages only for whom may view runs.
            extra["run_history"] = run_history(job)
            latest = Run.objects.filter(job=job).order_by("-enqueued_at", "-id").first()
            extra["latest_run"] = latest
            # Its trigger as the run history says it ("schedule", "Zeitplan").
            extra["latest_run_trigger"] = trigger_word(latest.trigger) if latest else ""
        if job is not None and request.user.has_perm("takt_runs.view_schedulerdecision"):
            extra["decisions"] = job_decisions(job)  # F-65, under "Why didn't it run?"
        if job is not None:
            extra["explanation"] = explanation_view(self.explanation(job))
            extra["can_cancel"] = request.user.has_perm("takt_runs.cancel_run")
        return super().change_view(request, object_id, form_url, extra_context=extra)

    def explanation(self, job: Job) -> Any:
        """F-66: the checklist, as explain_job prints it; the error text when
        Redis (the job's lock) cannot be read."""
        try:
            return explain_job(job, now=timezone.now())
        except RedisError as exc:
            return redis_unreachable_message(exc)

    def save_model(self, request: HttpRequest, obj: Job, form: Any, change: bool) -> None:
        """A pause ticked in the editor records who and when (F-104)."""
        if "paused" in form.changed_data:
            if obj.paused:
                obj.paused_by, obj.paused_at = request.user.get_username()[:150], timezone.now()
            else:
                obj.paused_until, obj.consecutive_failures = None, 0
        super().save_model(request, obj, form, change)

    def save_related(self, request: HttpRequest, form: Any, formsets: Any, change: bool) -> None:
        """Saved as asked; what is likely wrong with a file trigger (a pattern
        that matches nothing there now, a job that skips files while busy)
        is said as a warning (F-16)."""
        super().save_related(request, form, formsets, change)
        for trigger in form.instance.triggers.filter(kind=TriggerKind.FILE):
            for warning in watch_warnings(trigger):
                self.message_user(
                    request,
                    _("File trigger #%(id)s: %(warning)s") % {"id": trigger.pk, "warning": warning},
                    messages.WARNING,
                )

    # --- actions ---------------------------------------------------------------
    @admin.action(description=gettext_lazy("Run now"), permissions=["change"])
    def run_now(self, request: HttpRequest, queryset: QuerySet[Job]) -> HttpResponse | None:
        """Up to INLINE_RUN_NOW_MAX jobs at once here; more as a `bulk_run`
        operation (F-93), whose run page shows its progress."""
        if self.runs_refused(request, list(queryset)):
            return None
        ids = list(queryset.values_list("pk", flat=True))
        if len(ids) > INLINE_RUN_NOW_MAX:
            return start_operation_view(
                self,
                request,
                "bulk_run",
                {"jobs": ids},
                what=_("Run now of %(n)d jobs") % {"n": len(ids)},
            )
        try:
            runs = [enqueue_job(job, trigger=RunTrigger.MANUAL) for job in queryset]
        except TaktError as exc:
            self.message_user(request, str(exc), messages.ERROR)
            return None
        self.message_user(
            request,
            ngettext("Started %(n)d run: %(runs)s", "Started %(n)d runs: %(runs)s", len(runs))
            % {"n": len(runs), "runs": ", ".join(f"#{r.pk} ({r.status})" for r in runs)},
        )
        return None

    @admin.action(description=gettext_lazy("Enable selected jobs"), permissions=["change"])
    def enable(self, request: HttpRequest, queryset: QuerySet[Job]) -> None:
        try:
            n = services.set_jobs_enabled(list(queryset.values_list("pk", flat=True)), True)
        except TaktError as exc:
            self.message_user(request, str(exc), messages.ERROR)
            return
        self.message_user(
            request, ngettext("Enabled %(n)d job.", "Enabled %(n)d jobs.", n) % {"n": n}
        )

    @admin.action(description=gettext_lazy("Disable selected jobs"), permissions=["change"])
    def disable(self, request: HttpRequest, queryset: QuerySet[Job]) -> None:
        n = services.set_jobs_enabled(list(queryset.values_list("pk", flat=True)), False)
        self.message_user(
            request, ngettext("Disabled %(n)d job.", "Disabled %(n)d jobs.", n) % {"n": n}
        )

    @admin.action(description=gettext_lazy("Pause selected jobs"), permissions=["change"])
    def pause(self, request: HttpRequest, queryset: QuerySet[Job]) -> None:
        now = timezone.now()
        by = request.user.get_username()
        n = sum(
            services.pause_job(pk, note=f"paused in the admin by {by}", by=by, now=now)
            for pk in queryset.values_list("pk", flat=True)
        )
        self.message_user(
            request,
            ngettext(
                "Paused %(n)d job. Edit a job to add a note or an end time.",
                "Paused %(n)d jobs. Edit a job to add a note or an end time.",
                n,
            )
            % {"n": n},
        )

    @admin.action(description=gettext_lazy("Resume selected jobs"), permissions=["change"])
    def resume(self, request: HttpRequest, queryset: QuerySet[Job]) -> None:
        n = sum(services.resume_job(pk) for pk in queryset.values_list("pk", flat=True))
        self.message_user(
            request, ngettext("Resumed %(n)d job.", "Resumed %(n)d jobs.", n) % {"n": n}
        )

    @admin.action(description=gettext_lazy("Backfill a past range…"), permissions=["change"])
    def backfill(self, request: HttpRequest, queryset: QuerySet[Job]) -> HttpResponse | None:
        """F-101: runs for every fire time of the selected jobs in a past
        range (runs/backfill.py); asks for the range first, then starts it
        as a `backfill` operation (F-93) and shows its run."""
        if self.runs_refused(request, list(queryset)):
            return None
        form = BackfillForm(request.POST if "apply" in request.POST else None)
        if form.is_valid():
            ids = list(queryset.values_list("pk", flat=True))
            params = {
                "jobs": ids,
                "start": form.cleaned_data["start"],
                "end": form.cleaned_data["end"],
            }
            started = start_operation_view(
                self,
                request,
                "backfill",
                params,
                what=ngettext("Backfill of %(n)d job", "Backfill of %(n)d jobs", len(ids))
                % {"n": len(ids)},
                form=form,
            )
            if started is not None:
                return started
        return operation_form(
            self,
            request,
            queryset,
            form,
            action="backfill",
            title=_("Backfill a past range"),
            intro=_(
                "Create a run for every fire time of these jobs in a past range (at most 1000"
                " per job), oldest first, one after another. Fire times that already have a"
                " run are left alone."
            ),
            submit=_("Backfill"),
        )

    # --- the "Run now" button on the change form --------------------------------
    def get_urls(self) -> list[Any]:
        run_now = self.admin_site.admin_view(require_POST(self.run_now_view))
        return [
            path("<int:job_id>/run-now/", run_now, name="takt_jobs_job_run_now"),
            *self.script_urls(),
            *timeline_urls(self.admin_site),
            *import_urls(self),
            *super().get_urls(),
        ]

    def run_now_view(self, request: HttpRequest, job_id: int) -> HttpResponse:
        job = get_object_or_404(Job, pk=job_id)
        back = HttpResponseRedirect(reverse("admin:takt_jobs_job_change", args=[job_id]))
        if self.runs_refused(request, [job]) or not self.has_change_permission(request, job):
            return back
        try:
            run = enqueue_job(job, trigger=RunTrigger.MANUAL)
        except TaktError as exc:
            self.message_user(request, str(exc), messages.ERROR)
            return back
        level = messages.SUCCESS if run.status == "queued" else messages.WARNING
        link = reverse("admin:takt_runs_run_change", args=[run.pk])
        text = format_html(
            "<a href='{}'>{}</a> {}.", link, _("Run #%(id)s") % {"id": run.pk}, run.status
        )
        if run.message:
            text = format_html("{} {}", text, times_in_text(run.message))
        self.message_user(request, text, level)
        return back


__all__ = ["HolidayCalendarAdmin", "JobAdmin", "QueueStateAdmin", "Run"]
