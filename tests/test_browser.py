"""A real browser (Debian's Chromium, driven by Playwright) on a running server."""

from pathlib import Path

import pytest

from tests.functional import imported_and_served
from tests.test_pages import CORPUS, LIST, h

ARTIFACTS = Path(__file__).resolve().parent.parent / "test-artifacts"



@pytest.fixture(scope="module")
def server(tmp_path_factory):
    with imported_and_served(tmp_path_factory.mktemp("browser"), LIST, CORPUS) as url:
        yield url


@pytest.fixture(scope="module")
def page(chromium):
    page = chromium.new_page()
    yield page
    page.close()


def test_thread_page_in_a_real_browser(server, page):
    errors = []
    page.on("console", lambda message: errors.append(message.text) if message.type == "error" else None)
    page.on("pageerror", lambda error: errors.append(str(error)))
    page.goto(f"{server}/list/{LIST}/thread/{h(0)}/")
    assert page.locator("h1").inner_text() == "Hello <script>alert('subject')</script>"
    articles = page.locator("article.message")
    assert articles.count() == 4

    page.keyboard.press("j")
    assert page.evaluate("document.activeElement.id") == f"m-{h(0)}"
    page.keyboard.press("j")
    page.keyboard.press("j")
    assert page.evaluate("document.activeElement.id") == f"m-{h(2)}"
    page.keyboard.press("k")
    assert page.evaluate("document.activeElement.id") == f"m-{h(1)}"
    # The relative-time hint was added by the script.
    assert "ago" in page.locator("article.message time").first.get_attribute("title")

    ARTIFACTS.mkdir(exist_ok=True)
    page.screenshot(path=str(ARTIFACTS / "thread.png"), full_page=True)
    assert errors == []


def test_reading_order_choice_is_remembered(server, page):
    page.goto(f"{server}/list/{LIST}/thread/{h(0)}/")
    page.click("nav.view-toggle a[data-view=flat]")
    page.wait_for_url("**view=flat**")
    page.goto(f"{server}/list/{LIST}/thread/{h(0)}/")
    page.wait_for_url("**view=flat**")
    assert page.locator("nav.view-toggle strong").inner_text() == "By date"
    page.click("nav.view-toggle a[data-view=tree]")
    page.wait_for_load_state()
    assert "view=flat" not in page.url
