"""The REST face of the memory (FastAPI): the facade's methods under ``/v1/spaces/{space}/``.

One route per operation of :data:`deltamem.formats.operations.OPERATIONS`
(:class:`OperationRoute`), dispatched ahead of FastAPI's router (:class:`OperationRouter`), plus
the routes written here: learning (one episode or a batch), the JSON Lines export and import,
the HTML view and the health checks. Work that touches the model or the database runs in a
worker thread, so the event loop never waits for a lock, the network or a model; only a read of
a SQLite file that ran fast last time runs on the loop itself (:class:`OperationRoute`). JSON
bodies mirror the CLI's ``--json`` output.
Every error has one envelope (``http_errors``); who may call what is ``access``.
"""

from __future__ import annotations

import asyncio
import contextvars
import re
import time
from collections.abc import AsyncIterator, Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import asynccontextmanager
from inspect import Parameter, Signature
from pathlib import Path as FilePath
from typing import Annotated, Any, TypeVar

from fastapi import Body, FastAPI, Path, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import HTMLResponse, JSONResponse, Response, StreamingResponse
from pydantic import BaseModel, TypeAdapter, ValidationError
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.types import ASGIApp, Receive, Scope, Send

from deltamem.config import Settings
from deltamem.embed.base import Embedder
from deltamem.errors import ConfigError, DeltaMemError, EpisodeError
from deltamem.extract.base import Extractor
from deltamem.faces.server.access import memory_for
from deltamem.faces.server.docs import (
    SECURED,
    documented,
    install_docs,
    operation_extras,
    repeated_fields,
    schema_ref,
)
from deltamem.faces.server.http_errors import (
    ApiError,
    error_body,
    invalid_input,
    library_error_body,
    private_paths,
    status_for,
    unreadable_body,
)
from deltamem.faces.server.keys import KeyStore
from deltamem.faces.server.limits import RateLimiter
from deltamem.faces.server.middleware import AccessLog, BodyLimit
from deltamem.faces.server.spaces import SpacePool
from deltamem.faces.server.viewer import render_viewer
from deltamem.faces.worker import BackgroundWorker, Worker
from deltamem.formats import api, operations
from deltamem.formats.episodes import episode_from_dict
from deltamem.formats.operations import Operation

R = TypeVar("R")
DEFAULT_MAX_IMPORT_BYTES = 64 * 1024 * 1024
NDJSON = "application/x-ndjson"
EXAMPLE_EPISODE = {
    "task": "heat the apple", "env": "a kitchen with a fridge and a microwave",
    "success": True, "score": 1.0,
    "steps": [{"action": "go to kitchen", "observation": "You are in the kitchen."}],
}
NodeIdPath = Annotated[str, Path(min_length=1, max_length=api.MAX_NODE_ID,
                                  description=operations.NODE_ID_HELP)]
_NODE_ID: TypeAdapter[str] = TypeAdapter(api.NodeId)
_PATH_PARAM = re.compile(r"{(\w+)}")
# The scope of each route REST writes by hand: the table's rows it serves itself, and the view.
CUSTOM_SCOPES: dict[str, str] = {name: str(operations.operation(name).scope)
                 for name in ("learn", "export", "import_")} | {"view": "read"}


