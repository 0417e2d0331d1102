"""How the Takt admin shows times, durations and statuses (F-90, F-64).

Every date-time goes out as ``<time class="takt-time" datetime="…Z">``
with the server's zone as its text; ``takt/admin.js`` rewrites the text in
the browser's own zone with the zone's abbreviation and puts the UTC value
in the tooltip. Without JavaScript the server's zone (TIME_ZONE) stays,
with its abbreviation. Durations are words ("4 min 05 s"), statuses
coloured badges (``takt/admin.css``, readable in the light and dark admin
themes).
"""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta
from decimal import Decimal

from django.utils import timezone
from django.utils.formats import number_format
from django.utils.html import escape, format_html
from django.utils.safestring import SafeString, mark_safe
from django.utils.translation import gettext, gettext_noop

from runs.core.messages import utc_text

EMPTY = "—"

# The admin's CSS and JS, for a ModelAdmin's Media and the custom pages.
ADMIN_CSS = ("takt/admin.css",)
ADMIN_JS = ("takt/admin.js",)


def server_time_text(value: datetime, *, seconds: bool = True) -> str:
    """`value` in the server's zone: "2026-12-01 17:51:10 CET"."""
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
    return mark_safe(re.sub(r"([./_])", r"\1<wbr>", str(escape(text))))  # noqa: S308  (escaped)


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


def times_in_text(text: str) -> SafeString:
    """`text` escaped, each UTC time in it shown as the admin shows times
    (the browser's zone, UTC on hover): for messages written for e-mail and
    logs, shown in the admin."""
    parts, last = [], 0
    for match in _UTC_IN_TEXT.finditer(text):
        try:
            moment = datetime.fromisoformat(f"{match.group(1)}T{match.group(2)}").replace(
                tzinfo=UTC
            )
        except ValueError:
            continue
        parts.append(escape(text[last : match.start()]))
        parts.append(str(time_html(moment)))
        last = match.end()
    parts.append(escape(text[last:]))
    return mark_safe("".join(parts))  # noqa: S308  (every part escaped or built by format_html)
