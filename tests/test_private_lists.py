"""Logging in, and private lists closed to everyone but their members (WebTest).

Roles and passwords come from FakeMailman here; test_accounts_mailman.py
asks a real Mailman core the same questions.
"""

from datetime import datetime, timezone
from urllib.parse import quote

import pytest
import transaction
from pyramid.scripting import prepare
from webtest import TestApp

from kittypyr.archiving import archive_message, ensure_mailing_list
from kittypyr.moderation import delete_messages
from kittypyr.msgid import message_id_hash
from kittypyr.security import User
from tests.accounts import FakeMailman, csrf_token, forget_login_failures, log_in, log_out
from tests.mailbuilder import attachment, make_message, multipart, text_part
from tests.test_app import make_app

PUBLIC = "open@lists.example.org"
PRIVATE = "board@lists.example.org"
SECRET_WORD = "zanzibarium"
MEMBER = "member@example.org"
OUTSIDER = "outsider@example.org"
ADMIN = "admin@example.org"
OWNER = "owner@example.org"


def h(n):
    return message_id_hash(f"<priv{n}@example.org>")


def mail(n, subject, body, reply_to=None):
    return make_message(
        message_id=f"<priv{n}@example.org>", subject=subject, sender=("Board Member", "boss@example.org"),
        date=datetime(2022, 5, 1 + n, 12, tzinfo=timezone.utc), body=body,
        in_reply_to=f"<priv{reply_to}@example.org>" if reply_to is not None else None)


@pytest.fixture(scope="module")
def site(tmp_path_factory):
    app = make_app(tmp_path_factory.mktemp("private"))
    app.registry.settings["kittypyr.admins"] = ADMIN
    with prepare(registry=app.registry) as env:
        public = ensure_mailing_list(env["root"], PUBLIC)
        archive_message(public, mail(0, "Open topic", "Everyone may read this.\n"))
        private = ensure_mailing_list(env["root"], PRIVATE)
        private.archive_policy = "private"
        private.display_name = "The Board"
        archive_message(private, mail(1, f"Salaries {SECRET_WORD}", multipart(
            "mixed", text_part(f"Confidential {SECRET_WORD} figures.\n"),
            attachment(b"secret,figures\n", "text/csv", "figures.csv"))))
        archive_message(private, mail(2, "Re: Salaries", "Agreed.\n", reply_to=1))
        # A thread of one message, deleted: its hash is a message's and a thread's tombstone.
        archive_message(private, mail(3, "Withdrawn", "Posted by mistake.\n"))
        delete_messages(private, [h(3)], User(ADMIN))
        transaction.commit()
    yield app
    app.registry._zodb_databases[""].close()


@pytest.fixture
def mailman(monkeypatch, site):
    forget_login_failures(site)
    fake = FakeMailman(monkeypatch)
    fake.add_user(MEMBER, "Mia Member", roles=[(PRIVATE, "member"), (PUBLIC, "member")])
    fake.add_user(OUTSIDER, "Otto Outsider", roles=[(PUBLIC, "member")])
    fake.add_user(ADMIN, "Ada Admin")
    fake.add_user(OWNER, "Olga Owner", roles=[(PRIVATE, "owner")])
    return fake


PRIVATE_URLS = [
    f"/list/{PRIVATE}/",
    f"/list/{PRIVATE}/2022/5/",
    f"/list/{PRIVATE}/thread/{h(1)}/",
    f"/list/{PRIVATE}/message/{h(2)}/",
    f"/list/{PRIVATE}/message/{h(1)}/raw",
    f"/list/{PRIVATE}/message/{h(1)}/attachment/2/figures.csv",
    f"/api/list/{PRIVATE}/",
    f"/api/list/{PRIVATE}/threads/",
    f"/api/list/{PRIVATE}/thread/{h(1)}/",
    f"/api/list/{PRIVATE}/email/{h(1)}/",
]


def leaks(text):
    # The list's address is in the URL the reader asked for; its name,
    # subjects, words and figures must not be anywhere.
    return any(secret in text for secret in (SECRET_WORD, "The Board", "Salaries", "Agreed", "Confidential"))


