"""The REST face of the memory (FastAPI): the facade's methods under ``/v1/spaces/{space}/``.

Every route that touches the model or the database is a plain ``def`` (FastAPI runs it in a
worker thread) or hands its work to ``run_in_threadpool``, so the event loop never blocks. JSON
bodies mirror the CLI's ``--json`` output. Errors use one envelope (see ``http_errors``).
"""

from __future__ import annotations

import asyncio
import contextvars
import re
from collections.abc import AsyncIterator, Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import asynccontextmanager
from inspect import Parameter, Signature
from pathlib import Path as FilePath
from typing import Annotated, Any, TypeVar

from fastapi import Body, Depends, FastAPI, Path, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import HTMLResponse, JSONResponse, Response, StreamingResponse
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer
from pydantic import BaseModel, TypeAdapter, ValidationError
from starlette.concurrency import run_in_threadpool
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.types import ASGIApp, Receive, Scope, Send

from deltamem.config import Settings
from deltamem.embed.base import Embedder
from deltamem.engine.memory import DeltaMem, check_space
from deltamem.errors import ConfigError, DeltaMemError, EpisodeError
from deltamem.extract.base import Extractor
from deltamem.faces.server.docs import documented, install_docs, schema_ref
from deltamem.faces.server.http_errors import (
    error_body,
    library_error_body,
    private_paths,
    status_for,
    validation_field,
)
from deltamem.faces.server.keys import ApiKey, KeyStore
from deltamem.faces.server.limits import RateLimiter
from deltamem.faces.server.middleware import AccessLog, BodyLimit
from deltamem.faces.server.spaces import SpacePool
from deltamem.faces.server.viewer import render_viewer
from deltamem.faces.worker import BackgroundWorker, Worker
from deltamem.formats import api, operations
from deltamem.formats.episodes import episode_from_dict
from deltamem.formats.operations import Operation

MAX_BATCH = api.MAX_BATCH
DEFAULT_MAX_IMPORT_BYTES = 64 * 1024 * 1024
NDJSON = "application/x-ndjson"
PARSE_FAILED = "There was an error parsing the body"  # FastAPI's 400 for an undecodable body
EXAMPLE_EPISODE = {
    "task": "heat the apple", "env": "a kitchen with a fridge and a microwave",
    "success": True, "score": 1.0,
    "steps": [{"action": "go to kitchen", "observation": "You are in the kitchen."}],
}
NodeIdPath = Annotated[str, Path(min_length=1, max_length=api.MAX_NODE_ID,
                                  description="A node id, e.g. 't-1a2b3c4d5e6f7a8b'.")]
R = TypeVar("R")
CUSTOM_SCOPES = {"view": "read"}  # a route outside the operation table


def route_scopes() -> dict[str, str]:
    """The key scope each space route needs, by route name (the operation table's, plus the
    HTML view's); a route missing here needs "admin"."""
    return {op.name: op.scope for op in operations.OPERATIONS if "rest" not in op.custom
            or op.name in CUSTOM_ROUTES} | CUSTOM_SCOPES


CUSTOM_ROUTES = ("learn", "export", "import_")  # table rows REST serves by hand


class ApiError(Exception):
    """An HTTP error raised by this module's own checks (auth, bad import file, ...)."""

    def __init__(self, status: int, kind: str, message: str, field: str | None = None,
                 headers: dict[str, str] | None = None):
        super().__init__(message)
        self.status = status
        self.body = error_body(kind, message, field)
        self.headers = headers


bearer = HTTPBearer(auto_error=False, description="An API key from `deltamem keys create`.")
Credentials = Annotated[HTTPAuthorizationCredentials | None, Depends(bearer)]


