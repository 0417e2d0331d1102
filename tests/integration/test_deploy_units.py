"""deploy/'s least-privilege defaults: the systemd units are valid
(`systemd-analyze verify`), hardened (NoNewPrivileges, ProtectSystem=strict
and friends; `systemd-analyze security` rates each OK), run web, worker and
beat as users of their own with state folders of their own, and Flower
starts only with a login in every deploy file."""

from __future__ import annotations

import configparser
import shutil
import subprocess
from pathlib import Path

import pytest
import yaml

from tests.processes import ROOT

UNITS = ROOT / "deploy/systemd"
NAMES = ["takt-web", "takt-worker", "takt-beat", "takt-flower"]
HARDENING = {
    "NoNewPrivileges": "yes",
    "ProtectSystem": "strict",
    "ProtectHome": "yes",
    "PrivateTmp": "yes",
    "PrivateDevices": "yes",
    "ProtectKernelTunables": "yes",
    "ProtectKernelModules": "yes",
    "ProtectControlGroups": "yes",
    "RestrictSUIDSGID": "yes",
    "RestrictNamespaces": "yes",
    "LockPersonality": "yes",
    "CapabilityBoundingSet": "",
    "AmbientCapabilities": "",
    "UMask": "0077",
}


def service(name: str) -> dict[str, str]:
    """The [Service] section of a unit (a key set twice: its last value)."""
    parser = configparser.ConfigParser(strict=False, interpolation=None, delimiters=("=",))
    parser.optionxform = str  # type: ignore[assignment,method-assign]
    parser.read_string((UNITS / f"{name}.service").read_text())
    return dict(parser["Service"])


@pytest.mark.parametrize("name", NAMES)
def test_every_unit_is_hardened(name):
    keys = service(name)
    assert {key: keys.get(key) for key in HARDENING} == HARDENING


def test_web_worker_and_beat_are_users_of_their_own_with_state_of_their_own():
    users = {name: service(name).get("User") for name in NAMES}
    assert users == {
        "takt-web": "takt-web",
        "takt-worker": "takt-worker",
        "takt-beat": "takt-beat",
        "takt-flower": None,  # DynamicUser: a user made at each start
    }
    assert service("takt-flower")["DynamicUser"] == "yes"
    for name in NAMES:
        keys = service(name)
        assert keys["StateDirectory"] == name
        assert f"TAKT_VAR_DIR=/var/lib/{name}" in keys["Environment"].split()
    # Set in the shared file, it would override every unit's own.
    example = (UNITS / "takt.env.example").read_text()
    assert not [line for line in example.splitlines() if line.startswith("TAKT_VAR_DIR=")]


@pytest.fixture
def units_here(tmp_path: Path) -> Path:
    """The units with /opt/takt replaced by this checkout, whose .venv has
    the programs they start (verify checks that they exist)."""
    for name in NAMES:
        text = (UNITS / f"{name}.service").read_text().replace("/opt/takt", str(ROOT))
        (tmp_path / f"{name}.service").write_text(text)
    return tmp_path


def systemd_analyze() -> str:
    found = shutil.which("systemd-analyze")
    if found is None:
        pytest.skip("systemd-analyze is not installed (the unit files are still read above)")
    return found


def test_systemd_analyze_verify_finds_nothing(units_here):
    files = [str(units_here / f"{name}.service") for name in NAMES]
    done = subprocess.run(
        [systemd_analyze(), "verify", "--man=no", *files],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert (done.returncode, done.stdout + done.stderr) == (0, "")


@pytest.mark.parametrize("name", NAMES)
def test_systemd_analyze_security_rates_every_unit_ok(units_here, name):
    """Exposure from 0 (locked down) to 10 (none of the protections); the
    units before these settings rated 9.2, "UNSAFE". The worker keeps no
    system-call filter (a job may be any program): 3.0."""
    done = subprocess.run(
        [systemd_analyze(), "security", "--offline=yes", "--threshold=35", f"{name}.service"],
        cwd=units_here,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr


def flower_guard() -> str:
    """takt-flower's ExecStartPre, as systemd hands it to /bin/sh ($$ is $)."""
    line = service("takt-flower")["ExecStartPre"]
    assert line.startswith("/bin/sh -c '") and line.endswith("'")
    return line[len("/bin/sh -c '") : -1].replace("$$", "$")


@pytest.mark.parametrize(
    ("value", "starts"),
    [(None, False), ("", False), ("takt", False), ("takt:", False), ("takt:pw-9f2k", True)],
)
def test_flower_unit_starts_only_with_a_login(value, starts):
    env = {"PATH": "/usr/bin:/bin"} | ({} if value is None else {"FLOWER_BASIC_AUTH": value})
    done = subprocess.run(
        ["/bin/sh", "-c", flower_guard()], env=env, capture_output=True, text=True, timeout=10
    )
    assert (done.returncode == 0) == starts
    if not starts:
        assert "FLOWER_BASIC_AUTH=user:password" in done.stderr


def test_procfile_and_compose_start_flower_only_with_a_login():
    procfile = (ROOT / "deploy/Procfile").read_text().splitlines()
    flower = next(line for line in procfile if line.startswith("flower:"))
    assert '--basic-auth="${FLOWER_BASIC_AUTH:?' in flower
    compose = yaml.safe_load((ROOT / "deploy/compose.yaml").read_text())
    assert compose["services"]["flower"]["environment"]["FLOWER_BASIC_AUTH"].startswith(
        "${FLOWER_BASIC_AUTH:?"
    )
