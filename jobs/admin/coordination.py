"""How the job editor and the job list show coordination (F-04, F-31,
F-32): the editor's form (a condition's accepted values typed as "0,
200"; a child's order optional), a group's name with its colour, a
parent's children as a tree, and whether the job may start during
maintenance (decided in code). The group and variable pages are groups.py.
"""

from __future__ import annotations

from typing import Any

from django import forms
from django.contrib import admin
from django.core.exceptions import ValidationError
from django.db.models import QuerySet
from django.http import HttpRequest
from django.urls import reverse
from django.utils.html import format_html, format_html_join
from django.utils.safestring import SafeString
from django.utils.translation import gettext as _
from django.utils.translation import gettext_lazy

from jobs.admin.display import EMPTY
from jobs.admin.targets import TargetInput
from jobs.models import ConcurrencyGroup, Job
from jobs.specs import allowed_in_maintenance

# A parent's tree is shown this deep at most (validation allows no loop).
TREE_DEPTH = 5

# The job editor's relations and the icons beside them: a group or a
# variable may be added from here ("+"), none is deleted from here, and the
# parent is a job, written in its own editor.
RELATED_ICONS = {
    "concurrency_group": {"can_delete_related": False},
    "condition_variable": {"can_delete_related": False},
    "result_variable": {"can_delete_related": False},
    "parent": {"can_add_related": False, "can_change_related": False, "can_delete_related": False},
}


def group_html(group: ConcurrencyGroup) -> SafeString:
    """A group's colour swatch and name, for the job list and editor."""
    return format_html(
        '<span class="takt-group"><span class="takt-swatch" style="background:{}"></span>{}</span>',
        group.colour,
        group.name,
    )


def children_tree_html(job: Job) -> SafeString | str:
    """The job's children in their order (then by id), each with its own
    below it, down to TREE_DEPTH levels: one query per level."""
    by_parent: dict[int, list[Job]] = {}
    level = [job.pk]
    for _level in range(TREE_DEPTH):
        children = list(
            Job.objects.filter(parent_id__in=level)
            .order_by("child_order", "pk")
            .only("pk", "name", "enabled", "parent_id", "child_order")
        )
        for child in children:
            by_parent.setdefault(child.parent_id or 0, []).append(child)
        level = [child.pk for child in children]
        if not level:
            break
    return _tree(by_parent, job.pk) or EMPTY


def _tree(by_parent: dict[int, list[Job]], parent_id: int) -> SafeString | str:
    children = by_parent.get(parent_id, [])
    if not children:
        return ""
    items = format_html_join(
        "",
        "<li><a href='{}'>{}</a> (#{}) <span class='takt-muted'>{}{}</span>{}</li>",
        (
            (
                reverse("admin:takt_jobs_job_change", args=[child.pk]),
                child.name,
                child.pk,
                _("order %(order)s") % {"order": child.child_order},
                "" if child.enabled else _(" · disabled: skipped"),
                _tree(by_parent, child.pk),
            )
            for child in children
        ),
    )
    return format_html('<ol class="takt-children">{}</ol>', items)


class GroupFilter(admin.SimpleListFilter):
    """The job list by concurrency group (F-31): each group, exclusive, or
    none. Shown once a group exists (one query: the groups)."""

    title = gettext_lazy("concurrency group")
    parameter_name = "group"

    def lookups(self, request: Any, model_admin: Any) -> list[tuple[str, str]]:
        groups = [
            (str(pk), name) for pk, name in ConcurrencyGroup.objects.values_list("pk", "name")
        ]
        if not groups:
            return []
        return [*groups, ("exclusive", _("exclusive")), ("none", _("in no group"))]

    def queryset(self, request: Any, queryset: QuerySet[Job]) -> QuerySet[Job]:
        value = self.value()
        if value == "exclusive":
            return queryset.filter(exclusive=True)
        if value == "none":
            return queryset.filter(exclusive=False, concurrency_group__isnull=True)
        if value and value.isdigit():
            return queryset.filter(concurrency_group_id=int(value))
        return queryset


def jobs_in_group_url(group_id: int) -> str:
    return reverse("admin:takt_jobs_job_changelist") + f"?{GroupFilter.parameter_name}={group_id}"


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
                    _("%(value)r is not a whole number: give values like 0, 200") % {"value": part}
                ) from None
        return values

    def has_changed(self, initial: Any, data: Any) -> bool:
        try:
            return self.to_python(data) != list(initial or [])
        except forms.ValidationError:
            return True


class JobForm(forms.ModelForm):
    """The job editor's form: the condition's values as text; a child's
    order 0 and a Celery task's args [] when left empty."""

    condition_values = AcceptedValues(
        required=False,
        label=gettext_lazy("Accepted values"),
        help_text=gettext_lazy("The values that let it start, separated by commas, e.g. 0, 200."),
    )
    child_order = forms.IntegerField(
        required=False, min_value=0, label=gettext_lazy("Order among its siblings"),
        help_text=gettext_lazy("Children run in this order (then by id)."),
    )  # fmt: skip

    class Meta:
        model = Job
        fields = "__all__"
        widgets = {"target": TargetInput(attrs={"class": "vTextField"})}

    def clean_child_order(self) -> int:
        return self.cleaned_data.get("child_order") or 0

    def clean_args(self) -> Any:
        """An emptied Args box means no positional arguments, not null."""
        value = self.cleaned_data.get("args")
        return [] if value is None else value

    def _update_errors(self, errors: ValidationError) -> None:
        """The model's errors, but none on a field the form refused already:
        the model saw that field's old value ("0, ok" refused leaves the
        values empty) and would add a second message contradicting the first."""
        if hasattr(errors, "error_dict"):
            kept = {field: e for field, e in errors.error_dict.items() if field not in self.errors}
            if not kept:
                return
            errors = ValidationError(kept)
        super()._update_errors(errors)


class CoordinationFields:
    """The job admin's coordination column and read-only fields, and the
    icons beside its relations (RELATED_ICONS)."""

    def formfield_for_dbfield(self, db_field: Any, request: HttpRequest, **kwargs: Any) -> Any:
        field = super().formfield_for_dbfield(db_field, request, **kwargs)  # type: ignore[misc]
        for name, value in RELATED_ICONS.get(db_field.name, {}).items():
            if field is not None and hasattr(field.widget, name):
                setattr(field.widget, name, value)
        return field

    @admin.display(description=gettext_lazy("Group"))
    def group(self, obj: Job) -> Any:
        """F-31: the group's name with its colour; exclusive jobs say so."""
        if obj.exclusive:
            return format_html(
                '<span class="takt-group takt-group-exclusive">{}</span>', _("exclusive")
            )
        group = obj.concurrency_group
        if group is None:
            return EMPTY
        return group_html(group)

    @admin.display(description=gettext_lazy("Children"))
    def children_tree(self, obj: Job) -> Any:
        """F-04: the job's children in their order, with theirs below them."""
        return children_tree_html(obj) if obj.pk else EMPTY

    @admin.display(description=gettext_lazy("Allowed during maintenance"))
    def maintenance_allowed(self, obj: Job) -> str:
        """F-29: decided by the target's code, not here."""
        if allowed_in_maintenance(obj):
            return _(
                "yes: %(target)s is registered with allowed_during_maintenance=True (set in code)"
            ) % {"target": obj.target}
        return _(
            "no: during maintenance only targets registered with"
            " @takt_job(..., allowed_during_maintenance=True) start (set in code)"
        )
