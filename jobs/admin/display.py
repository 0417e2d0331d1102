"""How the Takt admin shows times, durations and statuses (F-90, F-64).

Every date-time goes out as ``<time class="takt-time" datetime="…Z">``
with the request's zone as its text (jobs/input_zone.py: the browser's
once it told its zone, else the server's); ``takt/admin.js`` rewrites the
text in the browser's own zone with the zone's abbreviation and puts the
UTC value in the tooltip. Every Takt admin is a `LocalTimes`: a date-time
field it lists or shows read-only goes out this way by itself, and one
typed in says its zone beside the input. Durations are words ("4 min 05 s"), statuses
coloured badges (``takt/admin.css``, readable in the light and dark admin
themes).
"""

from __future__ import annotations

import functools
import re
from datetime import UTC, datetime, timedelta
from decimal import Decimal
from typing import Any

from django.contrib import admin
from django.contrib.admin.utils import flatten_fieldsets
from django.db import models
from django.http import HttpRequest
from django.utils import timezone
from django.utils.formats import number_format
from django.utils.html import escape, format_html
from django.utils.safestring import SafeString, mark_safe
from django.utils.translation import gettext, gettext_noop

from jobs.input_zone import zoned_datetime_overrides
from jobs.js_catalog import JS_CATALOG
from runs.core.messages import utc_text

EMPTY = "—"

# The admin's CSS and JS, for a ModelAdmin's Media and the custom pages.
ADMIN_CSS = ("takt/admin.css",)
ADMIN_JS = ("takt/admin.js",)


def server_time_text(value: datetime, *, seconds: bool = True) -> str:
    """`value` in the request's zone: "2026-12-01 17:51:10 CET"."""
    local = timezone.localtime(value)
    return local.strftime("%Y-%m-%d %H:%M:%S %Z" if seconds else "%Y-%m-%d %H:%M %Z")


def time_html(
    value: datetime | None,
    *,
    seconds: bool = True,
    relative: bool = False,
    compact: bool = False,
    empty: str = EMPTY,
) -> SafeString:
    """A date-time as the admin shows it (see the module docstring).
    `relative` adds "(in 4 min)" / "(3 min ago)" in the browser; `compact`
    (lists) drops the date of a time that is today in the browser's zone."""
    if value is None:
        return format_html("{}", empty)
    iso = value.astimezone(UTC).isoformat(timespec="seconds").replace("+00:00", "Z")
    flags = (" data-relative" if relative else "") + (" data-compact" if compact else "")
    return format_html(
        '<time class="takt-time" datetime="{}" title="{}" data-precision="{}"{}>{}</time>',
        iso,
        utc_text(value),
        "second" if seconds else "minute",
        mark_safe(flags),
        server_time_text(value, seconds=seconds),
    )


def time_column(field: str, label: Any, *, compact: bool = False) -> Any:
    """A column or read-only field of a ModelAdmin showing the date-time
    `field` as `time_html` does; `compact` (lists) drops today's date."""

    @admin.display(description=label, ordering=field)
    def column(self: Any, obj: Any) -> SafeString:
        return time_html(getattr(obj, field), compact=compact)

    return column


SHOWN, LISTED = "_shown", "_listed"


