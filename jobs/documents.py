"""Reading a YAML or JSON document of jobs with bounds (issue 25): the
admin's Import page, `import_jobs`, the import operation and
TAKT_JOBS_FILE all read through `load_document`.

A document larger than TAKT_IMPORT_MAX_BYTES, or with more values than
TAKT_IMPORT_MAX_NODES, is refused before it is built; so are YAML anchors
and aliases (`&name`, `*name`, and the merge key `<<: *name` with them),
outright: 559 bytes of nested aliases expand to 10⁷ values, and an export
never writes them. Nesting deeper than Python's recursion allows is
refused too. Each refusal is a DocumentRefused naming the line (YAML) or
the setting."""

from __future__ import annotations

import json
from typing import Any

import yaml
from django.conf import settings


class DocumentRefused(ValueError):
    """The document is too large, too deep, or uses YAML anchors or
    aliases; str() says which, with the line where it can."""


class _BoundedLoader(yaml.SafeLoader):
    """yaml.SafeLoader that refuses anchors and aliases and counts the
    values it composes (keys included), refusing past `max_nodes`."""

    def __init__(self, stream: str, max_nodes: int) -> None:
        super().__init__(stream)
        self.max_nodes = max_nodes
        self.nodes = 0

    def compose_node(self, parent: Any, index: Any) -> Any:
        event = self.peek_event()
        line = event.start_mark.line + 1
        if isinstance(event, yaml.AliasEvent) or getattr(event, "anchor", None):
            raise DocumentRefused(
                f"line {line}: YAML anchors and aliases (&name, *name) are not accepted:"
                " write each value out"
            )
        self.nodes += 1
        if self.nodes > self.max_nodes:
            raise DocumentRefused(
                f"line {line}: more than {self.max_nodes} values (TAKT_IMPORT_MAX_NODES)"
            )
        return super().compose_node(parent, index)


def load_document(text: str, fmt: str) -> Any:
    """`text` parsed as YAML or JSON (`fmt`), within TAKT_IMPORT_MAX_BYTES
    (UTF-8) and TAKT_IMPORT_MAX_NODES. Raises DocumentRefused for what the
    bounds refuse, and yaml.YAMLError or ValueError for a text that is not
    valid YAML or JSON."""
    max_bytes, max_nodes = settings.TAKT_IMPORT_MAX_BYTES, settings.TAKT_IMPORT_MAX_NODES
    size = len(text.encode("utf-8", errors="replace"))
    if size > max_bytes:
        raise DocumentRefused(f"{size} bytes: at most {max_bytes} (TAKT_IMPORT_MAX_BYTES)")
    try:
        if fmt == "json":
            data = json.loads(text)
            if _count(data, max_nodes) > max_nodes:
                raise DocumentRefused(f"more than {max_nodes} values (TAKT_IMPORT_MAX_NODES)")
            return data
        loader = _BoundedLoader(text, max_nodes)
        try:
            return loader.get_single_data()
        finally:
            loader.dispose()
    except RecursionError:
        raise DocumentRefused("nested too deeply") from None


def _count(data: Any, limit: int) -> int:
    """The values in `data` (keys included), counted up to just past `limit`."""
    count, stack = 0, [data]
    while stack and count <= limit:
        value = stack.pop()
        count += 1
        if isinstance(value, dict):
            count += len(value)
            stack.extend(value.values())
        elif isinstance(value, list):
            stack.extend(value)
    return count
