"""import_celery_beat's record of each job it made (jobs.beat_origin): what it
set, so a later import tells an operator's change in Takt from its own."""

import django.db.models.deletion
from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("takt_jobs", "0020_caller_params"),
    ]

    operations = [
        migrations.CreateModel(
            name="BeatOrigin",
            fields=[
                (
                    "job",
                    models.OneToOneField(
                        on_delete=django.db.models.deletion.CASCADE,
                        primary_key=True,
                        related_name="beat_origin",
                        serialize=False,
                        to="takt_jobs.job",
                    ),
                ),
                ("periodic_task_id", models.PositiveIntegerField()),
                ("enabled_set", models.BooleanField(null=True)),
                ("source_switched", models.BooleanField(default=False)),
                ("last_run_at", models.DateTimeField(null=True)),
                ("total_run_count", models.PositiveIntegerField(default=0)),
                ("imported_at", models.DateTimeField()),
            ],
            options={
                "verbose_name": "django-celery-beat origin",
            },
        ),
    ]
