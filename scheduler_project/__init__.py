"""Takt's own project (settings, URLs, its Celery app) and the helpers its
apps share. Nothing here makes a Celery app on import: Takt's app,
``scheduler_project.celery``, is made when the ``jobs`` app loads and the
project has none of its own (jobs/celery_app.py); ``celery -A
scheduler_project`` finds it by its module name."""
