import django.db.models.deletion
from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("takt_jobs", "0012_coordination"),
        ("takt_runs", "0011_lost_runs"),
    ]

    operations = [
        migrations.AddField(
            model_name="run",
            name="cause",
            field=models.ForeignKey(
                blank=True,
                db_index=False,
                help_text="The run whose end started it, or the parent run it is part of.",
                null=True,
                on_delete=django.db.models.deletion.SET_NULL,
                related_name="caused",
                to="takt_runs.run",
            ),
        ),
        migrations.AddField(
            model_name="run",
            name="waiting_for",
            field=models.CharField(
                blank=True,
                choices=[
                    ("", "its job or the queue"),
                    ("group", "a slot of its concurrency group"),
                    ("exclusive", "every group to be free (exclusive job)"),
                    ("limit", "a slot under TAKT_MAX_CONCURRENCY"),
                ],
                max_length=16,
            ),
        ),
        migrations.AddIndex(
            model_name="run",
            index=models.Index(
                condition=models.Q(("cause__isnull", False)), fields=["cause"], name="run_cause_idx"
            ),
        ),
        migrations.AddConstraint(
            model_name="run",
            constraint=models.UniqueConstraint(
                condition=models.Q(("trigger__in", ["dependency", "parent"])),
                fields=("job", "cause"),
                name="run_unique_cause",
            ),
        ),
    ]
