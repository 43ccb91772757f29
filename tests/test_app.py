"""The application as a browser and an extension developer see it."""

from datetime import datetime, timedelta, timezone

import pytest
import transaction
from pyramid.scripting import prepare
from repoze.catalog.query import Eq
from webtest import TestApp

from kittypyr import main
from kittypyr.archiving import archive_message, ensure_mailing_list
from kittypyr.catalog import search
from kittypyr.msgid import message_id_hash
from tests.mailbuilder import make_message

START = datetime(2021, 6, 1, 8, 0, tzinfo=timezone.utc)


def make_app(tmp_path, includes="", **settings):
    (tmp_path / "blobs").mkdir(exist_ok=True)
    return main(
        {},
        **{
            "zodbconn.uri": f"file://{tmp_path}/Data.fs?blobstorage_dir={tmp_path}/blobs",
            "pyramid.includes": includes,
            "kittypyr.base_url": "http://localhost/",
            **settings,
        },
    )


def fill(app, address, count):
    with prepare(registry=app.registry) as env:
        mailing_list = ensure_mailing_list(env["root"], address)
        for n in range(count):
            archive_message(
                mailing_list,
                make_message(
                    message_id=f"<app{n}@example.org>",
                    subject="Hello <script>alert(1)</script>" if n == 0 else "Re: Hello",
                    sender=("Ada Lovelace", "ada@example.org"),
                    date=START + timedelta(minutes=n),
                    in_reply_to=None if n == 0 else f"<app{n - 1}@example.org>",
                    body=f"message {n}\n",
                ),
            )
        transaction.commit()


@pytest.fixture
def app(tmp_path):
    application = make_app(tmp_path)
    yield application
    application.registry._zodb_databases[""].close()


def test_index_lists_archived_lists_with_counts(app):
    fill(app, "Dev@Lists.Example.org", 3)
    fill(app, "users@lists.example.org", 1)
    page = TestApp(app).get("/")
    assert page.status_int == 200
    items = page.html.select("ul.lists li")
    assert [li.a.text for li in items] == ["dev", "users"]
    assert "3 messages" in items[0].text and "1 message\n" in items[1].text
    list_page = page.click("dev")
    assert list_page.request.path == "/list/dev@lists.example.org/"
    assert [span.text for span in list_page.html.select("main > p span.count")] == ["3 messages", "1 thread"]


def test_empty_archive_says_so(app):
    assert "No list has been archived yet" in TestApp(app).get("/").text


def test_unknown_list_is_404(app):
    TestApp(app).get("/list/nobody@example.org/", status=404)


def test_extension_included_from_settings(tmp_path):
    app = make_app(tmp_path, includes="tests.example_extension")
    try:
        fill(app, "dev@lists.example.org", 3)
        browser = TestApp(app)
        thread_key = message_id_hash("<app0@example.org>")
        summary = browser.get(f"/list/dev@lists.example.org/thread/{thread_key}/summary").json
        assert summary == {"subject": "Hello <script>alert(1)</script>", "messages": 3, "participants": 1}
        with prepare(registry=app.registry) as env:
            archive = env["root"]
            assert list(archive.lists["dev@lists.example.org"].arrivals)[:2] == [
                "Hello <script>alert(1)</script>", "Re: Hello"]
            total, found = search(archive, Eq("sender_domain", "example.org"))
            assert total == 3
            assert {m.subject for m in found} == {"Hello <script>alert(1)</script>", "Re: Hello"}
    finally:
        app.registry._zodb_databases[""].close()


def test_extension_index_added_to_an_existing_archive(tmp_path):
    app = make_app(tmp_path)
    fill(app, "dev@lists.example.org", 2)
    app.registry._zodb_databases[""].close()
    app = make_app(tmp_path, includes="tests.example_extension")
    try:
        with prepare(registry=app.registry) as env:
            total, _ = search(env["root"], Eq("sender_domain", "example.org"))
            assert total == 2
    finally:
        app.registry._zodb_databases[""].close()


def test_a_forged_host_header_decides_no_link(app):
    """With kittypyr.base_url set, redirects, links, the API's URLs and feed ids are on its host,
    whatever Host a client sends (a cache in front would keep them for every reader)."""
    fill(app, "dev@lists.example.org", 2)
    browser = TestApp(app, extra_environ={"HTTP_HOST": "evil.example"})
    moved = browser.get("/list/DEV@lists.example.org/", status=301)
    assert moved.location.startswith("http://localhost/list/dev@lists.example.org/")
    threads = browser.get("/api/list/dev@lists.example.org/threads/").json
    assert threads["results"] and all(t["url"].startswith("http://localhost/") for t in threads["results"])
    feed = browser.get("/list/dev@lists.example.org/feed/").text
    assert "evil.example" not in feed and "http://localhost/" in feed
    page = browser.get("/list/dev@lists.example.org/")
    assert "evil.example" not in page.text
    forwarded = TestApp(app, extra_environ={"HTTP_X_FORWARDED_HOST": "evil.example", "wsgi.url_scheme": "https"})
    assert "evil.example" not in forwarded.get("/list/dev@lists.example.org/feed/").text
    # A loopback name is believed from this machine only (an administrator's curl, Mailman on loopback).
    local = TestApp(app, extra_environ={"HTTP_HOST": "127.0.0.1:6543", "REMOTE_ADDR": "127.0.0.1"})
    assert local.get("/list/DEV@lists.example.org/", status=301).location.startswith("http://127.0.0.1:6543/")
    remote = TestApp(app, extra_environ={"HTTP_HOST": "127.0.0.1:6543", "REMOTE_ADDR": "203.0.113.9"})
    assert remote.get("/list/DEV@lists.example.org/", status=301).location.startswith("http://localhost/")