def create_app(
    db: str | FilePath,
    *,
    embedder: Embedder | str | None = None,
    extractor: Extractor | str = "trace",
    settings: Settings | None = None,
    require_keys: bool = True,
    max_body_bytes: int = 1_000_000,
    max_import_bytes: int = DEFAULT_MAX_IMPORT_BYTES,
    rate_limit: int | None = None,
    ready_timeout: float = 2.0,
    consolidate_every: float | None = None,
) -> FastAPI:
    """Build the REST app serving the memory at ``db``.

    Args:
        db: SQLite path, ``sqlite:PATH`` or ``postgresql://`` URL.
        embedder: an Embedder or spec; None uses ``settings.embedder`` (``minilm``).
        extractor: ``"trace"`` (no model), ``"llm"`` or an Extractor.
        settings: memory settings; defaults from ``Settings.from_env()``.
        require_keys: demand an ``Authorization: Bearer`` API key scoped to the space.
        max_body_bytes: largest accepted request body (413 above it).
        max_import_bytes: largest accepted body for ``/import`` (exports can be big).
        rate_limit: requests per minute per key for keys without their own limit (None: no
            limit); counted per server process.
        ready_timeout: seconds ``/readyz`` waits for the database before answering 503.
        consolidate_every: run a background consolidation pass over every space this often
            (seconds); pair it with ``settings.auto_consolidate=False``.
    """
    if require_keys and str(db) in (":memory:", "sqlite::memory:"):
        raise ConfigError("API keys need a database file or server; ':memory:' would lose "
                          "them (serve a file, or run without keys behind your own auth)")
    pool = SpacePool(db, embedder=embedder, extractor=extractor, settings=settings)
    # The keys share the memory's store (and its migrations), opened on first use.
    keys: KeyStore | None = KeyStore(lambda: pool.store) if require_keys else None

    @asynccontextmanager
    async def lifespan(_: FastAPI) -> AsyncIterator[None]:
        background = None
        if consolidate_every is not None:
            background = BackgroundWorker(Worker(lambda: pool.store, pool.get),
                                          consolidate_every)
            background.start()
        yield
        # uvicorn has let in-flight requests finish; a pass stops after its current space.
        if background is not None:
            await run_in_threadpool(background.stop)
        pool.close()
        if keys is not None:
            keys.close()

    app = FastAPI(title="deltamem", version="1", lifespan=lifespan, docs_url=None,
                  redoc_url=None,
                  description="Incremental experience memory for LLM agents: recall skills and "
                              "scene knowledge, learn from finished episodes.")
    _install_errors(app)
    install_docs(app)

    app.state.pool = pool
    app.state.paths = private_paths(db)  # kept out of error bodies
    app.state.keys = keys
    app.state.limiter = RateLimiter()
    app.state.rate_limit = rate_limit
    _add_health(app, pool, ready_timeout)
    routes = _add_operations(app)
    _add_custom_routes(app)
    app.add_middleware(OperationRouter, routes=routes)
    app.add_middleware(
        BodyLimit,
        limit=lambda path: max_import_bytes if path.endswith("/import") else max_body_bytes,
    )
    app.add_middleware(AccessLog)
    return app


def memory(request: Request, space: str, credentials: Credentials) -> DeltaMem:
    """Dependency of a hand-written route: authorise the caller for ``space`` with the route's
    scope and return its memory (404 if missing)."""
    return _memory(request, space, credentials, _route_scope(request), create=False)


def writable_memory(request: Request, space: str, credentials: Credentials) -> DeltaMem:
    """Dependency: as :func:`memory`, but creates the space (only writers do)."""
    return _memory(request, space, credentials, _route_scope(request), create=True)


def _route_scope(request: Request) -> str:
    return route_scopes().get(getattr(request.scope.get("route"), "name", ""), "admin")


def _memory(request: Request, space: str, credentials: HTTPAuthorizationCredentials | None,
            scope: str, *, create: bool) -> DeltaMem:
    check_space(space)
    keys: KeyStore | None = request.app.state.keys
    if keys is not None:
        _limit(request, _authorise(request, keys, credentials, space, scope))
    pool: SpacePool = request.app.state.pool
    return pool.get(space, create=create)


