"""Python clients for a deltamem REST server: :class:`Client` (sync) and :class:`AsyncClient`.

They speak the facade's vocabulary (``recall``, ``learn``, ``learn_many``, ``record_outcome``,
``correct``, ``forget_fact``, ``show``, ``list_nodes``, ``stats``, ``consolidate``, ``export``,
``import_``, ``delete``, ``forget``), return the same answer models of
:mod:`deltamem.formats.api` as the library (:class:`~deltamem.DeltaMem` answers these models,
with the engine's detail in a subclass), and raise the library's exceptions: an
error the server reports as ``NodeNotFound`` or ``EpisodeError`` is raised as that class with the
server's message; anything else (auth, scope, rate limit, an unreachable server) is a
:class:`~deltamem.errors.RemoteError`.

Both clients retry (``retries=3`` by default, ``retries=0`` turns it off) with exponential
backoff, honouring the server's ``Retry-After`` (seconds or an HTTP date):

* reads (``recall``, ``show``, ``list_nodes``, ``stats``, ``export``) on a dropped connection,
  a timeout, or an answer 429, 502, 503 or 504;
* every call when the request was never sent (connection refused) or was refused by a rate
  limit before it ran (429 with ``Retry-After``). A write is never sent twice otherwise: a
  learn whose answer was lost may have been learned.

::

    from deltamem import Client

    with Client("http://127.0.0.1:8080", api_key="dm_...", space="agent-1") as mem:
        recall = mem.recall(task="heat the apple", env="a kitchen ...")
        print(recall.context, recall.task.node)
        mem.learn(episode)               # an Episode or its JSON dict
"""

from __future__ import annotations

import asyncio
import random
import time
from collections.abc import Awaitable, Callable, Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar
from urllib.parse import quote

import httpx
from pydantic import BaseModel

from deltamem.core.model import Episode, NodeKind, Outcome, Tree
from deltamem.errors import DeltaMemError, EpisodeError, NodeNotFound, RemoteError
from deltamem.formats import api, operations
from deltamem.formats.episodes import episode_to_dict
from deltamem.llm.http import parse_retry_after

M = TypeVar("M", bound=BaseModel)
NDJSON = "application/x-ndjson"
EpisodeLike = Episode | Mapping[str, Any]


@dataclass(frozen=True)
class _Call:
    """One request and how to read its answer (shared by the sync and async clients)."""

    method: str
    path: str
    model: type[BaseModel] | None = None
    json: Any = None
    params: dict[str, Any] = field(default_factory=dict)
    content: bytes | None = None
    node_id: str | None = None  # for NodeNotFound, which carries the id
    idempotent: bool = False  # safe to send twice (a read): retried on any transient failure


RETRY_STATUSES = frozenset({429, 502, 503, 504})


@dataclass(frozen=True)
class RetryPolicy:
    """When and how long to wait before sending a request again.

    Args:
        retries: extra attempts after the first (0: never retry).
        backoff: the first wait in seconds without ``Retry-After``; doubled per attempt, with
            jitter (a random wait between half and all of it).
        max_wait: the longest single wait; a ``Retry-After`` longer than this is not waited
            for (the error is raised at once, its message says when to retry).
    """

    retries: int = 3
    backoff: float = 0.5
    max_wait: float = 30.0

    def __post_init__(self) -> None:
        if self.retries < 0 or self.backoff < 0 or self.max_wait < 0:
            raise ValueError("retries, backoff and max_wait must be >= 0")

    def delay(self, call: _Call, attempt: int, response: httpx.Response | None,
              error: httpx.HTTPError | None) -> float | None:
        """Seconds to wait before attempt ``attempt + 1``, or None to stop (answer as is)."""
        if attempt >= self.retries:
            return None
        if error is not None:
            never_sent = isinstance(error, httpx.ConnectError | httpx.ConnectTimeout)
            if not (never_sent or (call.idempotent and isinstance(error, httpx.TransportError))):
                return None
            return self._backoff(attempt)
        assert response is not None
        if response.status_code not in RETRY_STATUSES:
            return None
        asked = parse_retry_after(response.headers.get("Retry-After"))
        refused_before_running = response.status_code == 429 and asked is not None
        if not (call.idempotent or refused_before_running):
            return None
        if asked is None:
            return self._backoff(attempt)
        return asked if asked <= self.max_wait else None

    def _backoff(self, attempt: int) -> float:
        wait: float = min(self.max_wait, self.backoff * 2.0 ** attempt)
        return wait * random.uniform(0.5, 1.0)


