# The run an interval anchored on a run waits for (runs/anchored.py): a
# trigger's runs by fire time, in place of the foreign key's own index.

import django.db.models.deletion
from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("takt_jobs", "0023_target_help_names_remove_lock_file"),
        ("takt_runs", "0014_run_started_by"),
    ]

    operations = [
        # The new index first: a trigger's runs are never without one.
        migrations.AddIndex(
            model_name="run",
            index=models.Index(
                condition=models.Q(("source_trigger__isnull", False)),
                fields=["source_trigger", "-scheduled_for"],
                name="run_source_trigger_idx",
            ),
        ),
        migrations.AlterField(
            model_name="run",
            name="source_trigger",
            field=models.ForeignKey(
                blank=True,
                db_index=False,
                null=True,
                on_delete=django.db.models.deletion.SET_NULL,
                related_name="runs",
                to="takt_jobs.trigger",
                verbose_name="source trigger",
            ),
        ),
    ]
