"""The job editor's trigger inline (F-10..F-19, F-33, F-91): a form per
trigger, weekdays as boxes, excluded calendars, a dependency's upstream job
(typed into an autocomplete: there may be 100,000 jobs) and the ends of its
runs as boxes, and the next fire times of each saved trigger ("check
schedule")."""

from __future__ import annotations

from typing import Any

from django import forms
from django.contrib import admin
from django.core.exceptions import ValidationError
from django.forms.models import BaseInlineFormSet
from django.http import HttpRequest
from django.utils import timezone
from django.utils.dates import WEEKDAYS_ABBR
from django.utils.html import format_html, format_html_join
from django.utils.translation import gettext as _
from django.utils.translation import gettext_lazy, pgettext_lazy

from jobs import specs
from jobs.admin.capabilities import TriggerCapabilities
from jobs.admin.display import ADMIN_CSS, ADMIN_JS, EMPTY, LocalTimes, time_html
from jobs.core import triggers as core
from jobs.core.triggers import DEPENDENCY_STATUSES
from jobs.i18n import error_text
from jobs.js_catalog import JS_CATALOG
from jobs.models import HolidayCalendar, Job, Trigger
from jobs.policies import ALL_WEEKDAYS, TriggerKind

PREVIEW_COUNT = 5


# Django's own abbreviations (0 = Monday), in the active language.
WEEKDAY_CHOICES = [(str(day), WEEKDAYS_ABBR[day]) for day in range(7)]
STATUS_LABELS = {
    "succeeded": pgettext_lazy("run status", "succeeded"),
    "failed": pgettext_lazy("run status", "failed"),
    "timed_out": pgettext_lazy("run status", "timed out"),
    "cancelled": pgettext_lazy("run status", "cancelled"),
    "skipped": pgettext_lazy("run status", "skipped"),
    "lost": pgettext_lazy("run status", "lost"),
}
STATUS_CHOICES = [
    (status, STATUS_LABELS.get(status, status.replace("_", " "))) for status in DEPENDENCY_STATUSES
]
_SHOWN = "__shown"


class MarkedCheckboxes(forms.CheckboxSelectMultiple):
    """A box per choice, plus a hidden marker: a form posted without the
    field at all (a script, an old page) keeps the stored value, while
    unticking every box is an empty choice, which validation refuses."""

    def render(self, name: str, value: Any, attrs: Any = None, renderer: Any = None) -> str:
        marker = format_html('<input type="hidden" name="{}" value="1">', name + _SHOWN)
        return super().render(name, value, attrs, renderer) + marker

    def value_omitted_from_data(self, data: Any, files: Any, name: str) -> bool:
        return name + _SHOWN not in data

    def value_from_datadict(self, data: Any, files: Any, name: str) -> Any:
        if name + _SHOWN not in data:
            return None
        return super().value_from_datadict(data, files, name)


class WeekdaysField(forms.MultipleChoiceField):
    """Trigger.weekdays ("01234" = Monday to Friday) as checkboxes."""

    widget = MarkedCheckboxes

    def __init__(self, **kwargs: Any) -> None:
        # A new trigger ("Add another Trigger") starts with every day ticked,
        # like the model's default.
        kwargs.setdefault("initial", list(ALL_WEEKDAYS))
        super().__init__(choices=WEEKDAY_CHOICES, required=False, **kwargs)

    def prepare_value(self, value: Any) -> Any:
        return list(value) if isinstance(value, str) else value

    def clean(self, value: Any) -> str:
        return "".join(sorted(super().clean(value)))

    def has_changed(self, initial: Any, data: Any) -> bool:
        return data is not None and super().has_changed(initial, data)


class StatusesField(forms.MultipleChoiceField):
    """Trigger.upstream_statuses (["succeeded", "failed"]) as checkboxes, in
    their canonical order; a new trigger starts with "succeeded" ticked."""

    widget = MarkedCheckboxes

    def __init__(self, **kwargs: Any) -> None:
        kwargs.setdefault("initial", ["succeeded"])
        super().__init__(choices=STATUS_CHOICES, required=False, **kwargs)

    def clean(self, value: Any) -> list[str]:
        chosen = set(super().clean(value))
        return [status for status in DEPENDENCY_STATUSES if status in chosen]

    def has_changed(self, initial: Any, data: Any) -> bool:
        return data is not None and super().has_changed(initial, data)


