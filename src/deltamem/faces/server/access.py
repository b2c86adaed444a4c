"""Who may call a space's routes: the API key a request presents (``Authorization: Bearer``),
the spaces and scope it allows, and its rate limit; then the space's memory.

Every space route of the REST server goes through :func:`memory_for`. The key's id (never the
secret) is left in the request state for the access log.
"""

from __future__ import annotations

from starlette.requests import Request

from deltamem.engine.memory import DeltaMem, check_space
from deltamem.faces.server.http_errors import ApiError
from deltamem.faces.server.keys import ApiKey, KeyStore
from deltamem.faces.server.limits import RateLimiter
from deltamem.faces.server.spaces import SpacePool

CHALLENGE = {"WWW-Authenticate": "Bearer"}


def presented_key(request: Request) -> str | None:
    """The key a request presents (``Authorization: Bearer <key>``, the scheme in any case),
    or None."""
    kind, _, token = request.headers.get("authorization", "").partition(" ")
    return token.strip() if kind.lower() == "bearer" and token.strip() else None


def memory_for(request: Request, space: str, scope: str, *, create: bool) -> DeltaMem:
    """The memory of ``space`` for a caller allowed ``scope`` there.

    Raises:
        ConfigError: an invalid space name.
        ApiError: 401 (no key, or an invalid or revoked one), 403 (the key does not cover the
            space or lacks the scope), 429 (its rate limit).
        SpaceNotFound: the space does not exist and ``create`` is False (only writers create).
    """
    check_space(space)
    keys: KeyStore | None = request.app.state.keys
    if keys is not None:
        key = authorise(request, keys, space, scope)
        limit(request.app.state.limiter, key, request.app.state.rate_limit)
    pool: SpacePool = request.app.state.pool
    return pool.get(space, create=create)


def authorise(request: Request, keys: KeyStore, space: str, scope: str) -> ApiKey:
    """The request's key, verified to cover ``space`` with ``scope`` (ApiError otherwise)."""
    presented = presented_key(request)
    if presented is None:
        raise ApiError(401, "Unauthorized", "missing API key: send 'Authorization: Bearer <key>'",
                       headers=CHALLENGE)
    key = keys.verify(presented)
    if key is None:
        raise ApiError(401, "Unauthorized", "invalid or revoked API key", headers=CHALLENGE)
    request.state.key_id = key.id  # for the access log (the id, never the secret)
    if not key.covers(space):
        raise ApiError(403, "Forbidden", f"this API key is not allowed on space {space!r}")
    if not key.allows(space, scope):
        raise ApiError(403, "Forbidden", f"this API key lacks the {scope!r} scope "
                       f"(it has: {', '.join(key.scopes)})")
    return key


def limit(limiter: RateLimiter, key: ApiKey, default: int | None) -> None:
    """Take one request from ``key``'s budget (its own per-minute limit, else ``default``;
    None: no limit); 429 with ``Retry-After`` when it is spent."""
    per_minute = key.rate_limit or default
    if per_minute is None:
        return
    wait = limiter.take(key.id, per_minute)
    if wait is not None:
        raise ApiError(429, "RateLimited", f"this API key is limited to {per_minute} requests "
                       f"per minute; retry in {wait} s", headers={"Retry-After": str(wait)})
