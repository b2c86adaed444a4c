"""The hook daemon's socket belongs to its user: its folder is never a shared ``/tmp`` name,
a folder another user made or could write into is refused, the lock is never opened through
a link, and each end of a connection checks the other's uid."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

import deltamem_hook
from deltamem_hook import (
    ask,
    open_lock,
    private_dir,
    private_problem,
    runtime_dir,
    same_user,
    target,
)

OTHER_UID = 12346
as_root = pytest.mark.skipif(os.geteuid() != 0, reason="acting as another uid needs root")


def test_without_xdg_runtime_dir_the_socket_lives_under_home_not_tmp(tmp_path, monkeypatch):
    monkeypatch.delenv("XDG_RUNTIME_DIR", raising=False)
    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.setenv("TMPDIR", str(tmp_path / "tmp"))
    path = target(str(tmp_path / "m.db")).socket_path
    assert path.startswith(str(tmp_path / ".deltamem" / "run") + os.sep)
    assert "/tmp" not in path.removeprefix(str(tmp_path))


def test_a_runtime_dir_others_may_enter_is_not_used(tmp_path, monkeypatch):
    runtime = tmp_path / "xdg"
    runtime.mkdir()
    runtime.chmod(0o777)
    monkeypatch.setenv("XDG_RUNTIME_DIR", str(runtime))
    monkeypatch.setenv("HOME", str(tmp_path))
    assert runtime_dir() == str(tmp_path / ".deltamem" / "run")
    runtime.chmod(0o700)
    assert runtime_dir() == str(runtime)


def test_private_dir_creates_0700_folders_and_refuses_links_and_open_ones(tmp_path):
    made = private_dir(str(tmp_path / "a" / "b"))
    assert os.stat(made).st_mode & 0o777 == 0o700
    assert os.stat(tmp_path / "a").st_mode & 0o777 == 0o700
    real = tmp_path / "real"
    real.mkdir(mode=0o700)
    (tmp_path / "link").symlink_to(real)
    with pytest.raises(PermissionError, match="refusing"):
        private_dir(str(tmp_path / "link"))
    open_one = tmp_path / "open"
    open_one.mkdir()
    open_one.chmod(0o777)
    with pytest.raises(PermissionError, match="others may write"):
        private_dir(str(open_one))
    readable = tmp_path / "readable"  # an older install's 0755: tightened, not refused
    readable.mkdir()
    readable.chmod(0o755)
    private_dir(str(readable))
    assert os.stat(readable).st_mode & 0o777 == 0o700


@as_root
def test_a_folder_another_user_made_is_refused(tmp_path):
    squat = tmp_path / "squat"
    squat.mkdir(mode=0o700)
    os.chown(squat, OTHER_UID, OTHER_UID)
    assert "belongs to uid" in (private_problem(squat) or "")
    with pytest.raises(PermissionError, match="belongs to uid"):
        private_dir(str(squat))


def test_the_lock_is_never_opened_through_a_link(tmp_path):
    victim = tmp_path / "victim"
    victim.write_text("keep")
    lock = tmp_path / "hookd.sock.lock"
    lock.symlink_to(victim)
    with pytest.raises(PermissionError, match="refusing the lock"):
        open_lock(str(lock))
    assert victim.read_text() == "keep"
    lock.unlink()
    fd = open_lock(str(lock))
    os.close(fd)
    assert os.stat(lock).st_mode & 0o777 == 0o600


@as_root
def test_a_lock_another_user_made_is_refused(tmp_path):
    lock = tmp_path / "hookd.sock.lock"
    lock.write_text("")
    os.chown(lock, OTHER_UID, OTHER_UID)
    with pytest.raises(PermissionError, match="not a file of this user"):
        open_lock(str(lock))


def test_ask_never_talks_through_a_folder_others_may_enter(tmp_path, monkeypatch):
    """A daemon-like listener in an open folder gets no request (the prompt stays private)."""
    runtime = tmp_path / "run"
    runtime.mkdir(mode=0o700)
    monkeypatch.setenv("XDG_RUNTIME_DIR", str(runtime))
    t = target(str(tmp_path / "m.db"))
    heard: list[bytes] = []
    server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    server.bind(t.socket_path)
    server.listen(1)

    def serve() -> None:
        conn, _ = server.accept()
        heard.append(conn.recv(65536))
        conn.sendall(b'{"output": {"pid": 1}}\n')
        conn.close()

    threading.Thread(target=serve, daemon=True).start()
    monkeypatch.setattr(deltamem_hook, "runtime_dir", lambda: str(runtime))
    runtime.chmod(0o733)  # others may now enter and write: as a squatter's folder
    assert ask(t, {"event": "user-prompt", "payload": {"prompt": "secret"}}, 2.0) is None
    runtime.chmod(0o700)
    assert ask(t, {"event": "ping"}, 5.0) == {"output": {"pid": 1}}  # its own: answered
    assert heard and b"secret" not in b"".join(heard)
    server.close()


def as_other(work) -> bytes:
    """Run ``work()`` (returning bytes) in a forked child acting as another uid."""
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # pragma: no cover - the child
        try:
            os.close(read)
            os.setgid(OTHER_UID)
            os.setuid(OTHER_UID)
            os.write(write, work())
        finally:
            os._exit(0)
    os.close(write)
    with os.fdopen(read, "rb") as pipe:
        out = pipe.read()
    os.waitpid(pid, 0)
    return out


@pytest.fixture
def shared(tmp_path):
    """A folder every uid may enter (under /tmp, outside pytest's private base)."""
    import shutil
    import tempfile

    folder = Path(tempfile.mkdtemp(prefix="deltamem-test-"))
    folder.chmod(0o777)
    yield folder
    shutil.rmtree(folder, ignore_errors=True)


@as_root
def test_same_user_sees_the_peer_uid_on_both_ends(shared):
    path = str(shared / "s.sock")
    server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    server.bind(path)
    os.chmod(path, 0o777)
    server.listen(1)

    def client() -> bytes:
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as conn:
            conn.connect(path)
            return b"foreign" if not same_user(conn) else b"same"

    seen: list[bool] = []

    def accept() -> None:
        conn, _ = server.accept()
        seen.append(same_user(conn))
        conn.close()

    worker = threading.Thread(target=accept, daemon=True)
    worker.start()
    assert as_other(client) == b"foreign"  # the client end: root's listener is foreign
    worker.join(timeout=10)
    assert seen == [False]  # the server end: another uid's client
    server.close()
    os.unlink(path)

    def listener() -> bytes:
        other = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        other.bind(path)
        other.listen(1)
        other.settimeout(120)
        conn, _ = other.accept()
        conn.recv(10)
        return b""

    child = threading.Thread(target=as_other, args=(listener,), daemon=True)
    child.start()
    deadline = time.monotonic() + 60
    while not os.path.exists(path) and time.monotonic() < deadline:
        time.sleep(0.05)
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as conn:
        conn.connect(path)
        assert not same_user(conn)  # our client end: another uid's listener
    child.join(timeout=30)


@as_root
def test_the_daemon_answers_no_other_user(tmp_path, shared):
    """The real daemon, with its folder opened up for the test: another uid's ping gets no
    answer, the owner's does."""
    runtime = shared / "run"
    runtime.mkdir(mode=0o700)
    env = {**os.environ, "HOME": str(tmp_path), "XDG_RUNTIME_DIR": str(runtime),
           "DELTAMEM_EMBEDDER": "hashing", "PYTHONPATH": os.pathsep.join(sys.path)}
    db = tmp_path / "m.db"
    daemon = subprocess.Popen([sys.executable, "-m", "deltamem.integrations.hookd", "--db",
                               str(db), "--idle", "60"], env=env)
    try:
        key = target(str(db), "default", "hashing").key
        sock = runtime / f"hookd-{key}.sock"
        deadline = time.monotonic() + 180  # the daemon imports deltamem first (slow under load)
        while not sock.exists() and daemon.poll() is None and time.monotonic() < deadline:
            time.sleep(0.05)
        assert sock.exists(), daemon.poll()

        def ping() -> bytes:
            with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as conn:
                conn.settimeout(120)
                conn.connect(str(sock))
                try:
                    conn.sendall(b'{"event": "ping"}\n')
                    return conn.recv(1000) or b"<closed>"
                except (BrokenPipeError, ConnectionResetError):  # closed before we spoke
                    return b"<closed>"

        assert b'"pid"' in ping()  # the owner: answered (the daemon has set the socket's mode)
        runtime.chmod(0o711)
        sock.chmod(0o777)
        assert as_other(ping) == b"<closed>"  # another uid: closed without a word
    finally:
        daemon.terminate()
        daemon.wait(timeout=30)
