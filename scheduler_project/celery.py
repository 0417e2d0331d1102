"""The Celery app shared by web, worker and beat processes."""

from __future__ import annotations

import os

from celery import Celery

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "scheduler_project.settings")

app = Celery("takt")
app.config_from_object("django.conf:settings", namespace="CELERY")
app.autodiscover_tasks()
