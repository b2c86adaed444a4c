"""docs/integrations.md: every code block is valid, short, and the configs launch `deltamem mcp`."""

from __future__ import annotations

import json
import re
import tomllib
from pathlib import Path

DOC = Path(__file__).resolve().parents[2] / "docs" / "integrations.md"
BLOCK = re.compile(r"```(\w+)\n(.*?)```", re.S)


def blocks(language: str) -> list[str]:
    return [body for lang, body in BLOCK.findall(DOC.read_text()) if lang == language]


def test_python_examples_compile_and_stay_under_20_lines() -> None:
    examples = blocks("python")
    assert len(examples) == 4
    for code in examples:
        compile(code, str(DOC), "exec")
        assert len(code.strip().splitlines()) < 20


def test_client_configs_run_the_mcp_command() -> None:
    servers = [json.loads(body)["mcpServers"]["deltamem"] for body in blocks("json")]
    servers.append(tomllib.loads(blocks("toml")[0])["mcp_servers"]["deltamem"])
    assert len(servers) == 4
    for server in servers:
        assert server["command"] == "deltamem" and server["args"][:2] == ["mcp", "--db"]
