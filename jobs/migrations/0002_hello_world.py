"""F-05: a disabled "Hello world" job on a fresh install."""

from django.conf import settings
from django.db import migrations
from django.utils import timezone

HELLO_CRON = "0 9 * * *"


def create_hello_world(apps, schema_editor):
    from jobs.core.triggers import CronSpec, compute_first_fire

    Job = apps.get_model("takt_jobs", "Job")
    Trigger = apps.get_model("takt_jobs", "Trigger")
    if Job.objects.filter(target="takt.hello_world").exists():
        return
    job = Job.objects.create(
        name="Hello world",
        description="Logs a greeting, its trigger, the time and the number of jobs. Enable it, or press Run now.",
        enabled=False,
        kind="callable",
        target="takt.hello_world",
        params={},
        timeout_s=60,
    )
    Trigger.objects.create(
        job=job,
        kind="cron",
        cron_expression=HELLO_CRON,
        timezone="",
        next_run_at=compute_first_fire(
            CronSpec(HELLO_CRON, settings.TIME_ZONE), now=timezone.now()
        ),
        active=False,
    )


def remove_hello_world(apps, schema_editor):
    apps.get_model("takt_jobs", "Job").objects.filter(
        target="takt.hello_world", name="Hello world"
    ).delete()


class Migration(migrations.Migration):
    dependencies = [("takt_jobs", "0001_initial")]
    operations = [migrations.RunPython(create_hello_world, remove_hello_world)]
