"""The Celery app shared by web, worker and beat processes."""

from __future__ import annotations

import logging
import os
from typing import Any

from celery import Celery
from celery.signals import (
    after_setup_logger,
    after_setup_task_logger,
    celeryd_after_setup,
    celeryd_init,
)

from scheduler_project.logconfig import set_process_field, use_json

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "scheduler_project.settings")
# Celery runs Django's system checks when a worker or beat starts, and the URL
# check imports the whole web stack (admin views, the REST API): ~20 MB per
# process that never serves a request. The web server, `migrate` and
# `manage.py check` run the checks; CELERY_SKIP_CHECKS= (empty) restores them here.
os.environ.setdefault("CELERY_SKIP_CHECKS", "1")

app = Celery("takt")
app.config_from_object("django.conf:settings", namespace="CELERY")
app.autodiscover_tasks()


@celeryd_init.connect
def _json_logs_from_the_start(**kwargs: Any) -> None:
    """TAKT_LOG_FORMAT=json: Django's logging (and warnings through it) from
    the worker's first line on; Celery warns before it sets up its own
    logging (running as root, say)."""
    from django.conf import settings
    from django.utils.log import configure_logging

    if getattr(settings, "TAKT_LOG_FORMAT", "text") == "json":
        configure_logging(settings.LOGGING_CONFIG, settings.LOGGING)
        logging.captureWarnings(True)


@after_setup_logger.connect
@after_setup_task_logger.connect
def _json_logs(logger: Any, **kwargs: Any) -> None:
    """TAKT_LOG_FORMAT=json: the handlers Celery set up write JSON lines."""
    from django.conf import settings

    if getattr(settings, "TAKT_LOG_FORMAT", "text") == "json":
        use_json(logger)


@celeryd_after_setup.connect
def _worker_name(sender: str, **kwargs: Any) -> None:
    """Every line of a worker (and its pool processes) names it."""
    set_process_field("worker", sender)
