"""Offline API docs and the typed OpenAPI schema of the REST server.

``/docs`` is Swagger UI served by the server itself from the ``swagger-ui-bundle-v2`` package
(part of the ``server`` extra), so it renders with no network. The schema documents every route
with the models of :mod:`deltamem.formats.api`, including the one error body
``{"error": {...}}`` that every 4xx/5xx answer carries (FastAPI's default 422 shape is never used by
this server).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from fastapi import FastAPI
from fastapi.openapi.docs import get_swagger_ui_html
from fastapi.openapi.utils import get_openapi
from fastapi.responses import HTMLResponse
from fastapi.staticfiles import StaticFiles
from pydantic import BaseModel

from deltamem._util.extras import require
from deltamem.formats import api
from deltamem.formats.api import ErrorBody
from deltamem.formats.operations import Operation

ASSETS = "/docs/assets"
ERROR_STATUSES = {
    400: "Bad configuration or request (e.g. an unknown option value).",
    401: "Missing, invalid or revoked API key.",
    403: "The API key may not use this space or lacks the route's scope.",
    404: "No such node (or space).",
    409: "The store refused: embedder mismatch, collision, inconsistent data.",
    413: "The request body is larger than the server accepts.",
    422: "Invalid request: the message names the field.",
    429: "Rate limit or token budget exceeded.",
    500: "Internal error.",
    502: "The LLM provider failed.",
}


def extra_schemas() -> tuple[type[BaseModel], ...]:
    """Models the schema refers to by hand (the learn body, the error body of every route, the
    body of each operation of the table), looked up when the schema is built: the learn body is
    whatever :mod:`deltamem.formats.api` holds."""
    from deltamem.formats import operations

    bodies = tuple(dict.fromkeys(op.request for op in operations.OPERATIONS
                                 if op.on("rest") and not op.in_query))
    return api.EpisodeIn, api.EpisodesIn, ErrorBody, *bodies


def documented(model: Any, *, media_type: str | None = None) -> dict[str, Any]:
    """Route keyword arguments: the 200 body ``model`` (a model, a union of models, or None with
    a ``media_type``) and every error body.

    The route still returns plain dicts; the schema is documentation, kept true by a test that
    validates real answers against the models.
    """
    ok: dict[str, Any] = {"description": "Success."}
    if model is not None:
        ok["model"] = model
    if media_type is not None:
        ok["content"] = {media_type: {"schema": {"type": "string"}}}
    # Errors are JSON even on routes whose success is HTML or JSON Lines.
    error = {"application/json": {"schema": schema_ref(ErrorBody)}}
    errors = {code: {"description": text, "content": error}
              for code, text in ERROR_STATUSES.items()}
    return {"response_model": None, "responses": {200: ok, **errors}}


def schema_ref(model: type[BaseModel]) -> dict[str, str]:
    """A ``$ref`` to ``model`` among the schema's components (see :func:`extra_schemas`)."""
    return {"$ref": f"#/components/schemas/{model.__name__}"}


BEARER = {"HTTPBearer": {"type": "http", "scheme": "bearer",
                         "description": "An API key from `deltamem keys create`."}}
SECURED: dict[str, Any] = {"security": [{"HTTPBearer": []}]}  # a space route's OpenAPI extra


def repeated_fields(model: type[BaseModel]) -> frozenset[str]:
    """The fields of a query model that may be repeated in a query string: lists, and dicts
    sent as ``key=value`` texts."""
    def many(prop: dict[str, Any]) -> bool:
        kinds = [prop.get("type")] + [p.get("type") for p in prop.get("anyOf", [])]
        return "array" in kinds or "object" in kinds

    props = model.model_json_schema().get("properties", {})
    return frozenset(name for name, prop in props.items() if many(prop))


def operation_extras(op: Operation) -> dict[str, Any]:
    """A table operation's OpenAPI extras: its input (a JSON body, or query parameters), its
    key scope and idempotence (the TypeScript client is generated from these)."""
    extra: dict[str, Any] = {"x-deltamem-idempotent": op.idempotent,
                             "x-deltamem-scope": op.scope, **SECURED}
    if not op.in_query:
        extra["requestBody"] = {"required": False, "content": {
            "application/json": {"schema": schema_ref(op.request)}}}
        return extra
    multi = repeated_fields(op.request)
    extra["parameters"] = [
        {"name": name, "in": "query", "required": False,
         "description": prop.get("description", ""),
         "schema": ({"type": "array", "items": {"type": "string"}} if name in multi
                    else {k: v for k, v in prop.items() if k != "description"})}
        for name, prop in op.request.model_json_schema().get("properties", {}).items()]
    return extra


def install_docs(app: FastAPI) -> None:
    """Serve ``/docs`` (Swagger UI, offline) and ``/openapi.json`` with the extra schemas.

    Create ``app`` with ``docs_url=None, redoc_url=None`` so FastAPI's CDN page is not added.
    """
    require("server", "the REST server's /docs")
    from swagger_ui_bundle import swagger_ui_path

    app.mount(ASSETS, StaticFiles(directory=str(swagger_ui_path)), name="docs-assets")
    app.openapi = _openapi_builder(app)  # type: ignore[method-assign]

    @app.get("/docs", include_in_schema=False)
    async def docs() -> HTMLResponse:
        return get_swagger_ui_html(
            openapi_url=app.openapi_url or "/openapi.json", title=f"{app.title} API",
            swagger_js_url=f"{ASSETS}/swagger-ui-bundle.js",
            swagger_css_url=f"{ASSETS}/swagger-ui.css",
            swagger_favicon_url=f"{ASSETS}/favicon-32x32.png")


def _openapi_builder(app: FastAPI) -> Callable[[], dict[str, Any]]:
    def build() -> dict[str, Any]:
        if app.openapi_schema is None:
            schema = get_openapi(title=app.title, version=app.version,
                                 description=app.description, routes=app.routes)
            schema.setdefault("components", {})["securitySchemes"] = BEARER
            components = schema["components"].setdefault("schemas", {})
            for model in extra_schemas():
                body = model.model_json_schema(ref_template="#/components/schemas/{model}")
                components.update(body.pop("$defs", {}))
                components[model.__name__] = body
            app.openapi_schema = schema
        return app.openapi_schema

    return build