class AnchorField(forms.TypedChoiceField):
    """Trigger.interval_anchor; an old name (core.ANCHOR_ALIASES:
    `from_enqueue` is `fixed_rate`) is taken for the new one."""

    def to_python(self, value: Any) -> Any:
        value = super().to_python(value)
        return core.ANCHOR_ALIASES.get(value, value)


class TriggerForm(forms.ModelForm):
    weekdays = WeekdaysField(
        label=gettext_lazy("Weekdays"), help_text=gettext_lazy("The days it may fire on.")
    )
    upstream_statuses = StatusesField(
        label=gettext_lazy("When it ends"),
        help_text=gettext_lazy(
            "Start this job when a run of the upstream job ends with one of these."
        ),
    )
    exclude_calendars = forms.ModelMultipleChoiceField(
        HolidayCalendar.objects.all(),
        required=False,
        widget=forms.CheckboxSelectMultiple,
        label=gettext_lazy("Exclude calendars"),
        help_text=gettext_lazy(
            "Never fire on the days of these holiday calendars (Jobs › Holiday calendars)."
        ),
    )

    class Meta:
        model = Trigger
        fields = "__all__"
        # Times of day in the trigger's own zone: plain inputs, not the admin's
        # clock widget, whose "Now" and "you are N hours behind server time"
        # speak of the server's zone.
        widgets = {
            name: forms.TimeInput(attrs={"placeholder": "HH:MM", "size": 8}, format="%H:%M")
            for name in ("at_time", "window_start", "window_end")
        }

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        if not self.initial.get("upstream_statuses"):
            # None stored means "succeeded" (a trigger made in code, or of
            # another kind: choosing "After another job" starts from it).
            self.initial["upstream_statuses"] = ["succeeded"]
        if "jitter_seconds" in self.fields:
            self.fields["jitter_seconds"].required = False  # empty: no jitter
        for name in ("settle_seconds", "watch_pattern"):  # empty: the default
            if name in self.fields:
                self.fields[name].required = False

    def clean_jitter_seconds(self) -> int:
        value = self.cleaned_data.get("jitter_seconds")
        return 0 if value is None else int(value)

    def clean_settle_seconds(self) -> int:
        value = self.cleaned_data.get("settle_seconds")
        return 2 if value is None else int(value)

    def clean_watch_pattern(self) -> str:
        return self.cleaned_data.get("watch_pattern") or "*"

    def clean(self) -> dict[str, Any]:
        cleaned = super().clean()
        if cleaned.get("kind") == TriggerKind.DEPENDENCY and cleaned.get("upstream_statuses") == []:
            # Validation would take "none" for the default, succeeded: an
            # operator who unticked every box meant something else.
            self.add_error("upstream_statuses", _("tick at least one way its run ends"))
        if "exclude_calendars" in cleaned:
            # Validation and the trigger's save see the chosen calendars
            # before the form writes them (after the trigger).
            specs.stage_exclude_calendars(self.instance, cleaned["exclude_calendars"])
        return cleaned


class TriggerFormSet(BaseInlineFormSet):
    """The job's triggers. A new job made a child (F-04) is refused a
    trigger here, on its kind, in the words of jobs/coordination.py: the
    model's own check needs the job's id, which a job being added has not."""

    def clean(self) -> None:
        super().clean()
        job = self.instance
        if job.pk is not None or job.parent_id is None:
            return
        for form in self.forms:
            data = getattr(form, "cleaned_data", None) or {}
            if form.has_changed() and data.get("enabled") and not data.get("DELETE"):
                form.add_error(
                    "kind",
                    _(
                        "job #(new) is a child of job #%(parent)s: it runs only as part of"
                        " its parent's run and takes no trigger of its own (disable or delete"
                        " this trigger, or clear its parent)"
                    )
                    % {"parent": job.parent_id},
                )