def route_scopes() -> dict[str, str]:
    """The key scope each space route needs, by route name; a route missing here needs
    "admin"."""
    return {op.name: op.scope for op in operations.OPERATIONS if op.on("rest")} | CUSTOM_SCOPES


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
    inline_reads: bool = True,
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
        inline_reads: run a read (recall, show, list_nodes, stats) of an open space of a SQLite
            file on the event loop while it stays under ``INLINE_MAX_S``, saving the hop to a
            worker thread and back; False: every operation runs in a worker thread.
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
            await offload(background.stop)
        pool.close()
        if keys is not None:
            keys.close()

    app = FastAPI(title="deltamem", version="1", lifespan=lifespan, docs_url=None,
                  redoc_url=None,
                  description="Incremental experience memory for LLM agents: recall skills and "
                              "scene knowledge, learn from finished episodes.")
    for kind in (DeltaMemError, ApiError, RequestValidationError, StarletteHTTPException):
        app.add_exception_handler(kind, error_response)
    install_docs(app)
    app.state.pool = pool
    app.state.paths = private_paths(db)  # kept out of error bodies
    app.state.keys = keys
    app.state.limiter = RateLimiter()
    app.state.rate_limit = rate_limit
    app.state.inline_reads = inline_reads
    _add_health(app, pool, ready_timeout)
    routes = [OperationRoute(op) for op in operations.OPERATIONS if op.on("rest")]
    for route in routes:
        op = route.op
        app.add_api_route(op.route, route, methods=[op.method], name=op.name,
                          operation_id=op.name, summary=op.summary, tags=[_tag(op)],
                          description=op.description,
                          response_class=Response, openapi_extra=operation_extras(op),
                          **documented(op.answer))
    _add_custom_routes(app)
    app.add_middleware(OperationRouter, routes=routes)
    app.add_middleware(
        BodyLimit,
        limit=lambda path: max_import_bytes if path.endswith("/import") else max_body_bytes,
    )
    app.add_middleware(AccessLog)
    return app


# The worker threads of the routes. An executor of the event loop costs less CPU per request
# than Starlette's run_in_threadpool (anyio's thread hop and capacity limiter), which cost as
# much as a recall over SQLite (docs/results.md, "Server").
WORKERS = ThreadPoolExecutor(thread_name_prefix="deltamem-rest")
# A read that took longer than this (seconds) makes the next reads of its route and space go to
# a worker thread, until one of them is fast again: a slow read (a big space, an index rebuilt
# after a consolidation) holds the event loop, and so every other request, at most once in a
# row.
INLINE_MAX_S = 0.05
MAX_SLOW_SPACES = 1024  # once this many are slow, every read goes to a worker thread


async def offload(fn: Callable[..., R], /, *args: Any) -> R:
    """``fn(*args)`` in a worker thread, so the event loop never blocks, in the caller's context
    (its trace span)."""
    context = contextvars.copy_context()
    return await asyncio.get_running_loop().run_in_executor(WORKERS, context.run, fn, *args)