def test_anonymous_readers_get_a_login_prompt_and_nothing_of_a_private_list(site, mailman):
    app = TestApp(site)
    for url in PRIVATE_URLS:
        page = app.get(url, status=403)
        assert not leaks(page.text), url
        if not url.startswith("/api/"):
            assert page.forms["login-form"]["came_from"].value == url
    # Not even what is missing inside it gives the list away.
    assert not leaks(app.get(f"/list/{PRIVATE}/message/NOSUCHHASH/", status=403).text)
    index = app.get("/")
    assert "open" in index.text and not leaks(index.text)
    assert not leaks(app.get("/api/lists/").text)
    for query in (SECRET_WORD, f"list:{PRIVATE}", "Salaries"):
        results = app.get("/search", {"q": query})
        assert results.html.select_one("p.count").text.startswith("0 messages found")
        assert results.html.select("ol.hits li") == []
        assert app.get("/api/search", {"q": query}).json["count"] == 0


def test_a_logged_in_non_member_gets_403_everywhere(site, mailman):
    app = TestApp(site)
    assert log_in(app, OUTSIDER).status_int == 303
    for url in PRIVATE_URLS:
        page = app.get(url, status=403)
        assert not leaks(page.text), url
    assert "not a member" in app.get(f"/list/{PRIVATE}/", status=403).text
    assert not leaks(app.get("/").text)
    assert app.get("/api/search", {"q": SECRET_WORD}).json["count"] == 0
    assert app.get("/search", {"q": SECRET_WORD}).html.select("ol.hits li") == []


# Hashes anyone can compute from a guessed Message-ID: an archived message
# and thread, a reply's hash as a thread key, a deleted message and thread,
# and a hash of no message.
GUESSED_API_URLS = {
    f"/api/list/{PRIVATE}/email/{h(1)}/": 200,
    f"/api/list/{PRIVATE}/email/{h(3)}/": 410,
    f"/api/list/{PRIVATE}/email/{h(9)}/": 404,
    f"/api/list/{PRIVATE}/thread/{h(1)}/": 200,
    f"/api/list/{PRIVATE}/thread/{h(2)}/": 301,
    f"/api/list/{PRIVATE}/thread/{h(3)}/": 410,
    f"/api/list/{PRIVATE}/thread/{h(9)}/": 404,
}


@pytest.mark.parametrize("reader", [None, OUTSIDER])
def test_the_api_answers_alike_whether_a_guessed_message_of_a_private_list_exists(site, mailman, reader):
    app = TestApp(site)
    if reader is not None:
        log_in(app, reader)
    answers = {url: app.get(url, status="*") for url in GUESSED_API_URLS}
    assert {url: answer.status_int for url, answer in answers.items()} == dict.fromkeys(GUESSED_API_URLS, 403)
    assert len({answer.text for answer in answers.values()}) == 1


GUESSED_FEED_URLS = [f"{tree}/list/{PRIVATE}/thread/{h(n)}/t.atom" for tree in ("", "/api") for n in (1, 2, 3, 9)]


@pytest.mark.parametrize("reader", [None, OUTSIDER])
def test_a_thread_feed_answers_alike_whether_a_guessed_message_of_a_private_list_exists(site, mailman, reader):
    """Asked with GET or with POST (no form token: a feed changes nothing), a thread or reply is no different
    from a hash never archived; the API's reply hash once answered 500 and a POST 400 for what exists."""
    app = TestApp(site)
    if reader is not None:
        log_in(app, reader)
    for ask in (app.get, app.post):
        answers = {url: ask(url, status="*") for url in GUESSED_FEED_URLS}
        assert [answer.status_int for answer in answers.values()] == [403] * len(answers)
        # Alike but for the address asked, which a page's log-in link names.
        for tree in ("", "/api"):
            texts = {answer.text.replace(url, "URL").replace(quote(url, safe=""), "URL")
                     for url, answer in answers.items() if url.startswith(f"{tree}/list/")}
            assert len(texts) == 1, texts


def test_a_member_follows_a_reply_to_its_thread_feed_and_the_api_has_none(site, mailman):
    app = TestApp(site)
    log_in(app, MEMBER)
    moved = app.get(f"/list/{PRIVATE}/thread/{h(2)}/t.atom", status=301)
    assert moved.location.endswith(f"/list/{PRIVATE}/thread/{h(1)}/t.atom")
    assert "<feed" in moved.follow().text
    app.get(f"/api/list/{PRIVATE}/thread/{h(2)}/t.atom", status=404)
    app.get(f"/api/list/{PRIVATE}/thread/{h(1)}/t.atom", status=404)


