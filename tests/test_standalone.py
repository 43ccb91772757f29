"""An archive without Mailman core (none configured, or silent) offers no dead ends."""

import logging
from urllib.parse import parse_qs, urlsplit

import pytest
import transaction
from pyramid.scripting import prepare
from webtest import TestApp

from kittypyr import standalone
from kittypyr.archiving import archive_message, ensure_mailing_list
from kittypyr.msgid import message_id_hash
from kittypyr.resources.community import Reader
from kittypyr.votes import cast_vote
from tests.functional import free_port
from tests.mailbuilder import make_message
from tests.test_app import make_app

LIST = "dev@lists.example.org"
THREAD = f"/list/{LIST}/thread/{message_id_hash('<sa0@example.org>')}/"
MESSAGE = f"/list/{LIST}/message/{message_id_hash('<sa1@example.org>')}/"


@pytest.fixture(autouse=True)
def fresh_presence(monkeypatch):
    # Each test asks Mailman anew, whatever another test's app found.
    monkeypatch.setattr(standalone, "presence", standalone.MailmanPresence())


def fill(app):
    with prepare(registry=app.registry) as env:
        archive = env["root"]
        mailing_list = ensure_mailing_list(archive, LIST)
        archive_message(mailing_list, make_message(message_id="<sa0@example.org>", subject="Cache flushes",
                                                   sender=("Ada Lovelace", "ada@example.org")))
        archive_message(mailing_list, make_message(message_id="<sa1@example.org>", subject="Re: Cache flushes",
                                                   sender=("Bob Babbage", "bob@example.org"),
                                                   in_reply_to="<sa0@example.org>", body="Agreed.\n"))
        message = mailing_list.messages[message_id_hash("<sa0@example.org>")]
        for n, value in enumerate((1, 1, -1)):
            reader = archive.readers[f"r{n}@example.org"] = Reader(f"r{n}@example.org")
            cast_vote(archive, reader, message, value)
        transaction.commit()


@pytest.fixture
def alone(tmp_path):
    app = make_app(tmp_path)
    fill(app)
    yield TestApp(app)
    app.registry._zodb_databases[""].close()


def test_no_log_in_sign_up_reply_or_new_thread_without_mailman(alone):
    for url in ("/", f"/list/{LIST}/", THREAD, MESSAGE):
        page = alone.get(url)
        links = [a.text for a in page.html.select("a")]
        assert "Log in" not in links and "Sign up" not in links, url
        assert page.html.select("a.reply, a.new-thread") == [], url
        assert "read-only archive" in page.html.select_one("footer.site").text
    assert "Log in to vote" not in alone.get(THREAD).text


def test_pages_behind_them_explain(alone):
    login = alone.get("/login", status=404)
    assert "not connected to the mailing lists' server" in login.text
    assert login.html.select("form#login-form") == []
    signup = alone.get("/signup", status=404)
    # A confirmation link (typed in, or of an archive that had accounts)
    # said to sign up again, at that /signup.
    for confirm in (alone.get("/confirm?token=abc", status=404), alone.get("/confirm", status=404)):
        assert "Sign up again" not in confirm.text
        assert confirm.html.select_one("main").text == signup.html.select_one("main").text
    reply = alone.get(MESSAGE + "reply", status=404)
    assert reply.html.select_one("a.reply-by-mail")["href"].startswith(f"mailto:{LIST}?")
    assert alone.get(f"/list/{LIST}/new", status=404).html.select_one("a.mail-list")["href"] == f"mailto:{LIST}"


def test_pages_for_accounts_offer_no_log_in_form_that_cannot_work(alone):
    """Typed in or bookmarked: a login form here would post to a /login that answers 404."""
    for url in ("/admin/", "/users/me/", "/feed-keys"):
        page = alone.get(url, status=403)
        assert page.html.select("form#login-form") == [] and "/login" not in page.text, url
        assert "not connected to the mailing lists' server" in page.text, url


