"""The hook client's start-up: JSON through CPython's ``_json`` (:mod:`deltamem_hook.wire`), value
for value what :mod:`json` gives, and a hook process that imports none of the modules that cost
a hook more than the interpreter's own start (``json``/``re``, ``socket``, ``hashlib``,
``tempfile``, ``typing``, ``subprocess`` where it starts nothing)."""

from __future__ import annotations

import hashlib
import json
import math
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from deltamem_hook import digest, reply_digest, write_new
from deltamem_hook.wire import _c_codec, _py_codec, dumps, loads

VALUES: list[Any] = [
    {}, [], "", "plain", 0, -17, 2**70, 1.5, -2.5e300, 1e-7, None, True, False,
    {"prompt": "fix the test", "nested": [1, [2, {"k": None}], {}], "é": "ü ß 漢字"},
    "tab\tnew\nline \"quoted\" back\\slash \x00\x1f \u2028 \U0001f600",
    {"session_id": "5f0c6f2e-8d7b", "transcript_path": "/home/dev/.claude/x.jsonl", "n": 3},
]


@pytest.mark.parametrize("value", VALUES)
@pytest.mark.parametrize("ensure_ascii", [True, False])
def test_dumps_and_loads_are_jsons(value: Any, ensure_ascii: bool) -> None:
    text = dumps(value, ensure_ascii=ensure_ascii)
    assert text == json.dumps(value, ensure_ascii=ensure_ascii)
    assert loads(text) == json.loads(text) == value
    assert loads(text.encode("utf-8")) == value
    assert loads(f" \n{text}\r\t ") == value


def test_non_finite_numbers_as_json_writes_them() -> None:
    text = dumps([math.inf, -math.inf, math.nan])
    assert text == json.dumps([math.inf, -math.inf, math.nan]) == "[Infinity, -Infinity, NaN]"
    back = loads(text)
    assert back[:2] == [math.inf, -math.inf] and math.isnan(back[2])


@pytest.mark.parametrize("text", ["", "  ", "{", "[1,]", "1 2", "nul", '"\x01"', '{"a": 1}x',
                                  "{'a': 1}"])
def test_what_is_not_one_json_value_is_a_value_error(text: str) -> None:
    with pytest.raises(ValueError):
        json.loads(text)
    with pytest.raises(ValueError):
        loads(text)


def test_what_json_cannot_write_is_refused_as_json_refuses_it() -> None:
    with pytest.raises(TypeError, match="not JSON serializable"):
        dumps({"x": object()})
    cycle: list[Any] = []
    cycle.append(cycle)
    with pytest.raises(ValueError, match="Circular reference"):
        dumps(cycle)
    assert dumps({"after": "a refused value"}) == '{"after": "a refused value"}'


def test_the_fallback_codec_behaves_the_same() -> None:
    """Where ``_json`` is not usable, ``json`` serves: both codecs agree."""
    fast, slow = _c_codec(), _py_codec()
    for value in VALUES:
        for ascii_only in (True, False):
            assert fast[1](value, ascii_only) == slow[1](value, ascii_only)
        assert fast[0](json.dumps(value)) == slow[0](json.dumps(value))


def test_digests_are_hashlibs_blake2b() -> None:
    assert digest("a\0b", 8) == hashlib.blake2b(b"a\0b", digest_size=8).hexdigest()
    text = "  I changed add()\n in calc.py "
    assert reply_digest(text) == hashlib.blake2b(
        " ".join(text.split()).encode(), digest_size=12).hexdigest()


def test_write_new_is_atomic_and_private(tmp_path: Path) -> None:
    path = write_new(str(tmp_path), "entry.json", dumps({"a": 1}), sync=True)
    assert loads(Path(path).read_text()) == {"a": 1}
    assert Path(path).stat().st_mode & 0o777 == 0o600
    write_new(str(tmp_path), "entry.json", "{}")
    assert [p.name for p in tmp_path.iterdir()] == ["entry.json"]  # no temporary left behind
    with pytest.raises(OSError):
        write_new(str(tmp_path / "missing"), "x.json", "{}")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["entry.json"]


HEAVY = ("json", "re", "socket", "hashlib", "tempfile", "typing", "subprocess", "argparse",
         "deltamem")


def test_a_hook_process_imports_nothing_heavy(tmp_path: Path) -> None:
    """A hook that needs neither the daemon nor its start (a failed tool call, noted in the
    spool) runs on the interpreter's start and the C modules alone."""
    probe = ("import sys, runpy\n"
             "sys.argv = ['deltamem-hook', *sys.argv[1:]]\n"
             "try:\n    runpy.run_module('deltamem_hook', run_name='__main__')\n"
             "finally:\n"
             f"    print(sorted(m for m in {HEAVY!r} if m in sys.modules), file=sys.stderr)\n")
    payload = json.dumps({"session_id": "s1", "tool_use_id": "t1", "cwd": str(tmp_path),
                          "transcript_path": str(tmp_path / "t.jsonl")})
    env = {**os.environ, "HOME": str(tmp_path), "XDG_RUNTIME_DIR": str(tmp_path / "run")}
    done = subprocess.run([sys.executable, "-c", probe, "tool-failure", "--db",
                           str(tmp_path / "m.db")], input=payload, capture_output=True,
                          text=True, env=env, timeout=60, check=False)
    assert done.returncode == 0, done.stderr
    assert done.stderr.strip() == "[]"
    assert (tmp_path / ".deltamem-hooks" / "spool" / "failures" / "s1.jsonl").is_file()
