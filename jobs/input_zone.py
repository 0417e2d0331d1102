"""The zone a date-time typed in the admin is read in (F-121): the
browser's, which takt/admin.js tells the server in the cookie
``takt_time_zone``; without it (JavaScript off, or the first page before
any Takt page ran its script), or with a name zoneinfo does not know, the
server's (TIME_ZONE). Every date-time input says next to it which zone it
is read in (`ZonedSplitDateTime`, `ZonedDateTimeInput`, `zone_note`).

`BrowserTimeZoneMiddleware` activates that zone for the request: Django's
forms read a time typed without an offset in the active zone and show a
stored one in it, and the admin's `data-admin-utc-offset` (`{% now "Z" %}`)
is that zone's, so the "Now" shortcut gives the browser's time and the
"You are N hours behind server time" note has nothing to say. An offset
typed with the time (ISO 8601) wins over the zone, as in the API."""

from __future__ import annotations

import functools
import re
from collections.abc import Callable
from contextvars import ContextVar
from datetime import datetime
from typing import Any
from zoneinfo import ZoneInfo, available_timezones

from django import forms
from django.contrib.admin.widgets import AdminSplitDateTime
from django.http import HttpRequest, HttpResponse
from django.utils import timezone
from django.utils.html import format_html
from django.utils.safestring import SafeString, mark_safe
from django.utils.translation import gettext

COOKIE = "takt_time_zone"
_NAME = re.compile(r"[A-Za-z0-9_+\-]+(/[A-Za-z0-9_+\-]+){0,2}")
_FROM_BROWSER: ContextVar[bool] = ContextVar("takt_zone_from_browser", default=False)


@functools.cache
def _known_zones() -> frozenset[str]:
    return frozenset(available_timezones())


def browser_zone(request: HttpRequest) -> ZoneInfo | None:
    """The zone the browser named in its cookie, or None (no cookie, or a
    name that is not an IANA zone this server knows)."""
    name = request.COOKIES.get(COOKIE, "")
    if len(name) > 64 or not _NAME.fullmatch(name) or name not in _known_zones():
        return None
    return ZoneInfo(name)


class BrowserTimeZoneMiddleware:
    """Activates the browser's zone (`browser_zone`) for the request, else
    the server's; after the response, the server's again."""

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        zone = browser_zone(request)
        token = _FROM_BROWSER.set(zone is not None)
        if zone is not None:
            timezone.activate(zone)
        else:
            timezone.deactivate()
        try:
            return self.get_response(request)
        finally:
            timezone.deactivate()
            _FROM_BROWSER.reset(token)


def zone_note() -> SafeString:
    """Beside a date-time input: the zone the time is read in, the
    browser's or (saying so) the server's."""
    name = timezone.get_current_timezone_name()
    if _FROM_BROWSER.get():
        text = gettext("%(zone)s, your browser's time zone") % {"zone": name}
    else:
        text = gettext("%(zone)s, the server's time zone (your browser did not tell its own)") % {
            "zone": name
        }
    return format_html('<span class="takt-input-zone" data-zone="{}">{}</span>', name, text)


def typed_text(moment: datetime) -> str:
    """A time typed in, in the zone it was read in: "2026-12-07 03:10 EST"."""
    local = timezone.localtime(moment)
    return local.strftime("%Y-%m-%d %H:%M:%S %Z" if local.second else "%Y-%m-%d %H:%M %Z")


class ZonedSplitDateTime(AdminSplitDateTime):
    """The admin's date and time inputs, with the zone they are read in."""

    def render(self, *args: Any, **kwargs: Any) -> SafeString:
        """The note on a line of its own, under the time (inside the admin's
        <p class="datetime">, which sits in a row with the label)."""
        html = str(super().render(*args, **kwargs))
        head, end, tail = html.rpartition("</p>")
        note = format_html("<br>{}", zone_note())
        return mark_safe(f"{head}{note}{end}{tail}" if end else html + note)  # noqa: S308


class ZonedDateTimeInput(forms.DateTimeInput):
    """One "YYYY-MM-DD HH:MM" input, with the zone it is read in."""

    def __init__(self, attrs: dict[str, Any] | None = None) -> None:
        super().__init__({"placeholder": "YYYY-MM-DD HH:MM", "size": 18, **(attrs or {})})

    def render(self, *args: Any, **kwargs: Any) -> SafeString:
        return mark_safe(super().render(*args, **kwargs) + " " + zone_note())  # noqa: S308


def zoned_datetime_overrides() -> dict[Any, dict[str, Any]]:
    """A ModelAdmin's `formfield_overrides`: every DateTimeField typed in
    with its zone beside it."""
    from django.db import models

    return {models.DateTimeField: {"widget": ZonedSplitDateTime}}
