"""The REST face of the memory (FastAPI): the facade's methods under ``/v1/spaces/{space}/``.

Every route that touches the model or the database is a plain ``def`` (FastAPI runs it in a
worker thread) or hands its work to ``run_in_threadpool``, so the event loop never blocks. JSON
bodies mirror the CLI's ``--json`` output. Errors use one envelope (see ``http_errors``).
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Annotated, Any

from fastapi import Body, Depends, FastAPI, Query, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import HTMLResponse, JSONResponse, StreamingResponse
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer
from starlette.concurrency import run_in_threadpool
from starlette.exceptions import HTTPException as StarletteHTTPException

from deltamem.config import Settings
from deltamem.core.model import NodeKind, Outcome, Tree
from deltamem.core.ranking import filters_from_pairs
from deltamem.embed.base import Embedder
from deltamem.engine.memory import DeltaMem, check_space
from deltamem.engine.results import consolidation_report, node_listing
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
from deltamem.formats import api
from deltamem.formats.api import OutcomeRequest, RecallRequest
from deltamem.formats.episodes import episode_from_dict

MAX_BATCH = api.MAX_BATCH
DEFAULT_MAX_IMPORT_BYTES = 64 * 1024 * 1024
NDJSON = "application/x-ndjson"
PARSE_FAILED = "There was an error parsing the body"  # FastAPI's 400 for an undecodable body
EXAMPLE_EPISODE = {
    "task": "heat the apple", "env": "a kitchen with a fridge and a microwave",
    "success": True, "score": 1.0,
    "steps": [{"action": "go to kitchen", "observation": "You are in the kitchen."}],
}
# The key scope each space route needs (by route name); a route missing here needs "admin".
ROUTE_SCOPES = {
    "recall": "read", "show": "read", "list_nodes": "read", "stats": "read", "view": "read",
    "export": "read",
    "learn": "write", "record_outcome": "write", "consolidate": "write", "correct": "write",
    "delete": "admin", "forget": "admin", "import_": "admin",
}


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
    db: str | Path,
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
    _add_memory_routes(app)
    _add_admin_routes(app)
    app.add_middleware(
        BodyLimit,
        limit=lambda path: max_import_bytes if path.endswith("/import") else max_body_bytes,
    )
    app.add_middleware(AccessLog)
    return app


def memory(request: Request, space: str, credentials: Credentials) -> DeltaMem:
    """Dependency: authorise the caller for ``space`` and return its memory (404 if missing)."""
    return _memory(request, space, credentials, create=False)


def writable_memory(request: Request, space: str, credentials: Credentials) -> DeltaMem:
    """Dependency: as :func:`memory`, but creates the space (only writers do)."""
    return _memory(request, space, credentials, create=True)


def _memory(request: Request, space: str, credentials: HTTPAuthorizationCredentials | None, *,
            create: bool) -> DeltaMem:
    check_space(space)
    keys: KeyStore | None = request.app.state.keys
    if keys is not None:
        route = request.scope.get("route")
        scope = ROUTE_SCOPES.get(getattr(route, "name", ""), "admin")
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
    @app.exception_handler(DeltaMemError)
    async def library_error(request: Request, exc: DeltaMemError) -> JSONResponse:
        body = library_error_body(exc, getattr(request.app.state, "paths", ()))
        return JSONResponse(body, status_code=status_for(exc))

    @app.exception_handler(ApiError)
    async def api_error(_: Request, exc: ApiError) -> JSONResponse:
        return JSONResponse(exc.body, status_code=exc.status, headers=exc.headers)

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


def _add_memory_routes(app: FastAPI) -> None:
    @app.post("/v1/spaces/{space}/recall", tags=["memory"], **documented(api.RecallOut))
    def recall(mem: Mem, body: RecallRequest) -> dict[str, Any]:
        """Recall the skill for ``task`` and the knowledge for ``env``, composed root -> match."""
        return mem.recall(body.task, body.env, top_k=body.top_k,
                          budget_tokens=body.budget_tokens,
                          filters=body.filters).to_dict(explain=body.explain)

    # The body is validated by api.EpisodeIn (episode_from_dict words its errors, naming the
    # field); the same models document it.
    body_schema = {"anyOf": [schema_ref(api.EpisodeIn), schema_ref(api.EpisodesIn)]}

    @app.post("/v1/spaces/{space}/learn", tags=["memory"],
              **documented(api.LearnOut | api.BatchOut),  # a BatchOut for a batch
              openapi_extra={"requestBody": {"required": True, "content": {
                  "application/json": {"schema": body_schema}}}})
    def learn(mem: WriteMem, payload: Annotated[dict[str, Any], Body(
        description="One episode, or {\"episodes\": [...]}: a batch is all or nothing (every "
                    "episode is validated, then all are learned in one transaction; on any "
                    "error none is stored).",
        examples=[EXAMPLE_EPISODE, {"episodes": [EXAMPLE_EPISODE]}],
    )]) -> dict[str, Any]:
        """Learn one finished episode, or a batch of them (all or nothing)."""
        if set(payload) != {"episodes"}:
            return mem.learn(episode_from_dict(payload)).to_dict()
        raw = payload["episodes"]
        if not isinstance(raw, list) or len(raw) > MAX_BATCH:
            raise EpisodeError(f"field 'episodes' must be a list of at most {MAX_BATCH} "
                               "episodes", field="episodes")
        episodes = [episode_from_dict(item, where=f"episodes[{i}]") for i, item in enumerate(raw)]
        return mem.learn_many(episodes).to_dict()

    @app.post("/v1/spaces/{space}/outcome", tags=["memory"], **documented(api.OutcomeOut))
    def record_outcome(mem: Mem, body: OutcomeRequest) -> dict[str, Any]:
        """Count a success or a failure on recalled nodes, without learning an episode."""
        return mem.record_outcome(body.nodes, body.success).to_dict()

    @app.post("/v1/spaces/{space}/nodes/{node_id}/correct", tags=["memory"],
              **documented(api.CorrectionOut))
    def correct(mem: Mem, node_id: str, body: api.CorrectRequest) -> dict[str, Any]:
        """Correct a node (its outcome, a skill's steps, or retract it): a new root supersedes
        it in recall, with the history kept."""
        return mem.correct(node_id, success=body.success, steps=body.steps, wrong=body.wrong,
                           reason=body.reason).to_dict()

    @app.post("/v1/spaces/{space}/consolidate", tags=["memory"], **documented(api.ConsolidateOut))
    def consolidate(mem: Mem, dry_run: bool = False) -> dict[str, Any]:
        """Compile every frequently successful chain into a new root (``dry_run``: only list
        the chains that are due)."""
        return consolidation_report(mem.consolidate(dry_run=dry_run), dry_run=dry_run)

    @app.get("/v1/spaces/{space}/nodes", tags=["inspect"], **documented(api.NodeListOut))
    def list_nodes(mem: Mem, tree: Tree | None = None, kind: NodeKind | None = None,
                   outcome: Outcome | None = None,
                   contains: Annotated[str, Query(max_length=10_000)] = "",
                   limit: Annotated[int | None, Query(ge=1)] = None,
                   filters: Annotated[list[str] | None, Query(
                       max_length=api.MAX_FILTERS, description=(
                           "key=value, repeatable: only nodes whose episode meta has every key "
                           "equal to the string value, e.g. filters=user=alice"))] = None,
                   ) -> dict[str, Any]:
        """Nodes (id, tree, kind, outcome, key, parent, counters), oldest first, filtered."""
        return node_listing(mem.list_nodes(tree, kind=kind, outcome=outcome, contains=contains,
                                           filters=filters_from_pairs(filters)), limit)

    @app.get("/v1/spaces/{space}/nodes/{node_id}", tags=["inspect"], **documented(api.ShowOut))
    def show(mem: Mem, node_id: str) -> dict[str, Any]:
        """A node: its chain, composed experience, own patch and counters."""
        return mem.show(node_id)

    @app.get("/v1/spaces/{space}/stats", tags=["inspect"], **documented(api.StatsOut))
    def stats(mem: Mem) -> dict[str, Any]:
        """Tree shapes, episodes, and stored vs flat size."""
        return mem.stats()

    @app.get("/v1/spaces/{space}/view", tags=["inspect"], response_class=HTMLResponse,
             **documented(None, media_type="text/html"))
    def view(mem: Mem) -> HTMLResponse:
        """Both trees as one self-contained HTML page."""
        return HTMLResponse(render_viewer(mem))


def _add_admin_routes(app: FastAPI) -> None:
    @app.delete("/v1/spaces/{space}/nodes/{node_id}", tags=["admin"], **documented(api.DeleteOut))
    def delete(mem: Mem, node_id: str) -> dict[str, Any]:
        """Delete a node and its whole subtree in one transaction."""
        return api.DeleteOut.build(deleted=mem.delete(node_id)).wire()

    @app.delete("/v1/spaces/{space}", tags=["admin"], **documented(api.ForgetOut))
    def forget(mem: Mem) -> dict[str, Any]:
        """Delete everything in the space."""
        return api.ForgetOut.build(space=mem.space, deleted_nodes=mem.forget()).wire()

    @app.get("/v1/spaces/{space}/export", tags=["admin"], response_class=StreamingResponse,
             **documented(None, media_type=NDJSON))
    def export(mem: Mem) -> StreamingResponse:
        """The space as JSON Lines (header, nodes with vectors, episodes), streamed."""
        lines = mem.iter_export()
        first = next(lines)  # fail with a JSON error before the stream starts

        def stream() -> Iterator[str]:
            yield first
            yield from lines

        return StreamingResponse(stream(), media_type=NDJSON)

    @app.post("/v1/spaces/{space}/import", tags=["admin"], **documented(api.ImportOut),
              openapi_extra={"requestBody": {"content": {NDJSON: {"schema": {"type": "string"}}},
                                             "required": True}})
    async def import_(mem: WriteMem, request: Request) -> dict[str, int]:
        """Load an export (JSON Lines body) into the space in one transaction, all or nothing.

        The whole body is verified first; a bad one is 422 naming its first bad record.
        """
        lines = (await request.body()).split(b"\n")
        return await run_in_threadpool(mem.import_lines, lines)