Mem = Annotated[DeltaMem, Depends(memory)]
WriteMem = Annotated[DeltaMem, Depends(writable_memory)]


def _authorise(request: Request, keys: KeyStore,
               credentials: HTTPAuthorizationCredentials | None, space: str,
               scope: str) -> ApiKey:
    challenge = {"WWW-Authenticate": "Bearer"}
    if credentials is None:
        raise ApiError(401, "Unauthorized", "missing API key: send 'Authorization: Bearer <key>'",
                       headers=challenge)
    key = keys.verify(credentials.credentials)
    if key is None:
        raise ApiError(401, "Unauthorized", "invalid or revoked API key", headers=challenge)
    request.state.key_id = key.id  # for the access log (the id, never the secret)
    if not key.covers(space):
        raise ApiError(403, "Forbidden", f"this API key is not allowed on space {space!r}")
    if not key.allows(space, scope):
        raise ApiError(403, "Forbidden", f"this API key lacks the {scope!r} scope "
                       f"(it has: {', '.join(key.scopes)})")
    return key


def _limit(request: Request, key: ApiKey) -> None:
    per_minute = key.rate_limit or request.app.state.rate_limit
    if per_minute is None:
        return
    limiter: RateLimiter = request.app.state.limiter
    wait = limiter.take(key.id, per_minute)
    if wait is not None:
        raise ApiError(429, "RateLimited", f"this API key is limited to {per_minute} requests "
                       f"per minute; retry in {wait} s", headers={"Retry-After": str(wait)})


def _install_errors(app: FastAPI) -> None:
    app.add_exception_handler(DeltaMemError, error_response)  # type: ignore[arg-type]
    app.add_exception_handler(ApiError, error_response)  # type: ignore[arg-type]

    @app.exception_handler(RequestValidationError)
    async def invalid(_: Request, exc: RequestValidationError) -> JSONResponse:
        errors: list[dict[str, Any]] = list(exc.errors())
        first: dict[str, Any] = errors[0] if errors else {"loc": (), "msg": "invalid request"}
        loc = tuple(first.get("loc", ()))
        if first.get("type") == "json_invalid":
            ctx: dict[str, Any] = first.get("ctx") or {}
            detail = ctx.get("error", "invalid JSON")
            return JSONResponse(error_body(
                "ValidationError", f"malformed JSON body: {detail} at character {loc[-1]}", "body"
            ), status_code=422)
        field = validation_field(loc)
        return JSONResponse(error_body("ValidationError", f"{field}: {first['msg']}", field),
                            status_code=422)

    @app.exception_handler(StarletteHTTPException)
    async def http_error(_: Request, exc: StarletteHTTPException) -> JSONResponse:
        unreadable = _unreadable_body(exc)
        if unreadable is not None:  # the documented 422, not FastAPI's generic 400
            return JSONResponse(error_body("ValidationError", unreadable, "body"),
                                status_code=422)
        return JSONResponse(error_body("HTTPError", str(exc.detail)),
                            status_code=exc.status_code, headers=exc.headers)


def _unreadable_body(exc: StarletteHTTPException) -> str | None:
    """Why FastAPI could not decode a JSON body (its 400 "error parsing the body"), or None
    for any other HTTP error."""
    cause = exc.__cause__
    if exc.status_code != 400 or cause is None or exc.detail != PARSE_FAILED:
        return None
    if isinstance(cause, UnicodeDecodeError):
        return (f"malformed JSON body: not valid UTF-8 (byte {cause.start}); send UTF-8 "
                "encoded JSON")
    if isinstance(cause, RecursionError):
        return "malformed JSON body: nested too deeply; send at most 32 levels of nesting"
    return f"malformed JSON body: {type(cause).__name__}"


