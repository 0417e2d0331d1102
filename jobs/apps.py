from django.apps import AppConfig
from django.conf import settings
from django.utils.translation import gettext_lazy as _

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
        apply_to(settings)
        from jobs import registry  # lazy: an app's modules load once its models are ready

        registry.autodiscover()
