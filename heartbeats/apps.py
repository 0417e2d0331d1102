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

        from runs.signals import run_running_long, run_started

        from .job_events import on_run_running_long
        from .job_events import on_run_started as on_started

        run_started.connect(on_started, weak=False, dispatch_uid="takt.heartbeats.started")
        run_running_long.connect(
            on_run_running_long, weak=False, dispatch_uid="takt.heartbeats.long"
        )

        from runs.maintenance import maintenance_finished

        maintenance_finished.connect(
            _maintenance_findings, weak=False, dispatch_uid="takt.heartbeats.maintenance"
        )

        from runs.signals import catchup_capped

        catchup_capped.connect(_catchup_capped, weak=False, dispatch_uid="takt.heartbeats.capped")

        from celery.signals import worker_ready

        worker_ready.connect(_worker_ready, weak=False, dispatch_uid="takt.heartbeats.worker")


def _worker_ready(sender: object = None, **kwargs: object) -> None:
    """A worker reports its own heartbeat (F-61) as `worker:<its name>`."""
    from .processes import start_worker_reporter

    hostname = getattr(sender, "hostname", None) or "unknown"
    start_worker_reporter(f"worker:{hostname}")


def _maintenance_findings(
    sender: object = None, report: object = None, now: object = None, **kwargs: object
) -> None:
    """Maintenance findings become alerts (F-62, F-71..F-73): expired runs, a
    failed cleanup section, schema problems, too-short retry delays."""
    from .alerts import raise_alert

    for finding in getattr(report, "findings", []):
        raise_alert(
            finding.key,
            severity=str(finding.severity),
            title=finding.title,
            message=finding.detail,
            now=now,
        )


def _catchup_capped(
    sender: object = None,
    job_id: int = 0,
    job_name: str = "",
    skipped: int = 0,
    now: object = None,
    **kwargs: object,
) -> None:
    """F-62: a run_all catch-up that had to leave missed fire times out."""
    from .alerts import raise_alert

    try:
        raise_alert(
            f"catchup-capped:job:{job_id}",
            severity="warning",
            title=f"Catch-up of '{job_name}' capped",
            message=f"{skipped} missed fire time(s) were not caught up (catch-up limit or window)",
            now=now,
        )
    except Exception:
        import logging

        logging.getLogger("takt.heartbeats").exception("the capped catch-up alert failed")