def _policy(retries: int | RetryPolicy) -> RetryPolicy:
    return retries if isinstance(retries, RetryPolicy) else RetryPolicy(retries=retries)


class _Base:
    """Request building and answer parsing; the subclasses only move bytes."""

    def __init__(self, base_url: str, api_key: str | None, space: str,
                 retries: int | RetryPolicy) -> None:
        self.base_url = base_url.rstrip("/")
        self.space = space
        self.retry = _policy(retries)
        self._headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}

    def _path(self, suffix: str = "") -> str:
        return f"/v1/spaces/{self.space}{suffix}"

    # -- the calls --------------------------------------------------------------------------
    def _call(self, name: str, /, *args: Any, **inputs: Any) -> _Call:
        """The request of the operation ``name`` (:mod:`deltamem.formats.operations`): the
        path's node id (positional or by name) and the input model's fields; a None is left
        out (the server's default)."""
        op = operations.operation(name)
        if "client" in op.custom:
            raise AttributeError(f"{name} is not an operation the client derives")
        path = dict(zip(op.path_fields, args, strict=False))
        if len(args) > len(op.path_fields):
            raise TypeError(f"{name}() takes {len(op.path_fields)} positional argument(s)")
        path |= {f: inputs.pop(f) for f in op.path_fields if f in inputs}
        missing = [f for f in op.path_fields if f not in path]
        if missing:
            raise TypeError(f"{name}() needs {missing[0]!r}")
        url = self._path(op.path.format(**{k: quote(str(v), safe="") for k, v in path.items()}))
        body = api.request_body(op.request, **inputs)
        if op.in_query:
            return _Call(op.method, url, op.answer, params=_query(body),
                         node_id=path.get("node_id"), idempotent=op.idempotent)
        return _Call(op.method, url, op.answer, json=body, node_id=path.get("node_id"),
                     idempotent=op.idempotent)

    def _learn(self, episode: EpisodeLike) -> _Call:
        return _Call("POST", self._path("/learn"), api.LearnOut, json=_episode_json(episode))

    def _learn_many(self, episodes: Iterable[EpisodeLike]) -> _Call:
        body = api.request_body(api.EpisodesIn, episodes=[_episode_json(e) for e in episodes])
        return _Call("POST", self._path("/learn"), api.BatchOut, json=body)

    def _export(self) -> _Call:
        return _Call("GET", self._path("/export"), idempotent=True)

    def _import(self, path: str | Path) -> _Call:
        return _Call("POST", self._path("/import"), api.ImportOut,
                     content=Path(path).read_bytes())

    # -- answers ----------------------------------------------------------------------------
    def _request_args(self, call: _Call) -> dict[str, Any]:
        args: dict[str, Any] = {"params": call.params or None}
        if call.json is not None:
            args["json"] = call.json
        if call.content is not None:
            args["content"] = call.content
            args["headers"] = {"Content-Type": NDJSON}
        return args

    def _read(self, call: _Call, response: httpx.Response) -> BaseModel:
        if response.status_code >= 400:
            raise error_from(response, self.space, call.node_id)
        assert call.model is not None
        return call.model.model_validate(response.json())


