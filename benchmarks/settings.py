"""Settings for the benchmark's own processes: Takt's settings plus
django-celery-beat, so that its DatabaseScheduler can be measured next to
Takt on the same database. Takt's beat and workers keep using
scheduler_project.settings; only the tables differ (migrate runs with this
module, so the database has both apps' tables)."""

from __future__ import annotations

from scheduler_project.settings import *  # noqa: F403
from scheduler_project.settings import INSTALLED_APPS

# Takt's settings add it themselves when it is installed (the importer, F-76).
if "django_celery_beat" not in INSTALLED_APPS:
    INSTALLED_APPS = [*INSTALLED_APPS, "django_celery_beat"]

# django-celery-beat compares aware datetimes, like Takt.
DJANGO_CELERY_BEAT_TZ_AWARE = True
