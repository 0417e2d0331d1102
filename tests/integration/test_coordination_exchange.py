"""Coordination in exports, imports and jobs declared in code (F-04, F-31,
F-32, F-33 with F-74, F-75): groups and variables travel by name, jobs
(`parent`, `upstream_job`) by key, else id; a file may name its own jobs in
any order; a reference to nothing, a loop or a retired field refuses the
whole file naming the field, and nothing is stored."""

from __future__ import annotations

import json
from io import StringIO
from pathlib import Path
from typing import Any

import pytest
import time_machine
import yaml
from django.core.exceptions import ImproperlyConfigured
from django.core.management import CommandError, call_command
from django.test.utils import override_settings

from jobs import registry
from jobs.declared import sync_declared_jobs
from jobs.exchange import InvalidDefinition
from jobs.importing import import_jobs
from jobs.models import ConcurrencyGroup, Job, ResultVariable, Trigger
from tests.integration.conftest import make_job, utc

pytestmark = pytest.mark.django_db

T0 = utc(2025, 3, 29, 12, 0)


@pytest.fixture
def setup() -> dict[str, Any]:
    """A parent with two children (one in a group, one without a key), a
    job with a condition and a dependency on a child without a key, a
    writer of a variable, an exclusive job."""
    Job.objects.all().delete()  # the migrations' jobs
    imports = ConcurrencyGroup.objects.create(name="Imports", colour="#aa0000", limit=2)
    etl = ResultVariable.objects.create(name="etl_result")
    parent = make_job("ETL", key="etl", stop_on_child_failure=False, result_variable=etl)
    extract = make_job("Extract", key="etl.extract", parent=parent, child_order=1)
    load = make_job("Load", parent=parent, child_order=2, concurrency_group=imports)
    report = make_job(
        "Report",
        key="report",
        condition_variable=etl,
        condition_values=[0, 200],
        condition_consume=True,
    )
    Trigger.objects.create(
        job=report, kind="dependency", upstream_job=load, upstream_statuses=["succeeded", "failed"]
    )
    Trigger.objects.create(
        job=report, kind="dependency", upstream_job=parent, upstream_statuses=["succeeded"]
    )
    make_job("Vacuum", key="vacuum", exclusive=True)
    return {"group": imports, "variable": etl, "parent": parent, "extract": extract, "load": load}


def snapshot() -> list[dict[str, Any]]:
    """The coordination of every job, references by name."""
    rows = []
    for job in Job.objects.order_by("name"):
        rows.append(
            {
                "name": job.name,
                "key": job.key,
                "group": job.concurrency_group.name if job.concurrency_group else None,
                "exclusive": job.exclusive,
                "writes": job.result_variable.name if job.result_variable else None,
                "reads": job.condition_variable.name if job.condition_variable else None,
                "values": job.condition_values,
                "consume": job.condition_consume,
                "parent": job.parent.name if job.parent else None,
                "child_order": job.child_order,
                "stop_on_child_failure": job.stop_on_child_failure,
                "triggers": sorted(
                    (t.kind, t.upstream_job.name, tuple(t.upstream_statuses), t.enabled)
                    for t in job.triggers.all()
                ),
            }
        )
    return rows


def export(*args: str) -> list[dict[str, Any]]:
    out = StringIO()
    with time_machine.travel(T0, tick=False):
        call_command("export_jobs", "--format", "json", *args, stdout=out)
    return json.loads(out.getvalue())


def import_file(tmp_path: Path, data: Any, *args: str) -> list[str]:
    path = tmp_path / "jobs.json"
    path.write_text(json.dumps(data))
    out = StringIO()
    with time_machine.travel(T0, tick=False):
        call_command("import_jobs", str(path), *args, stdout=out, stderr=StringIO())
    return out.getvalue().splitlines()


def by_name(data: list[dict[str, Any]], name: str) -> dict[str, Any]:
    return next(entry for entry in data if entry["name"] == name)


# --- the format ---------------------------------------------------------------------


