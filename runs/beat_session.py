"""A paused beat holds nothing for long (issue 28, item 3).

A beat claims due triggers in a transaction that locks their rows (FOR
UPDATE SKIP LOCKED, runs.dispatch): the other beats skip them. A beat
paused inside that transaction (SIGSTOP, a frozen VM, a long GC pause)
used to keep the locks for the whole pause, and its triggers got no run
meanwhile (45 s in the trial). On PostgreSQL each connection of a beat
therefore gets two session limits when it is made:

* `idle_in_transaction_session_timeout` = TAKT_BEAT_IDLE_IN_TRANSACTION_SECONDS
  (5 s): a transaction that waits that long between two statements is
  ended by the server, its locks released and nothing of it kept; another
  beat claims those triggers at its next tick.
* `statement_timeout` = TAKT_BEAT_STATEMENT_TIMEOUT_SECONDS (60 s): no
  statement of the beat's runs or waits longer.

The paused beat, when it wakes, finds its connection gone: the tick fails
and says so in one line — naming the setting when the server's reason
reaches the client (`limit_hit`, from runs.beat), else as a short database
outage ("server closed the connection", then "database back") — the
connection is dropped and the next tick makes a new one; the claim it held
was rolled back, so nothing is doubled. Workers and the web are not limited: their
transactions are short and not paused by the beat's faults.

Other databases: SQLite has no sessions (one writer at a time, its busy
timeout), MySQL has no idle-in-transaction limit (its `wait_timeout`
closes idle connections, not transactions): nothing is set there.
"""

from __future__ import annotations

import logging
from typing import Any

from django.conf import settings
from django.db.backends.signals import connection_created

from runs.outage import exception_chain

log = logging.getLogger("takt.beat")


def session_limits() -> dict[str, int]:
    """The PostgreSQL session settings of a beat's connections, in ms (0:
    no limit)."""
    return {
        "idle_in_transaction_session_timeout": int(
            float(settings.TAKT_BEAT_IDLE_IN_TRANSACTION_SECONDS) * 1000
        ),
        "statement_timeout": int(float(settings.TAKT_BEAT_STATEMENT_TIMEOUT_SECONDS) * 1000),
    }


def limit_session(sender: Any = None, connection: Any = None, **kwargs: Any) -> None:
    """connection_created: set the limits on a new PostgreSQL connection."""
    if connection is None or connection.vendor != "postgresql":
        return
    with connection.cursor() as cursor:
        for name, value in session_limits().items():
            cursor.execute(f"SET {name} = {int(value)}")


def limit_beat_sessions() -> None:
    """From the beat's start: every connection this process makes from now
    on gets the limits, and the one already open, if any."""
    from django.db import connection

    connection_created.connect(limit_session, weak=False, dispatch_uid="takt-beat-session")
    if connection.connection is not None:
        limit_session(connection=connection)


# PostgreSQL's SQLSTATEs for the two limits, and the setting behind each.
LIMIT_STATES = {
    "25P03": "TAKT_BEAT_IDLE_IN_TRANSACTION_SECONDS",  # idle_in_transaction_session_timeout
    "57014": "TAKT_BEAT_STATEMENT_TIMEOUT_SECONDS",  # query_canceled
}


def limit_hit(exc: BaseException) -> str | None:
    """The setting whose limit ended the beat's transaction or statement,
    when `exc` (or an error it was raised from) says so; else None."""
    for current in exception_chain(exc):
        state = getattr(current, "sqlstate", None) or getattr(current, "pgcode", None)
        if state in LIMIT_STATES:
            return LIMIT_STATES[state]
    return None
