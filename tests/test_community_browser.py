"""Voting, tagging and read marks in a real browser (Debian's Chromium, driven by Playwright)."""

import os
from pathlib import Path

import pytest

from tests.functional import free_port, kittypyr, mbox_bytes, served, write_config
from tests.test_browser import ARTIFACTS
from tests.test_pages import CORPUS, LIST, h

sync_api = pytest.importorskip("playwright.sync_api")
expect = sync_api.expect

ROOT = Path(__file__).resolve().parent.parent
VOTER = ("carol@example.org", "carols-password")
THREAD = f"/list/{LIST}/thread/{h(0)}/"


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    folder = tmp_path_factory.mktemp("community-browser")
    port = free_port()
    config = write_config(folder, port=port, includes="tests.fake_accounts", extra=(
        f"kittypyr.secret = browser-test-secret\ntests.fake_accounts.users = {VOTER[0]}:{VOTER[1]}"))
    mbox = folder / "fixture.mbox"
    mbox.write_bytes(mbox_bytes(CORPUS))
    # Both load the test-only package tests.fake_accounts.
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    kittypyr("import", config, LIST, mbox, check=True, env={"PYTHONPATH": str(ROOT)})
    with served(config, port, env=env) as url:
        yield url


def watched(context):
    """A new page of ``context`` and the list its script errors and CSP refusals go to."""
    page = context.new_page()
    errors = []
    page.on("console", lambda message: errors.append(message.text) if message.type == "error" else None)
    page.on("pageerror", lambda error: errors.append(str(error)))
    return page, errors


def test_voting_and_tagging_when_logged_in(server, chromium):
    context = chromium.new_context()
    page, errors = watched(context)
    page.goto(f"{server}/login")
    page.fill("#login-form input[name=address]", VOTER[0])
    page.fill("#login-form input[name=password]", VOTER[1])
    page.click("#login-form button[type=submit]")
    page.wait_for_url(f"{server}/")
    assert page.locator("a.my-page").is_visible()

    page.goto(server + THREAD)
    article = page.locator(f"article#m-{h(1)}")
    score = article.locator("footer.votes .score")
    up = article.locator("button.vote-up")
    assert score.inner_text() == "0"
    # A mark on the window survives only if the page is not reloaded. (Waiting
    # uses Playwright's expect: the page's CSP forbids evaluating strings.)
    page.evaluate("window.notReloaded = true")
    up.click()
    expect(score).to_have_text("1")
    assert up.get_attribute("aria-pressed") == "true"
    assert page.locator("#thread-score").inner_text() == "1"
    assert article.locator(".reputation").inner_text() == "+1"
    assert page.evaluate("window.notReloaded") is True

    page.reload()
    assert page.locator(f"#m-{h(1)} footer.votes .score").inner_text() == "1"
    assert page.locator(f"#m-{h(1)} button.vote-up").get_attribute("aria-pressed") == "true"
    page.locator(f"#m-{h(1)} button.vote-down").click()
    expect(page.locator(f"#m-{h(1)} footer.votes .score")).to_have_text("-1")
    page.locator(f"#m-{h(1)} button.vote-down").click()  # pressed again: taken back
    expect(page.locator(f"#m-{h(1)} footer.votes .score")).to_have_text("0")
    assert page.locator(f"#m-{h(1)} button.vote-down").get_attribute("aria-pressed") == "false"
    page.locator(f"#m-{h(2)} button.vote-up").click()
    expect(page.locator("#thread-score")).to_have_text("1")

    page.fill("form.add-tag input[name=tag]", "Cache Bugs")
    page.click("form.add-tag button[type=submit]")
    page.wait_for_load_state()
    tag = page.locator("ul.tags a.tag")
    assert tag.inner_text() == "cache-bugs"
    ARTIFACTS.mkdir(exist_ok=True)
    page.screenshot(path=str(ARTIFACTS / "community-thread.png"), full_page=True)
    tag.click()
    page.wait_for_url("**/tag/cache-bugs/")
    assert page.locator("h1").inner_text() == "Threads tagged “cache-bugs”"
    assert page.locator("ol.threads li a").first.inner_text() == "Hello <script>alert('subject')</script>"

    page.fill("header.site form.search input[name=q]", "tag:cache-bugs")
    page.press("header.site form.search input[name=q]", "Enter")
    page.wait_for_url("**/search?**")
    assert page.locator("p.count").inner_text().startswith("4 messages found")

    page.goto(f"{server}/list/{LIST}/threads?sort=popularity")
    first = page.locator("ol.threads li").first
    shown = first.inner_text()
    assert "Hello" in first.locator("a").first.inner_text() and "+1 vote" in shown and "+1 votes" not in shown
    page.goto(f"{server}/users/me/")
    assert page.locator("section.my-votes li").count() == 1
    assert "Re: Topic 1" in page.locator("section.my-votes li").inner_text()
    assert errors == []
    context.close()


def test_read_marks_of_a_reader_who_is_not_logged_in(server, chromium):
    context = chromium.new_context()
    page, errors = watched(context)
    page.goto(f"{server}/list/{LIST}/")
    item = page.locator(f"section.recent li:has(a[href$='{h(0)}/'])")
    assert item.locator(".unread-mark").count() == 0  # the first visit: all read
    stored = page.evaluate("JSON.parse(localStorage.getItem('kittypyr-read'))")
    assert list(stored["since"]) == [LIST]

    # As if the reader had last read the thread before its last three messages came.
    page.goto(server + THREAD)
    first_date = page.locator(f"#m-{h(0)} time").get_attribute("datetime")
    first_date = page.evaluate(f"Date.parse('{first_date}')")
    page.evaluate(f"""(() => {{
        const read = JSON.parse(localStorage.getItem('kittypyr-read'));
        read.seen['{LIST}/{h(0)}'] = {first_date} / 1000;
        localStorage.setItem('kittypyr-read', JSON.stringify(read));
    }})()""")
    page.goto(f"{server}/list/{LIST}/")
    assert item.locator(".unread-mark").text_content() == "unread"
    page.goto(server + THREAD)
    new = page.locator("article.message.is-new")
    assert new.count() == 3
    assert page.locator("a.first-unread").get_attribute("href") == f"#m-{h(1)}"
    page.click("a.first-unread")
    assert page.evaluate("location.hash") == f"#m-{h(1)}"
    page.goto(f"{server}/list/{LIST}/")
    assert item.locator(".unread-mark").count() == 0
    page.goto(server + THREAD)
    assert page.locator("article.message.is-new").count() == 0
    # Nothing of it went to the server.
    assert context.cookies() == []
    assert errors == []
    context.close()
