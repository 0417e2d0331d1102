# F-65: the decision log kept in the database (runs/decisions.py), drained
# from its Redis stream by the beat; indexed for a job's and a kind's newest
# entries and for the retention cleanup by time.

from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("takt_runs", "0016_run_rerun_of"),
    ]

    operations = [
        migrations.CreateModel(
            name="SchedulerDecision",
            fields=[
                (
                    "id",
                    models.BigAutoField(
                        auto_created=True, primary_key=True, serialize=False, verbose_name="ID"
                    ),
                ),
                (
                    "stream_id",
                    models.CharField(
                        editable=False, max_length=41, unique=True, verbose_name="stream id"
                    ),
                ),
                ("at", models.DateTimeField(verbose_name="at")),
                ("kind", models.CharField(max_length=32, verbose_name="kind")),
                ("job_id", models.BigIntegerField(verbose_name="job")),
                ("run_id", models.BigIntegerField(blank=True, null=True, verbose_name="run")),
                (
                    "trigger_id",
                    models.BigIntegerField(blank=True, null=True, verbose_name="trigger"),
                ),
                ("detail", models.TextField(blank=True, verbose_name="detail")),
            ],
            options={
                "verbose_name": "scheduler decision",
                "verbose_name_plural": "scheduler decisions",
                "ordering": ["-id"],
                "indexes": [
                    models.Index(fields=["at"], name="decision_at_idx"),
                    models.Index(fields=["job_id", "-id"], name="decision_job_idx"),
                    models.Index(fields=["kind", "-id"], name="decision_kind_idx"),
                ],
            },
        ),
    ]
