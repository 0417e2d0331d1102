from django.apps import AppConfig


class RunsConfig(AppConfig):
    name = "runs"
    verbose_name = "Takt runs"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        from runs import script_audit
        from runs.receivers import connect_all

        connect_all()
        script_audit.connect()
