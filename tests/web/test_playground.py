"""The playground at `/web`: its routes, then the page itself in a real headless Chromium.

The browser test drives Debian's `chromium` (`scripts/setup_browser.sh` installs it) through
Playwright, against `openenv serve environments/echo --web` in a subprocess. It skips only when
no chromium is installed and `OPENENV_TEST_BROWSER` is not `1` (CI sets it up, so there it runs).
It writes its screenshot to `docs/img/playground.png` when `OPENENV_WRITE_SCREENSHOT=1` or when
that file is missing, else under the test's temporary folder.
"""

from __future__ import annotations

import os
import shutil
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
import yaml
from fastapi.testclient import TestClient
from fixtures.servers import serve

from openenv_sdk import ServerConfig, create_app
from openenv_sdk.loader import load_environment
from openenv_sdk.providers import LocalProcessProvider

ROOT = Path(__file__).resolve().parents[2]
ECHO_DIR = ROOT / "environments" / "echo"
SCREENSHOT = ROOT / "docs" / "img" / "playground.png"
BROWSER_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]


@pytest.fixture(scope="module")
def echo_cls() -> Any:
    return load_environment(ECHO_DIR).env_cls


# --- routes ---------------------------------------------------------------------------------------


def test_the_playground_is_off_by_default(echo_cls: Any) -> None:
    with TestClient(create_app(echo_cls)) as client:
        assert client.get("/web/").status_code == 404


def test_the_playground_serves_its_page_and_assets_with_a_self_only_policy(echo_cls: Any) -> None:
    with TestClient(create_app(echo_cls, config=ServerConfig(web=True))) as client:
        redirect = client.get("/web", follow_redirects=False)
        assert (redirect.status_code, redirect.headers["location"]) == (307, "web/")
        for path, kind in [("/web/", "text/html"), ("/web/app.js", "text/javascript"), ("/web/style.css", "text/css")]:
            response = client.get(path)
            assert response.status_code == 200, path
            assert response.headers["content-type"].startswith(kind)
            assert "default-src 'self'" in response.headers["content-security-policy"]
        assert client.get("/web/secret.py").status_code == 404
        assert client.get("/web/../openenv.yaml").status_code == 404
        # The page is not part of the API: the OpenAPI document is the same with it on or off.
        assert not [p for p in client.get("/openapi.json").json()["paths"] if p.startswith("/web")]


def test_the_page_loads_nothing_from_elsewhere() -> None:
    web = ROOT / "openenv_sdk" / "server" / "web"
    for asset in web.iterdir():
        text = asset.read_text(encoding="utf-8")
        assert "http://" not in text and "https://" not in text and "//cdn" not in text, asset.name


def test_the_page_ships_in_the_wheel() -> None:
    """The page's files are package data: a wheel (and so an image) without them cannot serve /web."""
    import fnmatch
    import tomllib

    patterns = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["tool"]["setuptools"][
        "package-data"
    ]["openenv_sdk"]
    for asset in ("index.html", "app.js", "style.css"):
        assert any(fnmatch.fnmatch(f"server/web/{asset}", p) for p in patterns), (asset, patterns)


