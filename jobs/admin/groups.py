"""The admin pages of concurrency groups and result variables (F-31, F-32):
each group with its colour, its limit, its jobs, the runs holding its slots
now (read from Redis) and the runs waiting for one; each variable with its
value, when it changed and who set it (a run, or an operator by hand),
and the jobs that write and read it. A value set here goes through the
engine's service (runs.variables.set_variable), recorded as set by the
operator."""

from __future__ import annotations

from typing import Any

from django import forms
from django.contrib import admin
from django.db.models import Count, IntegerField, OuterRef, QuerySet, Subquery
from django.http import HttpRequest
from django.urls import reverse
from django.utils import timezone
from django.utils.html import format_html, format_html_join
from django.utils.http import urlencode
from django.utils.safestring import SafeString
from django.utils.translation import gettext as _
from django.utils.translation import gettext_lazy, ngettext
from redis import RedisError

from jobs.admin.coordination import group_html, jobs_in_group_url
from jobs.admin.display import ADMIN_CSS, ADMIN_JS, EMPTY, LocalTimes, time_html
from jobs.admin.history import AuditedAdmin
from jobs.admin.lookups import refuse_regex_lookups
from jobs.js_catalog import JS_CATALOG
from jobs.models import ConcurrencyGroup, Job, ResultVariable
from jobs.variables import PENDING, ResultCode
from runs.models import Run, RunStatus, WaitingFor
from runs.slots import exclusive_key, group_key, slot_holders
from runs.variables import set_variable

LINKED_JOBS = 50  # a group's or a variable's jobs named on its page; the rest counted
HOLDERS_SHOWN = 20  # runs named as holding a slot set; the rest counted


def holders_html(key: str) -> SafeString | str:
    """The runs holding (or reserved for) the slots of `key` now, each
    linked with its job's name; "none"; or why Redis could not say."""
    try:
        holders = sorted((run_id, reserved) for run_id, reserved in slot_holders(key) if run_id)
    except RedisError as exc:
        return _("unknown (Redis: %(error)s)") % {"error": exc}
    if not holders:
        return _("none")
    shown = holders[:HOLDERS_SHOWN]
    names = dict(
        Run.objects.filter(pk__in=[run_id for run_id, _ in shown]).values_list("pk", "job__name")
    )
    links = format_html_join(
        ", ",
        "<a href='{}'>{}</a> {}{}",
        (
            (
                reverse("admin:takt_runs_run_change", args=[run_id]),
                _("run #%(id)s") % {"id": run_id},
                names.get(run_id, _("(no longer stored)")),
                _(" (reserved: starting)") if reserved else "",
            )
            for run_id, reserved in shown
        ),
    )
    if len(holders) > len(shown):
        return and_more(links, len(holders) - len(shown))
    return links


def and_more(links: SafeString, more: int) -> SafeString:
    """`links` "and 3 more"."""
    return format_html(_("{links} and {count} more"), links=links, count=more)


def exclusive_holders_html() -> SafeString | str:
    """The run holding the exclusive slot (F-31's "global" group), if any."""
    return holders_html(exclusive_key())


def waiting_runs_url(**filters: Any) -> str:
    """The run list filtered to the held runs waiting for a slot."""
    return reverse("admin:takt_runs_run_changelist") + "?" + urlencode(filters)


def job_links(jobs: QuerySet[Job]) -> SafeString | str:
    """Links to the first LINKED_JOBS `jobs`, and how many more there are."""
    shown = list(jobs.only("pk", "name")[: LINKED_JOBS + 1])
    if not shown:
        return EMPTY
    links = format_html_join(
        ", ",
        "<a href='{}'>{}</a> (#{})",
        (
            (reverse("admin:takt_jobs_job_change", args=[j.pk]), j.name, j.pk)
            for j in shown[:LINKED_JOBS]
        ),
    )
    if len(shown) > LINKED_JOBS:
        return and_more(links, jobs.count() - LINKED_JOBS)
    return links


class ConcurrencyGroupForm(forms.ModelForm):
    class Meta:
        model = ConcurrencyGroup
        fields = ("name", "colour", "limit", "description")
        widgets = {"colour": forms.TextInput(attrs={"type": "color"})}


