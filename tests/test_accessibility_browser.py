"""Every kind of page at desktop and phone width in Chromium: axe-core finds nothing, nothing scrolls sideways.

Screenshots of each page at each width are kept in test-artifacts/ (not in git).
"""

from pathlib import Path

import pytest

from tests.functional import imported_and_served
from tests.test_reading import CORPUS, LIST, THREAD, message_url

ARTIFACTS = Path(__file__).resolve().parent.parent / "test-artifacts"

WIDTHS = {"desktop": (1280, 800), "phone": (360, 740)}

PAGES = {
    "index": "/",
    "overview": f"/list/{LIST}/",
    "month": f"/list/{LIST}/2020/4/",
    "thread": THREAD,
    "message": message_url("p1"),
    "search": "/search?q=flush",
    "profile": None,  # found from a message page
    "html-view": message_url("letter") + "html",
}


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    with imported_and_served(tmp_path_factory.mktemp("accessibility"), LIST, CORPUS) as url:
        yield url


@pytest.fixture(scope="module")
def axe():
    sync_axe = pytest.importorskip("axe_playwright_python.sync_playwright")
    return sync_axe.Axe()


def page_url(server, page, name):
    if PAGES[name] is not None:
        return server + PAGES[name]
    page.goto(server + message_url("review"))
    return server + page.locator("article .sender a").first.get_attribute("href").replace(server, "")


@pytest.mark.parametrize("width", list(WIDTHS))
@pytest.mark.parametrize("name", list(PAGES))
def test_no_accessibility_violations_and_no_sideways_scrolling(server, chromium, axe, name, width):
    viewport_width, viewport_height = WIDTHS[width]
    context = chromium.new_context(viewport={"width": viewport_width, "height": viewport_height})
    page = context.new_page()
    try:
        url = page_url(server, page, name)
        page.goto(url)
        ARTIFACTS.mkdir(exist_ok=True)
        # Messages off the screen are laid out only when scrolled to; the
        # picture of the whole page shows them all.
        page.evaluate("document.querySelectorAll('article.message')"
                      ".forEach(node => { node.style.contentVisibility = 'visible'; })")
        page.screenshot(path=str(ARTIFACTS / f"{name}-{width}.png"), full_page=True)

        results = axe.run(page)
        violations = [(v["id"], v["impact"], [n["target"] for n in v["nodes"]][:3])
                      for v in results.response["violations"]]
        assert violations == [], f"{url}: {violations}"

        # Only a focusable code block may be wider than the screen (it scrolls itself).
        too_wide = page.evaluate("""() => {
            const width = document.documentElement.clientWidth;
            const wide = [];
            for (const node of document.querySelectorAll('body *')) {
                if (node.closest('pre[tabindex]')) { continue; }
                const box = node.getBoundingClientRect();
                if (box.width && box.right > width + 1) { wide.push(node.tagName + '.' + node.className); }
            }
            return [document.documentElement.scrollWidth > width, wide.slice(0, 5)];
        }""")
        assert too_wide == [False, []], f"{url} at {width}: {too_wide}"
    finally:
        context.close()


def test_a_skip_link_leads_to_the_content_and_the_keys_are_explained(server, chromium):
    context = chromium.new_context()
    page = context.new_page()
    try:
        page.goto(server + THREAD)
        page.keyboard.press("Tab")
        skip = page.locator("a.skip-link")
        assert page.evaluate("document.activeElement.className") == "skip-link"
        assert skip.is_visible()
        page.keyboard.press("Enter")
        # A jump within the page reaches the driver after the key press returns.
        page.wait_for_url("**#content", timeout=5000)
        assert "j" in page.locator(".keys").inner_text() and "k" in page.locator(".keys").inner_text()
    finally:
        context.close()
