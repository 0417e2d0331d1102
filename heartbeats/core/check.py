"""One line of "Why didn't it run?" (F-66), and the words its checks share.
Pure: heartbeats/core/explain.py and heartbeats/core/coordination.py build
the checks; the admin and `manage.py explain_job` show them.

A check's name and, where it is one marked sentence, its detail are marked
with the core's `gettext_noop` (`said` keeps the message and its parameters
apart), so the admin shows them in the reader's language
(heartbeats.explaining.check_name and check_text); `detail` is the English
text, as `manage.py explain_job` prints it."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime

from jobs.core.cron import gettext_noop

# Every check's name, marked for translation (heartbeats.core.explain's order).
CHECK_NAMES = (
    gettext_noop("enabled"),
    gettext_noop("beat"),
    gettext_noop("scheduler switch"),
    gettext_noop("queue"),
    gettext_noop("maintenance"),
    gettext_noop("job pause"),
    gettext_noop("parent"),
    gettext_noop("children"),
    gettext_noop("trigger"),
    gettext_noop("weekday and time window"),
    gettext_noop("next fire time"),
    gettext_noop("condition"),
    gettext_noop("active runs"),
    gettext_noop("group"),
    gettext_noop("exclusive"),
    gettext_noop("global limit"),
    gettext_noop("worker"),
    gettext_noop("lock"),
)


@dataclass(frozen=True)
class Check:
    name: str
    ok: bool
    detail: str
    at: datetime | None = None  # the moment the detail speaks of, if any
    run_id: int | None = None  # the job's own run it names (the admin offers to cancel it)
    # The detail as a marked message with named placeholders, and their
    # values: `detail` is message % params. "": the detail is English only.
    message: str = ""
    params: Mapping[str, object] = field(default_factory=dict, compare=False, hash=False)

    def text(self, show: Callable[[datetime], str]) -> str:
        """The detail with its time shown by `show` (the reader's zone)."""
        return f"{self.detail} {show(self.at)}" if self.at is not None else self.detail


@dataclass(frozen=True)
class Phrase:
    """A marked phrase inside a check's sentence (a parameter of `said`),
    translated with it at the edge; str() is the English."""

    message: str
    params: Mapping[str, object] = field(default_factory=dict, compare=False, hash=False)

    def __str__(self) -> str:
        return self.message % self.params if self.params else self.message


@dataclass(frozen=True)
class Joined:
    """Items (phrases or plain text) joined by `sep` inside a sentence; the
    edge translates each phrase among them."""

    items: tuple[object, ...]
    sep: str = ", "

    def __str__(self) -> str:
        return self.sep.join(str(item) for item in self.items)


def phrase(message: str, /, **params: object) -> Phrase:
    """A phrase (`message` marked with gettext_noop) with its parameters."""
    return Phrase(message, params)


def said(
    name: str,
    ok: bool,
    message: str,
    /,
    *,
    at: datetime | None = None,
    run_id: int | None = None,
    **params: object,
) -> Check:
    """A check whose detail is one marked sentence (`message`, marked with
    gettext_noop) with named placeholders filled from `params` (a Phrase
    among them is translated with the sentence)."""
    values = {k: str(v) if isinstance(v, Phrase | Joined) else v for k, v in params.items()}
    detail = message % values if values else message
    return Check(name, ok, detail, at=at, run_id=run_id, message=message, params=params)


def said_phrase(
    name: str, ok: bool, words: Phrase, *, at: datetime | None = None, run_id: int | None = None
) -> Check:
    """A check whose detail is the phrase `words`."""
    return said(name, ok, words.message, at=at, run_id=run_id, **words.params)


def ordinal_phrase(n: int) -> Phrase:
    """1st, 2nd, 3rd, 4th … as a phrase (German: 1., 2., 3.)."""
    if 10 <= n % 100 <= 20:
        return phrase(gettext_noop("%(n)sth"), n=n)
    if n % 10 == 1:
        return phrase(gettext_noop("%(n)sst"), n=n)
    if n % 10 == 2:
        return phrase(gettext_noop("%(n)snd"), n=n)
    if n % 10 == 3:
        return phrase(gettext_noop("%(n)srd"), n=n)
    return phrase(gettext_noop("%(n)sth"), n=n)


def or_phrase(items: Sequence[object]) -> object:
    """ "a", "a or b", "a, b or c" as a phrase (or_words' English); the
    items may be phrases themselves."""
    if len(items) <= 1:
        return items[0] if items else ""
    return phrase(
        gettext_noop("%(first)s or %(last)s"), first=Joined(tuple(items[:-1])), last=items[-1]
    )


def or_words(items: Sequence[object]) -> str:
    """ "a", "a or b", "a, b or c"."""
    words = [str(item) for item in items]
    if len(words) <= 1:
        return "".join(words)
    return f"{', '.join(words[:-1])} or {words[-1]}"


def status_words(statuses: Sequence[str]) -> str:
    """Run statuses as the decision log writes them: "succeeded or timed out"."""
    return or_words([s.replace("_", " ") for s in statuses] or ["succeeded"])


# A run's statuses in words, marked (a dependency's statuses, a child run's).
STATUS_WORDS = {
    "queued": gettext_noop("queued"),
    "running": gettext_noop("running"),
    "succeeded": gettext_noop("succeeded"),
    "failed": gettext_noop("failed"),
    "timed_out": gettext_noop("timed out"),
    "lost": gettext_noop("lost"),
    "cancelled": gettext_noop("cancelled"),
    "skipped": gettext_noop("skipped"),
}


def status_phrase(statuses: Sequence[str]) -> object:
    """status_words as a phrase: "succeeded or timed out"."""
    words = [
        phrase(STATUS_WORDS[s]) if s in STATUS_WORDS else s.replace("_", " ")
        for s in (statuses or ["succeeded"])
    ]
    return or_phrase(words)
