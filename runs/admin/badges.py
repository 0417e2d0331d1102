"""A run status's coloured badge with its word in the reader's language
(runs.labels.status_word): the run list, a run's page, its live view and
any Takt page showing a run's status. The CSS class keeps the code
(takt-status-timed_out), so colours and tests do not depend on the
language."""

from __future__ import annotations

from django.utils.safestring import SafeString

from jobs.admin.display import badge_html
from runs.labels import status_word


def status_badge(status: str) -> SafeString:
    """The badge of run status `status` ("—" for an empty one)."""
    return badge_html(status, family="status", label=status_word(status) if status else None)
