"""Unknown query parameters are an error (400), not silently ignored.

Contract: `reject_unknown_query` is an app-wide FastAPI dependency. For the route that
matched, the allowed names are the `in: query` parameters its operation documents in the
app's OpenAPI (so what is accepted is exactly what clients are told); any other name in
the query string answers 400 `{"error": "unknown query parameter", "details": [{"field",
"message"}]}` listing each unknown name (bounded in length and count: at most
`MAX_LISTED`, each cut to `MAX_NAME` characters). A parameter that is not an array given
more than once is 400 too ("repeated query parameter"), not silently its last value.
Routes outside the OpenAPI (docs) are not checked. The lookup table is built once per
app, on first use.
"""

from __future__ import annotations

import json
from typing import Any

from fastapi import Request

from peloton.api.errors import BadRequest

__all__ = ["reject_unknown_query", "MAX_LISTED", "MAX_NAME"]

MAX_LISTED = 10
MAX_NAME = 64
_METHODS = ("get", "put", "post", "delete", "patch", "head", "options")


def _documented(app: Any) -> dict[tuple[str, str], dict[str, bool]]:
    """(path, METHOD) -> {query parameter: whether it may repeat (an array)}."""
    table = getattr(app.state, "query_params_by_operation", None)
    if table is None:
        table = {}
        for path, item in app.openapi().get("paths", {}).items():
            for method in _METHODS:
                op = item.get(method)
                if op is not None:
                    table[(path, method.upper())] = {
                        p["name"]: '"array"' in json.dumps(p.get("schema", {}))
                        for p in op.get("parameters", []) if p.get("in") == "query"}
        app.state.query_params_by_operation = table
    return table


async def reject_unknown_query(request: Request) -> None:
    route = request.scope.get("route")
    path = getattr(route, "path_format", None)
    if path is None or not request.query_params:
        return
    allowed = _documented(request.app).get((path, request.method))
    if allowed is None:
        return
    unknown = sorted({k for k in request.query_params if k not in allowed})
    if unknown:
        expected = ", ".join(sorted(allowed)) or "none"
        raise BadRequest("unknown query parameter", [
            {"field": name[:MAX_NAME], "message": f"not a parameter of this operation "
                                                  f"(expected: {expected})"}
            for name in unknown[:MAX_LISTED]])
    repeated = sorted({k for k, _ in request.query_params.multi_items()
                       if not allowed[k] and len(request.query_params.getlist(k)) > 1})
    if repeated:
        raise BadRequest("repeated query parameter", [
            {"field": name, "message": "give it once"} for name in repeated])