def _add_health(app: FastAPI, pool: SpacePool, timeout: float) -> None:
    @app.get("/healthz", tags=["health"], **documented(api.HealthOut))
    async def healthz() -> dict[str, str]:
        """Liveness: the process answers."""
        return {"status": "ok"}

    @app.get("/readyz", tags=["health"], **documented(api.ReadyOut))
    async def readyz() -> JSONResponse:
        """Readiness: the database answers a query within the ready timeout."""
        try:
            spaces = await asyncio.wait_for(
                run_in_threadpool(lambda: len(pool.store.spaces())), timeout)
        except TimeoutError:
            return JSONResponse({"status": "unavailable",
                                 "error": f"the database did not answer within {timeout:g} s"},
                                status_code=503)
        except Exception as exc:  # any failure means "not ready"; say why
            return JSONResponse({"status": "unavailable", "error": str(exc)}, status_code=503)
        return JSONResponse({"status": "ready", "spaces": spaces})


class OperationRoute:
    """The REST handler of one operation of :data:`~deltamem.formats.operations.OPERATIONS`.

    Its input is read and validated once, by the operation's model (a JSON body, or query
    parameters), the key's scope checked, the facade method run in a worker thread, and the
    answer encoded once (pydantic's serializer) with no re-validation on the way out. A space
    nobody wrote to reads as empty; only a write creates it. :class:`OperationRouter` sends a
    request here ahead of FastAPI's router; FastAPI's route documents it (and would serve it).
    """

    def __init__(self, op: Operation) -> None:
        self.op = op
        schema = op.request.model_json_schema()
        self._multi = frozenset(name for name, prop in schema.get("properties", {}).items()
                                if _many(prop))
        self.pattern = re.compile(_PATH_PARAM.sub(r"(?P<\1>[^/]+)", op.route))
        params = [Parameter("request", Parameter.POSITIONAL_OR_KEYWORD, annotation=Request),
                  Parameter("space", Parameter.POSITIONAL_OR_KEYWORD, annotation=str)]
        params += [Parameter(name, Parameter.KEYWORD_ONLY, annotation=NodeIdPath)
                   for name in op.path_fields]
        self.__signature__ = Signature(params, return_annotation=Response)

    async def __call__(self, request: Request, space: str, **path: str) -> Response:
        raw = b"" if self.op.in_query else await request.body()
        try:
            return await offload(self.answer, request, space, raw, path)
        except (DeltaMemError, ApiError) as exc:
            return error_response(request, exc)

    def answer(self, request: Request, space: str, raw: bytes,
               path: dict[str, str]) -> Response:
        for name, value in path.items():
            _check_node_id(name, value)
        mem = _memory(request, space, _bearer(request), self.op.scope, create=True)
        given = self.parse(raw, request)
        result = self.op.run(mem, given, path)
        body = self.op.answer_of(result, mem).model_dump_json(exclude_unset=True)
        return Response(body, media_type="application/json")

    def parse(self, raw: bytes, request: Request) -> BaseModel:
        """The operation's input model from the body or the query string (422 if invalid)."""
        try:
            if not self.op.in_query:
                return self.op.request.model_validate_json(raw or b"{}")
            query = request.query_params
            fields = self.op.request.model_fields
            return self.op.request.model_validate(
                {name: query.getlist(name) if name in self._multi else query[name]
                 for name in query if name in fields})
        except ValidationError as exc:
            raise _invalid(exc, "query" if self.op.in_query else "body", raw) from None

    def openapi(self) -> dict[str, Any]:
        """The route's OpenAPI extras: its input (body or query parameters), name and
        idempotence (the TypeScript client is generated from these)."""
        extra: dict[str, Any] = {"x-deltamem-idempotent": self.op.idempotent,
                                 "x-deltamem-scope": self.op.scope,
                                 "security": [{"HTTPBearer": []}]}
        if not self.op.in_query:
            extra["requestBody"] = {"required": False, "content": {
                "application/json": {"schema": schema_ref(self.op.request)}}}
            return extra
        props = self.op.request.model_json_schema().get("properties", {})
        extra["parameters"] = [
            {"name": name, "in": "query", "required": False,
             "description": prop.get("description", ""),
             "schema": ({"type": "array", "items": {"type": "string"}} if name in self._multi
                        else {k: v for k, v in prop.items() if k != "description"})}
            for name, prop in props.items()]
        return extra


