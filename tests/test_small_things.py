"""The smaller things readers notice: the favicon, an unmatched filter, all of a sender's posts."""

from datetime import datetime, timedelta, timezone

import pytest
import transaction
from pyramid.scripting import prepare
from webtest import TestApp

from kittypyr.archiving import archive_message, ensure_mailing_list
from tests.mailbuilder import make_message
from tests.test_app import make_app

LIST = "dev@lists.example.org"
START = datetime(2022, 1, 3, 9, 0, tzinfo=timezone.utc)


@pytest.fixture(scope="module")
def browser(tmp_path_factory):
    app = make_app(tmp_path_factory.mktemp("small"))
    with prepare(registry=app.registry) as env:
        mailing_list = ensure_mailing_list(env["root"], LIST)
        for n in range(30):
            archive_message(mailing_list, make_message(
                message_id=f"<post{n}@example.org>", subject=f"Post number {n}",
                sender=("Ada Lovelace", "ada@example.org"), date=START + timedelta(hours=n),
                body=f"Body {n}.\n"))
        transaction.commit()
    yield TestApp(app)
    app.registry._zodb_databases[""].close()


def test_favicon_ico_leads_to_the_icon(browser):
    answer = browser.get("/favicon.ico", status=301)
    icon = browser.get(answer.location)
    assert icon.content_type == "image/svg+xml" and b"<svg" in icon.body


def test_a_filter_without_match_says_so(browser):
    page = browser.get("/", {"name": "nomatch"})
    assert "No list matches “nomatch”" in page.text
    assert "No list has been archived yet" not in page.text


def profile_of_ada(browser):
    thread = browser.get(f"/list/{LIST}/").html.select_one("section.newest li a")["href"]
    return browser.get(thread).html.select_one(".sender a")["href"]


def test_a_profile_lists_every_post_a_page_at_a_time(browser):
    url = profile_of_ada(browser)
    first = browser.get(url)
    posts = [a.text for a in first.html.select("ol.posts li a.subject")]
    assert posts == [f"Post number {n}" for n in range(29, 4, -1)]
    assert "Page 1 of 2" in first.html.select_one("nav.pages").text
    second = browser.get(first.html.select_one("nav.pages a[rel=next]")["href"])
    assert [a.text for a in second.html.select("ol.posts li a.subject")] == [
        f"Post number {n}" for n in range(4, -1, -1)]


def test_a_profile_links_a_search_of_their_messages(browser):
    page = browser.get(profile_of_ada(browser))
    link = page.html.select_one("a.search-posts")
    assert "ada@example.org" not in page.text
    results = browser.get(link["href"])
    assert results.status_int == 200 and "Post number 29" in results.text
