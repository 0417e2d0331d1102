from django.apps import AppConfig


class JobsConfig(AppConfig):
    name = "jobs"
    verbose_name = "Takt jobs"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        from jobs import registry, token_admin  # noqa: F401  (registers the API token admin)

        registry.autodiscover()