def _bearer(request: Request) -> HTTPAuthorizationCredentials | None:
    """The ``Authorization: Bearer`` credentials of a request, as ``HTTPBearer`` reads them."""
    kind, _, token = request.headers.get("authorization", "").partition(" ")
    if kind.lower() != "bearer" or not token.strip():
        return None
    return HTTPAuthorizationCredentials(scheme=kind, credentials=token.strip())


def _many(prop: dict[str, Any]) -> bool:
    """Whether a query field is repeated (a list, or a dict sent as key=value texts)."""
    kinds = [prop.get("type")] + [p.get("type") for p in prop.get("anyOf", [])]
    return "array" in kinds or "object" in kinds


def _invalid(exc: ValidationError, where: str, raw: bytes) -> ApiError:
    """The 422 of an invalid input, naming its first bad field."""
    errors: list[dict[str, Any]] = [dict(e) for e in exc.errors()]
    first: dict[str, Any] = errors[0] if errors else {"loc": (), "msg": "invalid request",
                                                       "type": ""}
    if first["type"] == "json_invalid":
        ctx: dict[str, Any] = first.get("ctx") or {}
        detail = str(ctx.get("error", "invalid JSON"))
        try:
            raw.decode("utf-8")
        except UnicodeDecodeError as bad:
            detail = f"not valid UTF-8 (byte {bad.start}); send UTF-8 encoded JSON"
        if "recursion" in detail:
            detail = "nested too deeply; send at most 32 levels of nesting"
        return ApiError(422, "ValidationError", f"malformed JSON body: {detail}", "body")
    field = validation_field(tuple(first.get("loc", ()))) if first.get("loc") else where
    return ApiError(422, "ValidationError", f"{field}: {first['msg']}", field)


def _add_operations(app: FastAPI) -> list[OperationRoute]:
    """One route per operation of the table that REST derives (see :class:`OperationRoute`)."""
    routes = [OperationRoute(op) for op in operations.OPERATIONS if op.on("rest")]
    for route in routes:
        op = route.op
        app.add_api_route(op.route, route, methods=[op.method], name=op.name,
                          operation_id=op.name, summary=op.summary, tags=[_tag(op)],
                          response_class=Response, openapi_extra=route.openapi(),
                          **documented(op.answer))
    return routes


class OperationRouter:
    """ASGI middleware sending the table's operations to their :class:`OperationRoute` ahead of
    FastAPI's router, whose per-request work (dependency solving, the exception and exit-stack
    layers) would cost as much CPU as a recall; every other path goes on to FastAPI. It sits
    inside the body limit and the access log; errors get the same envelope as elsewhere."""

    def __init__(self, app: ASGIApp, routes: list[OperationRoute]) -> None:
        self.app = app
        self.routes: dict[str, list[OperationRoute]] = {}
        for route in routes:
            self.routes.setdefault(route.op.method, []).append(route)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http":
            for route in self.routes.get(scope["method"], ()):
                match = route.pattern.fullmatch(scope["path"])
                if match is not None:
                    response = await route(Request(scope, receive), **match.groupdict())
                    await response(scope, receive, send)
                    return
        await self.app(scope, receive, send)


# The worker threads of the table's operations. An executor of the event loop costs less CPU
# per request than Starlette's run_in_threadpool (anyio's thread hop and capacity limiter),
# which cost as much as a recall over SQLite (docs/results.md, "Server").
WORKERS = ThreadPoolExecutor(thread_name_prefix="deltamem-rest")


async def offload(fn: Callable[..., R], /, *args: Any) -> R:
    """``fn(*args)`` in a worker thread, so the event loop never blocks, in the caller's context
    (its trace span)."""
    context = contextvars.copy_context()
    return await asyncio.get_running_loop().run_in_executor(WORKERS, context.run, fn, *args)