def test_every_message_offers_reply_by_email(alone):
    link = alone.get(MESSAGE).html.select_one("a.reply-by-mail")
    assert link.text == "Reply by e-mail"
    target = urlsplit(link["href"])
    assert target.scheme == "mailto" and target.path == LIST
    fields = parse_qs(target.query)
    assert fields["subject"] == ["Re: Cache flushes"]  # not "Re: Re: ..."
    assert fields["In-Reply-To"] == ["<sa1@example.org>"]
    first = urlsplit(alone.get(THREAD).html.select_one("article a.reply-by-mail")["href"])
    assert parse_qs(first.query)["subject"] == ["Re: Cache flushes"]
    assert parse_qs(first.query)["In-Reply-To"] == ["<sa0@example.org>"]


def test_every_reader_sees_up_and_down_votes_and_no_zero_reputation(alone):
    articles = alone.get(THREAD).html.select("article.message")
    tally = articles[0].select_one("footer.votes .tally")
    assert tally.select_one(".ups").text == "▲ 2" and tally.select_one(".downs").text == "▼ 1"
    assert articles[0].select_one(".reputation").text == "+1"
    assert articles[1].select_one(".reputation").has_attr("hidden")  # +0 is not shown


def test_empty_index_says_how_to_import(tmp_path):
    app = make_app(tmp_path)
    try:
        page = TestApp(app).get("/")
        assert "No list has been archived yet" in page.text
        assert "kittypyr import CONFIG LIST_ADDRESS PATH" in page.html.select_one("p.help").text
    finally:
        app.registry._zodb_databases[""].close()


def test_mailman_configured_but_silent_is_explained_and_logged_once(tmp_path, caplog):
    app = make_app(tmp_path)
    app.registry.settings.update({"kittypyr.mailman_url": f"http://127.0.0.1:{free_port()}",
                                  "kittypyr.mailman_sync_ttl": "0"})
    fill(app)
    browser = TestApp(app)
    try:
        with caplog.at_level(logging.INFO, logger="kittypyr"):
            for url in ("/", f"/list/{LIST}/", THREAD, f"/list/{LIST}/", "/"):
                page = browser.get(url)
                assert page.html.select("a.reply, a.new-thread") == []
            login = browser.get("/login", status=503)
        assert "does not answer right now" in login.text and login.headers["Retry-After"] == "60"
        warnings = [r.getMessage() for r in caplog.records
                    if r.levelno >= logging.WARNING and r.name in ("kittypyr.mailman", "kittypyr.standalone")]
        assert len(warnings) == 1 and "does not answer" in warnings[0], warnings
    finally:
        app.registry._zodb_databases[""].close()


def test_presence_is_asked_again_after_a_minute_and_its_return_logged(caplog):
    answers = [(False, "refused"), (True, "HTTP 200")]
    clock = [0.0]
    presence = standalone.MailmanPresence(clock=lambda: clock[0], ask=lambda registry: answers.pop(0))

    class Registry:
        settings = {"kittypyr.mailman_url": "http://127.0.0.1:9"}

    with caplog.at_level(logging.WARNING, logger="kittypyr"):
        assert presence.available(Registry) is False
        clock[0] = 59
        assert presence.available(Registry) is False  # not asked again yet
        clock[0] = 61
        assert presence.available(Registry) is True
    assert [r.getMessage().split(" (")[0] for r in caplog.records] == [
        "Mailman core at http://127.0.0.1:9 does not answer", "Mailman core at http://127.0.0.1:9 answers again"]


def test_orders_by_votes_and_tags_are_offered_only_where_there_are_some(alone, tmp_path):
    """Nobody can vote or tag without Mailman: "by popularity" and "by tag" lead somewhere only where the
    archive has votes or tags of its own (brought from HyperKitty)."""
    def offered(browser):
        overview = [a.text for a in browser.get(f"/list/{LIST}/").html.select("nav.thread-lists a")]
        orders = [a.text for a in browser.get(f"/list/{LIST}/threads").html.select("nav.sort a, nav.sort strong")]
        return overview, orders

    overview, orders = offered(alone)  # votes were cast, no tag
    assert "by popularity" in overview and "by tag" not in overview
    assert "popularity (votes)" in orders
    (tmp_path / "bare").mkdir()
    bare = make_app(tmp_path / "bare")
    try:
        with prepare(registry=bare.registry) as env:
            archive_message(ensure_mailing_list(env["root"], LIST), make_message(message_id="<b0@example.org>"))
            transaction.commit()
        overview, orders = offered(TestApp(bare))
        assert overview == ["by activity"] and orders == ["latest activity"]
    finally:
        bare.registry._zodb_databases[""].close()
