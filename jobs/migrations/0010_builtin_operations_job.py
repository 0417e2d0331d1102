"""F-93: the built-in job "Takt operations", whose runs are the long
operations an operator starts in the admin (backfill, a bulk "Run now",
an import; runs/operations.py, target "takt.operation" registered in
runs/takt_jobs.py). Disabled and without a trigger: it runs only when an
operation is started, on a worker, recorded like any run, its progress
and output live on the run's page."""

from django.db import migrations

OPERATIONS_KEY = "takt.operations"
OPERATIONS_TARGET = "takt.operation"


def create_operations_job(apps, schema_editor):
    Job = apps.get_model("takt_jobs", "Job")
    if Job.objects.filter(key=OPERATIONS_KEY).exists():
        return
    Job.objects.create(
        name="Takt operations",
        key=OPERATIONS_KEY,
        description=(
            "Long operations started in the admin run here, each as one run with its progress"
            " and output: a backfill, a bulk Run now (more than 20 jobs), an import of jobs."
            " Never scheduled; its runs are the history of those operations."
        ),
        enabled=False,
        kind="callable",
        target=OPERATIONS_TARGET,
        params={},
        priority=0,
        timeout_s=6 * 3600,
        overlap_policy="allow",
        max_instances=10,
        code_managed=True,
    )


def remove_operations_job(apps, schema_editor):
    apps.get_model("takt_jobs", "Job").objects.filter(
        key=OPERATIONS_KEY, code_managed=True
    ).delete()


class Migration(migrations.Migration):
    dependencies = [("takt_jobs", "0009_queue_paused_until")]
    operations = [migrations.RunPython(create_operations_job, remove_operations_job)]
