"""Bulk inserts for seeding at scale: ``COPY … FROM STDIN`` on PostgreSQL,
``executemany`` in one transaction on SQLite, with rows given as tuples of
values already in the database's form (see `Backend`).

The ORM's bulk_create builds a model instance and compiles an INSERT per
batch: about 30 µs a row, several minutes for a million runs. Here a row
costs the tuple and the driver. Columns a caller leaves out get their
model field's default, so a seed names only what it sets.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator, Sequence
from datetime import UTC, datetime, time, timedelta
from itertools import islice
from typing import Any

from django.core.management.color import no_style
from django.db import connection, models, transaction
from django.db.models.fields import AutoFieldMixin

SQLITE_BATCH = 20_000
SQLITE_SEED_CACHE_KB = -262_144  # negative: KiB, i.e. 256 MB
_EPOCH_NAIVE = datetime(1970, 1, 1)  # noqa: DTZ001  (SQLite stores naive UTC text)
_EPOCH_UTC = datetime(1970, 1, 1, tzinfo=UTC)


class Backend:
    """How values go to the current database: SQLite stores date-times as
    naive UTC text ("2026-11-30 07:28:00.123456", the text Django writes),
    times as text and JSON as text; PostgreSQL takes aware date-times and
    time objects, and JSON as its text."""

    def __init__(self) -> None:
        self.postgresql = connection.vendor == "postgresql"

    def epoch(self, seconds: float) -> Any:
        """A date-time given as seconds since 1970 (UTC)."""
        if self.postgresql:
            return _EPOCH_UTC + timedelta(seconds=seconds)
        return str(_EPOCH_NAIVE + timedelta(seconds=seconds))

    def time(self, value: datetime | None) -> Any:
        return connection.ops.adapt_datetimefield_value(value)

    def clock(self, value: time | None) -> Any:
        return connection.ops.adapt_timefield_value(value)

    @staticmethod
    def json(value: Any) -> str | None:
        return None if value is None else json.dumps(value)


def _default(field: models.Field[Any, Any]) -> Any:
    value = field.get_default()
    if isinstance(field, models.JSONField):
        return Backend.json(value)
    if hasattr(value, "key"):  # a ZoneInfo (django-timezone-field): its name
        return str(value)
    return value


def _batches(rows: Iterable[tuple[Any, ...]], size: int) -> Iterator[list[tuple[Any, ...]]]:
    it = iter(rows)
    while chunk := list(islice(it, size)):
        yield chunk


def insert(
    model: type[models.Model], columns: Sequence[str], rows: Iterable[tuple[Any, ...]]
) -> int:
    """Insert `rows` (tuples in the order of `columns`, attribute names such
    as "job_id") into `model`'s table in one transaction; every other
    concrete field gets its default. Returns the number of rows. Raises the
    driver's IntegrityError (and inserts nothing) on a broken constraint."""
    fields = {f.attname: f for f in model._meta.concrete_fields}
    unknown = set(columns) - set(fields)
    if unknown:
        raise ValueError(f"{model.__name__} has no field {sorted(unknown)}")
    # An auto id left out is the database's to assign, not a NULL to insert.
    rest = [f for name, f in fields.items()
            if name not in columns and not isinstance(f, AutoFieldMixin)]  # fmt: skip
    tail = tuple(_default(f) for f in rest)
    names = [fields[c].column for c in columns] + [f.column for f in rest]
    qn = connection.ops.quote_name
    table, cols = qn(model._meta.db_table), ", ".join(qn(n) for n in names)
    count = 0
    with transaction.atomic(), connection.cursor() as cur:
        if connection.vendor == "postgresql":
            with cur.cursor.copy(f"COPY {table} ({cols}) FROM STDIN") as copy:
                for row in rows:
                    copy.write_row(row + tail)
                    count += 1
        else:
            sql = f"INSERT INTO {table} ({cols}) VALUES ({', '.join(['%s'] * len(names))})"
            cur.execute("PRAGMA cache_size")
            cache = cur.fetchone()[0]
            # The index pages of a million rows inserted in time order (not in
            # job order) do not fit SQLite's 2 MB default cache: give the
            # insert 256 MB, and the measurements the default again after it.
            cur.execute(f"PRAGMA cache_size = {SQLITE_SEED_CACHE_KB}")
            try:
                for chunk in _batches(rows, SQLITE_BATCH):
                    cur.executemany(sql, [row + tail for row in chunk])
                    count += len(chunk)
            finally:
                cur.execute(f"PRAGMA cache_size = {int(cache)}")
    return count


def empty(model_list: Sequence[type[models.Model]]) -> None:
    """Delete every row of these tables (TRUNCATE … CASCADE on PostgreSQL)."""
    tables = [connection.ops.quote_name(m._meta.db_table) for m in model_list]
    with connection.cursor() as cur:
        if connection.vendor == "postgresql":
            cur.execute(f"TRUNCATE {', '.join(tables)} CASCADE")
        else:
            for table in tables:
                cur.execute(f"DELETE FROM {table}")


def reset_sequences(model_list: Sequence[type[models.Model]]) -> None:
    """After inserting explicit ids: move PostgreSQL's id sequences past them
    (SQLite's AUTOINCREMENT follows the largest id by itself)."""
    statements = connection.ops.sequence_reset_sql(no_style(), list(model_list))
    if statements:
        with connection.cursor() as cur:
            for sql in statements:
                cur.execute(sql)


def analyze() -> None:
    """Planner statistics for the rows just inserted, as autovacuum would
    gather them on PostgreSQL (VACUUM ANALYZE: also the visibility map that
    index-only scans need). On SQLite, ANALYZE writes sqlite_stat1, which a
    long-lived installation has after `PRAGMA optimize`."""
    with connection.cursor() as cur:
        cur.execute("VACUUM ANALYZE" if connection.vendor == "postgresql" else "ANALYZE")
