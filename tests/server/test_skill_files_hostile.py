"""Skill files from folders someone else controls (a cloned repository, a shared drive): every
write goes through the facade (redacted), nothing is read through a link or from a FIFO or
device, nothing is written through a link planted in the export folder, and what a correction
took back is never exported as guidance."""

from __future__ import annotations

import os
import stat
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from deltamem.core.model import Tree
from deltamem.embed.hashing import HashingEmbedder
from deltamem.engine.memory import DeltaMem
from deltamem.errors import ConfigError
from deltamem.extract.trace import TraceExtractor
from deltamem.faces.cli import app as cli
from deltamem.faces.skills import (
    export_layout,
    export_memory_md,
    export_skills,
    import_layout,
    import_skills,
)
from deltamem.store.sqlite import SQLiteStore
from helpers import TEST_SETTINGS, make_episode

AWS = "AKIA" + "QX7VZ2M4NB6LK8PD"  # the shapes of an AWS access key id and a GitHub token
GITHUB = "ghp_" + "k3Jd9QxZ2mW8vL5tR7yN1bC4hF6gP0sA2eUi"
SECRET_SKILL = f"""---
name: deploy-prod
description: Deploy to production with the release key.
---

1. export AWS_ACCESS_KEY_ID={AWS}
2. git clone https://{GITHUB}@github.com/acme/shop.git
3. run make deploy
"""
HAND = """---
name: brew
description: Make a cup of coffee.
---

1. fill the tank
2. press the button
"""


def fresh(tmp_path: Path, name: str = "m") -> DeltaMem:
    return DeltaMem(SQLiteStore(tmp_path / f"{name}.db"), HashingEmbedder(), TraceExtractor(),
                    settings=TEST_SETTINGS)


def skill_dir(tmp_path: Path, text: str, name: str = "s") -> Path:
    folder = tmp_path / "skills" / name
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "SKILL.md").write_text(text)
    return tmp_path / "skills"


def stored_text(mem: DeltaMem, db: Path) -> str:
    rows = [repr((n.key, mem.experience(n.id), n.meta)) for n in mem.nodes()]
    return "\n".join(rows) + db.read_bytes().decode("latin-1")


# -- one write path: redacted -----------------------------------------------------------------
def test_a_secret_in_a_skill_md_is_stored_redacted(tmp_path: Path) -> None:
    mem = fresh(tmp_path)
    done = import_skills(mem, skill_dir(tmp_path, SECRET_SKILL))
    assert len(done["imported"]) == 1
    mem.close()
    mem = fresh(tmp_path)
    text = stored_text(mem, tmp_path / "m.db")
    assert AWS not in text and GITHUB not in text
    assert "[REDACTED" in text and "run make deploy" in text


def test_a_secret_in_a_memory_md_layout_is_stored_redacted(tmp_path: Path) -> None:
    unsafe = TEST_SETTINGS.with_(redact=False)
    source = DeltaMem(SQLiteStore(tmp_path / "src.db"), HashingEmbedder(), TraceExtractor(),
                      settings=unsafe)
    source.learn(make_episode(task=f"push with token {GITHUB}",
                              actions=("go to repo", f"export KEY={AWS}", "git push")))
    source.learn(make_episode(task=f"push with token {GITHUB}",
                              actions=("go to repo", f"export KEY={AWS}", "git push", "check ci")))
    assert any(n.kind.value == "delta" for n in source.nodes(Tree.TASK))
    export_memory_md(source, tmp_path / "md")
    mem = fresh(tmp_path)
    done = import_layout(mem, tmp_path / "md")
    assert done["imported"] and mem.check() == []
    mem.close()
    mem = fresh(tmp_path)
    text = stored_text(mem, tmp_path / "m.db")
    assert AWS not in text and GITHUB not in text
    again = import_layout(mem, tmp_path / "md")  # the same folder again: nothing new
    assert again["imported"] == []


# -- reading hostile folders ------------------------------------------------------------------
def test_a_symlinked_skill_md_is_refused(tmp_path: Path) -> None:
    outside = tmp_path / "outside.md"
    outside.write_text(HAND)
    folder = tmp_path / "skills" / "evil"
    folder.mkdir(parents=True)
    (folder / "SKILL.md").symlink_to(outside)
    mem = fresh(tmp_path)
    with pytest.raises(ConfigError, match="symbolic link"):
        import_skills(mem, tmp_path / "skills")
    assert list(mem.nodes()) == []


