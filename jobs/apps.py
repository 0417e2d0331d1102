from celery import Celery, _state
from django.apps import AppConfig
from django.conf import settings
from django.utils.translation import gettext_lazy as _

from jobs.celery_app import made_by_a_project, project_app
from scheduler_project.takt_settings import apply_to


class JobsConfig(AppConfig):
    name = "jobs"
    label = "takt_jobs"
    verbose_name = _("Takt jobs")
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        # Every TAKT_* setting the project left out takes its default (the
        # environment overrides): a project that embeds Takt sets only what
        # it changes (docs/embedding.md). The first app of Takt's to load.
        # The Celery app is the project's own when it has one (jobs/celery_app.py).
        app = select_celery_app()
        apply_to(settings, app_broker=lambda: app.conf.broker_url)
        from jobs import registry  # lazy: an app's modules load once its models are ready

        registry.autodiscover()


def select_celery_app() -> Celery:
    """The app Takt uses from now on (called once, when the jobs app
    loads): the project's, made the default for every thread (Celery's
    current app is per thread; its Django fix-up already does this when
    DJANGO_SETTINGS_MODULE was set before the app was made), else Takt's own."""
    app = project_app()
    if app is None:
        # Takt as its own project: importing its app's module makes the app,
        # which is why nothing imports it before this point.
        from scheduler_project import celery as own

        app = own.app
    if not made_by_a_project(_state.default_app):
        app.set_default()
    return app
