from django.db import migrations


class Migration(migrations.Migration):
    dependencies = [
        ("takt_runs", "0007_run_cancelled_by_and_progress"),
    ]

    operations = [
        migrations.AlterModelOptions(
            name="run",
            options={
                "ordering": ["-enqueued_at", "-id"],
                "permissions": [("cancel_run", "Can cancel a queued or running run")],
            },
        ),
    ]
