"""Command and system jobs (F-02) through the API and `import_jobs`: created
with their fields, round-tripped by export, and refused with the field
named and nothing stored, the same as in the admin."""

from __future__ import annotations

import json
from io import StringIO
from typing import Any

import pytest
from django.core.management import CommandError, call_command

from jobs.models import Job
from tests.integration.api_helpers import SessionClient, TokenClient, make_token, user_with

pytestmark = pytest.mark.django_db

JOB_PERMS = (
    "takt_jobs.view_job",
    "takt_jobs.add_job",
    "takt_jobs.change_job",
    "takt_jobs.delete_job",
    "takt_jobs.run_programs",  # command jobs (jobs.capabilities)
)
COMMAND = {
    "name": "archive",
    "key": "ops.archive",
    "kind": "command",
    "command": ["tar", "czf", "/tmp/archive.tgz", "/srv/in"],
    "cwd": "/tmp",
    "env": {"LANG": "C.UTF-8"},
    "nice": 10,
    "success_codes": [0, 1],
    "detached": True,
    "result_code_at": "exit",
}


@pytest.fixture(params=["session", "token"])
def client(request: pytest.FixtureRequest) -> Any:
    user = user_with(*JOB_PERMS)
    if request.param == "session":
        return SessionClient(user)
    return TokenClient(make_token(user=user))


def test_a_command_job_is_created_and_read_back_with_its_fields(client):
    response = client.send("post", "/api/v1/jobs", COMMAND)

    assert response.status_code == 201, response.json()
    data = client.get(f"/api/v1/jobs/{response.json()['id']}").json()
    assert {k: data[k] for k in COMMAND} == COMMAND
    assert data["target"] == ""


@pytest.mark.parametrize(
    ("change", "field", "start"),
    [
        ({"command": []}, "command", "a command job needs its command"),
        ({"cwd": "tmp"}, "cwd", "'tmp' is a relative path"),
        ({"env": {"N": 1}}, "env", "N: the value must be a string"),
        ({"nice": 25}, "nice", "Ensure this value is less than or equal to 19."),
        ({"result_code_at": "later"}, "result_code_at", '"later" is not a valid choice.'),
    ],
)
def test_bad_command_fields_are_refused_by_the_api_naming_the_field(client, change, field, start):
    response = client.send("post", "/api/v1/jobs", {**COMMAND, **change})

    assert response.status_code == 400
    assert response.json()[field][0].startswith(start), response.json()
    assert not Job.objects.filter(key="ops.archive").exists()


def test_a_system_job_with_a_param_it_does_not_take_is_refused_by_the_api(client):
    body = {"name": "pause", "kind": "system", "target": "takt.pause_queue", "params": {"x": "1"}}

    response = client.send("post", "/api/v1/jobs", body)

    assert response.status_code == 400
    assert response.json()["params"] == ["takt.pause_queue does not take x (it takes: note)"]


def export() -> list[dict[str, Any]]:
    out = StringIO()
    call_command("export_jobs", "--format", "json", stdout=out)
    return json.loads(out.getvalue())


def import_file(path) -> None:
    call_command("import_jobs", str(path), stdout=StringIO())


def test_export_and_import_round_trip_command_and_system_jobs(tmp_path):
    Job(**COMMAND).save()
    Job(name="pause", key="ops.pause", kind="system", target="takt.pause_queue",
        params={"note": "backup"}).save()  # fmt: skip
    exported = [j for j in export() if (j.get("key") or "").startswith("ops.")]
    Job.objects.filter(key__startswith="ops.").delete()
    path = tmp_path / "jobs.json"
    path.write_text(json.dumps(exported))

    import_file(path)

    def without_ids(jobs: list[dict[str, Any]]) -> list[dict[str, Any]]:
        return [{k: v for k, v in j.items() if k != "id"} for j in jobs]

    again = [j for j in export() if (j.get("key") or "").startswith("ops.")]
    assert without_ids(again) == without_ids(exported)
    archive = Job.objects.get(key="ops.archive")
    assert (archive.command, archive.detached, archive.result_code_at) == (
        COMMAND["command"],
        True,
        "exit",
    )


def test_an_import_with_a_bad_command_job_writes_nothing(tmp_path):
    path = tmp_path / "jobs.json"
    path.write_text(json.dumps([{**COMMAND, "cwd": "/no/such/dir"}]))

    with pytest.raises(CommandError, match=r"cwd: '/no/such/dir' is not a directory"):
        import_file(path)
    assert not Job.objects.filter(key="ops.archive").exists()
