"""A heartbeat's state, the operations page's state and an alert's
severity in the reader's language (gettext: English by default, German for
a German request). The stored values stay the codes ("down", "critical");
these are only what a page, an e-mail or an alert shows.

`state_word` is a heartbeat state's word ("down", "ausgefallen"); any Takt
page that shows a heartbeat's state can use it (its coloured badge: the
template filter ``takt_heartbeat_state`` of ``{% load takt_summary %}``). `operations_word` translates the label of the
operations page's state column (heartbeats.core.status.operations_label),
`severity_word` an alert's severity. Unknown values are shown as they
are."""

from __future__ import annotations

from django.utils.translation import gettext

from heartbeats.core.status import STATE_LABELS, HeartbeatState


def state_word(state: str) -> str:
    """A heartbeat state's word in the active language ("late": "verspätet")."""
    try:
        label = STATE_LABELS[HeartbeatState(state)]
    except ValueError:
        return state
    return gettext(label)


def operations_word(label: str) -> str:
    """The operations page's state ("Overdue", "Last run failed", "OK", "No
    run has reported yet") in the active language."""
    return gettext(label) if label else label


def severity_word(severity: str) -> str:
    """An alert's severity in the active language ("critical": "kritisch")."""
    from heartbeats.models import AlertSeverity

    try:
        return str(AlertSeverity(severity).label)
    except ValueError:
        return severity
