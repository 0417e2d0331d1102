"""The served schema's error answers: drf-spectacular documents success
bodies only, so this post-processing hook adds the refusals every operation
can answer with (see jobs.api.errors): 400 where the request has a body or
query parameters, 401 and 403 everywhere, 404 on paths with an id, 409
where the queue switches refuse a run. Operations that document their own
answer for a status keep it. Request bodies say `additionalProperties:
false`: a field the schema does not list is refused (jobs.strict_input)."""

from __future__ import annotations

from typing import Any

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
