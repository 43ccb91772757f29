"""A list's feed, a thread's feed, a search's feed, a sender's profile and a tag's page read what they show, not the list.

Each asked the catalog for every message of the list (or of the archive)
and intersected that with what it wanted: a feed polled every few minutes
cost five times as much on a list ten times as long. Counted here in
records read from the storage with an emptied cache, on a list with older
mail and another list beside it, then with twice as much of both.
"""

import re
from datetime import datetime, timedelta, timezone

import pytest
import transaction
from pyramid.scripting import prepare

from webtest import TestApp
from ZODB.Connection import Connection

from kittypyr.archiving import archive_message, ensure_mailing_list
from kittypyr.feeds import FEED_SIZE
from kittypyr.msgid import message_id_hash
from kittypyr.tags import add_tag
from tests.mailbuilder import make_message
from tests.test_app import make_app

DEV = "dev@lists.example.org"
OTHER = "other@lists.example.org"
NOW = datetime(2024, 6, 1, tzinfo=timezone.utc)
OLDER = 750  # messages added to the list before its recent ones, and to another list, each time


def recent(mailing_list):
    """Ada's thread of 12 and 40 messages of others' threads, in the last weeks."""
    for n in range(12):
        archive_message(mailing_list, make_message(
            message_id=f"<ada{n}@example.org>", subject="Cache flush", sender=("Ada", "ada@example.org"),
            date=NOW - timedelta(hours=n), in_reply_to=f"<ada{n + 1}@example.org>" if n < 11 else None,
            body=f"Ada's word {n}.\n"))
    for n in range(40):
        archive_message(mailing_list, make_message(
            message_id=f"<other{n}@example.org>", subject=f"Topic {n // 4}", sender=("Bo", f"bo{n % 7}@example.org"),
            date=NOW - timedelta(days=1, hours=n), in_reply_to=f"<other{n - 1}@example.org>" if n % 4 else None,
            body=f"Bo's word {n}.\n"))


def older(archive, mailing_list, first):
    for n in range(first, first + OLDER):
        archive_message(mailing_list, make_message(
            message_id=f"<old{n}@example.org>", subject=f"Old topic {n // 10}", sender=("Cy", f"cy{n % 50}@example.org"),
            date=NOW - timedelta(days=400 + n), in_reply_to=f"<old{n - 1}@example.org>" if n % 10 else None,
            body=f"An old word {n}.\n"))
        # Ada wrote there too, some time ago: as many messages of hers each time.
        sender = ("Ada", "ada@example.org") if n < 10 else ("Di", f"di{n % 30}@example.org")
        archive_message(ensure_mailing_list(archive, OTHER), make_message(
            message_id=f"<elsewhere{n}@example.org>", subject="Elsewhere", sender=sender,
            date=NOW - timedelta(days=2, minutes=n), body=f"Elsewhere {n}.\n"))


def pages(app, monkeypatch):
    """Each page as a reader gets it: ``{name: (its text, records read)}``."""
    with prepare(registry=app.registry) as env:
        person = env["root"].people.person_id("ada@example.org")
    thread = message_id_hash("<ada11@example.org>")
    urls = {
        "list feed": f"/list/{DEV}/feed/",
        "thread feed": f"/list/{DEV}/thread/{thread}/t.atom",
        "profile": f"/users/{person}/",
        "tag": f"/list/{DEV}/tag/needs-review/",
        "search feed": "/search.atom?q=flush",
        # By fields alone, finding most of the list: newest first.
        "search of a list": "/search?q=list:dev",
        "search leaving a sender out": f"/search?q=-from:ada@example.org&mlist={DEV}",
        "search before a date": f"/search?q=before:2030&mlist={DEV}",
        "search after a date": f"/search?q=after:2024-05-01&mlist={DEV}",
        "search after a date leaving a sender out": f"/search?q=after:2024-05-01 -from:ada@example.org&mlist={DEV}",
    }
    found = {}
    for name, url in urls.items():
        page, read = read_cold(app, url, monkeypatch)
        found[name] = (page.text, read)
    return found


def read_cold(app, url, monkeypatch):
    """``(the page at url, records it read)``, asked with an emptied cache once templates are compiled."""
    loads = []
    setstate = Connection.setstate

    def counted(connection, obj):
        loads.append(obj)
        return setstate(connection, obj)

    browser = TestApp(app)
    browser.get(url)  # templates compiled, the session of the pool's connection begun
    app.registry._zodb_databases[""].cacheMinimize()
    with monkeypatch.context() as patched:
        patched.setattr(Connection, "setstate", counted)
        page = browser.get(url)
    return page, len(loads)