def test_members_get_the_true_answer_of_the_api_for_each_hash(site, mailman):
    app = TestApp(site)
    log_in(app, MEMBER)
    assert {url: app.get(url, status="*").status_int for url in GUESSED_API_URLS} == GUESSED_API_URLS


@pytest.mark.parametrize("reader", [MEMBER, OWNER, ADMIN])
def test_members_owners_and_site_admins_read_everything(site, mailman, reader):
    app = TestApp(site)
    log_in(app, reader)
    for url in PRIVATE_URLS:
        assert app.get(url).status_int == 200, url
    assert "The Board" in app.get("/").text
    assert "figures.csv" in app.get(f"/list/{PRIVATE}/thread/{h(1)}/").text
    found = app.get("/api/search", {"q": SECRET_WORD}).json
    assert found["count"] == 1 and SECRET_WORD in found["results"][0]["snippet"]
    assert PRIVATE.split("@")[0] in [entry["name"] for entry in app.get("/api/lists/").json["results"]] \
        or "The Board" in [entry["name"] for entry in app.get("/api/lists/").json["results"]]


def test_losing_membership_closes_the_list_within_the_cache_time(site, mailman):
    from kittypyr import security

    app = TestApp(site)
    log_in(app, MEMBER)
    app.get(f"/list/{PRIVATE}/", status=200)
    mailman.roles[MEMBER] = {(PUBLIC, "member")}
    security.memberships.forget(MEMBER)  # as a minute passing would
    app.get(f"/list/{PRIVATE}/", status=403)


def test_login_shows_the_reader_and_logout_needs_the_form_token(site, mailman):
    app = TestApp(site)
    answer = log_in(app, MEMBER)
    assert answer.status_int == 303
    cookie = answer.headers["Set-Cookie"]
    assert "HttpOnly" in cookie and "SameSite=Lax" in cookie
    page = app.get("/")
    assert "Mia Member" in page.text and "Log out" in page.text
    assert page.headers["Cache-Control"] == "no-cache, private"
    app.post("/logout", status=400)  # no CSRF token: refused
    assert "Mia Member" in app.get("/").text
    log_out(app)
    page = app.get("/")
    assert "Mia Member" not in page.text and "Log in" in page.text


def test_wrong_passwords_are_refused_then_slowed_down(site, mailman):
    app = TestApp(site)
    for _ in range(5):
        answer = log_in(app, MEMBER, "wrong password")
        assert answer.status_int == 403 and "not right" in answer.text
    blocked = log_in(app, MEMBER)  # even the right password waits now
    assert blocked.status_int == 429 and "Too many failed attempts" in blocked.text
    assert int(blocked.headers["Retry-After"]) > 0
    assert "Mia Member" not in app.get("/").text


def test_login_goes_back_only_to_pages_of_this_site(site, mailman):
    app = TestApp(site)
    form = app.get("/login", {"came_from": f"/list/{PUBLIC}/"}).forms["login-form"]
    form["address"], form["password"] = MEMBER, mailman.passwords[MEMBER]
    assert form.submit().location.endswith(f"/list/{PUBLIC}/")
    log_out(app)
    form = app.get("/login", {"came_from": "https://evil.example.com/"}).forms["login-form"]
    form["address"], form["password"] = MEMBER, mailman.passwords[MEMBER]
    assert form.submit().location == "http://localhost/"


def test_login_goes_back_to_a_page_named_in_any_script(site, mailman):
    # A link to the login form may name its page unescaped: the way back is
    # a header, which holds ASCII only.
    app = TestApp(site)
    form = app.get("/login", {"came_from": "/search?q=日本語"}).forms["login-form"]
    form["address"], form["password"] = MEMBER, mailman.passwords[MEMBER]
    answer = form.submit()
    assert answer.status_int == 303
    assert answer.location == "http://localhost/search?q=%E6%97%A5%E6%9C%AC%E8%AA%9E"
    assert "Mia Member" in app.get("/").text


def test_forms_without_the_session_token_are_refused(site, mailman):
    app = TestApp(site)
    app.post("/login", {"address": MEMBER, "password": mailman.passwords[MEMBER]}, status=400)
    token = csrf_token(app)
    app.post("/login", {"address": MEMBER, "password": mailman.passwords[MEMBER], "csrf_token": token},
             status=303)


