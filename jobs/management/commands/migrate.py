"""Django's migrate, first moving an installation made with Takt's old app
labels (jobs, runs, heartbeats) onto the new ones (jobs/legacy_labels.py)."""

from __future__ import annotations

import sys
from typing import Any

from django.core.management.commands import migrate
from django.db import connections

from jobs.legacy_labels import move_to_new_labels, planned


class Command(migrate.Command):
    def handle(self, *args: Any, **options: Any) -> None:
        connection = connections[options["database"]]
        if options["plan"] or options["check_unapplied"]:
            moves = planned(connection)
            for move in moves:
                self.stdout.write(f"Takt's app labels to move: {move.describe()}")
            if moves and options["check_unapplied"]:
                sys.exit(1)
        else:
            for move in move_to_new_labels(connection):
                if options["verbosity"] >= 1:
                    self.stdout.write(f"Takt's app labels moved: {move.describe()}")
        super().handle(*args, **options)
