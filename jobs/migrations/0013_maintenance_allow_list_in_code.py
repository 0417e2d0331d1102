# F-29: the maintenance allow-list is code's (a function registered with
# @takt_job(..., allowed_during_maintenance=True)), no longer a switch on
# each job that an operator or an API call could turn on.
from django.db import migrations


class Migration(migrations.Migration):
    dependencies = [
        ("takt_jobs", "0012_coordination"),
    ]

    operations = [
        migrations.RemoveField(
            model_name="job",
            name="allowed_during_maintenance",
        ),
    ]