def test_what_a_member_reads_no_shared_cache_keeps(site, mailman):
    """A proxy or CDN in front of the archive must never hand a member's answer to someone else."""
    app = TestApp(site)
    log_in(app, MEMBER)
    urls = PRIVATE_URLS + [f"/list/{PRIVATE}/message/{h(3)}/",
                           f"/search?q={SECRET_WORD}", f"/api/search?q={SECRET_WORD}"]
    for url in urls:
        answer = app.get(url, status=[200, 410])
        assert "private" in answer.headers.get("Cache-Control", ""), url
        assert "Cookie" in answer.headers.get("Vary", ""), url
    # What everyone reads stays for shared caches to keep.
    anonymous = TestApp(site)
    for url in (f"/list/{PUBLIC}/message/{h(0)}/raw", f"/list/{PUBLIC}/thread/{h(0)}/", "/search?q=open"):
        answer = anonymous.get(url)
        assert "private" not in answer.headers.get("Cache-Control", ""), url
        assert "Cookie" in answer.headers.get("Vary", ""), url


def test_anonymous_pages_set_no_cookie(site, mailman):
    app = TestApp(site)
    for url in ("/", f"/list/{PUBLIC}/", f"/list/{PUBLIC}/thread/{h(0)}/", "/search?q=open"):
        assert "Set-Cookie" not in app.get(url).headers, url


def test_a_list_whose_mailman_policy_becomes_never_keeps_its_archive_closed(tmp_path):
    # Mailman's third policy: archive no more. What was archived before
    # stays as closed as a private list's, never opened to everyone.
    from kittypyr.mailman import apply_list_details

    app = make_app(tmp_path)
    with prepare(registry=app.registry) as env:
        stopped = ensure_mailing_list(env["root"], PRIVATE)
        stopped.archive_policy = "private"
        archive_message(stopped, mail(1, f"Salaries {SECRET_WORD}", f"Confidential {SECRET_WORD} figures.\n"))
        apply_list_details(stopped, {"display_name": "The Board", "description": "",
                                     "archive_policy": "never"})
        transaction.commit()
    browser = TestApp(app)
    try:
        for url in (f"/list/{PRIVATE}/", f"/list/{PRIVATE}/message/{h(1)}/", f"/list/{PRIVATE}/message/{h(1)}/raw",
                    f"/api/list/{PRIVATE}/email/{h(1)}/", f"/list/{PRIVATE}/feed"):
            assert not leaks(browser.get(url, status=403).text), url
        assert not leaks(browser.get("/").text) and not leaks(browser.get("/api/lists/").text)
        assert browser.get("/api/search", {"q": SECRET_WORD}).json["count"] == 0
    finally:
        app.registry._zodb_databases[""].close()


def test_search_answers_tell_nothing_of_a_private_lists_words_by_their_scores(site, mailman):
    # A word's weight counts every list's messages: a score shown would
    # move with what the private list holds.
    app = TestApp(site)
    hits = app.get("/api/search", {"q": "Everyone"}).json["results"]
    assert len(hits) == 1 and "score" not in hits[0]


def _ranking_site(folder, private_bodies):
    """Four public messages alike but for one word each, and a private list holding ``private_bodies``."""
    folder.mkdir()
    app = make_app(folder)
    with prepare(registry=app.registry) as env:
        public = ensure_mailing_list(env["root"], PUBLIC)
        for n, word in enumerate(("controlword", SECRET_WORD, "othercontrol", "blorptastic")):
            archive_message(public, make_message(
                message_id=f"<p{n}@example.org>", subject="Note", sender=("P", "p@example.org"),
                date=datetime(2022, 1, 1 + n, tzinfo=timezone.utc), body=f"{word} and some filler here.\n"))
        private = ensure_mailing_list(env["root"], PRIVATE)
        private.archive_policy = "private"
        for n, body in enumerate(private_bodies):
            archive_message(private, make_message(
                message_id=f"<s{n}@example.org>", subject="Board", sender=("S", "s@example.org"),
                date=datetime(2022, 2, 1 + n, tzinfo=timezone.utc), body=body))
        transaction.commit()
    return app


