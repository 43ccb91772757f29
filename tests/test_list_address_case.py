"""A list's address typed in capitals leads to its one (lower-case) URL, the rest of the path kept."""

import pytest
import transaction
from pyramid.scripting import prepare
from webtest import TestApp

from kittypyr.archiving import archive_message, ensure_mailing_list
from kittypyr.msgid import message_id_hash
from tests.mailbuilder import make_message
from tests.test_app import make_app

LIST = "dev@lists.example.org"
PRIVATE = "board@lists.example.org"
SHOUTED = "DEV@Lists.EXAMPLE.org"
HASH = message_id_hash("<case@example.org>")


@pytest.fixture(scope="module")
def browser(tmp_path_factory):
    app = make_app(tmp_path_factory.mktemp("case"))
    with prepare(registry=app.registry) as env:
        archive_message(ensure_mailing_list(env["root"], LIST),
                        make_message(message_id="<case@example.org>", subject="Mixed case"))
        board = ensure_mailing_list(env["root"], PRIVATE)
        board.archive_policy = "private"
        archive_message(board, make_message(message_id="<secret@example.org>", subject="Secret plans"))
        transaction.commit()
    yield TestApp(app)
    app.registry._zodb_databases[""].close()


@pytest.mark.parametrize(("asked", "canonical"), [
    (f"/list/{SHOUTED}/", f"/list/{LIST}/"),
    (f"/list/{SHOUTED}", f"/list/{LIST}/"),
    (f"/list/{SHOUTED}/thread/{HASH}/?view=flat", f"/list/{LIST}/thread/{HASH}/?view=flat"),
    (f"/list/{SHOUTED}/message/{HASH}/raw", f"/list/{LIST}/message/{HASH}/raw"),
    (f"/list/{SHOUTED}/2020/1/?page=2", f"/list/{LIST}/2020/1/?page=2"),
    (f"/api/list/{SHOUTED}/", f"/api/list/{LIST}/"),
    (f"/api/list/{SHOUTED}/threads/?page=1", f"/api/list/{LIST}/threads/?page=1"),
])
def test_an_address_in_capitals_leads_to_the_lower_case_url(browser, asked, canonical):
    answer = browser.get(asked, status=301)
    assert answer.location == "http://localhost" + canonical
    assert answer.follow().status_int == 200


def test_the_pages_found_there_are_the_lists(browser):
    page = browser.get(f"/list/{SHOUTED}/thread/{HASH}/", status=301).follow()
    assert page.html.h1.text == "Mixed case"
    assert browser.get(f"/api/list/{SHOUTED}/", status=301).follow().json["messages"] == 1


def test_an_unknown_list_in_any_case_is_not_found(browser):
    browser.get("/list/NOBODY@Lists.Example.org/", status=404)
    browser.get("/list/nobody@lists.example.org/", status=404)
    browser.get("/api/list/NOBODY@Lists.Example.org/", status=404)


def test_a_private_list_in_capitals_stays_closed(browser):
    for asked in ("/list/BOARD@lists.example.org/", "/api/list/BOARD@lists.example.org/"):
        closed = browser.get(asked, status=301).follow(status=403)
        assert "Secret plans" not in closed.text


@pytest.mark.parametrize("tree", ["/list", "/api/list"])
def test_a_path_deeper_than_any_page_below_an_address_in_capitals_is_none(browser, tree):
    # Each name of the path was kept by a copy of all those before it:
    # 16,000 names (a URL of 32 KB) held a gigabyte.
    browser.get(f"{tree}/{SHOUTED}/" + "a/" * 16_000, status=404)
    browser.get(f"{tree}/{LIST}/" + "a/" * 16_000, status=404)
    deep = browser.get(f"{tree}/{SHOUTED}/" + "a/" * 30, status=301)
    assert deep.location == f"http://localhost{tree}/{LIST}/" + "a/" * 30
