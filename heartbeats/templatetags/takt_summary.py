"""``{% load takt_summary %}{% takt_landing as summary %}``: the data of the
Takt landing page (heartbeats/admin/summary.py)."""

from __future__ import annotations

from typing import Any

from django import template
from django.utils import timezone

from heartbeats.admin.summary import landing_summary

register = template.Library()


@register.simple_tag
def takt_landing() -> dict[str, Any]:
    return landing_summary(now=timezone.now())