class Client(_Base):
    """A synchronous client of one space of a deltamem server.

    Args:
        base_url: e.g. ``http://127.0.0.1:8080``.
        api_key: a key from ``deltamem keys create`` (None for a server run with ``--no-keys``).
        space: the space every call works on.
        timeout: seconds per request (learning with a model can take a while).
        retries: extra attempts on a transient failure (see the module docs for which calls),
            or a :class:`RetryPolicy` (backoff and the longest wait too); 0 turns retries off.
        transport: an httpx transport (tests; a custom TLS or proxy setup).
    """

    def __init__(self, base_url: str, api_key: str | None = None, *, space: str = "default",
                 timeout: float = 120.0, retries: int | RetryPolicy = 3,
                 transport: httpx.BaseTransport | None = None) -> None:
        super().__init__(base_url, api_key, space, retries)
        self._http = httpx.Client(base_url=self.base_url, headers=self._headers,
                                  timeout=timeout, transport=transport)

    def __enter__(self) -> Client:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        self._http.close()

    def __getattr__(self, name: str) -> Callable[..., BaseModel]:
        """A table operation without a typed method here: ``client.NAME(node_id, **inputs)``
        answers its answer model."""
        op = _derived(name)

        def call(*args: Any, **inputs: Any) -> BaseModel:
            return self._send(self._call(name, *args, **inputs), op.answer)

        return call

    def _send(self, call: _Call, model: type[M]) -> M:
        attempt = 0
        while True:
            response, error = None, None
            try:
                response = self._http.request(call.method, call.path,
                                              **self._request_args(call))
            except httpx.HTTPError as exc:
                error = exc
            wait = self.retry.delay(call, attempt, response, error)
            if wait is None:
                break
            time.sleep(wait)
            attempt += 1
        if error is not None:
            raise _unreachable(self.base_url, error, attempt) from error
        assert response is not None
        result = self._read(call, response)
        assert isinstance(result, model)
        return result

    def recall(self, task: str = "", env: str = "", *, top_k: int | None = None,
               explain: bool = False, budget_tokens: int | None = None,
               filters: Mapping[str, Any] | None = None) -> api.RecallOut:
        """Recall the skill for ``task`` and the knowledge for ``env`` (see DeltaMem.recall;
        ``filters``: only nodes whose episode meta has every key with an equal value)."""
        return self._send(self._call("recall", task=task, env=env, top_k=top_k,
                                     explain=explain, budget_tokens=budget_tokens,
                                     filters=_filters(filters)), api.RecallOut)

    def learn(self, episode: EpisodeLike) -> api.LearnOut:
        """Learn one finished episode (an :class:`Episode` or its JSON form)."""
        return self._send(self._learn(episode), api.LearnOut)

    def learn_many(self, episodes: Iterable[EpisodeLike]) -> api.BatchOut:
        """Learn a batch: every episode is validated before any is learned."""
        return self._send(self._learn_many(episodes), api.BatchOut)

    def show(self, node_id: str) -> api.ShowOut:
        """A node: its chain, composed experience, own patch and counters."""
        return self._send(self._call("show", node_id), api.ShowOut)

    def list_nodes(self, tree: Tree | str | None = None, *, kind: NodeKind | str | None = None,
                   outcome: Outcome | str | None = None, contains: str = "",
                   limit: int | None = None,
                   filters: Mapping[str, str] | None = None) -> api.NodeListOut:
        """Nodes (id, tree, kind, outcome, key, counters), oldest first, filtered (``filters``:
        string values, sent as ``key=value`` query parameters)."""
        return self._send(self._call("list_nodes", tree=tree, kind=kind, outcome=outcome,
                                     contains=contains, limit=limit,
                                     filters=_filters(filters)), api.NodeListOut)

    def stats(self) -> api.StatsOut:
        """Tree shapes, episodes, and stored vs flat size."""
        return self._send(self._call("stats"), api.StatsOut)

    def record_outcome(self, nodes: api.RecallOut | Iterable[str], success: bool
                       ) -> api.OutcomeOut:
        """Count a success or a failure on recalled nodes: a recall's matched nodes, or node
        ids (see DeltaMem.record_outcome)."""
        return self._send(self._call("record_outcome", nodes=_node_ids(nodes),
                                     success=success), api.OutcomeOut)

    def consolidate(self, *, dry_run: bool = False) -> api.ConsolidateOut:
        """Compile every frequently successful chain into a new root (``dry_run``: only list
        the chains that are due)."""
        return self._send(self._call("consolidate", dry_run=dry_run), api.ConsolidateOut)

    def correct(self, node_id: str, *, success: bool | None = None,
                steps: Iterable[str] | None = None, wrong: bool = False,
                reason: str = "") -> api.CorrectionOut:
        """Correct a node: its outcome, a skill's steps, or retract it (DeltaMem.correct)."""
        return self._send(self._call("correct", node_id, success=success, steps=_list(steps),
                                     wrong=wrong, reason=reason), api.CorrectionOut)

    def forget_fact(self, node_id: str, fact: str, *, reason: str = "") -> api.CorrectionOut:
        """Remove one fact of a scene-knowledge node, keeping the others
        (DeltaMem.forget_fact)."""
        return self._send(self._call("forget_fact", node_id, fact=fact, reason=reason),
                          api.CorrectionOut)

    def delete(self, node_id: str) -> api.DeleteOut:
        """Delete a node and its subtree (``deleted``: the ids)."""
        return self._send(self._call("delete", node_id), api.DeleteOut)

    def forget(self) -> api.ForgetOut:
        """Delete everything in the space (``deleted_nodes``: how many nodes went)."""
        return self._send(self._call("forget"), api.ForgetOut)

    def import_(self, path: str | Path) -> api.ImportOut:
        """Load an export file into the space in one transaction (all or nothing)."""
        return self._send(self._import(path), api.ImportOut)

    def export(self, path: str | Path) -> int:
        """Write the space as JSON Lines to ``path`` (streamed); return the number of records.
        A retry after a broken stream writes the file again from the start."""
        call, attempt = self._export(), 0
        while True:
            try:
                with self._http.stream("GET", call.path) as response:
                    if response.status_code < 400:
                        with Path(path).open("w", encoding="utf-8") as handle:
                            return _write_lines(handle, response.iter_lines())
                    response.read()
                    wait = self.retry.delay(call, attempt, response, None)
                    if wait is None:
                        raise error_from(response, self.space)
            except httpx.HTTPError as exc:
                wait = self.retry.delay(call, attempt, None, exc)
                if wait is None:
                    raise _unreachable(self.base_url, exc, attempt) from exc
            time.sleep(wait)
            attempt += 1


