"""Lost runs (issue 12): the partial index of the beat's lost-run check,
and the duration of runs already marked lost set to unknown (it was the
delay until their detection, not how long they ran)."""

from django.db import migrations, models


def forget_lost_durations(apps, schema_editor):
    apps.get_model("takt_runs", "Run").objects.filter(status="lost").update(duration_s=None)


class Migration(migrations.Migration):
    dependencies = [
        ("takt_jobs", "0011_job_name_index"),
        ("takt_runs", "0010_run_published_index"),
    ]

    operations = [
        migrations.AddIndex(
            model_name="run",
            index=models.Index(
                condition=models.Q(("status", "running")),
                fields=["started_at"],
                name="run_running_idx",
            ),
        ),
        # Not undone backwards: the detection delays are not worth keeping.
        migrations.RunPython(forget_lost_durations, migrations.RunPython.noop),
    ]
