"""DJANGO_LANGUAGE_CODE: the default language, checked against LANGUAGES."""

from __future__ import annotations

from django.core.exceptions import ImproperlyConfigured


def language_code(value: str, languages: list[tuple[str, str]]) -> str:
    """The language code to use as LANGUAGE_CODE: `value` ("de", "de-de",
    "en-us", "EN"...) when its language is one of `languages`, in lower case.
    Raises ImproperlyConfigured naming DJANGO_LANGUAGE_CODE otherwise."""
    code = value.strip().lower().replace("_", "-") or "en-us"
    supported = [lang for lang, _name in languages]
    if code.split("-")[0] not in supported:
        raise ImproperlyConfigured(
            f"DJANGO_LANGUAGE_CODE: unsupported language {value!r}"
            f" (supported: {', '.join(supported)})"
        )
    return code