def test_the_export_names_groups_variables_and_jobs(setup):
    data = export()

    assert by_name(data, "Load")["concurrency_group"] == "Imports"
    assert by_name(data, "Load")["parent"] == "etl"  # by key
    assert by_name(data, "ETL")["result_variable"] == "etl_result"
    report = by_name(data, "Report")
    assert (report["condition_variable"], report["condition_values"]) == ("etl_result", [0, 200])
    assert report["condition_consume"] is True
    after_load, after_etl = report["triggers"]
    assert after_load["upstream_job"] == setup["load"].pk  # no key: by id
    assert after_load["upstream_statuses"] == ["succeeded", "failed"]
    assert (after_etl["upstream_job"], after_etl["upstream_statuses"]) == ("etl", ["succeeded"])
    assert by_name(data, "Vacuum")["exclusive"] is True
    assert "allowed_during_maintenance" not in by_name(data, "Vacuum")


def test_export_then_import_into_an_empty_database_gives_the_same_coordination(setup, tmp_path):
    before = snapshot()
    data = export()
    Job.objects.all().delete()  # groups and variables stay: they are referred to by name

    lines = import_file(tmp_path, data)

    assert snapshot() == before
    assert lines[-1] == "5 create, 0 update, 0 unchanged"
    assert import_file(tmp_path, export())[-1] == "0 create, 0 update, 5 unchanged"


def test_jobs_of_a_file_may_name_each_other_in_any_order(tmp_path):
    """A child before its parent, a dependency on a job further down, a
    reference by the id a job was exported with: each is saved after the
    jobs it names."""
    data = [
        {"name": "Child", "key": "child", "target": "tests.echo", "parent": "parent"},
        {
            "name": "After",
            "target": "tests.echo",
            "triggers": [{"kind": "dependency", "upstream_job": 9001}],
        },
        {"id": 9001, "name": "Upstream", "target": "tests.echo"},
        {"name": "Parent", "key": "parent", "target": "tests.echo"},
    ]

    dry = import_file(tmp_path, data, "--dry-run")
    assert not Job.objects.filter(name__in=["Child", "After", "Upstream", "Parent"]).exists()
    lines = import_file(tmp_path, data)

    assert dry[-1] == "dry run, nothing written: 4 create, 0 update, 0 unchanged"
    assert (
        lines[:4]
        == dry[:4]
        == [  # in the file's order
            "create     job 1 (key 'child', name 'Child')",
            "create     job 2 (name 'After')",
            "create     job 3 (name 'Upstream')",
            "create     job 4 (key 'parent', name 'Parent')",
        ]
    )
    assert Job.objects.get(key="child").parent == Job.objects.get(key="parent")
    trigger = Trigger.objects.get(job__name="After")
    assert trigger.upstream_job == Job.objects.get(name="Upstream")


def test_a_reference_to_a_stored_job_by_key_or_id(tmp_path):
    Job.objects.all().delete()
    parent = make_job("Parent", key="parent")
    upstream = make_job("Upstream")
    data = [
        {"name": "Child", "target": "tests.echo", "parent": "parent"},
        {
            "name": "After",
            "target": "tests.echo",
            "triggers": [{"kind": "dependency", "upstream_job": upstream.pk}],
        },
    ]

    import_file(tmp_path, data)

    assert Job.objects.get(name="Child").parent == parent
    assert Trigger.objects.get(job__name="After").upstream_job == upstream


# --- refusals, nothing stored -------------------------------------------------------

