"""Takt's apps were labelled ``jobs``, ``runs`` and ``heartbeats`` until
issue 15; they are ``takt_jobs``, ``takt_runs`` and ``takt_heartbeats`` now,
so that a project's own ``jobs`` or ``runs`` app can sit beside them.

An installation made with the old labels keeps its data: before ``migrate``
reads the migration history, its tables are renamed (``jobs_job`` →
``takt_jobs_job``, the many-to-many tables too), its content types move to the
new labels (so groups' and users' permissions and the admin's history stay
attached) and its rows in ``django_migrations`` are relabelled last, as the
mark that the move is done. Where the database can roll DDL back
(PostgreSQL, SQLite) it is one transaction; elsewhere (MySQL, MariaDB) every
step is repeatable, so a move cut short finishes on the next ``migrate``.

Only history that is Takt's moves: every migration applied under the old
label must be one of Takt's, its first two among them, and nothing applied
under the new label yet. A project's own ``jobs`` app is left alone.
"""

from __future__ import annotations

import pkgutil
from dataclasses import dataclass
from importlib import import_module

from django.apps import apps
from django.db.backends.base.base import BaseDatabaseWrapper
from django.db.migrations.recorder import MigrationRecorder

# (old label, new label), in the order the apps depend on each other.
LABELS = (("jobs", "takt_jobs"), ("runs", "takt_runs"), ("heartbeats", "takt_heartbeats"))


@dataclass(frozen=True)
class Move:
    """What moves from one old label to its new one."""

    old: str
    new: str
    tables: tuple[tuple[str, str], ...]  # (old table, new table) still to rename
    migrations: tuple[str, ...]  # applied migration names relabelled

    def describe(self) -> str:
        return (
            f"{self.old} → {self.new}: {len(self.tables)} tables renamed,"
            f" {len(self.migrations)} applied migrations relabelled"
        )


def _takt_migrations(label: str) -> list[str]:
    package = import_module(f"{apps.get_app_config(label).name}.migrations")
    return sorted(m.name for m in pkgutil.iter_modules(package.__path__) if m.name[:4].isdigit())


def planned(connection: BaseDatabaseWrapper) -> list[Move]:
    """The moves this database still needs (none on a fresh or moved one)."""
    recorder = MigrationRecorder(connection)
    if not recorder.has_table():
        return []
    applied: dict[str, set[str]] = {}
    for app, name in recorder.migration_qs.values_list("app", "name"):
        applied.setdefault(app, set()).add(name)
    existing = set(connection.introspection.table_names())
    moves = []
    for old, new in LABELS:
        ours = _takt_migrations(new)
        old_names = applied.get(old, set())
        if (
            not old_names
            or applied.get(new)
            or not old_names <= set(ours)
            or not set(ours[:2]) <= old_names
        ):
            continue
        tables = []
        for model in apps.get_app_config(new).get_models(include_auto_created=True):
            table = model._meta.db_table
            if not table.startswith(f"{new}_"):
                continue  # a table name of its own: not the label's
            before = old + table[len(new) :]
            if before in existing and table not in existing:
                tables.append((before, table))
        moves.append(Move(old, new, tuple(tables), tuple(sorted(old_names))))
    return moves


def move_to_new_labels(connection: BaseDatabaseWrapper) -> list[Move]:
    """Carry out `planned(connection)`; returns what moved."""
    moves = planned(connection)
    if not moves:
        return []
    models = {
        model._meta.db_table: model
        for _old, new in LABELS
        for model in apps.get_app_config(new).get_models(include_auto_created=True)
    }
    # The schema editor opens the transaction (SQLite must switch its
    # foreign key checks off before one starts).
    with connection.schema_editor(atomic=connection.features.can_rollback_ddl) as editor:
        for move in moves:
            for before, after in move.tables:
                editor.alter_db_table(models[after], before, after)
        if apps.is_installed("django.contrib.contenttypes"):
            _move_content_types(connection, moves)
        recorder = MigrationRecorder(connection)
        for move in moves:
            names = move.migrations
            recorder.migration_qs.filter(app=move.old, name__in=names).update(app=move.new)
    return moves


def _move_content_types(connection: BaseDatabaseWrapper, moves: list[Move]) -> None:
    from django.contrib.contenttypes.models import ContentType  # noqa: PLC0415 (optional app)

    if ContentType._meta.db_table not in connection.introspection.table_names():
        return
    types = ContentType.objects.using(connection.alias)
    for move in moves:
        names = [m._meta.model_name for m in apps.get_app_config(move.new).get_models()]
        taken = set(types.filter(app_label=move.new).values_list("model", flat=True))
        types.filter(app_label=move.old, model__in=[n for n in names if n not in taken]).update(
            app_label=move.new
        )
    ContentType.objects.clear_cache()