class AsyncClient(_Base):
    """The asyncio twin of :class:`Client`: the same methods, awaited."""

    def __init__(self, base_url: str, api_key: str | None = None, *, space: str = "default",
                 timeout: float = 120.0, retries: int | RetryPolicy = 3,
                 transport: httpx.AsyncBaseTransport | None = None) -> None:
        super().__init__(base_url, api_key, space, retries)
        self._http = httpx.AsyncClient(base_url=self.base_url, headers=self._headers,
                                       timeout=timeout, transport=transport)

    async def __aenter__(self) -> AsyncClient:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    async def aclose(self) -> None:
        await self._http.aclose()

    def __getattr__(self, name: str) -> Callable[..., Awaitable[BaseModel]]:
        """See :meth:`Client.__getattr__`."""
        op = _derived(name)

        async def call(*args: Any, **inputs: Any) -> BaseModel:
            return await self._send(self._call(name, *args, **inputs), op.answer)

        return call

    async def _send(self, call: _Call, model: type[M]) -> M:
        attempt = 0
        while True:
            response, error = None, None
            try:
                response = await self._http.request(call.method, call.path,
                                                    **self._request_args(call))
            except httpx.HTTPError as exc:
                error = exc
            wait = self.retry.delay(call, attempt, response, error)
            if wait is None:
                break
            await asyncio.sleep(wait)
            attempt += 1
        if error is not None:
            raise _unreachable(self.base_url, error, attempt) from error
        assert response is not None
        result = self._read(call, response)
        assert isinstance(result, model)
        return result

    async def recall(self, task: str = "", env: str = "", *, top_k: int | None = None,
                     explain: bool = False, budget_tokens: int | None = None,
                     filters: Mapping[str, Any] | None = None) -> api.RecallOut:
        """See :meth:`Client.recall`."""
        return await self._send(self._call("recall", task=task, env=env, top_k=top_k,
                                           explain=explain, budget_tokens=budget_tokens,
                                           filters=_filters(filters)), api.RecallOut)

    async def learn(self, episode: EpisodeLike) -> api.LearnOut:
        """See :meth:`Client.learn`."""
        return await self._send(self._learn(episode), api.LearnOut)

    async def learn_many(self, episodes: Iterable[EpisodeLike]) -> api.BatchOut:
        """See :meth:`Client.learn_many`."""
        return await self._send(self._learn_many(episodes), api.BatchOut)

    async def show(self, node_id: str) -> api.ShowOut:
        """See :meth:`Client.show`."""
        return await self._send(self._call("show", node_id), api.ShowOut)

    async def list_nodes(self, tree: Tree | str | None = None, *,
                         kind: NodeKind | str | None = None,
                         outcome: Outcome | str | None = None, contains: str = "",
                         limit: int | None = None,
                         filters: Mapping[str, str] | None = None) -> api.NodeListOut:
        """See :meth:`Client.list_nodes`."""
        return await self._send(self._call("list_nodes", tree=tree, kind=kind, outcome=outcome,
                                           contains=contains, limit=limit,
                                           filters=_filters(filters)), api.NodeListOut)

    async def stats(self) -> api.StatsOut:
        """See :meth:`Client.stats`."""
        return await self._send(self._call("stats"), api.StatsOut)

    async def record_outcome(self, nodes: api.RecallOut | Iterable[str], success: bool
                             ) -> api.OutcomeOut:
        """See :meth:`Client.record_outcome`."""
        return await self._send(self._call("record_outcome", nodes=_node_ids(nodes),
                                           success=success), api.OutcomeOut)

    async def consolidate(self, *, dry_run: bool = False) -> api.ConsolidateOut:
        """See :meth:`Client.consolidate`."""
        return await self._send(self._call("consolidate", dry_run=dry_run), api.ConsolidateOut)

    async def correct(self, node_id: str, *, success: bool | None = None,
                      steps: Iterable[str] | None = None, wrong: bool = False,
                      reason: str = "") -> api.CorrectionOut:
        """Correct a node: its outcome, a skill's steps, or retract it (DeltaMem.correct)."""
        return await self._send(self._call("correct", node_id, success=success,
                                           steps=_list(steps), wrong=wrong, reason=reason),
                                api.CorrectionOut)

    async def forget_fact(self, node_id: str, fact: str, *,
                          reason: str = "") -> api.CorrectionOut:
        """Remove one fact of a scene-knowledge node, keeping the others
        (DeltaMem.forget_fact)."""
        return await self._send(self._call("forget_fact", node_id, fact=fact, reason=reason),
                                api.CorrectionOut)

    async def delete(self, node_id: str) -> api.DeleteOut:
        """See :meth:`Client.delete`."""
        return await self._send(self._call("delete", node_id), api.DeleteOut)

    async def forget(self) -> api.ForgetOut:
        """See :meth:`Client.forget`."""
        return await self._send(self._call("forget"), api.ForgetOut)

    async def import_(self, path: str | Path) -> api.ImportOut:
        """See :meth:`Client.import_`."""
        return await self._send(self._import(path), api.ImportOut)

    async def export(self, path: str | Path) -> int:
        """See :meth:`Client.export`."""
        call, attempt = self._export(), 0
        while True:
            try:
                async with self._http.stream("GET", call.path) as response:
                    if response.status_code < 400:
                        lines = [line async for line in response.aiter_lines()]
                        break
                    await response.aread()
                    wait = self.retry.delay(call, attempt, response, None)
                    if wait is None:
                        raise error_from(response, self.space)
            except httpx.HTTPError as exc:
                wait = self.retry.delay(call, attempt, None, exc)
                if wait is None:
                    raise _unreachable(self.base_url, exc, attempt) from exc
            await asyncio.sleep(wait)
            attempt += 1
        with Path(path).open("w", encoding="utf-8") as handle:
            return _write_lines(handle, lines)


