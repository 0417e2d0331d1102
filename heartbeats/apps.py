from django.apps import AppConfig


class HeartbeatsConfig(AppConfig):
    name = "heartbeats"
    verbose_name = "Takt heartbeats"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        from heartbeats.receivers import connect_all

        connect_all()
