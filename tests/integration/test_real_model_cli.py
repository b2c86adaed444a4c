"""The real local model behind the CLI: in-process (llama.cpp) and over HTTP (llama.cpp's server).

These run in CI (the setup installs llama-cpp-python and the SmolLM2 file); they never skip.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest

from deltamem.formats.episodes import read_episodes
from deltamem.llm.llamacpp import default_model_path

FIXTURE = Path(__file__).resolve().parent.parent / "fixtures" / "scienceworld_gold.jsonl"
pytestmark = [pytest.mark.llm, pytest.mark.slow]


def cli(*args, env=None, timeout=900):
    return subprocess.run([sys.executable, "-m", "deltamem", *map(str, args)],
                          capture_output=True, text=True, timeout=timeout,
                          env={**os.environ, **(env or {})})


def test_learn_with_the_local_model_writes_valid_nodes(tmp_path):
    """`deltamem learn --extractor llm --llm local` on real episodes: valid nodes and usage."""
    shortest = sorted((e for _, e in read_episodes(FIXTURE)), key=lambda e: len(e.steps))[:2]
    path = tmp_path / "two.jsonl"
    path.write_text("".join(
        json.dumps({"task": e.task, "env": e.env, "success": e.success, "score": e.score,
                    "steps": [{"action": s.action, "observation": s.observation}
                              for s in e.steps], "meta": e.meta}) + "\n" for e in shortest))
    db = tmp_path / "m.db"
    proc = cli("learn", path, "--db", db, "--extractor", "llm", "--llm", "local", "--json")
    assert proc.returncode == 0, proc.stderr
    out = json.loads(proc.stdout)
    assert out["episodes"] == 2
    assert out["usage"]["llm_calls"] >= 2 and out["usage"]["prompt_tokens"] > 0
    assert out["usage"]["completion_tokens"] > 0
    check = json.loads(cli("check", "--db", db, "--json").stdout)
    assert check == {"ok": True, "problems": []}
    node = out["results"][0]["task"]["node"]
    shown = json.loads(cli("show", node, "--db", db, "--json").stdout)
    assert shown["experience"]["type"] in ("skill", "lesson")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture(scope="module")
def llama_server(tmp_path_factory):
    """llama-cpp-python's own OpenAI-compatible server on the SmolLM2 file, on loopback."""
    port = _free_port()
    # A file, not a pipe: llama.cpp logs a lot at load and would block on a full pipe.
    log = (tmp_path_factory.mktemp("llama") / "server.log").open("w")
    proc = subprocess.Popen(
        [sys.executable, "-m", "llama_cpp.server", "--model", str(default_model_path()),
         "--host", "127.0.0.1", "--port", str(port), "--n_ctx", "2048", "--n_threads", "1"],
        stdout=log, stderr=subprocess.STDOUT)
    url = f"http://127.0.0.1:{port}/v1"
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise AssertionError(f"llama.cpp server exited; see {log.name}")
        try:
            if httpx.get(f"{url}/models", timeout=2).status_code == 200:
                break
        except httpx.HTTPError:
            time.sleep(0.5)
    else:
        proc.kill()
        raise AssertionError("llama.cpp server did not come up in 120 s")
    yield url
    proc.terminate()
    proc.wait(timeout=30)
    log.close()


def test_bench_over_an_openai_compatible_server(llama_server, tmp_path):
    """`deltamem bench --llm openai --base-url ...` drives a real HTTP model server."""
    out_dir = tmp_path / "run"
    proc = cli("bench", "--env", "twx-coin", "--memory", "none,deltamem", "--agent", "react",
               "--llm", "openai", "--base-url", llama_server, "--model", "smollm2",
               "--episodes", "1",
               "--protocol", "online", "--extractor", "trace", "--max-steps", "3",
               "--game-params", "numLocations=2,includeDoors=0,numDistractorItems=0",
               "--out", out_dir, "--json")
    assert proc.returncode == 0, proc.stderr[-3000:]
    summary = json.loads(proc.stdout)
    rows = {row["kind"]: row for row in summary["kinds"]}
    assert set(rows) == {"none", "deltamem"}
    assert all(row["episodes"] == 1 and row["agent_llm_calls_per_episode"] >= 1
               for row in rows.values())
    assert (out_dir / "report.html").exists()


def test_learn_with_llm_over_http(llama_server, tmp_path):
    """The LLM extractor through the openai provider against the real server."""
    shortest = min((e for _, e in read_episodes(FIXTURE)), key=lambda e: len(e.steps))
    path = tmp_path / "one.jsonl"
    path.write_text(json.dumps({"task": shortest.task, "env": shortest.env, "success": True,
                                "steps": [{"action": s.action, "observation": s.observation}
                                          for s in shortest.steps]}) + "\n")
    proc = cli("learn", path, "--db", tmp_path / "m.db", "--extractor", "llm", "--llm",
               "openai", "--base-url", llama_server, "--model", "smollm2", "--json")
    assert proc.returncode == 0, proc.stderr[-3000:]
    out = json.loads(proc.stdout)
    assert out["episodes"] == 1 and out["usage"]["llm_calls"] >= 2