def test_the_manifest_turns_the_playground_on(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from openenv_sdk.cli import serve as serve_cli

    folder = tmp_path / "echo"
    shutil.copytree(ECHO_DIR, folder)
    manifest = folder / "openenv.yaml"
    document = yaml.safe_load(manifest.read_text(encoding="utf-8"))
    document.setdefault("server", {})["web"] = True
    manifest.write_text(yaml.safe_dump(document), encoding="utf-8")
    monkeypatch.setenv(serve_cli.ENV_DIR_VAR, str(folder))
    monkeypatch.setenv(serve_cli.OVERRIDES_VAR, "{}")
    with TestClient(serve_cli.build_app_from_env()) as client:
        assert client.get("/web/").status_code == 200
    monkeypatch.setenv(serve_cli.OVERRIDES_VAR, '{"web": false}')  # openenv serve --no-web
    with TestClient(serve_cli.build_app_from_env()) as client:
        assert client.get("/web/").status_code == 404


def test_the_playground_is_served_by_a_real_server(echo_cls: Any) -> None:
    with serve(create_app(echo_cls, config=ServerConfig(web=True))) as url:
        response = httpx.get(f"{url}/web", follow_redirects=True)
    assert response.status_code == 200 and str(response.url).endswith("/web/")
    assert '<script src="app.js" defer></script>' in response.text


# --- the page in a real browser -------------------------------------------------------------------


def _chromium() -> str | None:
    for name in ("chromium", "chromium-browser"):
        if found := shutil.which(name):
            return found
    return None


@pytest.fixture(scope="module")
def chromium() -> str:
    found = _chromium()
    if found is None:
        if os.environ.get("OPENENV_TEST_BROWSER") == "1":
            pytest.fail("OPENENV_TEST_BROWSER=1 but no chromium is installed: run bash scripts/setup_browser.sh")
        pytest.skip("no chromium installed (bash scripts/setup_browser.sh installs it; OPENENV_TEST_BROWSER=1 requires it)")
    return found


@pytest.fixture(scope="module")
def web_server() -> Iterator[str]:
    """`openenv serve environments/echo --web` in a subprocess (the CLI flag, end to end), as a
    person runs it: without an orchestrator token (a browser cannot send one)."""
    with LocalProcessProvider(
        ECHO_DIR, extra_args=("--web", "--log-level", "warning"), orchestrator_token=False
    ) as provider:
        assert provider.base_url is not None
        yield provider.base_url


@pytest.mark.skipif(sys.platform == "win32", reason="Debian's chromium")
@pytest.mark.timeout(180)
def test_a_person_plays_an_episode_in_the_browser(chromium: str, web_server: str, tmp_path: Path) -> None:
    from playwright.sync_api import expect, sync_playwright

    problems: list[str] = []
    requests: list[tuple[str, str]] = []
    with sync_playwright() as playwright:
        context = playwright.chromium.launch_persistent_context(
            str(tmp_path / "profile"),  # a fresh --user-data-dir
            executable_path=chromium,
            headless=True,
            args=BROWSER_ARGS,
            viewport={"width": 1280, "height": 900},
        )
        try:
            page = context.new_page()
            page.set_default_timeout(20_000)
            page.on("console", lambda m: problems.append(f"console {m.type}: {m.text}") if m.type == "error" else None)
            page.on("pageerror", lambda e: problems.append(f"page error: {e}"))
            page.on("request", lambda r: requests.append((r.method, r.url)))

            page.goto(f"{web_server}/web")
            expect(page.locator("body")).to_have_attribute("data-ready", "true")
            expect(page.locator("#env-name")).to_have_text("echo")
            expect(page.locator("#env-description")).to_contain_text("Echoes every message back")
            expect(page.locator("#load-error")).to_be_hidden()
            # The tool's form is made from its JSON Schema: a required string `message`.
            tool_form = page.locator('form[data-tool="echo"]')
            expect(tool_form.locator('label[for="tool-echo-message"]')).to_contain_text("message*")
            expect(tool_form.locator('label[for="tool-echo-message"]')).to_contain_text("the text to echo back")

            # Reset: a session, its MCP URL, the first observation.
            page.click("#reset-button")
            expect(page.locator("#reset-output")).to_contain_text("Episode started.")
            expect(page.locator("#reset-output")).to_contain_text("Echo environment ready!")
            expect(page.locator("#mcp-url")).to_contain_text("/mcp?session=")

            # The agent's path: the echo tool through its form, over MCP.
            page.fill("#tool-echo-message", "hello from the browser")
            tool_form.get_by_role("button", name="Call echo").click()
            expect(page.locator("#tool-echo-output .result.ok")).to_have_text("hello from the browser")

            # The orchestrator's step through the action form.
            page.fill("#action-message", "hi")
            page.click("#step-button")
            expect(page.locator("#step-output")).to_contain_text("reward 0.2")
            expect(page.locator("#step-output")).to_contain_text('"echoed_message": "hi"')

            # A typed error: an invalid action, shown plainly; the session goes on.
            page.check("#action-raw-toggle")
            page.fill("#action-raw", '{"mesage": "typo"}')
            page.click("#step-button")
            error = page.locator("#step-output .error")
            expect(error.locator(".code")).to_have_text("VALIDATION_ERROR")
            expect(error).to_contain_text("HTTP 422")
            expect(error).to_contain_text("message: Field required")
            expect(error.locator(".field-errors")).to_contain_text("mesage")

            # The transcript: reset, the agent's tool call, the step, the refused step, in order.
            entries = page.locator("#transcript-list > li")
            expect(entries).to_have_count(4)
            expect(entries.nth(0)).to_contain_text("reset")
            expect(entries.nth(1)).to_contain_text('echo({"message":"hello from the browser"})')
            expect(entries.nth(2)).to_contain_text('{"message":"hi"}')
            expect(entries.nth(3)).to_contain_text("VALIDATION_ERROR")
            expect(page.locator("#state-output")).to_contain_text('"hello from the browser"')
            expect(page.locator("#state-output")).to_contain_text('"step_count": 1')

            shot = SCREENSHOT if os.environ.get("OPENENV_WRITE_SCREENSHOT") == "1" or not SCREENSHOT.exists() else (
                tmp_path / "playground.png"
            )
            shot.parent.mkdir(parents=True, exist_ok=True)
            page.screenshot(path=str(shot), full_page=True)
        finally:
            context.close()

    # No script error and no blocked load (a CSP violation is a console error); Chromium also logs
    # the refused step's HTTP 422 as one, which is the typed error the page was asked to show.
    expected = "Failed to load resource: the server responded with a status of 422"
    assert [p for p in problems if expected not in p] == [], problems
    assert all(url.startswith(web_server) for _, url in requests), [u for _, u in requests if not u.startswith(web_server)]
    # It used the public API, and the agent's tool call went over MCP with the session's token.
    paths = {(method, url.removeprefix(web_server).split("?")[0]) for method, url in requests}
    assert {("GET", "/metadata"), ("GET", "/schema"), ("POST", "/sessions"), ("POST", "/reset"),
            ("POST", "/step"), ("GET", "/state"), ("POST", "/call/transcript"), ("POST", "/mcp")} <= paths
    assert any(url.startswith(f"{web_server}/mcp?session=") for _, url in requests)
