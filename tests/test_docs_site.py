"""The documentation site (mkdocs.yml, MkDocs Material over docs/) builds in strict mode: a
broken link, a missing anchor or a page left out of the nav fails the build."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def build(config: Path, site: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "--config-file",
                           str(config), "--site-dir", str(site)], capture_output=True, text=True,
                          timeout=300, env={**os.environ, "NO_MKDOCS_2_WARNING": "1"}, cwd=ROOT)


def test_the_docs_site_builds_strictly(tmp_path: Path) -> None:
    proc = build(ROOT / "mkdocs.yml", tmp_path / "site")
    assert proc.returncode == 0, proc.stderr[-4000:]
    pages = {p.parent.name for p in (tmp_path / "site").rglob("index.html")}
    for doc in (ROOT / "docs").glob("*.md"):
        assert doc.stem == "index" or doc.stem in pages, f"{doc.name} is not in the site"


def test_a_broken_link_fails_the_build(tmp_path: Path) -> None:
    """The check is real: the same config over docs with one bad link does not build."""
    docs = tmp_path / "docs"
    docs.mkdir()
    for doc in (ROOT / "docs").glob("*.md"):
        (docs / doc.name).write_text(doc.read_text())
    (docs / "img").symlink_to(ROOT / "docs" / "img")
    (docs / "index.md").write_text((docs / "index.md").read_text()
                                   + "\n[gone](no-such-page.md)\n")
    config = tmp_path / "mkdocs.yml"
    config.write_text((ROOT / "mkdocs.yml").read_text().replace("docs_dir: docs",
                                                                f"docs_dir: {docs}"))
    proc = build(config, tmp_path / "site")
    assert proc.returncode != 0 and "no-such-page.md" in proc.stderr
