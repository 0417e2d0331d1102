"""The decision log in the admin (F-65; runs/decisions.py): the list of
every job's decisions, newest first, filtered by kind, job and time, and a
job's latest ones in its editor (jobs.admin.panels.job_decisions), under "Why didn't it
run?". Read-only; seen with the model's own view permission,
`takt_runs.view_schedulerdecision` (docs/security.md: Django's model
permissions, `view_*` to read). Every time shown, in a column or inside a
detail, is in the browser's zone
(jobs/admin/display.py). A page drains the log's stream first, so it shows
what was decided a moment ago with no beat running."""

from __future__ import annotations

from typing import Any

from django.contrib import admin
from django.db.models import OuterRef, QuerySet, Subquery
from django.http import HttpRequest, HttpResponse
from django.urls import reverse
from django.utils.html import format_html
from django.utils.safestring import SafeString
from django.utils.translation import gettext
from django.utils.translation import gettext_lazy as _

from jobs.admin.display import ADMIN_CSS, ADMIN_JS, time_html, times_in_text
from jobs.admin.lookups import refuse_regex_lookups
from jobs.admin.panels import run_link
from jobs.js_catalog import JS_CATALOG
from jobs.models import Job
from runs.admin.filters import BoundFilter, CappedPaginator, JobFilter
from runs.decisions import KINDS, drain_quietly
from runs.models import SchedulerDecision


class KindFilter(admin.SimpleListFilter):
    title = _("kind")
    parameter_name = "kind"

    def lookups(self, request: Any, model_admin: Any) -> list[tuple[str, str]]:
        return [(kind, kind) for kind in KINDS]

    def queryset(self, request: Any, queryset: QuerySet[Any]) -> QuerySet[Any]:
        value = self.value()
        return queryset.filter(kind=value) if value else queryset


class DecidedFromFilter(BoundFilter):
    title = _("decided from")
    parameter_name = "at_from"
    lookup = "at__gte"


class DecidedToFilter(BoundFilter):
    title = _("decided before")
    parameter_name = "at_to"
    lookup = "at__lt"


def _job_link(job_id: int, name: str | None) -> SafeString:
    if job_id == 0:
        return format_html("{}", gettext("all jobs"))
    if name is None:
        return format_html("#{}", job_id)
    return format_html(
        "<a href='{}'>{}</a>", reverse("admin:takt_jobs_job_change", args=[job_id]), name
    )


@admin.register(SchedulerDecision)
@refuse_regex_lookups
class SchedulerDecisionAdmin(admin.ModelAdmin):
    list_display = ("decided", "kind", "job", "run", "trigger_id", "detail_text")
    list_display_links = None
    list_filter = (KindFilter, JobFilter, DecidedFromFilter, DecidedToFilter)
    ordering = ("-id",)
    sortable_by = ()
    show_full_result_count = False
    show_facets = admin.ShowFacets.NEVER
    paginator = CappedPaginator
    list_per_page = 100
    actions = None

    class Media:
        css = {"all": ADMIN_CSS}
        js = (JS_CATALOG, *ADMIN_JS)  # the scripts' texts in the reader's language

    def changelist_view(self, request: HttpRequest, extra_context: Any = None) -> HttpResponse:
        drain_quietly()
        return super().changelist_view(request, extra_context)

    def get_queryset(self, request: HttpRequest) -> QuerySet[SchedulerDecision]:
        # The job's name as it is now (ids, not keys: the log outlives a job).
        name = Job.objects.filter(pk=OuterRef("job_id")).values("name")[:1]
        return super().get_queryset(request).annotate(job_name=Subquery(name))

    @admin.display(description=_("Decided at"))
    def decided(self, obj: SchedulerDecision) -> Any:
        return time_html(obj.at)

    @admin.display(description=_("Job"))
    def job(self, obj: SchedulerDecision) -> Any:
        return _job_link(obj.job_id, getattr(obj, "job_name", None))

    @admin.display(description=_("Run"))
    def run(self, obj: SchedulerDecision) -> Any:
        return run_link(obj.run_id)

    @admin.display(description=_("Detail"))
    def detail_text(self, obj: SchedulerDecision) -> Any:
        return times_in_text(obj.detail)

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False
