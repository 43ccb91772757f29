"""Deleting selected messages in a real browser: the tick boxes under each
message belong to the form below the thread (the HTML ``form`` attribute),
which only a browser shows working. The server runs in this process, so that
FakeMailman answers its logins."""

import pytest
from webtest.http import StopableWSGIServer

from tests.accounts import PASSWORD, FakeMailman
from tests.test_administration import ADMIN, DEV, THREAD, h, message_url, site  # noqa: F401 (fixture)
from tests.test_browser import ARTIFACTS, page  # noqa: F401 (fixture)


@pytest.fixture
def server(site, monkeypatch):  # noqa: F811 (the imported fixture)
    fake = FakeMailman(monkeypatch)
    fake.add_user(ADMIN, "Ada Admin")
    running = StopableWSGIServer.create(site)
    try:
        yield running.application_url.rstrip("/")
    finally:
        running.shutdown()


def test_an_administrator_deletes_two_ticked_messages(server, page):  # noqa: F811 (the imported fixture)
    errors = []
    page.on("console", lambda message: errors.append(message.text) if message.type == "error" else None)
    page.on("pageerror", lambda error: errors.append(str(error)))
    page.goto(f"{server}/login?came_from={THREAD}")
    page.fill("#login-form input[name=address]", ADMIN)
    page.fill("#login-form input[name=password]", PASSWORD)
    page.click("#login-form button[type=submit]")
    page.wait_for_url(f"**{THREAD}")

    page.check(f"#m-{h(2)} .moderation input[type=checkbox]")
    page.check(f"#m-{h(4)} .moderation input[type=checkbox]")
    ARTIFACTS.mkdir(exist_ok=True)
    page.screenshot(path=str(ARTIFACTS / "thread-administration.png"), full_page=True)
    page.click("form#select-messages button[type=submit]")
    page.wait_for_url("**/delete-selected?**")
    assert page.locator("h1").inner_text() == "Delete the selected messages?"
    assert page.locator("ol.affected li").count() == 2
    page.fill("#moderate-form textarea[name=reason]", "off topic")
    page.screenshot(path=str(ARTIFACTS / "confirm-deletion.png"), full_page=True)
    page.click("#moderate-form button[type=submit]")
    page.wait_for_url(f"**{THREAD}")
    assert page.locator(".flash").inner_text() == "2 messages deleted."
    assert page.locator("article.message").count() == 3
    assert page.locator(f"#m-{h(2)}").count() == 0 and page.locator(f"#m-{h(4)}").count() == 0
    assert errors == []  # nothing the Content-Security-Policy refused, no script error

    answer = page.goto(f"{server}{message_url(2)}")
    assert answer.status == 410
    assert page.locator("h1").inner_text() == "This message was deleted"
    page.goto(f"{server}/list/{DEV}/admin/log")
    assert "off topic" in page.locator("table.audit td.reason").first.inner_text()
