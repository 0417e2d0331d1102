"""The Celery app shared by web, worker and beat processes."""

from __future__ import annotations

import os

from celery import Celery

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "scheduler_project.settings")
# Celery runs Django's system checks when a worker or beat starts, and the URL
# check imports the whole web stack (admin views, the REST API): ~20 MB per
# process that never serves a request. The web server, `migrate` and
# `manage.py check` run the checks; CELERY_SKIP_CHECKS= (empty) restores them here.
os.environ.setdefault("CELERY_SKIP_CHECKS", "1")

app = Celery("takt")
app.config_from_object("django.conf:settings", namespace="CELERY")
app.autodiscover_tasks()