def test_a_linked_folder_is_not_entered(tmp_path: Path) -> None:
    outside = tmp_path / "elsewhere" / "secret-skill"
    outside.mkdir(parents=True)
    (outside / "SKILL.md").write_text(HAND)
    skills = skill_dir(tmp_path, HAND.replace("brew", "tea"), "tea")
    (skills / "linked").symlink_to(outside.parent)
    mem = fresh(tmp_path)
    done = import_skills(mem, skills)
    assert len(done["imported"]) == 1
    assert {n.meta["skill_name"] for n in mem.nodes()} == {"tea"}


def test_a_fifo_is_refused_at_once(tmp_path: Path) -> None:
    folder = tmp_path / "skills" / "pipe"
    folder.mkdir(parents=True)
    os.mkfifo(folder / "SKILL.md")
    mem = fresh(tmp_path)
    outcome: list[BaseException | None] = []

    def attempt() -> None:
        try:
            import_skills(mem, tmp_path / "skills")
            outcome.append(None)
        except BaseException as exc:  # noqa: BLE001 - handed to the test's thread
            outcome.append(exc)

    worker = threading.Thread(target=attempt, daemon=True)
    worker.start()
    worker.join(timeout=20)
    if worker.is_alive():  # the old code blocks in open() until a writer comes
        with open(folder / "SKILL.md", "w"):
            pass
        worker.join(timeout=5)
        pytest.fail("importing a FIFO hung")
    assert isinstance(outcome[0], ConfigError) and "not a regular file" in str(outcome[0])


@pytest.mark.skipif(os.geteuid() != 0, reason="mknod of a device needs root")
def test_a_device_is_refused(tmp_path: Path) -> None:
    folder = tmp_path / "skills" / "zero"
    folder.mkdir(parents=True)
    os.mknod(folder / "SKILL.md", stat.S_IFCHR | 0o600, os.makedev(1, 5))  # /dev/zero
    with pytest.raises(ConfigError, match="not a regular file"):
        import_skills(fresh(tmp_path), tmp_path / "skills")


def test_a_file_over_the_size_cap_is_refused(tmp_path: Path, monkeypatch) -> None:
    big = HAND + "\n".join(f"{i}. step {i} " + "x" * 80 for i in range(3, 40)) + "\n"
    skills = skill_dir(tmp_path, big)
    monkeypatch.setenv("DELTAMEM_SKILL_MAX_BYTES", "1000")
    with pytest.raises(ConfigError, match="1000-byte limit"):
        import_skills(fresh(tmp_path), skills)
    monkeypatch.delenv("DELTAMEM_SKILL_MAX_BYTES")
    assert len(import_skills(fresh(tmp_path, "ok"), skills)["imported"]) == 1
    (skills / "s" / "SKILL.md").write_bytes(HAND.encode() + b"#" * (2 << 20))
    with pytest.raises(ConfigError, match="limit"):  # the default cap: 1 MiB
        import_skills(fresh(tmp_path, "big"), skills)


def test_deep_yaml_is_one_clear_error_not_a_crash(tmp_path: Path, capsys) -> None:
    deep = "---\nname: " + "[" * 5000 + "]" * 5000 + "\ndescription: x\n---\n1. a\n"
    skills = skill_dir(tmp_path, deep)
    with pytest.raises(SystemExit) as info:
        cli.main(["skills", "import", str(skills), "--db", str(tmp_path / "c.db")])
    err = capsys.readouterr().err
    assert info.value.code == 3, err
    assert "nested too deeply" in err and "Traceback" not in err


# -- writing into a folder with planted links -------------------------------------------------
def learned(tmp_path: Path) -> DeltaMem:
    mem = fresh(tmp_path, "learned")
    mem.learn(make_episode())
    return mem


@pytest.mark.parametrize("planted", ["heat-the-apple", "knowledge"])
def test_export_refuses_a_linked_folder_in_the_export_folder(tmp_path: Path,
                                                             planted: str) -> None:
    mem = learned(tmp_path)
    out, outside = tmp_path / "out", tmp_path / "outside"
    out.mkdir()
    outside.mkdir()
    (out / planted).symlink_to(outside)
    with pytest.raises(ConfigError, match="symbolic link"):
        export_skills(mem, out)
    assert list(outside.iterdir()) == []


