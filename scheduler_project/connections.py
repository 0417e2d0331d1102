"""Reusing the database connection between back-to-back units of work (a
worker's runs, a beat's ticks).

Django's `close_old_connections()` drops a connection that broke or passed
CONN_MAX_AGE, and marks it for a health check (CONN_HEALTH_CHECKS: a
`SELECT 1` round trip before its next use). A connection used a moment ago
without an error needs neither, so `ConnectionReuse` calls it only when the
connection was idle for longer than `fresh_s`, had an error, or is past its
age.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager
from functools import cache
from types import SimpleNamespace
from typing import Any

from django.conf import settings
from django.db import close_old_connections, connection


class ConnectionReuse:
    def __init__(self, fresh_s: float) -> None:
        self.fresh_s = fresh_s
        self._last_end = float("-inf")

    @contextmanager
    def use(self) -> Iterator[None]:
        """Around one unit of work: checks the connection first if it needs it."""
        now = time.monotonic()
        aged = connection.close_at is not None and now >= connection.close_at
        if now - self._last_end > self.fresh_s or connection.errors_occurred or aged:
            close_old_connections()
        try:
            yield
        finally:
            self._last_end = time.monotonic()


def statement_cursor(prepared: bool = True) -> Any:
    """A cursor for Takt's own statements on the hot path (runs/statements.py,
    heartbeats/statements.py): `with statement_cursor() as cursor:`, like
    `connection.cursor()`, with Django's health check, error wrapping and
    query log.

    On PostgreSQL with psycopg 3 it binds parameters on the server and
    prepares each statement on its first use on the connection: the server
    then plans the statement once per connection, not once per run, and
    psycopg sends the parameters without quoting them into the SQL text
    (measured: benchmarks/README.md, "Prepared statements"). A connection
    pooler that does not keep prepared statements (PgBouncer in transaction
    mode before 1.21) needs TAKT_DB_PREPARED_STATEMENTS=false: the
    statements are then sent as Django sends its own. Other databases get
    `connection.cursor()`. `prepared=False`: parameters bound on the
    server, the statement not prepared (for a statement whose text varies,
    such as a multi-row INSERT: preparing each shape would cost a round
    trip and a slot in the connection's cache of 100)."""
    if connection.vendor != "postgresql" or not settings.TAKT_DB_PREPARED_STATEMENTS:
        return connection.cursor()
    cursor_class = _prepared_cursor_class()
    if cursor_class is None:  # psycopg 2
        return connection.cursor()
    connection.close_if_health_check_failed()
    connection.ensure_connection()
    with connection.wrap_database_errors:
        if connection.connection.prepare_threshold is None:
            # Django turns preparing off (for poolers): on again, for the
            # statements that ask for it only (Django's own cursors never do).
            connection.connection.prepare_threshold = ONLY_WHEN_ASKED
        raw = cursor_class(connection.connection)
        raw.prepare_default = True if prepared else None
        _match_time_zone(raw)
        return connection._prepare_cursor(raw)


@cache
def _prepared_cursor_class() -> Any:
    from django.db.backends.postgresql import base

    if not getattr(base, "is_psycopg3", False):
        return None
    from psycopg.errors import FeatureNotSupported
    from psycopg.pq import TransactionStatus

    class PreparedCursor(base.ServerBindingCursor):  # type: ignore[misc,name-defined]
        prepare_default: bool | None = True

        def execute(self, query: Any, params: Any = None, **kwargs: Any) -> Any:
            kwargs.setdefault("prepare", self.prepare_default)
            try:
                result = super().execute(query, params, **kwargs)
            except FeatureNotSupported as exc:
                # A migration run elsewhere changed what a prepared statement
                # returns: drop this connection's prepared statements and try
                # once more (inside a transaction the caller's retry does).
                idle = self.connection.info.transaction_status == TransactionStatus.IDLE
                if "cached plan" not in str(exc) or not idle:
                    raise
                self.connection.execute("DEALLOCATE ALL")  # psycopg forgets its names too
                result = super().execute(query, params, **kwargs)
            if self._query is None and isinstance(query, str):
                # What Django's query log shows (connection.queries, a test's
                # CaptureQueriesContext): the statement, its parameters apart.
                self._query = SimpleNamespace(query=query.encode())
            return result

    return PreparedCursor


def _match_time_zone(cursor: Any) -> None:
    """As Django's own cursors: timestamps load in the connection's zone."""
    from django.db.backends.postgresql.psycopg_any import register_tzloader
    from psycopg.pq import Format

    loader = connection.connection.adapters.get_loader(TIMESTAMPTZ_OID, Format.TEXT)
    if connection.timezone != loader.timezone:
        register_tzloader(connection.timezone, cursor)


TIMESTAMPTZ_OID = 1184
ONLY_WHEN_ASKED = 2**31 - 1  # psycopg's prepare_threshold: never by itself
