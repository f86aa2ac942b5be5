"""The API's OpenAPI document, made to match what the server sends.

FastAPI declares a 422 "Validation Error" on every operation with parameters, but the API
answers invalid input with 400 and its own error shape (peloton.api.errors). `install`
replaces `app.openapi` with a generator that post-processes FastAPI's document once:
- every 422 response is dropped, and so are the HTTPValidationError/ValidationError
  schemas when nothing refers to them any more;
- every operation documents, with the `ErrorBody` schema, the errors any request may get:
  400 (invalid input, unknown query parameters), 413 (a body over the size limit,
  peloton.api.bodylimit); 404 when the path names something (a path parameter); 503 for
  writes (a publish the broker did not acknowledge); 415 when the body may come in several
  content types (a YAML or JSON document); 401 and 403 when the operation carries a
  security requirement (peloton.api.auth);
- parameters lose the `null` FastAPI adds to optional ones (`anyOf: [X, null]` -> X): a
  query or path parameter is absent or text, never null;
- responses an operation declares itself are kept as they are.
"""

from __future__ import annotations

import json
import re
from typing import Any

from fastapi import FastAPI

from peloton.api.errors import ErrorBody

__all__ = ["install", "fix_document", "ERROR_SCHEMA", "any_case", "document_content"]

ERROR_SCHEMA = "ErrorBody"
_WRITES = ("post", "put", "delete", "patch")
_DESCRIPTIONS = {
    "400": "Invalid request (every problem in details)",
    "401": "Missing or invalid bearer token",
    "403": "The token does not allow this",
    "404": "Not found",
    "413": "Request body too large",
    "415": "A body in a content type the operation does not read",
    "503": "The broker did not acknowledge the request, or the store is unavailable",
}


def install(app: FastAPI) -> None:
    """Wrap the app's current OpenAPI generator (FastAPI's, or one that already wraps it,
    e.g. peloton.api.auth's security declarations: install this one last)."""
    build = app.openapi
    fixed: list[dict[str, Any]] = []

    def openapi() -> dict[str, Any]:
        if not fixed or app.openapi_schema is not fixed[0]:
            fixed[:] = [fix_document(build())]
            app.openapi_schema = fixed[0]
        return fixed[0]

    app.openapi = openapi  # type: ignore[method-assign]


def fix_document(doc: dict[str, Any]) -> dict[str, Any]:
    schemas = doc.setdefault("components", {}).setdefault("schemas", {})
    schemas.setdefault(ERROR_SCHEMA, ErrorBody.model_json_schema())
    ref = {"$ref": f"#/components/schemas/{ERROR_SCHEMA}"}
    secured_by_default = bool(doc.get("security"))
    for item in doc.get("paths", {}).values():
        for method, op in item.items():
            if not isinstance(op, dict) or "responses" not in op:
                continue
            for param in op.get("parameters", []):
                _drop_null(param.get("schema", {}))
            responses = op["responses"]
            responses.pop("422", None)
            wanted = ["400", "413"]
            if any(p.get("in") == "path" for p in op.get("parameters", [])):
                wanted.append("404")
            if method in _WRITES:
                wanted.append("503")
            if len(op.get("requestBody", {}).get("content", {})) > 1:
                wanted.append("415")
            if op.get("security") or (secured_by_default and "security" not in op):
                wanted += ["401", "403"]
            for code in wanted:
                responses.setdefault(code, {
                    "description": _DESCRIPTIONS[code],
                    "content": {"application/json": {"schema": dict(ref)}}})
    for name in ("HTTPValidationError", "ValidationError"):
        if name in schemas and f"#/components/schemas/{name}" not in json.dumps(doc):
            schemas.pop(name)
    return doc


def _drop_null(schema: dict[str, Any]) -> None:
    """`anyOf: [X, null]` -> X: a parameter is absent or a string, never null."""
    options = schema.get("anyOf")
    if isinstance(options, list) and {"type": "null"} in options:
        rest = [o for o in options if o != {"type": "null"}]
        del schema["anyOf"]
        if len(rest) == 1:
            schema.update(rest[0])
        else:
            schema["anyOf"] = rest


def any_case(words: tuple[str, ...] | list[str]) -> str:
    """A JSON Schema pattern matching any of `words` in any letter case (JSON Schema
    patterns have no case-insensitive flag)."""
    def one(word: str) -> str:
        return "".join(f"[{c.upper()}{c.lower()}]" if c.isalpha() else re.escape(c)
                       for c in word)
    return "^(?:" + "|".join(one(w) for w in words) + ")$"


def document_content(types: tuple[str, ...]) -> dict[str, Any]:
    """Request body content for a document sent as YAML or JSON: in every content type
    (YAML, JSON, text/plain read as YAML) the document is a mapping; its fields are
    checked by the server, which answers 400 listing every problem."""
    return {t: {"schema": {"type": "object"}} for t in types}