def _derived(name: str) -> operations.Operation:
    """The table operation ``name`` a client derives (AttributeError otherwise)."""
    if not name.startswith("_"):
        try:
            op = operations.operation(name)
        except KeyError:
            pass
        else:
            if op.on("client"):
                return op
    raise AttributeError(name)


def _filters(filters: Mapping[str, Any] | None) -> dict[str, Any] | None:
    return dict(filters) if filters else None


def _node_ids(nodes: api.RecallOut | Iterable[str]) -> list[str]:
    """A recall's matched nodes (as the library takes them), or the ids given."""
    if isinstance(nodes, api.RecallOut):
        return [t.node for t in (nodes.task, nodes.env) if t.node is not None]
    return list(nodes)


def _list(items: Iterable[str] | None) -> list[str] | None:
    return None if items is None else list(items)


def _query(body: Mapping[str, Any]) -> dict[str, Any]:
    """Input fields as query parameters: a mapping as repeated ``key=value`` texts, booleans
    as ``true``/``false``, enums as their values."""
    out: dict[str, Any] = {}
    for name, value in body.items():
        if isinstance(value, Mapping):
            out[name] = [f"{k}={v}" for k, v in value.items()]
        elif isinstance(value, bool):
            out[name] = "true" if value else "false"
        elif isinstance(value, list | tuple):
            out[name] = [str(v) for v in value]
        elif value != "":
            out[name] = str(value)
    return out


