"""What ``deltamem mcp`` answers to the MCP ``initialize`` request and to the listings whose
answers never change (standard library only).

The one source of the server's name and instructions: the SDK server
(:func:`deltamem.faces.server.mcp.build_server`) is built from them, and the fast front of the
``deltamem`` command (:mod:`deltamem_launch`) answers ``initialize`` from them before the SDK is
imported, and the listings from the SDK server's own answers (``listings.json``).
``tests/server/test_mcp_front.py`` checks that both answers are equal for every protocol
version.
"""

from __future__ import annotations

from typing import Any

SERVER_NAME = "deltamem"
SERVER_VERSION = "0.1.0"  # the package's version (tests/test_public_api.py holds the three equal)

INSTRUCTIONS = (
    "deltamem is an experience memory of skills (how tasks were done) and scene knowledge "
    "(what holds in an environment). Before a task, call `recall` with the goal and a short "
    "description of the scene, and read the returned context before you plan. After the task, "
    "call `learn` with what you did (the steps, or the transcript of messages) and whether it "
    "worked; if you only followed a recalled memory, `record_outcome` counts the result instead."
)

# The protocol versions the SDK's handshake accepts (``mcp_types.version``), oldest first: a
# client asking for another one is answered with the latest (the spec's negotiation).
HANDSHAKE_VERSIONS = ("2024-11-05", "2025-03-26", "2025-06-18", "2025-11-25")

# The capabilities the SDK server derives from the handlers MCPServer registers.
CAPABILITIES: dict[str, Any] = {
    "prompts": {"listChanged": False},
    "resources": {"listChanged": False, "subscribe": False},
    "tools": {"listChanged": False},
}


def initialize_answer(request: Any) -> dict[str, Any] | None:
    """The JSON-RPC answer to ``request`` (a parsed JSON value) when it is an ``initialize``
    request of the handshake whose shape is certainly valid, else None (the SDK answers it:
    errors included)."""
    if not isinstance(request, dict) or request.get("jsonrpc") != "2.0" \
            or request.get("method") != "initialize":
        return None
    rid = request_id(request)
    params = request.get("params")
    if rid is None or not isinstance(params, dict):
        return None
    version, caps, client = (params.get("protocolVersion"), params.get("capabilities"),
                             params.get("clientInfo"))
    if not (isinstance(version, str) and isinstance(caps, dict)
            and all(isinstance(v, dict) for v in caps.values())
            and isinstance(client, dict) and isinstance(client.get("name"), str)
            and isinstance(client.get("version"), str)):
        return None
    negotiated = version if version in HANDSHAKE_VERSIONS else HANDSHAKE_VERSIONS[-1]
    return {"jsonrpc": "2.0", "id": rid, "result": {
        "capabilities": CAPABILITIES, "instructions": INSTRUCTIONS,
        "protocolVersion": negotiated,
        "serverInfo": {"name": SERVER_NAME, "version": SERVER_VERSION}}}


# The requests the front answers from the table of the SDK server's answers (none depends on
# the memory, the options or the negotiated version).
LISTINGS = ("tools/list", "prompts/list", "resources/list", "resources/templates/list", "ping")


def listing_answer(request: Any, table: dict[str, Any]) -> dict[str, Any] | None:
    """The JSON-RPC answer to ``request`` when it is a request of :data:`LISTINGS` without a
    cursor or any other parameter (``_meta`` aside) whose result ``table`` holds, else None."""
    if not isinstance(request, dict) or request.get("jsonrpc") != "2.0":
        return None
    method, rid, params = request.get("method"), request_id(request), request.get("params", {})
    if method not in LISTINGS or rid is None or method not in table \
            or not isinstance(params, dict) or set(params) - {"_meta"} \
            or not isinstance(params.get("_meta", {}), dict):
        return None
    return {"jsonrpc": "2.0", "id": rid, "result": table[method]}


def request_id(request: dict[str, Any]) -> str | int | None:
    """A request's id when the SDK reads it as one (a string or an integer), else None."""
    rid = request.get("id")
    return None if isinstance(rid, bool) or not isinstance(rid, (int, str)) else rid