def error_response(request: Request, exc: DeltaMemError | ApiError) -> JSONResponse:
    """The JSON error answer of a library error or of one of this module's own checks."""
    if isinstance(exc, ApiError):
        return JSONResponse(exc.body, status_code=exc.status, headers=exc.headers)
    body = library_error_body(exc, getattr(request.app.state, "paths", ()))
    return JSONResponse(body, status_code=status_for(exc))


_NODE_ID: TypeAdapter[str] = TypeAdapter(api.NodeId)
_PATH_PARAM = re.compile(r"{(\w+)}")


def _check_node_id(name: str, value: str) -> None:
    try:
        _NODE_ID.validate_python(value)
    except ValidationError as exc:
        raise _invalid(exc, name, b"") from None


def _tag(op: Operation) -> str:
    return "admin" if op.scope == "admin" else "inspect" if op.method == "GET" else "memory"


def _add_custom_routes(app: FastAPI) -> None:
    """The operations REST writes by hand: learn (one episode or a batch), the JSON Lines
    export and import, and the HTML view."""
    body_schema = {"anyOf": [schema_ref(api.EpisodeIn), schema_ref(api.EpisodesIn)]}

    @app.post("/v1/spaces/{space}/learn", tags=["memory"], operation_id="learn",
              **documented(api.LearnOut | api.BatchOut),  # a BatchOut for a batch
              openapi_extra={"requestBody": {"required": True, "content": {
                  "application/json": {"schema": body_schema}}}})
    def learn(mem: WriteMem, payload: Annotated[dict[str, Any], Body(
        description="One episode, or {\"episodes\": [...]}: a batch is all or nothing (every "
                    "episode is validated, then all are learned in one transaction; on any "
                    "error none is stored).",
        examples=[EXAMPLE_EPISODE, {"episodes": [EXAMPLE_EPISODE]}],
    )]) -> Response:
        """Learn one finished episode, or a batch of them (all or nothing)."""
        if set(payload) != {"episodes"}:
            return _json(mem.learn(episode_from_dict(payload)).to_wire())
        raw = payload["episodes"]
        if not isinstance(raw, list) or len(raw) > MAX_BATCH:
            raise EpisodeError(f"field 'episodes' must be a list of at most {MAX_BATCH} "
                               "episodes", field="episodes")
        episodes = [episode_from_dict(item, where=f"episodes[{i}]") for i, item in enumerate(raw)]
        return _json(mem.learn_many(episodes).to_wire())

    @app.get("/v1/spaces/{space}/view", tags=["inspect"], response_class=HTMLResponse,
             **documented(None, media_type="text/html"))
    def view(mem: Mem) -> HTMLResponse:
        """Both trees as one self-contained HTML page."""
        return HTMLResponse(render_viewer(mem))

    @app.get("/v1/spaces/{space}/export", tags=["admin"], response_class=StreamingResponse,
             operation_id="export", **documented(None, media_type=NDJSON))
    def export(mem: Mem) -> StreamingResponse:
        """The space as JSON Lines (header, nodes with vectors, episodes), streamed."""
        lines = mem.iter_export()
        first = next(lines)  # fail with a JSON error before the stream starts

        def stream() -> Iterator[str]:
            yield first
            yield from lines

        return StreamingResponse(stream(), media_type=NDJSON)

    @app.post("/v1/spaces/{space}/import", tags=["admin"], operation_id="import_",
              **documented(api.ImportOut),
              openapi_extra={"requestBody": {"content": {NDJSON: {"schema": {"type": "string"}}},
                                             "required": True}})
    async def import_(mem: WriteMem, request: Request) -> dict[str, int]:
        """Load an export (JSON Lines body) into the space in one transaction, all or nothing.

        The whole body is verified first; a bad one is 422 naming its first bad record.
        """
        lines = (await request.body()).split(b"\n")
        return await run_in_threadpool(mem.import_lines, lines)


def _json(answer: api.Model) -> Response:
    return Response(answer.model_dump_json(exclude_unset=True), media_type="application/json")