def _episode_json(episode: EpisodeLike) -> dict[str, Any]:
    return episode_to_dict(episode) if isinstance(episode, Episode) else dict(episode)


def _write_lines(handle: Any, lines: Iterable[str]) -> int:
    count = 0
    for line in lines:
        if line.strip():
            handle.write(line.rstrip("\n") + "\n")
            count += 1
    return count


def _unreachable(base_url: str, exc: httpx.HTTPError, retried: int = 0) -> RemoteError:
    tries = f" (after {retried + 1} attempts)" if retried else ""
    return RemoteError(f"no answer from the deltamem server at {base_url}{tries}: "
                       f"{exc or type(exc).__name__}")


def error_from(response: httpx.Response, space: str, node_id: str | None = None
               ) -> DeltaMemError:
    """The exception for an error answer: the library's own class when the server names one."""
    try:
        detail = response.json()["error"]
        kind, message = str(detail["type"]), str(detail["message"])
        blame = detail.get("field")
    except (ValueError, KeyError, TypeError):
        kind, blame = "HTTPError", None
        message = f"HTTP {response.status_code}: {response.text[:300]}"
    cls = _library_errors().get(kind)
    if cls is None:
        return RemoteError(message, status=response.status_code, kind=kind, field=blame)
    return _rebuild(cls, message, blame, space, node_id)


def _library_errors() -> dict[str, type[DeltaMemError]]:
    found: dict[str, type[DeltaMemError]] = {}
    todo: list[type[DeltaMemError]] = [DeltaMemError]
    while todo:
        cls = todo.pop()
        if cls is not RemoteError:
            found[cls.__name__] = cls
        todo += cls.__subclasses__()
    return found


def _rebuild(cls: type[DeltaMemError], message: str, blame: str | None, space: str,
             node_id: str | None) -> DeltaMemError:
    """An instance of ``cls`` whose message is exactly the server's."""
    error: DeltaMemError
    if issubclass(cls, NodeNotFound):
        error = cls(node_id or "", space)
    elif issubclass(cls, EpisodeError):
        error = cls(message, field=blame)
    else:
        try:
            error = cls(message)
        except TypeError:  # a constructor that needs more than the message
            error = cls.__new__(cls)
    error.args = (message,)
    return error