class OperationRoute:
    """The REST handler of one operation of the table.

    Its input is read and validated once, by the operation's model (a JSON body, or query
    parameters), the key's scope checked, the facade method run, and the answer encoded once
    (pydantic's serializer) with no re-validation on the way out. A space nobody wrote to reads
    as empty; only a write creates it. FastAPI's route documents it.

    Where it runs: a read of a space already open in a SQLite file (which waits for no lock, no
    network and no model load: ``SpacePool.reads_locally``) runs on the event loop, as long as
    its last run in that space took under ``INLINE_MAX_S``; everything else (writes,
    PostgreSQL, a first request, a read that was slow) runs in a worker thread. The hop to a
    thread and back cost more CPU than a small read itself (docs/results.md, "Server").
    """

    def __init__(self, op: Operation) -> None:
        self.op = op
        self.reads = op.scope == "read"
        self.slow: set[str] = set()  # spaces whose last run of this route was slow
        self.repeated = repeated_fields(op.request)
        self.pattern = re.compile(_PATH_PARAM.sub(r"(?P<\1>[^/]+)", op.route))
        params = [Parameter("request", Parameter.POSITIONAL_OR_KEYWORD, annotation=Request),
                  Parameter("space", Parameter.POSITIONAL_OR_KEYWORD, annotation=str)]
        params += [Parameter(name, Parameter.KEYWORD_ONLY, annotation=NodeIdPath)
                   for name in op.path_fields]
        self.__signature__ = Signature(params, return_annotation=Response)

    async def __call__(self, request: Request, space: str, **path: str) -> Response:
        raw = b"" if self.op.in_query else await request.body()
        try:
            if self.inline(request, space):
                return self.timed(request, space, raw, path)
            return await offload(self.timed, request, space, raw, path)
        except (DeltaMemError, ApiError) as exc:
            return error_response(request, exc)

    def inline(self, request: Request, space: str) -> bool:
        """Whether this request may run on the event loop (see the class)."""
        state = request.app.state
        keys: KeyStore | None = state.keys
        return (self.reads and state.inline_reads and space not in self.slow
                and len(self.slow) < MAX_SLOW_SPACES and (keys is None or keys.opened)
                and state.pool.reads_locally(space))

    def timed(self, request: Request, space: str, raw: bytes,
              path: dict[str, str]) -> Response:
        """:meth:`answer`; for a read, remember whether it was slow in ``space``."""
        if not self.reads:
            return self.answer(request, space, raw, path)
        started = time.perf_counter()
        try:
            return self.answer(request, space, raw, path)
        finally:
            if time.perf_counter() - started <= INLINE_MAX_S:
                self.slow.discard(space)
            elif len(self.slow) < MAX_SLOW_SPACES:
                self.slow.add(space)

    def answer(self, request: Request, space: str, raw: bytes,
               path: dict[str, str]) -> Response:
        for name, value in path.items():
            try:
                _NODE_ID.validate_python(value)
            except ValidationError as exc:
                raise invalid_input(exc.errors(), name) from None
        mem = memory_for(request, space, self.op.scope, create=True)
        result = self.op.run(mem, self.parse(raw, request), path)
        return _json(self.op.answer_of(result))

    def parse(self, raw: bytes, request: Request) -> BaseModel:
        """The operation's input model from the body or the query string (422 if invalid)."""
        try:
            if not self.op.in_query:
                return self.op.request.model_validate_json(raw or b"{}")
            query, fields = request.query_params, self.op.request.model_fields
            return self.op.request.model_validate(
                {name: query.getlist(name) if name in self.repeated else query[name]
                 for name in query if name in fields})
        except ValidationError as exc:
            raise invalid_input(exc.errors(), "query" if self.op.in_query else "body",
                                raw) from None