REFUSALS = [
    (
        {"concurrency_group": "Nope"},
        "concurrency_group: no concurrency group is named 'Nope'",
    ),
    ({"result_variable": "nope"}, "result_variable: no result variable is named 'nope'"),
    ({"condition_variable": "nope"}, "condition_variable: no result variable is named 'nope'"),
    ({"parent": "nope"}, "parent: no job has the key 'nope'"),
    ({"parent": 987654}, "parent: no job has the id 987654"),
    ({"parent": True}, "parent: give a job's key (a string) or id (an integer)"),
    (
        {"triggers": [{"kind": "dependency", "upstream_job": "nope"}]},
        "triggers[0].upstream_job: no job has the key 'nope'",
    ),
    (
        {"triggers": [{"kind": "dependency"}]},
        "triggers[0].upstream_job: required for a dependency trigger",
    ),
    (
        {"triggers": [{"kind": "dependency", "upstream_job": "etl", "upstream_statuses": ["ok"]}]},
        "triggers[0].upstream_statuses: 'ok' is not how a run ends",
    ),
    ({"condition_values": ["0"]}, "condition_values: give the accepted values as whole numbers"),
    (
        {"concurrency_group": "imports", "exclusive": True},
        "exclusive: an exclusive job is in no group",
    ),
    (
        {"allowed_during_maintenance": True},
        "allowed_during_maintenance: no longer a job field: the maintenance allow-list is"
        " code's (F-29). Register the job's function with"
        ' @takt_job("name", allowed_during_maintenance=True) instead',
    ),
]


@pytest.mark.parametrize(("change", "message"), REFUSALS)
def test_a_bad_reference_refuses_the_whole_import_naming_the_field(
    setup, tmp_path, change, message
):
    data = export()
    by_name(data, "ETL")["priority"] = 1  # a valid change that must not be written either
    by_name(data, "Vacuum").update(change)
    before = snapshot()
    priorities = dict(Job.objects.values_list("name", "priority"))

    with pytest.raises(CommandError) as caught:
        import_file(tmp_path, data)

    assert f"(key 'vacuum', name 'Vacuum'): {message}" in str(caught.value)
    assert snapshot() == before
    assert dict(Job.objects.values_list("name", "priority")) == priorities


def test_new_jobs_that_name_each_other_in_a_loop_are_refused(tmp_path):
    data = [
        {"name": "A", "key": "a", "target": "tests.echo", "parent": "b"},
        {"name": "B", "key": "b", "target": "tests.echo", "parent": "a"},
        {"name": "C", "key": "c", "target": "tests.echo", "parent": "c"},
    ]
    with pytest.raises(InvalidDefinition) as caught:
        import_jobs(data, now=T0, by="test")
    assert caught.value.problems == [
        (
            "job 1 (key 'a', name 'A'): ",
            "parent",
            "the jobs of this file name each other in a loop:"
            " job 1 (key 'a', name 'A') → job 2 (key 'b', name 'B') → job 1 (key 'a', name 'A')",
        )
    ]
    assert not Job.objects.filter(key__in=["a", "b", "c"]).exists()

    with pytest.raises(InvalidDefinition, match="parent: a job cannot be its own parent"):
        import_jobs(data[2:], now=T0, by="test")
    dependency = [
        {"name": "D", "key": "d", "target": "tests.echo"},
        {"kind": "dependency", "upstream_job": "d"},
    ]
    with pytest.raises(InvalidDefinition, match=r"triggers\[0\].upstream_job: a job cannot depend"):
        import_jobs([{**dependency[0], "triggers": dependency[1:]}], now=T0, by="test")


def test_a_dependency_cycle_through_stored_jobs_is_refused(setup, tmp_path):
    """ETL alone, made to depend on Report, which depends on ETL already."""
    data = export("--key", "etl")
    data[0]["triggers"] = [{"kind": "dependency", "upstream_job": "report"}]
    before = snapshot()

    with pytest.raises(CommandError, match=r"triggers\[0\].upstream_job: that would make a cycle"):
        import_file(tmp_path, data)
    assert snapshot() == before


def test_a_dependency_loop_within_the_file_is_refused(setup, tmp_path):
    data = export()
    by_name(data, "ETL")["triggers"] = [{"kind": "dependency", "upstream_job": "report"}]
    before = snapshot()

    with pytest.raises(CommandError) as caught:
        import_file(tmp_path, data)
    assert (
        # ETL after Report, Report after Load, Load part of ETL's run: for ever
        "triggers[0].upstream_job: the jobs of this file name each other in a loop:"
        " job 1 (key 'etl', name 'ETL') → job 4 (key 'report', name 'Report')"
        " → job 3 (name 'Load') → job 1 (key 'etl', name 'ETL')"
    ) in str(caught.value)
    assert snapshot() == before