@pytest.mark.parametrize("query", [f"controlword OR {SECRET_WORD}", f"{SECRET_WORD} OR controlword"])
def test_the_order_of_public_results_tells_nothing_of_a_private_lists_words(tmp_path, query):
    """A word's weight counts only the messages the reader may see: else its rank would move with
    every private message that holds it, and equal messages would swap places."""
    orders = []
    for name, bodies in (("without", ["Nothing to see.\n"] * 3),
                         ("with", [f"We discussed {SECRET_WORD}.\n", f"{SECRET_WORD} again.\n", "Other.\n"])):
        app = _ranking_site(tmp_path / name, bodies)
        try:
            found = TestApp(app).get("/api/search", {"q": query}).json["results"]
            orders.append([hit["message_id"] for hit in found])
        finally:
            app.registry._zodb_databases[""].close()
    assert len(orders[0]) == 2
    assert orders[0] == orders[1]


def test_an_address_with_a_lone_percent_sign_logs_in(site, mailman):
    # Mailman reads "%" followed by anything but two hex digits as it is.
    mailman.add_user("half%.half@example.org", "Half", roles=[(PRIVATE, "member")])
    app = TestApp(site)
    assert log_in(app, "half%.half@example.org").status_int == 303
    assert app.get(f"/list/{PRIVATE}/").status_int == 200
    # Written with escapes, it names the same account another way: refused.
    refused = log_in(TestApp(site), "half%25.half@example.org")
    assert refused.status_int == 403 and "not right" in refused.text


def test_roles_on_a_list_whose_id_is_the_same_open_no_list_mailman_no_longer_has(site, mailman):
    """Mailman's list id joins name and domain with a dot: board.lists@example.org has board@lists.example.org's."""
    collider = "collider@example.org"
    mailman.add_user(collider, "Carl Collider", roles=[("board.lists@example.org", "owner")])
    app = TestApp(site)
    log_in(app, collider)
    # While Mailman has the list, a list of that id cannot be made there: the roles are its own.
    assert app.get(f"/list/{PRIVATE}/").status_int == 200
    with prepare(registry=site.registry) as env:
        env["root"].lists[PRIVATE].in_mailman = False  # Mailman deleted it; the archive keeps it
        transaction.commit()
    try:
        for url in PRIVATE_URLS:
            assert not leaks(app.get(url, status=403).text), url
        app.get(f"/list/{PRIVATE}/admin/", status=403)
        # Nor do the reader's own lists name it, for the list Mailman has now.
        mine = app.get("/users/me/")
        assert not leaks(mine.text) and "board.lists.example.org" in mine.text
        # Site administrators still read and moderate it.
        admin = TestApp(site)
        log_in(admin, ADMIN)
        assert admin.get(f"/list/{PRIVATE}/").status_int == 200
    finally:
        with prepare(registry=site.registry) as env:
            del env["root"].lists[PRIVATE].in_mailman
            transaction.commit()


def test_a_list_mailman_says_it_has_not_is_marked_so_and_one_it_has_is_not(tmp_path, monkeypatch):
    from types import SimpleNamespace

    from kittypyr import mailman as mailman_core
    from kittypyr.mailman import NO_SUCH_LIST, apply_list_details, create_list_with_policy

    registry = SimpleNamespace(settings={"kittypyr.mailman_url": "http://127.0.0.1:9/"})
    monkeypatch.setattr(mailman_core, "ask_list_details", lambda registry, address: NO_SUCH_LIST)
    app = make_app(tmp_path)
    try:
        with prepare(registry=app.registry) as env:
            old, _, said = create_list_with_policy(env["root"], registry, "old@lists.example.org")
            assert said is NO_SUCH_LIST and old.in_mailman is False and old.archive_policy == "private"
            apply_list_details(old, {"display_name": "Old", "description": "", "archive_policy": "private"})
            assert old.in_mailman is True
            transaction.abort()
    finally:
        app.registry._zodb_databases[""].close()


def test_the_api_refuses_in_json_under_a_path_prefix_too(site, mailman):
    # Served at /archives/ behind a proxy (SCRIPT_NAME): the refusal read
    # the whole path, and answered the API's clients with the login page.
    app = TestApp(site, extra_environ={"SCRIPT_NAME": "/archives"})
    refused = app.get(f"/api/list/{PRIVATE}/", status=403)
    assert refused.content_type == "application/json" and refused.json == {"error": "you may not see this"}
    assert "<form" in app.get(f"/list/{PRIVATE}/", status=403).text
