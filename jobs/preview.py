"""The "check schedule" (F-19): the next fire times of a trigger that may not be
saved yet, with the schedule in words, validated exactly as saving it
would be (the model's full_clean: jobs.validation.validate_trigger). Used by
the API's /api/v1/schedule/preview, which the trigger form in the admin
calls while the operator types."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

from django.conf import settings
from django.core.exceptions import ValidationError
from django.utils.translation import gettext

from jobs.core import triggers as core
from jobs.i18n import cron_locale, error_text
from jobs.models import HolidayCalendar, Trigger
from jobs.specs import stage_exclude_calendars, trigger_spec

MAX_COUNT = 50


@dataclass(frozen=True)
class Preview:
    description: str
    timezone: str  # the zone the trigger reads its times in (canonical spelling)
    fire_times: list[datetime]  # aware UTC, at most `count`
    enabled: bool
    jitter_s: int


def preview_trigger(
    values: dict[str, Any],
    *,
    calendars: list[HolidayCalendar] | None = None,
    trigger_id: int | None = None,
    count: int = 5,
    now: datetime,
    after: datetime | None = None,
) -> Preview:
    """Validate the trigger made of `values` (Trigger field names; for an
    existing trigger `trigger_id`, only what differs from the stored one is
    new, so a saved once trigger whose time passed is not refused) and
    return its next `count` (1..MAX_COUNT) fire times after `after`
    (default `now`). Raises ValidationError naming the field; stores
    nothing."""
    if not 1 <= count <= MAX_COUNT:
        raise ValidationError({"count": f"must be between 1 and {MAX_COUNT}, got {count}"})
    trigger = Trigger()
    if trigger_id is not None:
        stored = Trigger.objects.filter(pk=trigger_id).first()
        if stored is None:
            raise ValidationError({"id": f"no trigger with id {trigger_id}"})
        trigger = stored
    for name, value in values.items():
        setattr(trigger, name, value)
    if calendars is not None:
        stage_exclude_calendars(trigger, calendars)
    trigger.full_clean(exclude=["job"])
    start = after or now
    try:
        spec = trigger_spec(trigger, now=start)
        times = core.compute_fire_times(spec, after=start, count=count)
        description = core.describe(spec, gettext, cron_locale=cron_locale())
    except core.TriggerError as exc:  # validated above; kept for a clear message anyway
        raise ValidationError({exc.field: error_text(exc)}) from None
    return Preview(
        description=description,
        timezone=core.canonical_timezone(trigger.timezone or settings.TIME_ZONE),
        fire_times=times,
        enabled=trigger.enabled,
        jitter_s=trigger.jitter_seconds or 0,
    )
