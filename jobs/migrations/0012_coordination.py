import django.core.validators
import django.db.models.deletion
import django.db.models.functions.text
from django.db import migrations, models


def groups_from_names(apps, schema_editor):
    Job = apps.get_model("takt_jobs", "Job")
    Group = apps.get_model("takt_jobs", "ConcurrencyGroup")
    groups = {}
    names = Job.objects.exclude(concurrency_group="").values_list("concurrency_group", flat=True)
    for name in sorted(set(names)):
        key = name.strip().lower()
        if key not in groups:
            groups[key] = Group.objects.create(name=name.strip()[:100])
        Job.objects.filter(concurrency_group=name).update(group_tmp=groups[key])


def names_from_groups(apps, schema_editor):
    Job = apps.get_model("takt_jobs", "Job")
    for job in Job.objects.exclude(group_tmp=None).select_related("group_tmp"):
        Job.objects.filter(pk=job.pk).update(concurrency_group=job.group_tmp.name)


class Migration(migrations.Migration):
    dependencies = [
        ("takt_jobs", "0011_job_name_index"),
    ]

    operations = [
        migrations.AddField(
            model_name="job",
            name="child_order",
            field=models.PositiveIntegerField(
                default=0,
                help_text="Children run in this order (then by id).",
                verbose_name="order among its siblings",
            ),
        ),
        migrations.AddField(
            model_name="job",
            name="condition_consume",
            field=models.BooleanField(
                default=False,
                help_text="Set the variable back to -1 once a run started, so one result starts it once.",
                verbose_name="consume the result",
            ),
        ),
        migrations.AddField(
            model_name="job",
            name="condition_values",
            field=models.JSONField(
                blank=True,
                default=list,
                help_text="The values that let it start, e.g. [0, 200].",
                verbose_name="accepted values",
            ),
        ),
        migrations.AddField(
            model_name="job",
            name="exclusive",
            field=models.BooleanField(
                default=False,
                help_text="Starts only while no job of any group runs, and blocks every group while it runs.",
                verbose_name="exclusive (global group)",
            ),
        ),
        migrations.AddField(
            model_name="job",
            name="parent",
            field=models.ForeignKey(
                blank=True,
                help_text="A child runs only as part of its parent's run, in its order; never by itself.",
                null=True,
                on_delete=django.db.models.deletion.SET_NULL,
                related_name="children",
                to="takt_jobs.job",
            ),
        ),
        migrations.AddField(
            model_name="job",
            name="stop_on_child_failure",
            field=models.BooleanField(
                default=True,
                help_text="As a parent: after a failed child, skip the rest (else run them all).",
            ),
        ),
        migrations.AddField(
            model_name="trigger",
            name="upstream_job",
            field=models.ForeignKey(
                blank=True,
                help_text="Dependency: the job whose end starts this one.",
                null=True,
                on_delete=django.db.models.deletion.CASCADE,
                related_name="downstream_triggers",
                to="takt_jobs.job",
            ),
        ),
        migrations.AddField(
            model_name="trigger",
            name="upstream_statuses",
            field=models.JSONField(
                blank=True,
                default=list,
                help_text='Dependency: the statuses of its end that start this job, e.g. ["succeeded"].',
                verbose_name="when it ends",
            ),
        ),
        migrations.AlterField(
            model_name="trigger",
            name="kind",
            field=models.CharField(
                choices=[
                    ("cron", "Cron expression"),
                    ("interval", "Interval"),
                    ("once", "Once"),
                    ("calendar", "Calendar preset"),
                    ("dependency", "After another job"),
                ],
                default="cron",
                max_length=16,
            ),
        ),
        migrations.CreateModel(
            name="ConcurrencyGroup",
            fields=[
                (
                    "id",
                    models.BigAutoField(
                        auto_created=True, primary_key=True, serialize=False, verbose_name="ID"
                    ),
                ),
                (
                    "name",
                    models.CharField(
                        help_text="Unique, whatever the case (the manual's colour groups: 'Blue', 'Imports').",
                        max_length=100,
                    ),
                ),
                (
                    "colour",
                    models.CharField(
                        default="#2f6fde",
                        help_text="Shown beside the group's name in the job list.",
                        max_length=7,
                        validators=[
                            django.core.validators.RegexValidator(
                                "^#[0-9a-fA-F]{6}$", "a colour as #rrggbb, e.g. #2f6fde"
                            )
                        ],
                    ),
                ),
                (
                    "limit",
                    models.PositiveSmallIntegerField(
                        default=1,
                        help_text="How many runs of the group's jobs may run at once (1: one after the other).",
                        validators=[
                            django.core.validators.MinValueValidator(1),
                            django.core.validators.MaxValueValidator(1000),
                        ],
                    ),
                ),
                ("description", models.TextField(blank=True)),
            ],
            options={
                "ordering": ["name"],
                "constraints": [
                    models.UniqueConstraint(
                        django.db.models.functions.text.Lower("name"),
                        name="group_unique_name",
                        violation_error_message="a concurrency group with this name exists already",
                    )
                ],
            },
        ),
        # concurrency_group was a free text, stored and ignored: each name in
        # use becomes a group (limit 1, as the manual's colour groups), the
        # same name in another case the same group.
        migrations.AddField(
            model_name="job",
            name="group_tmp",
            field=models.ForeignKey(
                null=True,
                on_delete=django.db.models.deletion.PROTECT,
                related_name="+",
                to="takt_jobs.concurrencygroup",
            ),
        ),
        migrations.RunPython(groups_from_names, names_from_groups),
        migrations.RemoveField(model_name="job", name="concurrency_group"),
        migrations.RenameField(
            model_name="job", old_name="group_tmp", new_name="concurrency_group"
        ),
        migrations.AlterField(
            model_name="job",
            name="concurrency_group",
            field=models.ForeignKey(
                blank=True,
                help_text="Jobs in one group run at most the group's limit at a time; a run waits for a slot.",
                null=True,
                on_delete=django.db.models.deletion.PROTECT,
                related_name="jobs",
                to="takt_jobs.concurrencygroup",
            ),
        ),
        migrations.CreateModel(
            name="ResultVariable",
            fields=[
                (
                    "id",
                    models.BigAutoField(
                        auto_created=True, primary_key=True, serialize=False, verbose_name="ID"
                    ),
                ),
                (
                    "name",
                    models.CharField(
                        help_text="Unique, whatever the case; the jobs that write and read it name it.",
                        max_length=100,
                    ),
                ),
                ("value", models.IntegerField(default=-1)),
                ("changed_at", models.DateTimeField(blank=True, editable=False, null=True)),
                (
                    "changed_by_run",
                    models.PositiveBigIntegerField(blank=True, editable=False, null=True),
                ),
                (
                    "changed_by",
                    models.CharField(
                        blank=True,
                        editable=False,
                        help_text="Who set it by hand, if nobody's run.",
                        max_length=200,
                    ),
                ),
                ("description", models.TextField(blank=True)),
            ],
            options={
                "ordering": ["name"],
                "constraints": [
                    models.UniqueConstraint(
                        django.db.models.functions.text.Lower("name"),
                        name="variable_unique_name",
                        violation_error_message="a result variable with this name exists already",
                    )
                ],
            },
        ),
        migrations.AddField(
            model_name="job",
            name="condition_variable",
            field=models.ForeignKey(
                blank=True,
                help_text="Starts only while this variable holds one of the accepted values.",
                null=True,
                on_delete=django.db.models.deletion.PROTECT,
                related_name="readers",
                to="takt_jobs.resultvariable",
            ),
        ),
        migrations.AddField(
            model_name="job",
            name="result_variable",
            field=models.ForeignKey(
                blank=True,
                help_text="Its runs write their result code here: -1 when one starts, its code when it ends.",
                null=True,
                on_delete=django.db.models.deletion.PROTECT,
                related_name="writers",
                to="takt_jobs.resultvariable",
            ),
        ),
    ]
