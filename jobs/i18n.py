"""Translation at the edge for messages the pure core marks with its own
gettext_noop (jobs/core/cron.py): the core keeps a message's English
template and its named parameters apart; here they meet in the active
language (docs/translation.md)."""

from __future__ import annotations

from typing import Any

from django.utils.translation import get_language, gettext


def translated(template: str, params: dict[str, Any] | None = None) -> str:
    """`template` in the active language, filled with `params` (named
    %(name)s placeholders). A template with no catalogue entry stays English."""
    text = gettext(template)
    return text % params if params else text


def cron_locale() -> str:
    """cron-descriptor's locale for the active language (English otherwise)."""
    return "de_DE" if (get_language() or "").lower().startswith("de") else "en_US"


def error_text(exc: Any) -> str:
    """The message of a core TriggerError (or any error with `template` and
    `params`) in the active language; its plain `message` for others."""
    template = getattr(exc, "template", None)
    if template is None:
        return str(exc.message)
    return translated(template, getattr(exc, "params", None))