class OperationRouter:
    """ASGI middleware sending the table's operations to their :class:`OperationRoute` ahead of
    FastAPI's router, whose per-request work (dependency solving, the exception and exit-stack
    layers) costs more CPU than a small operation; every other path goes on to FastAPI. It sits
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


def error_response(request: Request, exc: Exception) -> JSONResponse:
    """The JSON error answer of a library error, an :class:`ApiError`, FastAPI's validation
    error or an HTTP error (404, 405, an undecodable body)."""
    if isinstance(exc, ApiError):
        return JSONResponse(exc.body, status_code=exc.status, headers=exc.headers)
    if isinstance(exc, DeltaMemError):
        body = library_error_body(exc, getattr(request.app.state, "paths", ()))
        return JSONResponse(body, status_code=status_for(exc))
    if isinstance(exc, RequestValidationError):
        return error_response(request, invalid_input(list(exc.errors()), "body"))
    assert isinstance(exc, StarletteHTTPException)
    unreadable = unreadable_body(exc.status_code, exc.detail, exc.__cause__)
    if unreadable is not None:  # the documented 422, not FastAPI's generic 400
        return JSONResponse(error_body("ValidationError", unreadable, "body"), status_code=422)
    return JSONResponse(error_body("HTTPError", str(exc.detail)), status_code=exc.status_code,
                        headers=exc.headers)


def _add_health(app: FastAPI, pool: SpacePool, timeout: float) -> None:
    @app.get("/healthz", tags=["health"], **documented(api.HealthOut))
    async def healthz() -> dict[str, str]:
        """Liveness: the process answers."""
        return {"status": "ok"}

    @app.get("/readyz", tags=["health"], **documented(api.ReadyOut))
    async def readyz() -> JSONResponse:
        """Readiness: the database answers a query within the ready timeout."""
        try:
            spaces = await asyncio.wait_for(offload(lambda: len(pool.store.spaces())), timeout)
        except TimeoutError:
            return JSONResponse({"status": "unavailable",
                                 "error": f"the database did not answer within {timeout:g} s"},
                                status_code=503)
        except Exception as exc:  # any failure means "not ready"; say why
            return JSONResponse({"status": "unavailable", "error": str(exc)}, status_code=503)
        return JSONResponse({"status": "ready", "spaces": spaces})


def _tag(op: Operation) -> str:
    return "admin" if op.scope == "admin" else "inspect" if op.method == "GET" else "memory"


def _add_custom_routes(app: FastAPI) -> None:
    """The operations REST writes by hand: learn (one episode or a batch), the JSON Lines
    export and import, and the HTML view."""
    body_schema = {"anyOf": [schema_ref(api.EpisodeIn), schema_ref(api.EpisodesIn)]}

    @app.post("/v1/spaces/{space}/learn", tags=["memory"], operation_id="learn",
              **documented(api.LearnOut | api.BatchOut),  # a BatchOut for a batch
              openapi_extra={**SECURED, "requestBody": {"required": True, "content": {
                  "application/json": {"schema": body_schema}}}})
    def learn(request: Request, space: str, payload: Annotated[dict[str, Any], Body(
        description="One episode, or {\"episodes\": [...]}: a batch is all or nothing (every "
                    "episode is validated, then all are learned in one transaction; on any "
                    "error none is stored).",
        examples=[EXAMPLE_EPISODE, {"episodes": [EXAMPLE_EPISODE]}],
    )]) -> Response:
        """Learn one finished episode, or a batch of them (all or nothing)."""
        mem = memory_for(request, space, CUSTOM_SCOPES["learn"], create=True)
        if set(payload) != {"episodes"}:
            return _json(mem.learn(episode_from_dict(payload)))
        raw = payload["episodes"]
        if not isinstance(raw, list) or len(raw) > api.MAX_BATCH:
            raise EpisodeError(f"field 'episodes' must be a list of at most {api.MAX_BATCH} "
                               "episodes", field="episodes")
        episodes = [episode_from_dict(item, where=f"episodes[{i}]") for i, item in enumerate(raw)]
        return _json(mem.learn_many(episodes))

    @app.get("/v1/spaces/{space}/view", tags=["inspect"], response_class=HTMLResponse,
             openapi_extra=SECURED, **documented(None, media_type="text/html"))
    def view(request: Request, space: str) -> HTMLResponse:
        """Both trees as one self-contained HTML page."""
        return HTMLResponse(render_viewer(memory_for(request, space, "read", create=False)))

    @app.get("/v1/spaces/{space}/export", tags=["admin"], response_class=StreamingResponse,
             operation_id="export", openapi_extra=SECURED, **documented(None, media_type=NDJSON))
    def export(request: Request, space: str) -> StreamingResponse:
        """The space as JSON Lines (header, nodes with vectors, episodes), streamed."""
        mem = memory_for(request, space, CUSTOM_SCOPES["export"], create=False)
        lines = mem.iter_export()
        first = next(lines)  # fail with a JSON error before the stream starts

        def stream() -> Iterator[str]:
            yield first
            yield from lines

        return StreamingResponse(stream(), media_type=NDJSON)

    @app.post("/v1/spaces/{space}/import", tags=["admin"], operation_id="import_",
              **documented(api.ImportOut), openapi_extra={**SECURED, "requestBody": {
                  "content": {NDJSON: {"schema": {"type": "string"}}}, "required": True}})
    async def import_(request: Request, space: str) -> Response:
        """Load an export (JSON Lines body) into the space in one transaction, all or nothing.

        The whole body is verified first; a bad one is 422 naming its first bad record.
        """
        mem = await offload(lambda: memory_for(request, space, CUSTOM_SCOPES["import_"],
                                               create=True))
        return _json(await offload(mem.import_lines, (await request.body()).split(b"\n")))


def _json(answer: api.Model) -> Response:
    return Response(answer.model_dump_json(exclude_unset=True), media_type="application/json")
