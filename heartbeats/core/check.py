"""One line of "Why didn't it run?" (F-66), and the words its checks share.
Pure: heartbeats/core/explain.py and heartbeats/core/coordination.py build
the checks; the admin and `manage.py explain_job` show them."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime


@dataclass(frozen=True)
class Check:
    name: str
    ok: bool
    detail: str
    at: datetime | None = None  # the moment the detail speaks of, if any
    run_id: int | None = None  # the job's own run it names (the admin offers to cancel it)

    def text(self, show: Callable[[datetime], str]) -> str:
        """The detail with its time shown by `show` (the reader's zone)."""
        return f"{self.detail} {show(self.at)}" if self.at is not None else self.detail


def or_words(items: Sequence[object]) -> str:
    """ "a", "a or b", "a, b or c"."""
    words = [str(item) for item in items]
    if len(words) <= 1:
        return "".join(words)
    return f"{', '.join(words[:-1])} or {words[-1]}"


def status_words(statuses: Sequence[str]) -> str:
    """Run statuses as the decision log writes them: "succeeded or timed out"."""
    return or_words([s.replace("_", " ") for s in statuses] or ["succeeded"])


def ordinal(n: int) -> str:
    """1st, 2nd, 3rd, 4th … 11th, 12th, 13th, 21st."""
    suffix = "th" if 10 <= n % 100 <= 20 else {1: "st", 2: "nd", 3: "rd"}.get(n % 10, "th")
    return f"{n}{suffix}"
