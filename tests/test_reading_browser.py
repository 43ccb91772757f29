"""Long threads and message pages in a real browser: folded diffs, the outline, copying a Message-ID."""

import pytest

from tests.functional import imported_and_served
from tests.test_reading import CORPUS, LIST, THREAD, h, message_url


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    with imported_and_served(tmp_path_factory.mktemp("reading-browser"), LIST, CORPUS) as url:
        yield url


@pytest.fixture
def page(chromium):
    context = chromium.new_context(viewport={"width": 1280, "height": 800})
    page = context.new_page()
    errors = []
    page.on("pageerror", lambda error: errors.append(str(error)))
    page.on("console", lambda message: errors.append(message.text) if message.type == "error" else None)
    yield page
    context.close()
    assert errors == []


def test_the_outline_is_on_the_first_screen_and_diffs_open_on_demand(server, page):
    page.goto(server + THREAD)
    outline = page.locator("details.outline")
    assert outline.is_visible()
    assert outline.bounding_box()["y"] < 800
    assert page.locator("nav.neighbours a.newer").first.bounding_box()["y"] < 800

    diff = page.locator(f"#m-{h('p1')} details.patch-fold")
    assert not diff.locator("pre.patch").is_visible()
    assert page.locator(f"#m-{h('p1')}").get_by_text("The flush must happen").is_visible()
    diff.locator("summary").click()
    # Loaded in place, not followed.
    diff.locator("pre.patch").wait_for()
    assert diff.locator("pre.patch span.add").first.inner_text() == "+\tnew_flush();"
    assert page.url == server + THREAD

    # A long quote too.
    quote = page.locator(f"#m-{h('long-review')} details.quote-fold")
    quote.locator("summary").click()
    quote.locator("blockquote.quote").wait_for()
    assert "quoted line 59" in quote.inner_text()

    # Expand all and collapse all act in place when the script runs.
    page.click("a.expand-all")
    assert page.url == server + THREAD
    assert page.locator(".messages details.patch-fold[open]").count() == 2
    page.locator(f"#m-{h('p2')} details.patch-fold pre.patch").wait_for()
    page.click("a.collapse-all")
    assert page.locator(".messages details.patch-fold[open]").count() == 0

    # The outline folds, and leads to the message it names.
    page.click(f"details.outline a[href='#m-{h('review')}']")
    # A jump within the page reaches the driver after the click returns.
    page.wait_for_url(f"**#m-{h('review')}", timeout=5000)
    outline.locator("summary").click()
    assert not outline.locator("ol").is_visible()


def test_the_message_id_is_copied_whole(server, chromium):
    context = chromium.new_context(permissions=["clipboard-read", "clipboard-write"])
    page = context.new_page()
    try:
        page.goto(server + message_url("cover"))
        page.click("button.copy")
        page.wait_for_function("document.querySelector('button.copy').textContent === 'Copied'")
        assert page.evaluate("navigator.clipboard.readText()") == "cover@example.org"
    finally:
        context.close()


def font_of(page, selector):
    return page.locator(selector).first.evaluate("node => getComputedStyle(node).fontFamily")


def test_prose_reflows_on_a_phone_and_fixed_width_is_remembered(server, chromium):
    context = chromium.new_context(viewport={"width": 360, "height": 740})
    page = context.new_page()
    try:
        page.goto(server + message_url("p1"))
        body = f"#m-{h('p1')} pre.text"
        assert "monospace" not in font_of(page, body)
        assert "monospace" in font_of(page, f"#m-{h('p1')} pre.patch")
        # The hard-wrapped paragraph reflows: its two source lines do not end where they did.
        join = page.locator(f"{body} span.j").first
        assert join.evaluate("node => getComputedStyle(node).whiteSpace") == "normal"

        page.click("button.fixed-width-switch")
        assert "monospace" in font_of(page, body)
        assert page.locator("button.fixed-width-switch").get_attribute("aria-pressed") == "true"
        page.goto(server + THREAD)
        assert "monospace" in font_of(page, f"#m-{h('p1')} pre.text")
        page.click("button.fixed-width-switch")
        assert "monospace" not in font_of(page, f"#m-{h('p1')} pre.text")
    finally:
        context.close()


def test_the_html_view_loads_our_stylesheet_and_nothing_remote(server, page):
    requested = []
    page.on("request", lambda request: requested.append(request.url))
    page.goto(server + message_url("letter"))
    page.click("p.html-original a")
    assert page.locator("div.html-mail a").get_attribute("href") == "https://example.org/notes"
    assert page.locator("h1").evaluate("node => getComputedStyle(node).fontSize") == "24px"  # styled
    assert [url for url in requested if not url.startswith(server)] == []
