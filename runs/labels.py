"""A run's status, trigger and waiting reason in the reader's language
(gettext: English by default, German for a German request). The stored
values stay the codes ("timed_out"); these are only what a page shows.

`status_word` is the lower-case word of a status badge ("timed out",
"Zeitüberschreitung"; runs.admin.badges.status_badge is the badge), for
any Takt page or message that shows a run's status. `trigger_label` is
the trigger's label ("Schedule", "Zeitplan"), `trigger_word` its word in
a table cell ("schedule" in English, as before). Unknown values are shown
as they are."""

from __future__ import annotations

from django.utils.translation import pgettext_lazy

from runs.models import STATUS_WORDS, RunTrigger, status_word

__all__ = ["STATUS_WORDS", "TRIGGER_WORDS", "status_word", "trigger_label", "trigger_word"]

# A trigger as a table cell or inside a sentence: lower case in English, as
# the code reads ("schedule", "parent"); the filter's choices are
# RunTrigger's labels ("Schedule").
TRIGGER_WORDS = {
    RunTrigger.SCHEDULE: pgettext_lazy("run trigger word", "schedule"),
    RunTrigger.RETRY: pgettext_lazy("run trigger word", "retry"),
    RunTrigger.MANUAL: pgettext_lazy("run trigger word", "manual"),
    RunTrigger.API: pgettext_lazy("run trigger word", "api"),
    RunTrigger.CATCHUP: pgettext_lazy("run trigger word", "catchup"),
    RunTrigger.FILE: pgettext_lazy("run trigger word", "file"),
    RunTrigger.DEPENDENCY: pgettext_lazy("run trigger word", "dependency"),
    RunTrigger.PARENT: pgettext_lazy("run trigger word", "parent"),
}


def trigger_label(trigger: str) -> str:
    """A run trigger's label in the active language ("Schedule")."""
    try:
        return str(RunTrigger(trigger).label)
    except ValueError:
        return trigger


def trigger_word(trigger: str) -> str:
    """A run trigger in a table cell, in the active language: the code in
    English ("schedule"), "Zeitplan" in German."""
    word = TRIGGER_WORDS.get(trigger)  # type: ignore[call-overload]
    return str(word) if word is not None else trigger