def test_export_refuses_a_linked_file_and_leaves_its_target(tmp_path: Path) -> None:
    mem = learned(tmp_path)
    out = tmp_path / "out"
    (out / "heat-the-apple").mkdir(parents=True)
    victim = tmp_path / "victim.txt"
    victim.write_text("keep me")
    (out / "heat-the-apple" / "SKILL.md").symlink_to(victim)
    with pytest.raises(ConfigError, match="symbolic link"):
        export_skills(mem, out)
    assert victim.read_text() == "keep me"


def test_memory_md_export_refuses_a_linked_folder(tmp_path: Path) -> None:
    mem = learned(tmp_path)
    out, outside = tmp_path / "out", tmp_path / "outside"
    out.mkdir()
    outside.mkdir()
    (out / "skills").symlink_to(outside)
    with pytest.raises(ConfigError, match="symbolic link"):
        export_memory_md(mem, out)
    assert list(outside.iterdir()) == []


def test_the_cli_refuses_a_linked_export_folder_with_one_line(tmp_path: Path, capsys) -> None:
    db = tmp_path / "c.db"
    learned(tmp_path).close()
    os.replace(tmp_path / "learned.db", db)
    out, outside = tmp_path / "out", tmp_path / "outside"
    out.mkdir()
    outside.mkdir()
    (out / "knowledge").symlink_to(outside)
    with pytest.raises(SystemExit) as info:
        cli.main(["skills", "export", str(out), "--db", str(db), "--embedder", "hashing"])
    err = capsys.readouterr().err
    assert info.value.code == 3 and err.startswith("error: ") and "Traceback" not in err
    assert list(outside.iterdir()) == []


# -- corrections ------------------------------------------------------------------------------
@pytest.mark.parametrize("layout", ["skills", "memory-md"])
@pytest.mark.parametrize("correction", [{"wrong": True}, {"success": False},
                                        {"steps": ["go to kitchen", "microwave apple"]}])
def test_what_a_correction_took_back_is_never_exported(tmp_path: Path, layout: str,
                                                       correction: dict) -> None:
    mem = fresh(tmp_path)
    node = mem.learn(make_episode()).task.node
    assert node is not None
    fixed = mem.correct(node, **correction)
    out = tmp_path / "out"
    export_layout(mem, out, layout)
    texts = "\n".join(p.read_text() for p in out.rglob("*.md"))
    skills = [p for p in out.rglob("*.md")
              if "lessons" not in p.parts and "knowledge" not in p.parts and p.name != "MEMORY.md"]
    assert f"node: {node}\n" not in texts  # the corrected node has no file
    if "steps" in correction:  # the correction itself is the skill now
        assert len(skills) == 1 and "microwave apple" in skills[0].read_text()
        assert "take apple" not in skills[0].read_text()
    else:  # a retraction or a failure: no skill at all
        assert skills == []
        if "wrong" in correction:
            assert f"node: {fixed.node}\n" not in texts


# -- recall of an imported prose skill, with the real embedder --------------------------------
def test_a_prose_skill_is_found_by_a_short_request(tmp_path: Path) -> None:
    from deltamem.embed import make_embedder

    prose = """---
name: pdf-forms
description: >-
  Fill in PDF forms. Also extracts text and tables from documents, merges and splits files,
  rotates pages, adds watermarks, encrypts and decrypts them, turns scanned pages into
  searchable text with OCR, and creates new documents from HTML or Markdown with reportlab.
---

Read the fields with pypdf, then write each value into its field.
"""
    mem = DeltaMem(SQLiteStore(tmp_path / "real.db"), make_embedder("minilm"), TraceExtractor())
    import_skills(mem, skill_dir(tmp_path, prose))
    for request in ("fill in a PDF form", "fill out this pdf form"):
        recall = mem.recall(request)
        assert recall.task.matched, (request, recall.task.candidates[:1])
        assert "write each value into its field" in recall.context


def test_import_never_hangs_from_the_command_line(tmp_path: Path) -> None:
    folder = tmp_path / "skills" / "pipe"
    folder.mkdir(parents=True)
    os.mkfifo(folder / "SKILL.md")
    env = {**os.environ, "DELTAMEM_EMBEDDER": "hashing"}
    done = subprocess.run([sys.executable, "-m", "deltamem", "skills", "import",
                           str(tmp_path / "skills"), "--db", str(tmp_path / "c.db")],
                          env=env, capture_output=True, text=True, timeout=60, check=False)
    assert done.returncode == 3 and "not a regular file" in done.stderr
    assert "Traceback" not in done.stderr
