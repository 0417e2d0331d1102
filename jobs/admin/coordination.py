"""The admin of coordination (F-04, F-31, F-32): concurrency groups with
their colour and the runs holding their slots now, result variables with
their value and the run that set it, and how the job editor and list show
a group and a parent's children."""

from __future__ import annotations

from typing import Any

from django import forms
from django.contrib import admin
from django.db.models import Count, QuerySet
from django.http import HttpRequest
from django.urls import reverse
from django.utils import timezone
from django.utils.html import format_html, format_html_join
from django.utils.safestring import SafeString
from redis import RedisError

from jobs.admin.display import ADMIN_CSS, ADMIN_JS, EMPTY, time_html
from jobs.models import ConcurrencyGroup, Job, ResultVariable
from runs.slots import exclusive_key, group_key, slot_holders
from runs.variables import set_variable

# A parent's tree is shown this deep at most (validation allows no loop).
TREE_DEPTH = 5


def group_html(group: ConcurrencyGroup) -> SafeString:
    """A group's colour swatch and name, for the job list and editor."""
    return format_html(
        '<span class="takt-group"><span class="takt-swatch" style="background:{}"></span>{}</span>',
        group.colour,
        group.name,
    )


def children_tree_html(job: Job, depth: int = 0) -> SafeString | str:
    """The job's children in their order, each with its own below it."""
    children = list(job.children.order_by("child_order", "pk"))
    if not children or depth >= TREE_DEPTH:
        return EMPTY if depth == 0 else ""
    items = format_html_join(
        "",
        "<li><a href='{}'>{}</a> (#{}){}{}</li>",
        (
            (
                reverse("admin:jobs_job_change", args=[child.pk]),
                child.name,
                child.pk,
                "" if child.enabled else " — disabled, skipped",
                children_tree_html(child, depth + 1),
            )
            for child in children
        ),
    )
    return format_html('<ol class="takt-children">{}</ol>', items)


def _holders_html(key: str) -> SafeString | str:
    try:
        holders = slot_holders(key)
    except RedisError as exc:
        return f"unknown (Redis: {exc})"
    if not holders:
        return "free"
    return format_html_join(
        ", ",
        "<a href='{}'>run #{}</a>{}",
        (
            (
                reverse("admin:runs_run_change", args=[run_id]),
                run_id,
                " (reserved)" if reserved else "",
            )
            for run_id, reserved in holders
            if run_id is not None
        ),
    )


class AcceptedValues(forms.CharField):
    """A condition's accepted values (F-32) as the manual writes them,
    "0, 200", stored as a list of whole numbers."""

    def prepare_value(self, value: Any) -> Any:
        if isinstance(value, list):
            return ", ".join(str(v) for v in value)
        return value

    def to_python(self, value: Any) -> list[int]:
        text = (super().to_python(value) or "").replace(";", ",")
        values = []
        for part in (p.strip() for p in text.split(",")):
            if not part:
                continue
            try:
                values.append(int(part))
            except ValueError:
                raise forms.ValidationError(
                    f"{part!r} is not a whole number: give values like 0, 200"
                ) from None
        return values


class JobForm(forms.ModelForm):
    """The job editor's form: the condition's values as text; a child's
    order 0 when left empty."""

    condition_values = AcceptedValues(
        required=False,
        label="Accepted values",
        help_text="The values that let it start, separated by commas, e.g. 0, 200.",
    )
    child_order = forms.IntegerField(
        required=False, min_value=0, label="Order among its siblings",
        help_text="Children run in this order (then by id).",
    )  # fmt: skip

    class Meta:
        model = Job
        fields = "__all__"

    def clean_child_order(self) -> int:
        return self.cleaned_data.get("child_order") or 0


class ConcurrencyGroupForm(forms.ModelForm):
    class Meta:
        model = ConcurrencyGroup
        fields = ("name", "colour", "limit", "description")
        widgets = {"colour": forms.TextInput(attrs={"type": "color"})}


@admin.register(ConcurrencyGroup)
class ConcurrencyGroupAdmin(admin.ModelAdmin):
    """F-31: jobs in one group run at most `limit` at a time."""

    form = ConcurrencyGroupForm
    list_display = ("shown", "limit", "job_count", "holders", "description")
    search_fields = ("name",)
    readonly_fields = ("holders",)

    class Media:
        css = {"all": ADMIN_CSS}
        js = ADMIN_JS

    def get_queryset(self, request: HttpRequest) -> QuerySet[ConcurrencyGroup]:
        return super().get_queryset(request).annotate(job_count=Count("jobs"))

    @admin.display(description="Group", ordering="name")
    def shown(self, obj: ConcurrencyGroup) -> Any:
        return group_html(obj)

    @admin.display(description="Jobs")
    def job_count(self, obj: ConcurrencyGroup) -> int:
        return int(getattr(obj, "job_count", 0))

    @admin.display(description="Running now")
    def holders(self, obj: ConcurrencyGroup) -> Any:
        """The runs holding (or reserved) the group's slots now, from Redis."""
        return _holders_html(group_key(obj.pk)) if obj.pk else EMPTY


class ResultVariableForm(forms.ModelForm):
    class Meta:
        model = ResultVariable
        fields = ("name", "value", "description")


@admin.register(ResultVariable)
class ResultVariableAdmin(admin.ModelAdmin):
    """F-32: the value each variable holds, and who set it."""

    form = ResultVariableForm
    list_display = ("name", "value", "changed", "set_by", "description")
    search_fields = ("name",)
    readonly_fields = ("changed", "set_by", "writers", "readers")

    class Media:
        css = {"all": ADMIN_CSS}
        js = ADMIN_JS

    @admin.display(description="Changed")
    def changed(self, obj: ResultVariable) -> Any:
        return time_html(obj.changed_at) if obj.changed_at else EMPTY

    @admin.display(description="Set by")
    def set_by(self, obj: ResultVariable) -> Any:
        if obj.changed_by_run is not None:
            url = reverse("admin:runs_run_change", args=[obj.changed_by_run])
            return format_html("<a href='{}'>run #{}</a>", url, obj.changed_by_run)
        return obj.changed_by or EMPTY

    @admin.display(description="Written by")
    def writers(self, obj: ResultVariable) -> Any:
        return _job_links(obj.writers.all()) if obj.pk else EMPTY

    @admin.display(description="Read by (conditions)")
    def readers(self, obj: ResultVariable) -> Any:
        return _job_links(obj.readers.all()) if obj.pk else EMPTY

    def save_model(
        self, request: HttpRequest, obj: ResultVariable, form: Any, change: bool
    ) -> None:
        """A value set by hand goes through the service: recorded as set by
        this user, and in the decision log."""
        value_changed = change and "value" in form.changed_data
        super().save_model(request, obj, form, change)
        if value_changed:
            set_variable(obj, obj.value, by=request.user.get_username(), now=timezone.now())


def exclusive_holders_html() -> SafeString | str:
    """The exclusive slot's holder, for the queue page."""
    return _holders_html(exclusive_key())


def _job_links(jobs: Any) -> SafeString | str:
    links = [
        (reverse("admin:jobs_job_change", args=[job.pk]), job.name, job.pk) for job in jobs[:50]
    ]
    if not links:
        return EMPTY
    return format_html_join(", ", "<a href='{}'>{}</a> (#{})", links)