class LocalTimes:
    """The first base of every Takt ModelAdmin and inline (F-121): each
    date-time field of the model that it lists, or shows read-only, is
    shown as `time_html` shows it (as the column or field ``<name>_listed``,
    ``<name>_shown``), and each one typed in says its zone beside the input
    (jobs/input_zone.py). Django would print it in the server's zone
    without the zone's name. A subclass's own get_list_display,
    get_readonly_fields and get_fieldsets are held to it too, whether or
    not they call super()."""

    formfield_overrides = zoned_datetime_overrides()
    model: Any
    readonly_fields: Any

    class Media:  # a time's text in the browser's zone, and the zone cookie
        css = {"all": ADMIN_CSS}
        js = (JS_CATALOG, *ADMIN_JS)

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        for name in ("get_list_display", "get_readonly_fields", "get_fieldsets"):
            own = cls.__dict__.get(name)
            if own is not None:
                setattr(cls, name, _held_to_local_times(name, own))

    def _time_fields(self) -> dict[str, Any]:
        return {f.name: f for f in self.model._meta.fields if isinstance(f, models.DateTimeField)}

    def __getattr__(self, name: str) -> Any:
        for suffix in (SHOWN, LISTED):
            field = self._time_fields().get(name.removesuffix(suffix))
            if name.endswith(suffix) and field is not None:
                label = field.verbose_name
                return time_column(field.name, label, compact=suffix == LISTED).__get__(self)
        raise AttributeError(name)

    def get_list_display(self, request: HttpRequest) -> Any:
        return self._listed(super().get_list_display(request))  # type: ignore[misc]

    def get_readonly_fields(self, request: HttpRequest, obj: Any = None) -> Any:
        return self._read_only(super().get_readonly_fields(request, obj))  # type: ignore[misc]

    def get_fieldsets(self, request: HttpRequest, obj: Any = None) -> Any:
        fieldsets = super().get_fieldsets(request, obj)  # type: ignore[misc]
        return self._fieldsets(fieldsets, request, obj)

    def get_form(
        self, request: HttpRequest, obj: Any = None, change: bool = False, **kwargs: Any
    ) -> Any:
        if "fields" not in kwargs:  # get_fields asks with fields=None
            kwargs["fields"] = self._form_fields(request, obj)
        return super().get_form(request, obj, change=change, **kwargs)  # type: ignore[misc]

    def get_formset(self, request: HttpRequest, obj: Any = None, **kwargs: Any) -> Any:
        if "fields" not in kwargs:
            kwargs["fields"] = self._form_fields(request, obj)
        return super().get_formset(request, obj, **kwargs)  # type: ignore[misc]

    def _form_fields(self, request: HttpRequest, obj: Any) -> list[Any]:
        """The fields of the fieldsets without the shown date-times, which
        are this admin's, not the form's."""
        times = self._time_fields()
        return [
            name
            for name in flatten_fieldsets(self.get_fieldsets(request, obj))
            if not (isinstance(name, str) and name.endswith(SHOWN) and name[: -len(SHOWN)] in times)
        ]

    # Each of these gives the same answer when applied twice.
    def _listed(self, names: Any) -> list[Any]:
        times = self._time_fields()
        return [f"{n}{LISTED}" if isinstance(n, str) and n in times else n for n in names]

    def _read_only(self, names: Any) -> list[Any]:
        """Each read-only date-time as ``<name>_shown``, and its own name
        after all (the form leaves it out; `_fieldsets` drops it)."""
        times = self._time_fields()
        shown = [f"{n}{SHOWN}" if isinstance(n, str) and n in times else n for n in names]
        own = [n for n in names if isinstance(n, str) and n in times]
        return list(dict.fromkeys([*shown, *own]))

    def _typed_in(self, request: HttpRequest, obj: Any) -> bool:
        """Whether the page's fields are typed in: the user may change the
        object, or add one (a view-only page shows every field)."""
        admin_: Any = self
        if admin_.has_change_permission(request, obj):
            return True
        if isinstance(admin_, admin.options.InlineModelAdmin):
            return bool(admin_.has_add_permission(request, obj))
        return obj is None and bool(admin_.has_add_permission(request))

    def _fieldsets(self, fieldsets: Any, request: HttpRequest, obj: Any) -> list[Any]:
        """A date-time that is not typed in (not editable, read-only in the
        class, or the user may not change the object) as ``<name>_shown``."""
        typed = self._typed_in(request, obj)
        shown_names = {
            name
            for name, field in self._time_fields().items()
            if not typed or not field.editable or name in self.readonly_fields
        }
        seen: set[Any] = set()

        def shown(name: Any) -> Any:
            if isinstance(name, list | tuple):
                return tuple(n for n in (shown(part) for part in name) if n)
            if isinstance(name, str) and name in shown_names:
                name = f"{name}{SHOWN}"
            if name in seen:
                return None
            seen.add(name)
            return name

        return [
            (title, {**options, "fields": tuple(n for n in map(shown, options["fields"]) if n)})
            for title, options in fieldsets
        ]


def _held_to_local_times(name: str, method: Any) -> Any:
    """`method` (a LocalTimes subclass's own get_…) with its answer in
    LocalTimes' names."""

    @functools.wraps(method)
    def held(self: LocalTimes, request: HttpRequest, *args: Any) -> Any:
        answer = method(self, request, *args)
        if name == "get_list_display":
            return self._listed(answer)
        if name == "get_readonly_fields":
            return self._read_only(answer)
        return self._fieldsets(answer, request, args[0] if args else None)

    return held


