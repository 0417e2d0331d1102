"""The catalogue of Takt's script texts (jobs/urls.py's JavaScriptCatalog,
domain djangojs) as a script of an admin class's Media: ``js = (JS_CATALOG,
*ADMIN_JS)``. Apart from the admin and the template tags (jobs/templatetags/
takt.py's ``{% takt_js_catalog %}``), which both use it."""

from __future__ import annotations

from django import forms
from django.urls import NoReverseMatch, reverse

# jobs/urls.py's JavaScript catalogue (Django's JavaScriptCatalog, domain djangojs).
JS_CATALOG_URL_NAME = "takt-jsi18n"
# Its texts: Takt's scripts' and Django admin's own (calendar, "Today", "Now",
# the actions' counter), so that a Takt page loads one catalogue, not two
# (admin/takt/change_form.html and change_list.html leave admin:jsi18n out).
JS_CATALOG_PACKAGES = ["django.contrib.admin", "jobs"]


def js_catalog_url() -> str:
    """The address of the catalogue of Takt's script texts; "" where the
    project did not include jobs.urls (the scripts then speak English)."""
    try:
        return reverse(JS_CATALOG_URL_NAME)
    except NoReverseMatch:
        return ""


class CatalogScript(forms.Script):
    """The catalogue as a Media script: its address is looked up when the
    page is drawn (no script tag where there is none)."""

    def __init__(self) -> None:
        super().__init__(JS_CATALOG_URL_NAME)

    @property
    def path(self) -> str:
        return js_catalog_url()

    def __str__(self) -> str:
        return super().__str__() if self.path else ""


# For an admin class's Media: js = (JS_CATALOG, *ADMIN_JS).
JS_CATALOG = CatalogScript()
