"""The README's library example runs as written (documentation that cannot rot)."""

from __future__ import annotations

import re
from pathlib import Path

README = Path(__file__).resolve().parent.parent / "README.md"


def test_library_example_runs(tmp_path, monkeypatch, capsys):
    """The ten-line example learns a root and reports its cost."""
    block = re.search(r"```python\n(.*?)```", README.read_text(), re.S)
    assert block is not None
    monkeypatch.chdir(tmp_path)
    exec(compile(block.group(1), "README.md", "exec"), {})
    printed = capsys.readouterr().out
    assert printed.startswith("root ") and "'embed_texts'" in printed
    assert (tmp_path / "agent.db").exists()