@pytest.fixture(scope="module")
def measured(tmp_path_factory):
    monkeypatch = pytest.MonkeyPatch()
    app = make_app(tmp_path_factory.mktemp("narrow"))
    try:
        with prepare(registry=app.registry) as env:
            archive = env["root"]
            mailing_list = ensure_mailing_list(archive, DEV)
            recent(mailing_list)
            add_tag(mailing_list.threads[message_id_hash("<ada11@example.org>")], "needs-review",
                    "mod@example.org")
            older(archive, mailing_list, 0)
            transaction.commit()
        small = pages(app, monkeypatch)
        with prepare(registry=app.registry) as env:
            older(env["root"], env["root"].lists[DEV], OLDER)
            transaction.commit()
        large = pages(app, monkeypatch)
        yield small, large
    finally:
        app.registry._zodb_databases[""].close()


@pytest.mark.parametrize("page", ["list feed", "thread feed", "profile", "tag", "search feed"])
def test_a_page_shows_the_same_and_reads_no_more_with_twice_the_older_mail(measured, page):
    small, large = measured
    (shown, read), (shown_large, read_large) = small[page], large[page]
    assert "Cache flush" in shown and shown == shown_large
    # Not the list's sets, nor the archive's.
    assert read_large <= read + 4, (read, read_large)


@pytest.mark.parametrize("page", ["search of a list", "search leaving a sender out", "search before a date",
                                  "search after a date", "search after a date leaving a sender out"])
def test_a_search_by_fields_alone_shows_the_newest_and_reads_no_more_with_twice_the_older_mail(measured, page):
    small, large = measured
    (shown, read), (shown_large, read_large) = small[page], large[page]
    words = re.findall(r"(Ada|Bo)&#x27;s word (\d+)", _hits(shown))
    newest_of_bo = [("Bo", str(n)) for n in range(20)]
    if "leaving a sender out" in page:
        assert words == newest_of_bo
    else:
        assert words == [("Ada", str(n)) for n in range(12)] + newest_of_bo[:8]
    assert _hits(shown) == _hits(shown_large)
    # Not the list's sets, nor the archive's.
    assert read_large <= read + 4, (read, read_large)


def _hits(page):
    """The list of matches of a search page."""
    return page[page.index('<ol class="hits">'):page.index("</ol>", page.index('<ol class="hits">'))]


def test_the_list_feed_holds_the_newest_messages_by_date(measured):
    small, _ = measured
    feed = small["list feed"][0]
    shown = [int(n) for n in re.findall(r"(?:Ada|Bo)&amp;#x27;s word (\d+)", feed)]
    assert shown == list(range(12)) + list(range(FEED_SIZE - 12))



def test_an_original_dated_otherwise_than_its_rebuilt_copy_moves_every_figure_with_it(tmp_path):
    """The original of a message rebuilt from a HyperKitty database takes its place with its own date and name:
    its thread's last date, the list's order of threads (which the list's feed reads), its counts follow.
    (Its sender's address is the one HyperKitty kept: no other mail may take a rebuilt one's place.)"""
    from kittypyr.archiving import store_parsed
    from kittypyr.health import check_archive
    from kittypyr.mail import parse_message
    from kittypyr.queries import newest_messages
    from kittypyr.stats import activity_of

    def parsed(raw, rebuilt=False):
        mail = parse_message(raw)
        mail.rebuilt = rebuilt
        return mail

    app = make_app(tmp_path)
    try:
        with prepare(registry=app.registry) as env:
            archive = env["root"]
            mailing_list = ensure_mailing_list(archive, DEV)
            early, late = NOW - timedelta(days=400), NOW + timedelta(hours=1)
            store_parsed(mailing_list, parsed(make_message(
                message_id="<swap@example.org>", subject="Swapped", sender=("Old Name", "old@example.org"),
                date=early, body="As HyperKitty kept it.\n"), rebuilt=True), env["registry"])
            recent(mailing_list)
            store_parsed(mailing_list, parsed(make_message(
                message_id="<swap@example.org>", subject="Swapped", sender=("New Name", "Old@Example.org"),
                date=late, body="As it was sent.\n")), env["registry"], originals=True)
            transaction.commit()
            name = message_id_hash("<swap@example.org>")
            assert [message.__name__ for message in newest_messages(mailing_list, 3)][0] == name
            assert mailing_list.threads.live(name).last_date == late
            activity = activity_of(mailing_list)
            assert activity.per_month.get(early.strftime("%Y-%m"), 0) == 0
            assert activity.participants.get("old@example.org") == 1
            assert activity.sender_names.get("old@example.org") == "New Name"
            findings, _ = check_archive(archive, env["registry"])
            assert findings == []
    finally:
        app.registry._zodb_databases[""].close()


