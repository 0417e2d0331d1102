"""Issue 27, item 5: the interval anchors say which is which. The grid that
was stored as `from_enqueue` is `fixed_rate` now (the data moves with it, so
no stored trigger changes what it does); `after_enqueue` is new: next =
the moment the beat enqueues the run + N (the migration manual's interval).
The old name stays accepted as input (jobs.core.triggers.ANCHOR_ALIASES)."""

from django.db import migrations, models


def _rename(apps, schema_editor, old, new):  # type: ignore[no-untyped-def]
    Trigger = apps.get_model("takt_jobs", "Trigger")
    Trigger.objects.filter(interval_anchor=old).update(interval_anchor=new)


def forwards(apps, schema_editor):  # type: ignore[no-untyped-def]
    _rename(apps, schema_editor, "from_enqueue", "fixed_rate")


def backwards(apps, schema_editor):  # type: ignore[no-untyped-def]
    Trigger = apps.get_model("takt_jobs", "Trigger")
    if Trigger.objects.filter(interval_anchor="after_enqueue").exists():
        raise RuntimeError(
            "triggers anchored 'after_enqueue' have no equivalent before migration 0022:"
            " change them to another anchor first"
        )
    _rename(apps, schema_editor, "fixed_rate", "from_enqueue")


class Migration(migrations.Migration):
    dependencies = [
        ("takt_jobs", "0021_celery_beat_origin"),
    ]

    operations = [
        migrations.AlterField(
            model_name="trigger",
            name="interval_anchor",
            field=models.CharField(
                choices=[
                    ("fixed_rate", "On a fixed grid (fixed rate: start + k × N)"),
                    ("after_enqueue", "N after the previous run was enqueued (drifts)"),
                    ("from_start", "From the previous run's start"),
                    ("from_finish", "Fixed delay after the previous run ends"),
                ],
                default="fixed_rate",
                help_text=(
                    "Fixed grid: at start + k × N, a late run does not move it. After the"
                    " enqueue: N after the beat enqueued the previous run, so it drifts by how"
                    " late that was."
                ),
                max_length=16,
                verbose_name="interval anchor",
            ),
        ),
        migrations.RunPython(forwards, backwards),
    ]
