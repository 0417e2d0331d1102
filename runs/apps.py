from django.apps import AppConfig
from django.utils.translation import gettext_lazy as _


class RunsConfig(AppConfig):
    name = "runs"
    label = "takt_runs"
    verbose_name = _("Takt runs")
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        from runs.receivers import connect_all

        connect_all()
