from typing import Any

from django.apps import AppConfig


class HeartbeatsConfig(AppConfig):
    name = "heartbeats"
    verbose_name = "Takt heartbeats"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        from runs.signals import run_finished

        from .services import record_run_heartbeat

        def on_run_finished(sender: Any, run: Any, **kwargs: Any) -> None:
            record_run_heartbeat(run)

        run_finished.connect(on_run_finished, dispatch_uid="takt.heartbeats.record_run")
