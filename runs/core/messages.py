"""The texts runs carry when the engine refuses or defers them, shared by
the beat, the workers and the admin (which recognises the UTC times in
them and shows them in the reader's zone). Pure.

Texts the admin or the API also show to a reader are marked with
`gettext_noop` (the name xgettext looks for: makemessages finds them) and
kept as an English template with named parameters; the edge fills them in
the reader's language (jobs.i18n.translated), while what is stored (a
run's message, the decision log) is the English `template % params`."""

from __future__ import annotations

from datetime import UTC, datetime

MAINTENANCE_REFUSAL = "refused in maintenance mode: the job is not allowed during maintenance"


def utc_text(value: datetime) -> str:
    return value.astimezone(UTC).strftime("%Y-%m-%d %H:%M:%S UTC")
