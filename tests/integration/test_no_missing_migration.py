"""Every change to Takt's models has its migration: a field's help text
that names the system functions (jobs.core.system) changes with them, and
a missing migration shows only as `makemigrations --check` failing on a
user's machine (seen once, when takt.remove_lock_file was added)."""

from __future__ import annotations

import io

import pytest
from django.core.management import call_command


@pytest.mark.django_db
def test_the_models_match_their_migrations():
    out = io.StringIO()
    try:
        call_command("makemigrations", "--check", "--dry-run", stdout=out, stderr=out)
    except SystemExit as exc:
        pytest.fail(f"a model change without its migration (exit {exc.code}):\n{out.getvalue()}")
