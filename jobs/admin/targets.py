"""The job editor's Target field (F-02): a text input that offers, as the
browser's suggestions (a datalist), Takt's system functions with what each
does and the params it takes, then the callables registered in code."""

from __future__ import annotations

from typing import Any

from django import forms
from django.utils.html import format_html, format_html_join
from django.utils.safestring import SafeString

from jobs import registry
from jobs.core.system import SYSTEM_FUNCTIONS
from jobs.policies import INTERNAL_TARGETS


def target_options() -> list[tuple[str, str]]:
    """(value, label) for every target worth offering, system functions first."""
    system = [(name, f"system: {f.describe()}") for name, f in SYSTEM_FUNCTIONS.items()]
    callables = [
        (name, "callable")
        for name in registry.registered_names()
        if name not in SYSTEM_FUNCTIONS and name not in INTERNAL_TARGETS
    ]
    return system + callables


class TargetInput(forms.TextInput):
    def render(
        self, name: str, value: Any, attrs: dict[str, Any] | None = None, renderer: Any = None
    ) -> SafeString:
        attrs = dict(attrs or {})
        list_id = f"{attrs.get('id') or 'id_' + name}-options"
        attrs.update(list=list_id, autocomplete="off")
        field = super().render(name, value, attrs, renderer)
        options = format_html_join("", '<option value="{}">{}</option>', target_options())
        return format_html('{}<datalist id="{}">{}</datalist>', field, list_id, options)
