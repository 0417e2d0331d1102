"""The served schema (api/v1/schema) and its Swagger UI (api/v1/docs), the
same in Takt's own project and in one that embeds it (docs/embedding.md),
whatever the project's REST_FRAMEWORK and SPECTACULAR_SETTINGS say:

* the schema view carries Takt's schema settings (SCHEMA_SETTINGS: title,
  enum names, the error answers) and describes Takt's API views only
  (TaktSchemaGenerator), wherever the project mounts them, never the
  project's own;
* Takt's API views and their `extend_schema` methods use drf-spectacular's
  AutoSchema themselves (jobs.api.base), with or without the project's
  DEFAULT_SCHEMA_CLASS;
* the Swagger UI's files come from drf-spectacular-sidecar, served as the
  project's static files, never from a CDN.

`add_error_responses`: drf-spectacular documents success bodies only, so
this post-processing hook adds the refusals every operation can answer
with (see jobs.api.errors): 400 where the request has a body or query
parameters, 401 and 403 everywhere, 404 on paths with an id, 409 where the
queue switches refuse a run. Operations that document their own answer for
a status keep it.

Request bodies say `additionalProperties: false`: a field the schema does
not list is refused (jobs.strict_input)."""

from __future__ import annotations

from typing import Any

from django.templatetags.static import static
from drf_spectacular import plumbing
from drf_spectacular.generators import EndpointEnumerator, SchemaGenerator
from drf_spectacular.views import SpectacularAPIView, SpectacularSwaggerView
from rest_framework.permissions import AllowAny

from jobs.api.base import TaktApi

# drf-spectacular's settings for Takt's schema (scheduler_project/settings.py
# has the same as SPECTACULAR_SETTINGS, for `manage.py spectacular`).
SCHEMA_SETTINGS: dict[str, Any] = {
    "TITLE": "Takt API",
    "DESCRIPTION": "Jobs, triggers, runs, the queue, heartbeats and alerts of a Takt installation.",
    "VERSION": "1",
    "COMPONENT_SPLIT_REQUEST": True,
    "ENUM_NAME_OVERRIDES": {
        "JobKindEnum": "jobs.policies.JobKind",
        "TriggerKindEnum": "jobs.policies.TriggerKind",
    },
    "POSTPROCESSING_HOOKS": [
        "drf_spectacular.hooks.postprocess_schema_enums",
        "jobs.api.schema.add_error_responses",
    ],
}
SWAGGER_UI = "drf_spectacular_sidecar/swagger-ui-dist"


class TaktEndpoints(EndpointEnumerator):
    """Takt's API views (TaktApi), not the project's."""

    def should_include_endpoint(self, path: str, callback: Any) -> bool:
        view = getattr(callback, "cls", None)
        return (
            isinstance(view, type)
            and issubclass(view, TaktApi)
            and bool(super().should_include_endpoint(path, callback))
        )


class TaktSchemaGenerator(SchemaGenerator):
    endpoint_inspector_cls = TaktEndpoints

    def get_schema(self, request: Any = None, public: bool = False) -> Any:
        _forget_enum_names()
        try:
            return super().get_schema(request=request, public=public)
        finally:
            _forget_enum_names()


def _forget_enum_names() -> None:
    """drf-spectacular keeps the ENUM_NAME_OVERRIDES it loaded for the
    process (per language): neither Takt's nor the project's may be left
    for the other's schema."""
    loaded = getattr(plumbing, "_load_enum_name_overrides", None)
    if loaded is not None:
        loaded.cache_clear()


class TaktSchemaView(SpectacularAPIView):
    """api/v1/schema: public, as Takt's API's own authentication reads it."""

    authentication_classes = TaktApi.authentication_classes
    permission_classes = [AllowAny]
    generator_class = TaktSchemaGenerator
    serve_public = True
    urlconf = None  # the project's: Takt's paths under the project's prefix
    custom_settings = SCHEMA_SETTINGS
    schema = None  # not an operation of any schema


class TaktSwaggerView(SpectacularSwaggerView):
    """api/v1/docs: Swagger UI on the schema, its files drf-spectacular-sidecar's."""

    authentication_classes = TaktApi.authentication_classes
    permission_classes = [AllowAny]
    title = SCHEMA_SETTINGS["TITLE"]
    schema = None

    @staticmethod
    def _swagger_ui_resource(filename: str) -> str:
        return static(f"{SWAGGER_UI}/{filename}")

    @staticmethod
    def _swagger_ui_favicon() -> str:
        return static(f"{SWAGGER_UI}/favicon-32x32.png")


ERROR = {
    "type": "object",
    "description": (
        "The fields at fault, each with a list of messages (`triggers` nested by index),"
        ' or {"detail": "..."} when no field is.'
    ),
    "additionalProperties": True,
}
DESCRIPTIONS = {
    "400": (
        "Bad input: the fields at fault (also a field it does not take, or a body over"
        " DATA_UPLOAD_MAX_MEMORY_SIZE), nothing stored changed"
    ),
    "401": "No valid credentials (a wrong, revoked or expired token)",
    "403": "Not allowed (model permission, API trigger permission, job-scoped token, no CSRF token)",
    "404": "No such object",
    "409": "The queue is paused, or maintenance mode refuses the job",
}


def add_error_responses(result: dict[str, Any], generator: Any, request: Any, public: bool) -> Any:
    result.setdefault("components", {}).setdefault("schemas", {})["Error"] = ERROR
    close_request_bodies(result)
    for path, operations in result.get("paths", {}).items():
        for method, operation in operations.items():
            codes = ["401", "403"]
            has_input = "requestBody" in operation or any(
                p.get("in") == "query" for p in operation.get("parameters", [])
            )
            if has_input or method in ("post", "patch", "put"):
                codes.append("400")
            if "{" in path:
                codes.append("404")
            if path.rstrip("/").endswith("/run"):
                codes.append("409")
            responses = operation.setdefault("responses", {})
            for code in codes:
                responses.setdefault(
                    code,
                    {
                        "description": DESCRIPTIONS[code],
                        "content": {
                            "application/json": {"schema": {"$ref": "#/components/schemas/Error"}}
                        },
                    },
                )
    return result


def close_request_bodies(result: dict[str, Any]) -> None:
    """`additionalProperties: false` on every object schema a request body
    uses (its components, and the ones they nest: a job's triggers)."""
    components = result.get("components", {}).get("schemas", {})
    seen: set[str] = set()

    def close(schema: Any) -> None:
        if isinstance(schema, list):
            for item in schema:
                close(item)
            return
        if not isinstance(schema, dict):
            return
        ref = schema.get("$ref")
        if isinstance(ref, str) and ref.startswith("#/components/schemas/"):
            name = ref.rsplit("/", 1)[-1]
            if name not in seen and name in components:
                seen.add(name)
                close(components[name])
            return
        if schema.get("type") == "object" and "properties" in schema:
            schema.setdefault("additionalProperties", False)
        for sub in schema.get("properties", {}).values():
            close(sub)
        for key in ("items", "allOf", "oneOf", "anyOf"):
            if key in schema:
                close(schema[key])

    for operations in result.get("paths", {}).values():
        for operation in operations.values():
            body = operation.get("requestBody", {}) if isinstance(operation, dict) else {}
            for media in body.get("content", {}).values():
                close(media.get("schema"))
