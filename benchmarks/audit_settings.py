"""Settings for benchmarks/audit_write.py only: Takt's settings plus both
audit libraries it was chosen between, on a SQLite file of its own."""

from __future__ import annotations

import os

from scheduler_project.settings import *  # noqa: F403
from scheduler_project.settings import INSTALLED_APPS

INSTALLED_APPS = [*INSTALLED_APPS, "simple_history", "auditlog"]
# A fresh SQLite file per run; with DATABASE_URL set, that database (which
# must be an empty one: the script migrates it).
if not os.environ.get("DATABASE_URL"):
    DATABASES = {
        "default": {
            "ENGINE": "django.db.backends.sqlite3",
            "NAME": os.environ["TAKT_AUDIT_BENCH_DB"],
        }
    }
