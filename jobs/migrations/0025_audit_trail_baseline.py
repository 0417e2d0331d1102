"""The audit trail's first row of every object stored before it existed
(F-120): its state at the migration, so that its first change is diffed
against what it was, not against nothing. Written as a change by "code",
said to be the baseline; no stored object changes."""

from django.db import migrations
from django.utils import timezone

MODELS = (
    "Job",
    "Trigger",
    "ConcurrencyGroup",
    "ResultVariable",
    "HolidayCalendar",
    "ApiToken",
    "QueueState",
)
BY = "migration: the state when the audit trail began"


def baseline(apps, schema_editor):
    now = timezone.now()
    for name in MODELS:
        model = apps.get_model("takt_jobs", name)
        history = apps.get_model("takt_jobs", f"Historical{name}")
        stored = {f.attname for f in model._meta.concrete_fields}
        fields = [f.attname for f in history._meta.concrete_fields if f.attname in stored]
        rows = (
            history(
                **{a: getattr(obj, a) for a in fields},
                history_date=now,
                history_type="~",
                audit_source="code",
                audit_by=BY,
            )
            for obj in model._default_manager.order_by("pk").iterator(chunk_size=1000)
        )
        batch = []
        for row in rows:
            batch.append(row)
            if len(batch) == 1000:
                history.objects.bulk_create(batch)
                batch = []
        history.objects.bulk_create(batch)


class Migration(migrations.Migration):
    dependencies = [("takt_jobs", "0024_audit_trail")]

    operations = [migrations.RunPython(baseline, migrations.RunPython.noop)]
