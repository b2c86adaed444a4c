"""The server's /docs works offline, and its OpenAPI schema is typed with the real error body."""

from __future__ import annotations

import re
import shutil

import httpx
import pytest
from server_live import LiveServer

pytestmark = pytest.mark.server

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
         "--disable-component-update", "--no-first-run"]


def test_docs_page_uses_only_its_own_assets(live: LiveServer) -> None:
    page = httpx.get(f"{live.url}/docs")
    assert page.status_code == 200
    urls = re.findall(r'(?:src|href)="([^"]+)"', page.text) + re.findall(
        r"url: '([^']+)'", page.text)
    assert urls and all(u.startswith("/") for u in urls), urls
    assert "cdn" not in page.text.lower()
    for url in urls:
        asset = httpx.get(f"{live.url}{url}")
        assert asset.status_code == 200 and asset.content, url


def test_every_route_is_typed_and_errors_have_the_real_body(live: LiveServer) -> None:
    spec = httpx.get(f"{live.url}/openapi.json").json()
    schemas = spec["components"]["schemas"]
    assert "HTTPValidationError" not in schemas  # FastAPI's default 422 shape is not ours
    assert set(schemas["ErrorBody"]["properties"]) == {"error"}
    for path, operations in spec["paths"].items():
        for method, op in operations.items():
            where = f"{method.upper()} {path}"
            ok = op["responses"]["200"]["content"]
            schema = next(iter(ok.values()))["schema"]
            assert "$ref" in schema or "anyOf" in schema or schema == {"type": "string"}, where
            for status in ("401", "404", "422", "500"):
                ref = op["responses"][status]["content"]["application/json"]["schema"]["$ref"]
                assert ref == "#/components/schemas/ErrorBody", where
    learn = spec["paths"]["/v1/spaces/{space}/learn"]["post"]
    body = learn["requestBody"]["content"]["application/json"]["schema"]["anyOf"]
    assert {b["$ref"].rsplit("/", 1)[1] for b in body} == {"EpisodeIn", "EpisodesIn"}
    assert "steps" in schemas["EpisodeIn"]["properties"]


def test_chromium_renders_the_docs_without_network(live: LiveServer) -> None:
    """Headless Chromium, every request off loopback refused: Swagger UI lists the routes."""
    assert CHROMIUM is not None, "needs Debian's chromium: apt-get install chromium"
    from playwright.sync_api import Route, sync_playwright

    refused: list[str] = []

    def only_loopback(route: Route) -> None:
        if route.request.url.startswith(live.url):
            route.continue_()
        else:
            refused.append(route.request.url)
            route.abort()

    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=CHROMIUM, args=FLAGS, headless=True)
        try:
            page = browser.new_page()
            page.route("**/*", only_loopback)
            page.goto(f"{live.url}/docs")
            page.wait_for_selector(".opblock", timeout=30_000)
            text = page.locator("#swagger-ui").inner_text()
            assert "/v1/spaces/{space}/recall" in text and "/v1/spaces/{space}/nodes" in text
        finally:
            browser.close()
    assert refused == []