def test_a_profile_reads_no_more_for_a_sender_of_twice_the_messages(tmp_path, monkeypatch):
    """A sender's page shows their newest posts, their first and last: it reads those, not all they wrote."""
    app = make_app(tmp_path)
    person = None

    def write(first, count):
        with prepare(registry=app.registry) as env:
            mailing_list = ensure_mailing_list(env["root"], DEV)
            for n in range(first, first + count):
                archive_message(mailing_list, make_message(
                    message_id=f"<prolific{n}@example.org>", subject=f"Note {n}", sender=("Pat", "pat@example.org"),
                    date=NOW - timedelta(days=3000) + timedelta(hours=n), body=f"Pat's note {n}.\n"))
            transaction.commit()
            return env["root"].people.person_id("pat@example.org")

    try:
        write(400, 400)  # the newer half, archived first
        person = write(0, 10)
        smaller = profile_reads(app, person, monkeypatch)
        write(10, 390)  # the older messages between: twice as many in all
        larger = profile_reads(app, person, monkeypatch)
        assert smaller[0][:2] == ["Note 799", "Note 798"] and smaller[0] == larger[0]  # the same newest posts
        assert larger[1] <= smaller[1] + 4, (smaller[1], larger[1])
    finally:
        app.registry._zodb_databases[""].close()


def profile_reads(app, person, monkeypatch):
    """``(the newest posts shown, records read)`` of the sender's profile, with an emptied cache."""
    page, read = read_cold(app, f"/users/{person}/", monkeypatch)
    return [item.text.strip() for item in page.html.select("main li a") if "Note" in item.text][:20], read


def test_an_archive_made_before_senders_posts_were_dated_is_upgraded_from_the_catalog(tmp_path):
    from kittypyr.bootstrap import EVOLVE_STEPS, ROOT_KEY, add_dated_posts, bootstrap_archive
    from kittypyr.people import first_and_last_post, posts_page

    app = make_app(tmp_path)
    try:
        with prepare(registry=app.registry) as env:
            recent(ensure_mailing_list(env["root"], DEV))
            transaction.commit()
            root = env["root"]._p_jar.root()
            del root[ROOT_KEY].people.dated_posts
            # As the version before the step that adds them left it.
            root[ROOT_KEY].schema_version = EVOLVE_STEPS.index(add_dated_posts)
            transaction.commit()
            archive = bootstrap_archive(root, app.registry)
            assert archive.schema_version == len(EVOLVE_STEPS)
            first, last = first_and_last_post(archive, "ada@example.org", [DEV])
            assert (first.__name__, last.__name__) == (message_id_hash("<ada11@example.org>"),
                                                       message_id_hash("<ada0@example.org>"))
            total, page = posts_page(archive, "bo3@example.org", [DEV], 0, 3)
            assert total == 6 and [m.message_id for m in page] == [
                "other3@example.org", "other10@example.org", "other17@example.org"]
            transaction.abort()
    finally:
        app.registry._zodb_databases[""].close()


@pytest.mark.parametrize("query", ["list:dev", "-from:cy3@example.org", "after:2021-06-01"])
def test_a_search_by_fields_alone_oldest_first_reads_no_more_with_twice_the_newer_mail(tmp_path, monkeypatch, query):
    app = make_app(tmp_path)

    def write(first, count):
        with prepare(registry=app.registry) as env:
            mailing_list = ensure_mailing_list(env["root"], DEV)
            for n in range(first, first + count):
                archive_message(mailing_list, make_message(
                    message_id=f"<n{n}@example.org>", subject=f"Topic {n // 10}", sender=("Cy", f"cy{n % 7}@example.org"),
                    date=datetime(2021, 6, 1, tzinfo=timezone.utc) + timedelta(hours=n),
                    in_reply_to=f"<n{n - 1}@example.org>" if n % 10 else None, body=f"Word {n}.\n"))
            transaction.commit()

    try:
        url = f"/search?q={query}&sort=date-asc&mlist={DEV}"
        write(0, 600)
        page, read = read_cold(app, url, monkeypatch)
        write(600, 600)
        page_large, read_large = read_cold(app, url, monkeypatch)
        shown = [int(n) for n in re.findall(r"Word (\d+)\.", _hits(page.text))]
        assert shown == [n for n in range(25) if query != "-from:cy3@example.org" or n % 7 != 3][:20]
        assert _hits(page.text) == _hits(page_large.text)
        assert read_large <= read + 4, (read, read_large)
    finally:
        app.registry._zodb_databases[""].close()
