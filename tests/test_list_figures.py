"""A list's figures for an archive whose newest mail is years old, and the lists index."""

from datetime import datetime, timedelta, timezone

import pytest
import transaction
from pyramid.scripting import prepare
from webtest import TestApp

from kittypyr.archiving import archive_message, ensure_mailing_list
from tests.mailbuilder import make_message
from tests.test_app import make_app

OLD = "old@lists.example.org"  # last post 2019-11-28
ANCIENT = "ancient@lists.example.org"  # last post 2011, and more messages
LAST_POST = datetime(2019, 11, 28, 10, 0, tzinfo=timezone.utc)

ADA = ("Ada Lovelace", "ada@example.org")
BOB = ("Bob Babbage", "bob@example.org")
CARL = ("Carl Gauss", "carl@example.org")


def mail(tag, when, sender, subject=None, reply_to=None):
    return make_message(
        message_id=f"<{tag}@example.org>",
        subject=subject or (f"Re: {reply_to}" if reply_to else f"Topic {tag}"),
        sender=sender,
        date=when,
        in_reply_to=f"<{reply_to}@example.org>" if reply_to else None,
        body=f"Message {tag}.\n",
    )


def old_list_mail():
    # In 2018: a long thread by Carl alone, the list's busiest of all time.
    yield mail("big", datetime(2018, 5, 1, tzinfo=timezone.utc), CARL, subject="The great debate")
    for n in range(6):
        yield mail(f"big{n}", datetime(2018, 5, 2 + n, tzinfo=timezone.utc), CARL, reply_to="big")
    # Its last month: Ada twice, Bob once, all within 30 days of 2019-11-28.
    yield mail("late", LAST_POST - timedelta(days=3), ADA, subject="Late news")
    yield mail("late1", LAST_POST - timedelta(days=1), BOB, reply_to="late")
    yield mail("last", LAST_POST, ADA, subject="Last words")


@pytest.fixture(scope="module")
def browser(tmp_path_factory):
    app = make_app(tmp_path_factory.mktemp("figures"))
    with prepare(registry=app.registry) as env:
        old = ensure_mailing_list(env["root"], OLD)
        for raw in old_list_mail():
            archive_message(old, raw)
        ancient = ensure_mailing_list(env["root"], ANCIENT)
        for n in range(15):
            archive_message(ancient, mail(f"anc{n}", datetime(2011, 3, 1 + n, tzinfo=timezone.utc), BOB))
        transaction.commit()
    yield TestApp(app)
    app.registry._zodb_databases[""].close()


def test_overview_counts_the_month_up_to_the_newest_message(browser):
    page = browser.get(f"/list/{OLD}/")
    posters = page.html.select_one("section.posters")
    assert "the 30 days up to 2019-11-28" in posters.text
    assert [li.text.split()[0] for li in posters.select("li")] == ["Ada", "Bob"]
    busiest = page.html.select_one("section.busiest")
    assert [a.text for a in busiest.select("li > a")] == ["Late news", "Last words"]
    assert "the 30 days up to 2019-11-28" in page.html.select_one("figure.activity figcaption").text
    assert page.html.select_one("figure.activity svg")["aria-label"] == "3 messages in 30 days"


def test_overview_shows_all_time_top_posters_and_busiest_threads(browser):
    page = browser.get(f"/list/{OLD}/")
    posters = page.html.select_one("section.posters-ever")
    assert [li.a.text for li in posters.select("li")] == ["Carl Gauss", "Ada Lovelace", "Bob Babbage"]
    assert "7 messages" in posters.select("li")[0].text
    busiest = page.html.select_one("section.busiest-ever")
    assert [a.text for a in busiest.select("li > a")][0] == "The great debate"
    assert "7 messages" in busiest.select("li")[0].text


def test_top_posters_link_to_their_profiles(browser):
    page = browser.get(f"/list/{OLD}/")
    link = page.html.select_one("section.posters li a")
    assert link.text == "Ada Lovelace" and link["href"].startswith("http://localhost/users/")
    profile = browser.get(link["href"])
    assert profile.html.h1.text == "Ada Lovelace"


def test_index_shows_last_post_and_sorts_by_it(browser):
    page = browser.get("/")
    items = page.html.select("ul.lists li")
    # The list with more messages but an older last post comes second.
    assert [li.a.text for li in items] == ["old", "ancient"]
    assert "last post 2019-11-28" in items[0].text
    assert "last post 2011-03-15" in items[1].text
    assert "2 participants in the 30 days up to 2019-11-28" in items[0].text
    assert "1 participant in the 30 days up to 2011-03-15" in items[1].text
    by_name = browser.get("/?sort=name").html.select("ul.lists li")
    assert [li.a.text for li in by_name] == ["ancient", "old"]


def test_new_threads_do_not_repeat_the_recent_ones(tmp_path):
    app = make_app(tmp_path)
    start = datetime(2020, 1, 1, tzinfo=timezone.utc)
    with prepare(registry=app.registry) as env:
        mailing_list = ensure_mailing_list(env["root"], OLD)
        for n in range(20):
            archive_message(mailing_list, mail(f"t{n}", start + timedelta(days=n), ADA))
        # Then the first fifteen get a reply each, the latest activity of all.
        for n in range(15):
            archive_message(mailing_list, mail(f"r{n}", start + timedelta(days=30 + n), BOB, reply_to=f"t{n}"))
        transaction.commit()
    try:
        page = TestApp(app).get(f"/list/{OLD}/")
        recent = [a.text for a in page.html.select("section.recent li > a")]
        newest = [a.text for a in page.html.select("section.newest li > a")]
        assert recent == [f"Topic t{n}" for n in range(14, -1, -1)]
        assert "2 messages" in page.html.select_one("section.recent li").text
        assert newest == [f"Topic t{n}" for n in range(19, 14, -1)]
    finally:
        app.registry._zodb_databases[""].close()