def test_a_host_header_that_only_begins_with_the_sites_host_decides_no_link(app):
    """The Host is believed whole or not at all: "localhost:80@evil.example" names evil.example in a URL."""
    fill(app, "dev@lists.example.org", 1)
    for host, remote in [("localhost:80@evil.example", "203.0.113.9"), ("localhost:@evil.example", "203.0.113.9"),
                         ("localhost:8443", "203.0.113.9"), ("localhost:80:81", "203.0.113.9"),
                         ("localhost:80/evil.example", "203.0.113.9"), ("localhost:80 evil.example", "203.0.113.9"),
                         ("127.0.0.1:6543@evil.example", "127.0.0.1"), ("[::1]:6543@evil.example", "::1")]:
        browser = TestApp(app, extra_environ={"HTTP_HOST": host, "REMOTE_ADDR": remote})
        moved = browser.get("/list/DEV@lists.example.org/", status=301)
        assert moved.location == "http://localhost/list/dev@lists.example.org/", host
        feed = browser.get("/list/dev@lists.example.org/feed/").text
        assert "evil.example" not in feed and ":8443" not in feed and ":81" not in feed, host
    # The site's own host with its own port, or a loopback name with any port, is believed as it is.
    for host, remote, location in [("LOCALHOST:80", "203.0.113.9", "http://localhost/"),
                                   ("[::1]:6543", "::1", "http://[::1]:6543/")]:
        browser = TestApp(app, extra_environ={"HTTP_HOST": host, "REMOTE_ADDR": remote})
        moved = browser.get("/list/DEV@lists.example.org/", status=301)
        assert moved.location.lower() == location + "list/dev@lists.example.org/", host


def test_the_sites_host_asked_in_capitals_or_over_http_makes_the_sites_own_links(tmp_path):
    # Believed as it came, LISTS.EXAMPLE.ORG or http:// made links, and the
    # ids of feed entries, that differ from the site's own.
    app = make_app(tmp_path, **{"kittypyr.base_url": "https://lists.example.org/"})
    try:
        fill(app, "dev@lists.example.org", 1)
        site = "https://lists.example.org/list/dev@lists.example.org/"
        feed = TestApp(app, extra_environ={"HTTP_HOST": "lists.example.org", "wsgi.url_scheme": "https"}).get(
            "/list/dev@lists.example.org/feed/").text
        for host, scheme in [("LISTS.EXAMPLE.ORG", "https"), ("lists.example.org", "http"),
                             ("Lists.Example.Org:443", "https")]:
            browser = TestApp(app, extra_environ={"HTTP_HOST": host, "wsgi.url_scheme": scheme})
            assert browser.get("/list/DEV@lists.example.org/", status=301).location == site, (host, scheme)
            assert browser.get("/list/dev@lists.example.org/feed/").text == feed, (host, scheme)
    finally:
        app.registry._zodb_databases[""].close()


@pytest.mark.parametrize("path", ["/login", "/signup", "/logout"])
def test_a_form_whose_body_cannot_be_read_is_answered_400(tmp_path, path):
    # multipart/form-data with no boundary: the form's token check read it
    # and raised, answered 500.
    from webtest import TestApp

    app = make_app(tmp_path)
    try:
        answer = TestApp(app).post(path, b"csrf_token=x", headers={"Content-Type": "multipart/form-data"},
                                   status="*")
        assert answer.status_int == 400
    finally:
        app.registry._zodb_databases[""].close()


@pytest.mark.parametrize("layout", ["an unknown scheme", "Data.fs a folder"])
def test_a_server_on_a_storage_that_cannot_be_what_the_uri_says_says_so_in_one_line(tmp_path, layout):
    # A traceback from the storage's resolver or from FileStorage.
    from kittypyr import StorageUnopened, main

    uri = "bogus://x"
    if layout == "Data.fs a folder":
        (tmp_path / "Data.fs").mkdir()
        uri = f"file://{tmp_path}/Data.fs?blobstorage_dir={tmp_path}/blobs"
    with pytest.raises(StorageUnopened) as raised:
        main({}, **{"zodbconn.uri": uri})
    assert "zodbconn.uri" in str(raised.value) and ("correct it" in str(raised.value)
                                                     or "move it away" in str(raised.value))


def test_the_json_apis_404_is_json(app):
    from webtest import TestApp

    browser = TestApp(app)
    for path in ("/api/list/nosuch@example.org/", "/api/list/nosuch@example.org/email/NOPE/", "/api/nothing"):
        answer = browser.get(path, status=404)
        assert answer.content_type == "application/json" and answer.json["error"], path


def test_a_bad_request_is_a_page_of_the_site_that_says_what_was_wrong(app):
    # Pyramid's bare page, with "check_csrf_token(): Invalid token" in it.
    from webtest import TestApp

    fill(app, "dev@lists.example.org", 1)
    browser = TestApp(app)
    stale = browser.post("/logout", {"csrf_token": "old"}, status=400)
    assert "This form is out of date" in stale.text and "check_csrf_token" not in stale.text
    assert stale.html.select_one("footer.site") is not None
    day = browser.get("/list/dev@lists.example.org/export/dev.mbox.gz?start=2020-02-30", status=400)
    assert "YYYY-MM-DD" in day.text and day.html.select_one("footer.site") is not None