class TriggerInline(LocalTimes, TriggerCapabilities, admin.StackedInline):
    """Triggers in the job editor. trigger_inline.js shows the fields of the
    chosen kind (and, for calendar presets, of the chosen rule). The upstream
    job of a dependency is an autocomplete (JobAdmin's search), which also
    works in a form added with "Add another Trigger"."""

    model = Trigger
    fk_name = "job"
    form = TriggerForm
    formset = TriggerFormSet
    extra = 0
    fieldsets = (
        (
            None,
            {
                "fields": (
                    ("kind", "enabled"),
                    "timezone",
                    "cron_expression",
                    ("interval_seconds", "interval_anchor", "start_at"),
                    "run_at",
                    "upstream_job",
                    "upstream_statuses",
                    "watch_folder",
                    ("watch_pattern", "watch_recursive"),
                    "settle_seconds",
                )
            },
        ),
        (
            gettext_lazy("Calendar preset"),
            {"fields": ("calendar_rule", ("at_time", "day_of_month", "month"))},
        ),
        (
            gettext_lazy("Weekdays, time window and excluded days"),
            {"fields": ("weekdays", ("window_start", "window_end"), "exclude_calendars")},
        ),
        (None, {"fields": ("jitter_seconds", ("next_run", "upcoming"))}),
    )
    readonly_fields = ("next_run", "upcoming")
    autocomplete_fields = ("upstream_job",)

    def formfield_for_dbfield(self, db_field: Any, request: HttpRequest, **kwargs: Any) -> Any:
        """The upstream job offers "view" beside it, not "add" or "change":
        a job is not written from a popup of another job's trigger. The
        interval anchor takes its old name too (AnchorField)."""
        if db_field.name == "interval_anchor":
            kwargs.setdefault("choices_form_class", AnchorField)
        field = super().formfield_for_dbfield(db_field, request, **kwargs)
        if db_field.name == "upstream_job" and field is not None:
            field.widget.can_add_related = field.widget.can_change_related = False
        return field

    # F-75: the triggers of a job declared in code are changed in code.
    def has_add_permission(self, request: HttpRequest, obj: Job | None = None) -> bool:
        return not (obj and obj.code_managed) and super().has_add_permission(request, obj)

    def has_change_permission(self, request: HttpRequest, obj: Job | None = None) -> bool:
        return not (obj and obj.code_managed) and super().has_change_permission(request, obj)

    def has_delete_permission(self, request: HttpRequest, obj: Job | None = None) -> bool:
        return not (obj and obj.code_managed) and super().has_delete_permission(request, obj)

    class Media:
        css = {"all": ADMIN_CSS}
        js = (JS_CATALOG, *ADMIN_JS, "jobs/trigger_inline.js", "takt/schedule_preview.js")

    @admin.display(description=gettext_lazy("Next run at"))
    def next_run(self, obj: Trigger) -> str:
        if obj.pk is None:
            return EMPTY
        if obj.kind == TriggerKind.DEPENDENCY:
            return _("none by the clock: it fires when a run of the upstream job ends")
        if obj.kind == TriggerKind.FILE:
            return _("none by the clock: it fires when a matching file arrives")
        if not obj.active:
            return format_html(
                "{} <span class='takt-muted'>({})</span>",
                time_html(obj.next_run_at),
                _("inactive: the job or the trigger is off"),
            )
        return time_html(obj.next_run_at, relative=True)

    @admin.display(description=gettext_lazy("Next fire times (check schedule)"))
    def upcoming(self, obj: Trigger) -> str:
        if obj.pk is None:
            return _("Save to see the next fire times.")
        if obj.kind in (TriggerKind.DEPENDENCY, TriggerKind.FILE):
            return format_html(
                "{}", _("%(trigger)s: no fire times") % {"trigger": specs.trigger_description(obj)}
            )
        now = timezone.now()
        try:
            spec = specs.trigger_spec(obj, now=now)
            times = core.compute_fire_times(spec, after=now, count=PREVIEW_COUNT)
        except core.TriggerError as exc:
            return f"{exc.field}: {error_text(exc)}"
        except ValueError as exc:
            return str(exc)
        except ValidationError as exc:
            return "; ".join(exc.messages)
        if not times:
            return _("Never fires again.")
        return format_html_join("", "{}<br>", ((time_html(t),) for t in times))