def test_a_rule_broken_only_with_the_saved_jobs_is_found_in_the_transaction(tmp_path):
    """A new parent that is in a group: the child's check needs the parent
    saved; its refusal rolls back the parent too."""
    Job.objects.all().delete()
    ConcurrencyGroup.objects.create(name="Blue")
    data = [
        {"name": "Child", "target": "tests.echo", "parent": "p"},
        {"name": "Parent", "key": "p", "target": "tests.echo", "concurrency_group": "blue"},
    ]
    with pytest.raises(InvalidDefinition) as caught:
        import_jobs(data, now=T0, by="test")
    [(where, field, message)] = caught.value.problems
    assert (where, field) == ("job 1 (name 'Child'): ", "parent")
    assert "is exclusive or in a group" in message
    assert not Job.objects.exists()
    # The dry run finds it too, and writes nothing.
    with pytest.raises(InvalidDefinition, match="is exclusive or in a group"):
        import_jobs(data, now=T0, by="test", dry_run=True)
    assert not Job.objects.exists()


def test_a_new_child_with_a_trigger_is_refused(tmp_path):
    Job.objects.all().delete()
    data = [
        {"name": "Parent", "key": "p", "target": "tests.echo"},
        {
            "name": "Child",
            "target": "tests.echo",
            "parent": "p",
            "triggers": [{"kind": "cron", "cron_expression": "0 3 * * *"}],
        },
    ]
    with pytest.raises(InvalidDefinition, match=r"job 2 \(name 'Child'\): triggers\[0\].kind: the"):
        import_jobs(data, now=T0, by="test")
    assert not Job.objects.exists()
    data[1]["triggers"][0]["enabled"] = False  # a disabled one may stay
    import_jobs(data, now=T0, by="test")
    assert Job.objects.get(name="Child").triggers.get().enabled is False


def test_two_new_jobs_with_one_key_are_refused():
    data = [
        {"name": "One", "key": "same", "target": "tests.echo"},
        {"name": "Two", "key": "same", "target": "tests.echo"},
    ]
    with pytest.raises(InvalidDefinition) as caught:
        import_jobs(data, now=T0, by="test")
    assert caught.value.problems == [
        (
            "job 2 (key 'same', name 'Two'): ",
            "key",
            "'same' is also the key of job 1 (key 'same', name 'One')",
        )
    ]
    assert not Job.objects.filter(key="same").exists()


def test_an_id_two_entries_share_is_no_reference(tmp_path):
    data = [
        {"id": 5, "name": "A", "target": "tests.echo"},
        {"id": 5, "name": "B", "target": "tests.echo"},
        {"name": "C", "target": "tests.echo", "parent": 5},
    ]
    with pytest.raises(InvalidDefinition, match="parent: 2 jobs of this file have the id 5"):
        import_jobs(data, now=T0, by="test")


# --- jobs declared in code ----------------------------------------------------------


@pytest.fixture
def _clean_declarations(monkeypatch):
    monkeypatch.setattr(registry, "_DECLARED", {})
    monkeypatch.setattr(registry, "_REGISTRY", dict(registry._REGISTRY))
    monkeypatch.setattr(registry, "_ALLOWED_IN_MAINTENANCE", set(registry._ALLOWED_IN_MAINTENANCE))


def sync(jobs: dict[str, Any], **options: Any) -> Any:
    with override_settings(TAKT_JOBS=jobs), time_machine.travel(T0, tick=False):
        return sync_declared_jobs(now=T0, **options)


DECLARED = {
    # The child comes first and names its parent, declared after it.
    "etl.load": {
        "name": "Load",
        "target": "tests.echo",
        "parent": "etl",
        "child_order": 2,
        "concurrency_group": "Imports",
    },
    "etl": {"name": "ETL", "target": "tests.echo", "result_variable": "etl_result"},
    "report": {
        "name": "Report",
        "target": "tests.echo",
        "condition_variable": "etl_result",
        "condition_values": [0],
        "triggers": [{"kind": "dependency", "upstream_job": "etl"}],
    },
}