@admin.register(ConcurrencyGroup)
@refuse_regex_lookups
class ConcurrencyGroupAdmin(AuditedAdmin, LocalTimes, admin.ModelAdmin):
    """F-31: jobs in one group run at most `limit` at a time. The list says
    what runs in each group now and what waits; above it, the exclusive
    slot's holder."""

    change_form_template = "admin/takt/audited_change_form.html"

    form = ConcurrencyGroupForm
    empty_value_display = EMPTY
    list_display = ("shown", "limit", "job_count", "holders", "waiting", "description")
    list_display_links = ("shown",)
    search_fields = ("name",)
    fields = ("name", "colour", "limit", "description", "holders", "waiting", "members")
    readonly_fields = ("holders", "waiting", "members")
    change_list_template = "admin/takt_jobs/concurrencygroup/change_list.html"

    class Media:
        css = {"all": ADMIN_CSS}
        js = (JS_CATALOG, *ADMIN_JS)

    def get_queryset(self, request: HttpRequest) -> QuerySet[ConcurrencyGroup]:
        waiting = (
            Run.objects.filter(
                job__concurrency_group=OuterRef("pk"),
                status=RunStatus.QUEUED,
                held=True,
                waiting_for=WaitingFor.GROUP,
            )
            .order_by()
            .values("job__concurrency_group")
            .annotate(n=Count("pk"))
            .values("n")
        )
        return (
            super()
            .get_queryset(request)
            .annotate(
                job_count=Count("jobs"),
                waiting_count=Subquery(waiting, output_field=IntegerField()),
            )
        )

    def changelist_view(self, request: HttpRequest, extra_context: Any = None) -> Any:
        extra = {**(extra_context or {}), "exclusive_holders": exclusive_holders_html()}
        return super().changelist_view(request, extra_context=extra)

    @admin.display(description=gettext_lazy("Group"), ordering="name")
    def shown(self, obj: ConcurrencyGroup) -> Any:
        return group_html(obj)

    @admin.display(description=gettext_lazy("Jobs"), ordering="job_count")
    def job_count(self, obj: ConcurrencyGroup) -> Any:
        count = int(getattr(obj, "job_count", 0))
        if not count:
            return "0"
        return format_html("<a href='{}'>{}</a>", jobs_in_group_url(obj.pk), count)

    @admin.display(description=gettext_lazy("Running now"))
    def holders(self, obj: ConcurrencyGroup) -> Any:
        """The runs holding (or reserved) the group's slots now, from Redis."""
        return holders_html(group_key(obj.pk)) if obj.pk else EMPTY

    @admin.display(description=gettext_lazy("Waiting for a slot"))
    def waiting(self, obj: ConcurrencyGroup) -> Any:
        if obj.pk is None:
            return EMPTY
        count = getattr(obj, "waiting_count", None)
        if count is None:
            count = Run.objects.filter(
                job__concurrency_group=obj, status=RunStatus.QUEUED, held=True,
                waiting_for=WaitingFor.GROUP,
            ).count()  # fmt: skip
        if not count:
            return "0"
        url = waiting_runs_url(waiting="group", group=obj.pk)
        text = ngettext("%(count)d run", "%(count)d runs", count) % {"count": count}
        return format_html("<a href='{}'>{}</a>", url, text)

    @admin.display(description=gettext_lazy("Its jobs"))
    def members(self, obj: ConcurrencyGroup) -> Any:
        return job_links(obj.jobs.order_by("name", "pk")) if obj.pk else EMPTY


class ResultVariableForm(forms.ModelForm):
    class Meta:
        model = ResultVariable
        fields = ("name", "value", "description")
        help_texts = {
            "value": gettext_lazy(
                "Set by the runs of the jobs that write it; change it here by hand if need"
                " be (recorded as set by you). -1: not ended yet, or no result."
            ),
        }


@admin.register(ResultVariable)
@refuse_regex_lookups
class ResultVariableAdmin(AuditedAdmin, LocalTimes, admin.ModelAdmin):
    """F-32: the value each variable holds, and who set it."""

    change_form_template = "admin/takt/audited_change_form.html"

    form = ResultVariableForm
    empty_value_display = EMPTY
    list_display = ("name", "value_shown", "changed", "set_by", "description")
    search_fields = ("name",)
    fields = ("name", "value", "description", "changed", "set_by", "writers", "readers")
    readonly_fields = ("changed", "set_by", "writers", "readers")

    class Media:
        css = {"all": ADMIN_CSS}
        js = (JS_CATALOG, *ADMIN_JS)

    @admin.display(description=gettext_lazy("Value"), ordering="value")
    def value_shown(self, obj: ResultVariable) -> Any:
        """The value; Takt's own codes (-1, -1001..-1005) with their meaning."""
        try:
            meaning = ResultCode(obj.value).label if obj.value < 0 else ""
        except ValueError:
            meaning = ""
        if not meaning:
            return str(obj.value)
        return format_html("{} <span class='takt-muted'>({})</span>", obj.value, meaning)

    @admin.display(description=gettext_lazy("Changed"), ordering="changed_at")
    def changed(self, obj: ResultVariable) -> Any:
        return time_html(obj.changed_at) if obj.changed_at else EMPTY

    @admin.display(description=gettext_lazy("Set by"))
    def set_by(self, obj: ResultVariable) -> Any:
        """The run that last set it (linked, with its job), or the user."""
        if obj.changed_by_run is not None:
            url = reverse("admin:takt_runs_run_change", args=[obj.changed_by_run])
            job = Run.objects.filter(pk=obj.changed_by_run).values_list("job__name", flat=True)
            name = job.first()
            link = format_html(
                "<a href='{}'>{}</a>", url, _("run #%(id)s") % {"id": obj.changed_by_run}
            )
            if not name:
                return link
            return format_html(_("{run} of {job}"), run=link, job=name)
        return obj.changed_by or EMPTY

    @admin.display(description=gettext_lazy("Written by (result variable of)"))
    def writers(self, obj: ResultVariable) -> Any:
        return job_links(obj.writers.order_by("name", "pk")) if obj.pk else EMPTY

    @admin.display(description=gettext_lazy("Read by (condition of)"))
    def readers(self, obj: ResultVariable) -> Any:
        return job_links(obj.readers.order_by("name", "pk")) if obj.pk else EMPTY

    def save_model(
        self, request: HttpRequest, obj: ResultVariable, form: Any, change: bool
    ) -> None:
        """A value set by hand goes through the service: recorded as set by
        this user, and in the decision log; the other fields are saved as
        they are (only those changed, so a run's value written meanwhile
        stays). A new variable's first value counts as set by hand unless it
        is the default (-1)."""
        value = obj.value
        if change:
            fields = [name for name in form.changed_data if name != "value"]
            if fields:
                obj.save(update_fields=fields)
            by_hand = "value" in form.changed_data
        else:
            obj.value = PENDING
            obj.save()
            by_hand = value != PENDING
        if by_hand:
            set_variable(obj, value, by=request.user.get_username(), now=timezone.now())
