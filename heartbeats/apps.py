from django.apps import AppConfig


class HeartbeatsConfig(AppConfig):
    name = "heartbeats"
    verbose_name = "Takt heartbeats"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        from runs.signals import run_finished

        from .services import on_run_finished

        # weak=False: a receiver is never collected while the app is loaded.
        run_finished.connect(on_run_finished, weak=False, dispatch_uid="takt.heartbeats.record_run")
