"""A heartbeat's state and an alert's severity in the reader's language (gettext: English by default, German for
a German request). The stored values stay the codes ("down", "critical");
these are only what a page, an e-mail or an alert shows.

`state_word` is a heartbeat state's word ("down", "ausgefallen"): every Takt
page that shows a heartbeat's state says it so (its coloured badge: the
template filter ``takt_heartbeat_state`` of ``{% load takt_summary %}``;
one vocabulary, issue 29). `severity_word` is an alert's severity. Unknown values are shown as they
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


def severity_word(severity: str) -> str:
    """An alert's severity in the active language ("critical": "kritisch")."""
    from heartbeats.models import AlertSeverity

    try:
        return str(AlertSeverity(severity).label)
    except ValueError:
        return severity
