"""Lookups an admin URL may not use (issue 25): `?name__regex=…` ran the
regular expression in the database, Python's `re` on SQLite, where a
catastrophic pattern holds a request's thread for as long as it likes.
Every Takt admin refuses `regex` and `iregex` lookups: Django answers
400 (DisallowedModelAdminLookup), the filters and search of the pages
need neither."""

from __future__ import annotations

from typing import Any, TypeVar

from django.db.models.constants import LOOKUP_SEP

REFUSED_LOOKUPS = frozenset({"regex", "iregex"})

A = TypeVar("A", bound=type)


def refuse_regex_lookups(admin_class: A) -> A:
    """Class decorator for a ModelAdmin: its lookup_allowed() refuses any
    lookup with a `regex` or `iregex` part, and asks the class's own for
    the rest."""
    allowed = admin_class.lookup_allowed  # type: ignore[attr-defined]

    def lookup_allowed(self: Any, lookup: str, value: Any, request: Any = None) -> bool:
        if REFUSED_LOOKUPS & set(lookup.split(LOOKUP_SEP)):
            return False
        return bool(allowed(self, lookup, value, request))

    admin_class.lookup_allowed = lookup_allowed  # type: ignore[attr-defined]
    return admin_class