UNKNOWN_DURATION = gettext_noop("unknown")


def run_duration_text(status: str, seconds: float | timedelta | None, *, empty: str = EMPTY) -> str:
    """A run's duration as duration_text says it, but "unknown" for a `lost`
    run: its worker died at some moment between its last lock renewal and
    the detection, so no duration is recorded (runs.ending.finish_run)."""
    if status == "lost":
        return gettext(UNKNOWN_DURATION)
    return duration_text(seconds, empty=empty)


def duration_text(seconds: float | timedelta | None, *, empty: str = EMPTY) -> str:
    """A duration in words: "0.25 s", "12.3 s", "4 min 05 s", "2 h 03 min",
    "3 d 04 h", in the reader's language and number format (German "0,25 s",
    "3 T 04 h"). None: `empty`."""
    if seconds is None:
        return empty
    if isinstance(seconds, timedelta):
        seconds = seconds.total_seconds()
    if seconds < 0:
        seconds = 0.0
    if seconds < 60:  # the decimal point is the language's (Django's number_format)
        places = 2 if seconds < 10 else 1
        rounded = Decimal(f"{seconds:.{places}f}")  # rounded (number_format would cut)
        return gettext("%(seconds)s s") % {"seconds": number_format(rounded, places)}
    whole = int(round(seconds))
    days, rest = divmod(whole, 86400)
    hours, rest = divmod(rest, 3600)
    minutes, secs = divmod(rest, 60)
    if days:
        return gettext("%(days)d d %(hours)02d h") % {"days": days, "hours": hours}
    if hours:
        return f"{hours} h {minutes:02d} min"
    return f"{minutes} min {secs:02d} s"


def breakable(text: str) -> SafeString:
    """`text` escaped, with a line-break opportunity (<wbr>) after each ".",
    "/" and "_": a dotted target or a zone name wraps in a narrow list
    column (the lists fit a 1280-pixel window) instead of widening it."""
    return mark_safe(_wrappable(str(escape(text))))  # noqa: S308  (escaped)


def _wrappable(escaped: str) -> str:
    return re.sub(r"([./_])", r"\1<wbr>", escaped)


def badge_html(value: str, *, family: str = "status", label: str | None = None) -> SafeString:
    """A coloured badge: ``family`` is "status" (a run's status) or
    "state" (a heartbeat's state); the CSS class is takt-<family>-<value>."""
    if not value:
        return format_html("{}", EMPTY)
    return format_html(
        '<span class="takt-badge takt-{}-{}">{}</span>',
        family,
        value.replace(" ", "-"),
        label if label is not None else value.replace("_", " "),
    )


def status_badge(status: str) -> SafeString:
    """A run status's badge, its word in the active language (the CSS class
    keeps the code)."""
    from runs.models import status_word  # the admin is glue over the apps

    return badge_html(status, family="status", label=status_word(status) if status else None)


def state_badge(state: str) -> SafeString:
    """A heartbeat state's badge, its word in the active language."""
    from heartbeats.labels import state_word  # imports this module: not at the top

    return badge_html(state, family="state", label=state_word(state) if state else None)


# A UTC time inside a message ("… ended succeeded at 2026-06-01 08:00:03
# UTC", an alert's "last run 2026-06-01T08:00:00+00:00").
_UTC_IN_TEXT = re.compile(
    r"\b(\d{4}-\d{2}-\d{2})[ T](\d{2}:\d{2}(?::\d{2})?)(?:\.\d+)?(?: UTC|Z|\+00:00)"
)


def times_in_text(text: str, *, wrap: bool = False) -> SafeString:
    """`text` escaped, each UTC time in it shown as the admin shows times
    (the browser's zone, UTC on hover): for messages written for e-mail and
    logs, shown in the admin. `wrap`: the text around the times may break
    after ".", "/" and "_" too (`breakable`), for a narrow list column."""
    edge = _wrappable if wrap else str
    parts, last = [], 0
    for match in _UTC_IN_TEXT.finditer(text):
        try:
            moment = datetime.fromisoformat(f"{match.group(1)}T{match.group(2)}").replace(
                tzinfo=UTC
            )
        except ValueError:
            continue
        parts.append(edge(escape(text[last : match.start()])))
        parts.append(str(time_html(moment)))
        last = match.end()
    parts.append(edge(escape(text[last:])))
    return mark_safe("".join(parts))  # noqa: S308  (every part escaped or built by format_html)
