"""The "Why didn't it run?" checklist (F-66) in the reader's language:
`check_name`, `check_detail`, `check_text`, `verdict_text` and
`runs_next_words` translate
what the pure core marked (heartbeats.core.check.said: a message and its
parameters apart); a detail the core writes only in English stays English.
`manage.py explain_job` prints the English text (management-command
output, for operators' scripts)."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from datetime import datetime

from django.utils.translation import gettext

from heartbeats.core.check import Check, Joined, Phrase
from heartbeats.core.explain import Explanation


def check_name(check: Check) -> str:
    """The check's name in the active language ("trigger": "Auslöser")."""
    return gettext(check.name)


def check_detail(check: Check) -> str:
    """The check's detail, without its time, in the active language: the
    core's marked message with its parameters, else the English detail."""
    if not check.message:
        return check.detail
    return _translated(check.message, check.params)


def _translated(message: str, params: Mapping[str, object]) -> str:
    """`message` in the active language with its parameters, a Phrase
    among them translated too."""
    if not params:
        return gettext(message)
    return gettext(message) % {name: _value(value) for name, value in params.items()}


def _value(value: object) -> object:
    if isinstance(value, Phrase):
        return _translated(value.message, value.params)
    if isinstance(value, Joined):
        return value.sep.join(str(_value(item)) for item in value.items)
    return value


def check_text(check: Check, show: Callable[[datetime], str]) -> str:
    """The detail with its time shown by `show` (the reader's zone)."""
    detail = check_detail(check)
    return f"{detail} {show(check.at)}" if check.at is not None else detail


def verdict_text(answer: Explanation, show: Callable[[datetime], str]) -> str:
    """The verdict line in the active language, its time shown by `show`."""
    first = answer.holding_back
    if first is not None:
        return gettext("held back by: %(check)s (%(detail)s)") % {
            "check": check_name(first),
            "detail": check_text(first, show),
        }
    if answer.next_run_at is not None:
        if answer.starts:
            return gettext("nothing holds it back: it runs %(starts)s, next at %(time)s") % {
                "starts": _value(answer.starts),
                "time": show(answer.next_run_at),
            }
        return gettext("nothing holds it back: it runs next at %(time)s") % {
            "time": show(answer.next_run_at)
        }
    if answer.starts:
        return gettext("nothing holds it back: it runs %(starts)s") % {
            "starts": _value(answer.starts)
        }
    return gettext("nothing holds it back")


def runs_next_words(answer: Explanation) -> str:
    """The words before the next run's time in the verdict ("it runs next
    at"), in the active language (Explanation.runs_next_words's English)."""
    if answer.starts:
        return gettext("it runs %(starts)s, next at") % {"starts": _value(answer.starts)}
    return gettext("it runs next at")