@pytest.mark.usefixtures("_clean_declarations")
def test_declared_jobs_name_groups_variables_and_each_other():
    ConcurrencyGroup.objects.create(name="Imports")
    ResultVariable.objects.create(name="etl_result")

    dry = sync(DECLARED, dry_run=True)
    assert not Job.objects.filter(key__in=DECLARED).exists()
    report = sync(DECLARED)

    assert report.created == dry.created == ["etl.load", "etl", "report"]  # as declared
    load, etl = Job.objects.get(key="etl.load"), Job.objects.get(key="etl")
    assert (load.parent, load.concurrency_group.name, load.code_managed) == (etl, "Imports", True)
    assert etl.result_variable.name == "etl_result"
    assert Trigger.objects.get(job__key="report").upstream_job == etl
    again = sync(DECLARED)
    assert again.unchanged == ["etl.load", "etl", "report"] and not again.changed


@pytest.mark.usefixtures("_clean_declarations")
@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"concurrency_group": "Nope"}, "['etl'].concurrency_group: no concurrency group is named"),
        (
            {"result_variable": "nope"},
            "['etl'].result_variable: no result variable is named 'nope'",
        ),
        ({"parent": "nope"}, "['etl'].parent: no job has the key 'nope'"),
        (
            {"triggers": [{"kind": "dependency", "upstream_job": "nope"}]},
            "['etl'].triggers[0].upstream_job: no job has the key 'nope'",
        ),
        (
            {"parent": "etl.load"},
            "['etl.load'].parent: the jobs of this file name each other in a loop:"
            " TAKT_JOBS['etl.load'] → TAKT_JOBS['etl'] → TAKT_JOBS['etl.load']",
        ),
        (
            {"allowed_during_maintenance": True},
            "['etl'].allowed_during_maintenance: no longer a job field: the maintenance"
            " allow-list is code's",
        ),
    ],
)
def test_a_declared_job_naming_nothing_stops_the_sync_and_stores_nothing(change, message):
    ConcurrencyGroup.objects.create(name="Imports")
    ResultVariable.objects.create(name="etl_result")
    declared = {**DECLARED, "etl": {**DECLARED["etl"], **change}}

    with pytest.raises(ImproperlyConfigured) as caught:
        sync(declared)

    assert f"TAKT_JOBS{message}" in str(caught.value)
    assert not Job.objects.filter(key__in=DECLARED).exists()


@pytest.mark.usefixtures("_clean_declarations")
def test_a_refusal_found_after_saving_rolls_the_sync_back():
    """The parent is in a group: only the child's check, made once the
    parent is saved, finds it; nothing stays."""
    ConcurrencyGroup.objects.create(name="Imports")
    ResultVariable.objects.create(name="etl_result")
    declared = {**DECLARED, "etl": {**DECLARED["etl"], "concurrency_group": "Imports"}}
    declared["etl.load"] = {**DECLARED["etl.load"], "concurrency_group": None}

    with pytest.raises(ImproperlyConfigured, match=r"TAKT_JOBS\['etl.load'\].parent: job #"):
        sync(declared)
    assert not Job.objects.filter(key__in=DECLARED).exists()


@pytest.mark.usefixtures("_clean_declarations")
def test_the_decorator_takes_the_allow_list_flag_and_declares_the_job():
    @registry.takt_job("tests.logoff", allowed_during_maintenance=True, schedule="0 22 * * *")
    def logoff(job: Any) -> None:
        pass

    sync({})

    job = Job.objects.get(key="tests.logoff")
    assert registry.allowed_in_maintenance(job.target)
    assert job.triggers.get().cron_expression == "0 22 * * *"


def test_the_export_in_yaml_reads_back(setup, tmp_path):
    out = StringIO()
    with time_machine.travel(T0, tick=False):
        call_command("export_jobs", stdout=out)
    data = yaml.safe_load(out.getvalue())
    assert by_name(data, "Extract")["parent"] == "etl"
