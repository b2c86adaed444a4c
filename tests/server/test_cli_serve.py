"""The serving CLI commands (keys, view, skills, delete, forget) through ``register(app)``."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import typer
from typer.testing import CliRunner

from deltamem.embed.hashing import HashingEmbedder
from deltamem.engine.memory import DeltaMem
from deltamem.extract.trace import TraceExtractor
from deltamem.faces.cli import serve as cli_serve
from deltamem.store.sqlite import SQLiteStore
from helpers import TEST_SETTINGS, make_episode

runner = CliRunner()
TASKS = [("heat the apple", ("go to kitchen", "take apple", "heat apple")),
         ("cool the milk", ("go to fridge", "cool milk", "put milk"))]


@pytest.fixture
def app(monkeypatch: pytest.MonkeyPatch) -> typer.Typer:
    """A Typer app with the serving commands, opening memories with the hashing test embedder."""

    def open_memory(db: str, space: str, embedder: str | None, *,
                    create: bool = False) -> DeltaMem:
        return DeltaMem(SQLiteStore(db, create=create), HashingEmbedder(), TraceExtractor(),
                        space=space, settings=TEST_SETTINGS, create=create)

    monkeypatch.setattr(cli_serve, "open_memory", open_memory)
    main = typer.Typer()

    @main.command()
    def version() -> None:
        """A second command, so Typer keeps sub-command names."""

    cli_serve.register(main)
    return main


def run(app: typer.Typer, *args: str) -> dict:
    result = runner.invoke(app, [*args, "--json"])
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)


def learn(db: Path, n: int = 1) -> DeltaMem:
    mem = DeltaMem(SQLiteStore(db), HashingEmbedder(), TraceExtractor(), settings=TEST_SETTINGS)
    for task, actions in TASKS[:n]:
        mem.learn(make_episode(task=task, actions=actions))
    return mem


def test_register_adds_every_command(app: typer.Typer) -> None:
    """serve, mcp, view, delete, forget and the keys/skills groups are registered."""
    result = runner.invoke(app, ["--help"])
    for name in ("serve", "mcp", "worker", "view", "delete", "forget", "keys", "skills"):
        assert name in result.stdout


def test_keys_create_list_revoke(app: typer.Typer, tmp_path: Path) -> None:
    """A created key is listed without its secret and can be revoked."""
    db = str(tmp_path / "k.db")
    created = run(app, "keys", "create", "--db", db, "--space", "a", "--space", "b")
    assert created["key"].startswith("dmk_") and created["spaces"] == ["a", "b"]
    listed = run(app, "keys", "list", "--db", db)["keys"]
    assert [k["id"] for k in listed] == [created["id"]]
    assert created["key"] not in json.dumps(listed)
    assert run(app, "keys", "revoke", created["id"], "--db", db)["revoked"] is True
    again = runner.invoke(app, ["keys", "revoke", created["id"], "--db", db])
    assert again.exit_code == 4


def test_view_writes_a_page(app: typer.Typer, tmp_path: Path) -> None:
    """`view --out` writes the self-contained viewer page."""
    db = tmp_path / "v.db"
    learn(db).close()
    out = tmp_path / "tree.html"
    done = run(app, "view", "--db", str(db), "--out", str(out))
    assert done["file"] == str(out) and "heat the apple" in out.read_text()


def test_skills_export_then_import(app: typer.Typer, tmp_path: Path) -> None:
    """Skills exported from one database import into another."""
    learn(tmp_path / "a.db", 2).close()
    exported = run(app, "skills", "export", str(tmp_path / "sk"), "--db", str(tmp_path / "a.db"))
    assert len(exported["skills"]) == 2
    imported = run(app, "skills", "import", str(tmp_path / "sk"), "--db", str(tmp_path / "b.db"))
    assert len(imported["imported"]) == 2


def test_delete_and_forget(app: typer.Typer, tmp_path: Path) -> None:
    """delete removes a subtree; forget needs --yes and then empties the space."""
    db = tmp_path / "d.db"
    mem = learn(db, 2)
    node = next(iter(mem.nodes())).id
    total = len(list(mem.nodes()))
    mem.close()
    assert run(app, "delete", node, "--db", str(db))["deleted"] == [node]
    refused = runner.invoke(app, ["forget", "--db", str(db)])
    assert refused.exit_code == 1
    assert run(app, "forget", "--db", str(db), "--yes")["deleted_nodes"] == total - 1


def _main(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str]:
    """Run the real CLI in-process; return (exit code, stderr)."""
    from deltamem.faces.cli import app as cli

    with pytest.raises(SystemExit) as info:
        cli.main(list(args))
    code = info.value.code
    return (code if isinstance(code, int) else 0), capsys.readouterr().err


@pytest.mark.parametrize("command", [["serve"], ["mcp", "--transport", "http"]])
def test_no_keys_warns_loudly_and_refuses_a_public_address(
        command: list[str], tmp_path: Path, capsys: pytest.CaptureFixture[str],
        monkeypatch: pytest.MonkeyPatch) -> None:
    """`serve --no-keys` / `mcp --transport http --no-keys`: on a non-loopback address the
    command refuses to start (exit 3, one line); on loopback it starts with a WARNING."""
    import uvicorn

    served: list[str] = []
    monkeypatch.setenv("DELTAMEM_EMBEDDER", "hashing")
    monkeypatch.setattr(uvicorn, "run", lambda app, host, **_: served.append(host))
    db = str(tmp_path / "m.db")
    code, err = _main(capsys, *command, "--db", db, "--no-keys", "--host", "0.0.0.0")
    assert code == 3 and "refusing" in err and "loopback" in err and not served
    assert len(err.strip().splitlines()) == 1
    code, err = _main(capsys, *command, "--db", db, "--no-keys", "--host", "127.0.0.1")
    assert code == 0 and served == ["127.0.0.1"]
    assert err.startswith("WARNING: --no-keys") and "any process on this machine" in err


def test_mcp_http_without_keys_refuses_a_public_address(tmp_path: Path) -> None:
    """The library entry point too: run_server over HTTP with no keys only on loopback."""
    from deltamem.errors import ConfigError
    from deltamem.faces.server.mcp_serve import run_server

    with learn(tmp_path / "m.db") as mem, pytest.raises(ConfigError, match="loopback"):
        run_server(mem, transport="http", host="0.0.0.0", port=1)


def test_serve_with_workers_shares_the_port_and_gives_the_same_answers(
        tmp_path: Path) -> None:
    """`deltamem serve --workers 2`: two server processes behind one port; what they learn is
    one memory, and every recall equals the library's own answer over the same database."""
    import os
    import socket
    import subprocess
    import sys
    import time

    import httpx

    from deltamem.faces.server.keys import open_keys

    db = tmp_path / "w.db"
    keys = open_keys(str(db))
    secret = keys.create(["a"])[1]
    keys.close()
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    env = {**os.environ, "DELTAMEM_EMBEDDER": "hashing", "DELTAMEM_TAU_TASK": "0.6",
           "DELTAMEM_TAU_ENV": "0.6"}
    proc = subprocess.Popen([sys.executable, "-m", "deltamem",
                             "serve", "--db", str(db), "--port", str(port), "--workers", "2"],
                            env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 120
        with httpx.Client(base_url=url, headers={"Authorization": f"Bearer {secret}"},
                          timeout=60) as c:
            while True:
                try:
                    if c.get("/healthz").status_code == 200:
                        break
                except httpx.TransportError:
                    pass
                assert proc.poll() is None and time.monotonic() < deadline, "did not start"
                time.sleep(0.2)
            for task, actions in TASKS:
                body = {"task": task, "env": "a kitchen", "success": True,
                        "steps": [{"action": a, "observation": "ok"} for a in actions]}
                assert c.post("/v1/spaces/a/learn", json=body).status_code == 200
            served = [c.post("/v1/spaces/a/recall", json={"task": task, "env": "a kitchen"})
                      .json() for task, _ in TASKS * 8]
        children = [p for p in os.listdir("/proc") if p.isdigit()
                    and _parent(int(p)) == proc.pid]
    finally:
        proc.terminate()
        proc.wait(timeout=60)
    assert len(children) >= 2  # the worker processes (uvicorn's supervisor is their parent)
    with DeltaMem(SQLiteStore(db), HashingEmbedder(), TraceExtractor(), space="a",
                  settings=TEST_SETTINGS, create=False) as mem:
        own = [mem.recall(task, "a kitchen").to_dict() for task, _ in TASKS * 8]
    for answer in (*served, *own):  # cost accounting (cache hits, wall time) is per process
        del answer["usage"]
    assert served == own and all(r["task"]["matched"] for r in served)


def _parent(pid: int) -> int | None:
    try:
        with open(f"/proc/{pid}/stat") as stat:
            return int(stat.read().rsplit(")", 1)[1].split()[1])
    except (OSError, ValueError, IndexError):
        return None
