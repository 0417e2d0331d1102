"""The API's schema (api/v1/schema) and Swagger UI (api/v1/docs) in a
project that embeds Takt (docs/embedding.md), whose REST_FRAMEWORK names no
DEFAULT_SCHEMA_CLASS and which has no SPECTACULAR_SETTINGS: the schema is
served, valid OpenAPI, Takt's own (its title, its paths only), and the
Swagger UI page loads nothing from another host (jobs.api.schema)."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from typing import Any

import pytest
from django.conf import settings
from django.test import Client, override_settings
from drf_spectacular.settings import spectacular_settings
from drf_spectacular.validation import validate_schema

from jobs.api.schema import SCHEMA_SETTINGS
from tests.fresh_project import make_project, python


@pytest.fixture
def a_hosts_settings() -> Iterator[None]:
    """REST_FRAMEWORK and SPECTACULAR_SETTINGS empty. drf-spectacular reads
    SPECTACULAR_SETTINGS once, at import, and keeps what it read (nothing
    reloads it when a setting changes; its reload() would read
    REST_FRAMEWORK instead): what it read is swapped here, and put back."""
    read, cached = spectacular_settings._user_settings, set(spectacular_settings._cached_attrs)

    def forget(user_settings: dict[str, Any]) -> None:
        for attr in spectacular_settings._cached_attrs | cached:
            spectacular_settings.__dict__.pop(attr, None)
        spectacular_settings._cached_attrs.clear()
        spectacular_settings._user_settings = user_settings

    with override_settings(REST_FRAMEWORK={}, SPECTACULAR_SETTINGS={}):
        forget({})
        try:
            yield
        finally:
            forget(read)


def external_hosts(page: str) -> list[str]:
    """Addresses of another host that a page loads (src, href, url(), or a
    bare //host/...)."""
    return re.findall(r"""(?:https?:)?//[a-z0-9.-]+\.[a-z]{2,}[^"' )]*""", page, flags=re.I)


def test_the_schema_and_its_page_without_the_projects_settings(a_hosts_settings):
    from rest_framework.settings import api_settings

    assert "DEFAULT_SCHEMA_CLASS" not in settings.REST_FRAMEWORK
    assert spectacular_settings.TITLE == ""  # drf-spectacular's default, not Takt's
    assert api_settings.DEFAULT_SCHEMA_CLASS.__module__ == "rest_framework.schemas.openapi"
    client = Client(SERVER_NAME="localhost")

    response = client.get("/api/v1/schema", {"format": "json"})

    assert response.status_code == 200
    schema = response.json()
    validate_schema(schema)
    assert schema["info"]["title"] == "Takt API"
    assert "/api/v1/jobs/{id}/run/" in schema["paths"]
    assert "Error" in schema["components"]["schemas"]  # Takt's post-processing hook
    page = client.get("/api/v1/docs").content.decode()
    assert "/static/drf_spectacular_sidecar/swagger-ui-dist/swagger-ui-bundle.js" in page
    assert external_hosts(page) == []


def test_takts_own_project_says_the_same_for_manage_py_spectacular():
    assert SCHEMA_SETTINGS.items() <= settings.SPECTACULAR_SETTINGS.items()


SHOW = """
import json, re
from django.test import Client
client = Client(SERVER_NAME="localhost")
schema = client.get("/takt/api/v1/schema", {"format": "json"})
docs = client.get("/takt/api/v1/docs")
print(json.dumps({"schema_status": schema.status_code, "schema": schema.content.decode(),
                  "docs_status": docs.status_code, "docs": docs.content.decode()}))
"""


@pytest.mark.timeout(120)
def test_in_a_fresh_project_made_by_startproject(tmp_path):
    """As a user's project has it: Takt's modules imported under the
    project's settings (drf-spectacular builds a method's schema class on
    DEFAULT_SCHEMA_CLASS when the module is imported)."""
    site = make_project(tmp_path / "mysite")

    out = python(site, "manage.py", "shell", "-v", "0", "-c", SHOW, timeout_s=90)

    served = json.loads(out.strip().splitlines()[-1])
    assert served["schema_status"] == 200, served["schema"][-3000:]
    schema = json.loads(served["schema"])
    validate_schema(schema)
    assert schema["info"]["title"] == "Takt API"
    assert "/takt/api/v1/jobs/{id}/run/" in schema["paths"]
    assert all(path.startswith("/takt/api/v1/") for path in schema["paths"])
    assert served["docs_status"] == 200
    assert "/static/drf_spectacular_sidecar/swagger-ui-dist/swagger-ui.css" in served["docs"]
    assert external_hosts(served["docs"]) == []


def test_takts_pages_load_nothing_from_another_host():
    """Every template and script of Takt's apps (the vendored ECharts with
    them: its addresses are XML namespaces and licences, never loaded)."""
    loads = re.compile(
        r"""(?:src|href|action)\s*=\s*["']?(?:https?:)?//|url\(\s*["']?(?:https?:)?//"""
        r"""|@import\s+["']?(?:https?:)?//|\b(?:import|fetch)\s*\(?\s*["'](?:https?:)?//""",
        flags=re.IGNORECASE,
    )
    root = settings.BASE_DIR
    files = [
        path
        for app in ("jobs", "runs", "heartbeats")
        for folder in ("templates", "static")
        for path in (root / app / folder).rglob("*")
        if path.suffix in (".html", ".js", ".css", ".txt")
    ]
    assert any(path.name == "echarts.min.js" for path in files)
    found = {str(p.relative_to(root)): loads.findall(p.read_text()) for p in files}
    assert {path: hits for path, hits in found.items() if hits} == {}
