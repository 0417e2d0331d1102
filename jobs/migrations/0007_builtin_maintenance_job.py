"""F-70..F-73: the built-in "Takt maintenance" job, enabled, hourly at
minute 7 (UTC), running runs.maintenance.run_maintenance (target
"takt.maintenance", registered in runs/takt_jobs.py)."""

from django.db import migrations
from django.utils import timezone

MAINTENANCE_TARGET = "takt.maintenance"
MAINTENANCE_CRON = "7 * * * *"


def create_maintenance_job(apps, schema_editor):
    from jobs.core.triggers import CronSpec, compute_first_fire

    Job = apps.get_model("takt_jobs", "Job")
    Trigger = apps.get_model("takt_jobs", "Trigger")
    if Job.objects.filter(target=MAINTENANCE_TARGET).exists():
        return
    job = Job.objects.create(
        name="Takt maintenance",
        description=(
            "Every hour: marks runs whose worker died as lost (and retries them where the"
            " job's policy says), fails runs queued or running for more than 7 days, deletes"
            " finished runs past retention (each batch announced by an audit row), and checks"
            " retry delays and the database schema. Also: manage.py takt_maintenance."
        ),
        enabled=True,
        kind="callable",
        target=MAINTENANCE_TARGET,
        params={},
        timeout_s=1800,
        code_managed=True,
    )
    # Historical models skip Job.save(), which keeps `active` in step: the
    # job is enabled and not paused, so its trigger is active.
    Trigger.objects.create(
        job=job,
        kind="cron",
        cron_expression=MAINTENANCE_CRON,
        timezone="UTC",
        next_run_at=compute_first_fire(CronSpec(MAINTENANCE_CRON, "UTC"), now=timezone.now()),
        active=True,
    )


def remove_maintenance_job(apps, schema_editor):
    apps.get_model("takt_jobs", "Job").objects.filter(
        target=MAINTENANCE_TARGET, code_managed=True
    ).delete()


class Migration(migrations.Migration):
    dependencies = [("takt_jobs", "0006_maintenance_mode")]
    operations = [migrations.RunPython(create_maintenance_job, remove_maintenance_job)]
