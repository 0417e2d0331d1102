from django.apps import AppConfig
from django.utils.translation import gettext_lazy as _


class HeartbeatsConfig(AppConfig):
    name = "heartbeats"
    label = "takt_heartbeats"
    verbose_name = _("Takt heartbeats")
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        from heartbeats.receivers import connect_all

        connect_all()
