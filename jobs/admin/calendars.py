"""The admin for holiday calendars (F-105)."""

from __future__ import annotations

from typing import Any

from django.contrib import admin
from django.core.exceptions import ValidationError
from django.db.models import QuerySet
from django.http import HttpRequest
from django.utils import timezone
from django.utils.functional import lazy
from django.utils.html import format_html_join
from django.utils.translation import gettext as _

from jobs import services
from jobs.admin.display import LocalTimes
from jobs.admin.history import AuditedAdmin
from jobs.admin.lookups import refuse_regex_lookups
from jobs.calendars import upcoming_days
from jobs.models import HolidayCalendar

CALENDAR_PREVIEW_COUNT = 10


def _next_days_text() -> str:
    return _("Next %(count)s days") % {"count": CALENDAR_PREVIEW_COUNT}


# The column's heading, in the language of each request.
_next_days_heading = lazy(_next_days_text, str)


@admin.register(HolidayCalendar)
@refuse_regex_lookups
class HolidayCalendarAdmin(AuditedAdmin, LocalTimes, admin.ModelAdmin):
    """Named days that triggers skip (F-105). Changing or deleting a
    calendar recomputes the next run of the triggers that use it."""

    change_form_template = "admin/takt/audited_change_form.html"

    list_display = ("name", "country", "subdivision", "description", "updated_at")
    search_fields = ("name", "description", "country")
    fields = ("name", "description", ("country", "subdivision"), "extra_dates", "next_days")
    readonly_fields = ("next_days",)

    @admin.display(description=_next_days_heading())
    def next_days(self, obj: HolidayCalendar) -> str:
        if obj.pk is None:
            return _("Save to see the next days.")
        try:
            days = upcoming_days(obj, today=timezone.localdate(), count=CALENDAR_PREVIEW_COUNT)
        except ValidationError as exc:
            return "; ".join(exc.messages)
        if not days:
            return _("No days in the next 5 years.")
        return format_html_join("", "{} {}<br>", ((d.isoformat(), name) for d, name in days))

    def save_model(
        self, request: HttpRequest, obj: HolidayCalendar, form: Any, change: bool
    ) -> None:
        super().save_model(request, obj, form, change)
        if change and {"country", "subdivision", "extra_dates"} & set(form.changed_data):
            ids = obj.triggers.values_list("pk", flat=True)
            services.refresh_calendar_triggers(ids, now=timezone.now())

    def delete_model(self, request: HttpRequest, obj: HolidayCalendar) -> None:
        services.delete_calendars(HolidayCalendar.objects.filter(pk=obj.pk), now=timezone.now())

    def delete_queryset(self, request: HttpRequest, queryset: QuerySet[HolidayCalendar]) -> None:
        services.delete_calendars(queryset, now=timezone.now())
