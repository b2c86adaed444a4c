"""The tree viewer: page content and escaping, and a real headless Chromium rendering it."""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import pytest

from deltamem.core.model import experience_to_dict
from deltamem.engine.memory import DeltaMem
from deltamem.faces.server.viewer import embed_json, render_viewer
from helpers import make_episode

ARTIFACTS = Path(__file__).resolve().parents[2] / "artifacts"
CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
         "--disable-component-update", "--no-first-run"]
LONGER = ("go to kitchen", "open microwave", "take apple", "heat apple")


def grow(mem: DeltaMem) -> None:
    """A memory with a root, a delta, a failure lesson and a consolidated root.

    The lesson is a root: stored under the skill it would be a whole-experience replacement,
    which costs more than a root (cost-aware placement).
    """
    mem.learn(make_episode())
    for _ in range(4):  # consolidated: the root -> delta chain retires into a new root
        mem.learn(make_episode(actions=LONGER))
    mem.learn(make_episode(actions=(*LONGER, "eat apple")))  # a delta of that root
    mem.learn(make_episode(actions=("look around",), success=False))
    mem.learn(make_episode(task="cool the milk", actions=("go to fridge", "cool milk"),
                           env="a pantry with shelves"))


def page_data(page: str) -> dict:
    match = re.search(r'<script type="application/json" id="deltamem-data">(.*?)</script>',
                      page, re.S)
    assert match is not None
    return json.loads(match.group(1))


def test_page_embeds_every_node_with_its_composition(mem: DeltaMem) -> None:
    """Every node is in the page's JSON with its composed experience and kind."""
    grow(mem)
    data = page_data(render_viewer(mem))
    assert len(data["nodes"]) == len(list(mem.nodes()))
    for row in data["nodes"]:
        assert row["experience"] == json.loads(json.dumps(
            experience_to_dict(mem.experience(row["id"]))))
        assert (row["kind"], row["outcome"]) == (mem.get(row["id"]).kind.value,
                                                 mem.get(row["id"]).outcome.value)
    kinds = {(r["kind"], r["outcome"], r["stats"]["consolidated_root"]) for r in data["nodes"]}
    assert ("root", "failure", False) in kinds and ("root", "success", True) in kinds


def test_hostile_text_cannot_break_out_of_the_data_element(mem: DeltaMem) -> None:
    """A task containing </script> and <!-- stays data: no raw '<' inside the JSON."""
    evil = "</script><script>alert(1)</script><!-- & more"
    mem.learn(make_episode(task=evil))
    page = render_viewer(mem)
    assert "alert(1)</script>" not in page
    assert page_data(page)["nodes"][0]["key"] == evil
    assert "<" not in embed_json({"x": "</"})


def test_page_is_self_contained(mem: DeltaMem) -> None:
    """No external scripts, styles or fetches: the page works offline."""
    grow(mem)
    page = render_viewer(mem)
    assert not re.search(r'(src|href)="https?:', page)
    assert "fetch(" not in page and "@import" not in page


@pytest.mark.browser
def test_chromium_renders_trees_and_click_shows_detail(mem: DeltaMem, tmp_path: Path) -> None:
    """Headless Chromium: nodes render, a click fills the detail pane, search filters."""
    # Never skipped: `make setup` installs Debian's chromium; without it this test must fail.
    assert CHROMIUM is not None, "needs Debian's chromium: apt-get install chromium"
    from playwright.sync_api import sync_playwright

    grow(mem)
    html_file = tmp_path / "tree.html"
    html_file.write_text(render_viewer(mem), encoding="utf-8")
    ARTIFACTS.mkdir(exist_ok=True)
    errors: list[str] = []
    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=CHROMIUM, args=FLAGS, headless=True)
        try:
            page = browser.new_page(viewport={"width": 1400, "height": 820})
            page.on("pageerror", lambda exc: errors.append(str(exc)))
            page.goto(html_file.as_uri())
            rows = page.locator(".row")
            assert rows.count() == len(list(mem.nodes()))
            assert page.locator("#task-tree .k-fail").count() == 1
            assert page.locator("#task-tree .k-cons").count() == 1
            assert page.locator("#env-tree .k-root").count() >= 1
            page.locator("#task-tree .k-delta .label").first.click()
            detail = page.locator("#detail .body")
            assert "open microwave" in detail.locator("pre.experience").inner_text()
            assert "Insert into steps" in detail.locator("pre.patch").inner_text()
            assert "chain:" in detail.inner_text()
            page.screenshot(path=str(ARTIFACTS / "viewer.png"), full_page=True)
            page.fill("#search", "milk")
            visible = [r for r in page.locator("li:not(.hidden) > .row .label").all_inner_texts()]
            assert visible and all("milk" in v or "pantry" in v for v in visible)
        finally:
            browser.close()
    assert errors == []


def test_a_parent_cycle_already_stored_is_reported_not_looped(mem: DeltaMem, tmp_path) -> None:
    """Damage already in the database (a delta its own parent) makes the viewer and
    `deltamem view` stop with a StoreError naming a node (it used to loop forever, growing)."""
    import sqlite3

    from deltamem.errors import StoreError
    from deltamem.faces.cli import app as cli

    grow(mem)
    deltas = [n for n in mem.nodes() if n.kind.value == "delta"]
    a = deltas[0]
    db = sqlite3.connect(mem.store.path, isolation_level=None)
    db.execute("UPDATE nodes SET parent_id = id WHERE id = ?", (a.id,))
    db.close()
    with pytest.raises(StoreError, match="parent cycle.*deltamem check"):
        render_viewer(mem)
    with pytest.raises(SystemExit) as done:
        cli.main(["view", "--db", mem.store.path, "--embedder", "hashing",
                  "--out", str(tmp_path / "t.html")])
    assert done.value.code == 5 and not (tmp_path / "t.html").exists()
