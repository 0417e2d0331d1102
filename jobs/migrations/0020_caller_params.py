"""Least privilege (docs/security.md): Job.caller_params, the run params a
caller of the API may set. New jobs take none; a job already started
through the API keeps taking any (["*"]) so an upgrade breaks no caller:
narrow it in the editor."""

from django.db import migrations, models


def keep_open_for_api_jobs(apps, schema_editor):
    Job = apps.get_model("takt_jobs", "Job")
    Job.objects.exclude(api_trigger_permission="off").update(caller_params=["*"])


class Migration(migrations.Migration):
    dependencies = [
        ("takt_jobs", "0019_capability_permissions"),
    ]

    operations = [
        migrations.AddField(
            model_name="job",
            name="caller_params",
            field=models.JSONField(
                blank=True,
                default=list,
                help_text=(
                    'The keys of the run params a caller of the API may set, e.g. ["date",'
                    ' "region"]; ["*"]: any key. Empty: none, a run gets the job\'s params.'
                ),
                verbose_name="params a caller may set",
            ),
        ),
        migrations.RunPython(keep_open_for_api_jobs, migrations.RunPython.noop),
    ]
