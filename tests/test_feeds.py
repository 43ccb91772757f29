"""Atom feeds as a feed reader reads them (WebTest, feedparser and the XML itself)."""

import calendar
import xml.etree.ElementTree as ET
from datetime import datetime, timedelta, timezone

import feedparser
import pytest
import transaction
from pyramid.scripting import prepare
from webtest import TestApp

from kittypyr.archiving import archive_message, ensure_mailing_list
from kittypyr.moderation import delete_messages
from kittypyr.msgid import message_id_hash
from kittypyr.security import User
from tests.accounts import FakeMailman, log_in
from tests.mailbuilder import make_message
from tests.test_app import make_app

LIST = "dev@lists.example.org"
PRIVATE = "board@lists.example.org"
MEMBER = "member@example.org"
START = datetime(2022, 9, 1, 8, 0, tzinfo=timezone.utc)
ATOM = "{http://www.w3.org/2005/Atom}"
THR = "{http://purl.org/syndication/thread/1.0}"
BASE = "http://localhost"


def mid(n):
    return f"<feed{n}@example.org>"


def h(n):
    return message_id_hash(mid(n))


def mail(n, subject, reply_to=None, body=None, sender=("Ada Lovelace", "ada@example.org"), minutes=None):
    return make_message(message_id=mid(n), subject=subject, sender=sender,
                        date=START + timedelta(minutes=n if minutes is None else minutes),
                        in_reply_to=mid(reply_to) if reply_to is not None else None,
                        body=body or f"Message {n}. Write to jdoe@example.com.\n")


def fill(app):
    """Thread 0 (0 <- 1 <- 2, 0 <- 3) and thread 4 (4 <- 5), and a private list."""
    with prepare(registry=app.registry) as env:
        mailing_list = ensure_mailing_list(env["root"], LIST)
        mailing_list.description = "Development, write to owner@example.org"
        for raw in (mail(0, "Feeds"), mail(1, "Re: Feeds", 0), mail(2, "Re: Feeds", 1),
                    mail(3, "Re: Feeds", 0),
                    mail(4, "Ask bob@example.net \x01 about <feeds> & more", sender=("", "carl@example.org")),
                    mail(5, "Re: Ask", 4)):
            archive_message(mailing_list, raw)
        board = ensure_mailing_list(env["root"], PRIVATE)
        board.archive_policy = "private"
        archive_message(board, make_message(message_id="<boardfeed@example.org>", subject="Feeds secret",
                                            date=START, body="Confidential.\n"))
        transaction.commit()


@pytest.fixture
def app(tmp_path):
    application = make_app(tmp_path)
    fill(application)
    yield application
    application.registry._zodb_databases[""].close()


def read_feed(response):
    """The feed as feedparser reads it, checked well-formed and valid enough for it, and as XML."""
    assert response.status_int == 200
    assert response.content_type == "application/atom+xml"
    parsed = feedparser.parse(response.body)
    assert not parsed.bozo, parsed.get("bozo_exception")
    assert parsed.version == "atom10"
    return parsed, ET.fromstring(response.body)


def url(n):
    return f"{BASE}/list/{LIST}/message/{h(n)}/"


def check_entries(parsed, root):
    """What RFC 4287 asks of each entry: a unique id, a title, an author, an updated date."""
    ids = [entry.id for entry in parsed.entries]
    assert len(set(ids)) == len(ids)
    for entry in parsed.entries:
        assert entry.title and entry.author and entry.updated_parsed
        assert entry.link == entry.id
    assert root.find(f"{ATOM}id").text and root.find(f"{ATOM}updated").text
    assert root.find(f"{ATOM}link[@rel='self']").get("href")


def test_a_lists_new_messages_newest_first_with_their_threading(app):
    parsed, root = read_feed(TestApp(app).get(f"/list/{LIST}/feed/"))
    check_entries(parsed, root)
    assert parsed.feed.title == "dev: new messages"
    assert [entry.id for entry in parsed.entries] == [url(n) for n in (5, 4, 3, 2, 1, 0)]
    first = parsed.entries[-1]
    assert calendar.timegm(first.published_parsed) == int(START.timestamp())
    assert calendar.timegm(parsed.entries[0].updated_parsed) == int((START + timedelta(minutes=5)).timestamp())
    assert root.find(f"{ATOM}link[@rel='self']").get("href") == f"{BASE}/list/{LIST}/feed/"
    # RFC 4685: each reply names its parent's entry.
    replies = {entry.find(f"{ATOM}id").text: entry.find(f"{THR}in-reply-to")
               for entry in root.findall(f"{ATOM}entry")}
    assert replies[url(0)] is None and replies[url(4)] is None
    for child, parent in ((1, 0), (2, 1), (3, 0), (5, 4)):
        assert replies[url(child)].get("ref") == url(parent)
        assert replies[url(child)].get("href") == url(parent)
    assert "Message 2." in parsed.entries[3].content[0].value


def test_feeds_write_addresses_as_the_pages_do_and_stay_well_formed(app):
    for path in (f"/list/{LIST}/feed/", f"/list/{LIST}/feed/threads", f"/list/{LIST}/thread/{h(4)}/t.atom",
                 "/search.atom?q=feeds"):
        response = TestApp(app).get(path)
        read_feed(response)
        text = response.body.decode("utf-8")
        for address in ("jdoe@example.com", "ada@example.org", "bob@example.net", "carl@example.org",
                        "owner@example.org"):
            assert address not in text, (path, address)
        assert "\x01" not in text
    parsed, _ = read_feed(TestApp(app).get(f"/list/{LIST}/feed/"))
    assert "jdoe at example.com" in parsed.entries[0].content[0].value
    assert parsed.entries[1].title == "Ask bob at example.net  about <feeds> & more"  # the control character left out
    assert parsed.entries[1].author == "carl at example.org"
    assert parsed.entries[0].author == "Ada Lovelace"
    assert parsed.feed.subtitle == "Development, write to owner at example.org"


def test_a_lists_new_threads_count_and_link_their_replies(app):
    parsed, root = read_feed(TestApp(app).get(f"/list/{LIST}/feed/threads"))
    check_entries(parsed, root)
    thread = lambda n: f"{BASE}/list/{LIST}/thread/{h(n)}/"  # noqa: E731
    assert [entry.id for entry in parsed.entries] == [thread(4), thread(0)]
    entries = {entry.find(f"{ATOM}id").text: entry for entry in root.findall(f"{ATOM}entry")}
    assert entries[thread(0)].find(f"{THR}total").text == "3"
    replies = entries[thread(0)].find(f"{ATOM}link[@rel='replies']")
    assert replies.get("href") == thread(0) + "t.atom" and replies.get(f"{THR}count") == "3"
    assert replies.get("type") == "application/atom+xml"
    assert entries[thread(4)].find(f"{THR}total").text == "1"
    assert "Message 0." in parsed.entries[1].content[0].value


def test_one_threads_messages_and_a_searchs_results(app):
    browser = TestApp(app)
    parsed, root = read_feed(browser.get(f"/list/{LIST}/thread/{h(0)}/t.atom"))
    check_entries(parsed, root)
    assert [entry.id for entry in parsed.entries] == [url(n) for n in (3, 2, 1, 0)]
    assert parsed.feed.title == "Feeds"
    parsed, root = read_feed(browser.get("/search.atom", {"q": "feeds"}))
    check_entries(parsed, root)
    assert [entry.id for entry in parsed.entries] == [url(n) for n in (4, 3, 2, 1, 0)]
    assert root.find(f"{ATOM}link[@rel='self']").get("href") == f"{BASE}/search.atom?q=feeds"
    parsed, _ = read_feed(browser.get("/search.atom", {"q": "from:carl"}))
    assert [entry.id for entry in parsed.entries] == [url(4)]
    parsed, _ = read_feed(browser.get("/search.atom"))
    assert parsed.entries == []
    browser.get(f"/list/{LIST}/feed/nothing", status=404)


def test_deleted_messages_leave_every_feed(app):
    with prepare(registry=app.registry) as env:
        delete_messages(env["root"].lists[LIST], [h(2)], User("mod@example.org", "Mod"))
        transaction.commit()
    browser = TestApp(app)
    for path in (f"/list/{LIST}/feed/", f"/list/{LIST}/thread/{h(0)}/t.atom", "/search.atom?q=feeds"):
        parsed, _ = read_feed(browser.get(path))
        assert url(2) not in [entry.id for entry in parsed.entries], path
        assert "Message 2." not in browser.get(path).text
    _, root = read_feed(browser.get(f"/list/{LIST}/feed/threads"))
    assert [e.find(f"{THR}total").text for e in root.findall(f"{ATOM}entry")] == ["1", "2"]


def test_private_feeds_are_for_those_who_may_read_the_list(app, monkeypatch):
    fake = FakeMailman(monkeypatch)
    fake.add_user(MEMBER, "Mia Member", roles=[(PRIVATE, "member")])
    thread = message_id_hash("<boardfeed@example.org>")
    private = [f"/list/{PRIVATE}/feed/", f"/list/{PRIVATE}/feed/threads", f"/list/{PRIVATE}/thread/{thread}/t.atom"]
    anonymous = TestApp(app)
    for path in private:
        assert "Confidential" not in anonymous.get(path, status=403).text
    assert "Feeds secret" not in anonymous.get("/search.atom", {"q": "feeds"}).text
    member = TestApp(app)
    log_in(member, MEMBER)
    for path in private:
        parsed, _ = read_feed(member.get(path))
        assert parsed.entries[0].title == "Feeds secret"
        assert member.get(path).headers["Cache-Control"] == "no-cache, private"
    assert "Feeds secret" in member.get("/search.atom", {"q": "feeds"}).text


def test_a_deleted_message_leaves_every_copy_a_cache_revalidates(app):
    # A feed's or a page's date is its newest message's: deleting an older
    # one left it as it was, and a cache asking "modified since?" was told
    # no, and went on showing the deleted mail to everyone. Nor may a cache
    # keep an answer without asking again.
    browser = TestApp(app)
    paths = (f"/list/{LIST}/feed/", f"/list/{LIST}/thread/{h(0)}/", f"/list/{LIST}/thread/{h(0)}/t.atom")
    before = {path: browser.get(path) for path in paths}
    for answer in before.values():
        assert "no-cache" in answer.headers["Cache-Control"] and "Last-Modified" not in answer.headers
        assert "Message 1." in answer.text
    with prepare(registry=app.registry) as env:
        delete_messages(env["root"].lists[LIST], [h(1)], User("mod@example.org", "Mod"), registry=app.registry)
        transaction.commit()
    for path, answer in before.items():
        for asked in ({"If-None-Match": answer.headers["ETag"]}, {"If-Modified-Since": "Thu, 01 Jan 2099 00:00:00 GMT"}):
            again = browser.get(path, headers=asked, status=200)
            assert "Message 1." not in again.text, (path, asked)


def test_feed_readers_poll_cheaply(app):
    browser = TestApp(app)
    for path in (f"/list/{LIST}/feed/", f"/list/{LIST}/feed/threads", f"/list/{LIST}/thread/{h(0)}/t.atom",
                 "/search.atom?q=feeds"):
        first = browser.get(path)
        assert first.headers["ETag"] and "no-cache" in first.headers["Cache-Control"]
        again = browser.get(path, headers={"If-None-Match": first.headers["ETag"]}, status=304)
        assert again.body == b""
    etag = browser.get(f"/list/{LIST}/feed/").headers["ETag"]
    with prepare(registry=app.registry) as env:
        archive_message(env["root"].lists[LIST], mail(6, "Re: Feeds", 3))
        transaction.commit()
    fresh = browser.get(f"/list/{LIST}/feed/", headers={"If-None-Match": etag})
    assert fresh.status_int == 200 and fresh.headers["ETag"] != etag
    assert read_feed(fresh)[0].entries[0].id == url(6)


def test_pages_name_their_feeds_for_browsers_and_feed_readers(app):
    browser = TestApp(app)
    pages = {
        f"/list/{LIST}/": [f"/list/{LIST}/feed/", f"/list/{LIST}/feed/threads"],
        f"/list/{LIST}/2022/9/": [f"/list/{LIST}/feed/", f"/list/{LIST}/feed/threads"],
        f"/list/{LIST}/thread/{h(0)}/": [f"/list/{LIST}/thread/{h(0)}/t.atom", f"/list/{LIST}/feed/",
                                         f"/list/{LIST}/feed/threads"],
        f"/list/{LIST}/message/{h(5)}/": [f"/list/{LIST}/thread/{h(4)}/t.atom", f"/list/{LIST}/feed/",
                                          f"/list/{LIST}/feed/threads"],
        "/search?q=feeds": ["/search.atom?q=feeds"],
    }
    for path, expected in pages.items():
        page = browser.get(path)
        links = page.html.select('head link[rel="alternate"][type="application/atom+xml"]')
        assert [link["href"].replace(BASE, "") for link in links] == expected, path
        assert all(link.get("title") for link in links)
        for link in links:
            read_feed(browser.get(link["href"]))
        assert [a["href"] for a in page.html.select("a.feed")] == [link["href"] for link in links], path
    assert browser.get("/").html.select('head link[rel="alternate"]') == []


def test_a_members_feed_reader_follows_a_private_list_by_the_members_key(app, monkeypatch):
    import base64

    from kittypyr import security

    fake = FakeMailman(monkeypatch)
    fake.add_user(MEMBER, "Mia Member", roles=[(PRIVATE, "member")])
    member = TestApp(app)
    log_in(member, MEMBER)
    assert all("key=" not in link["href"]
               for link in member.get(f"/list/{LIST}/").html.select('head link[rel="alternate"]'))
    thread = message_id_hash("<boardfeed@example.org>")
    hrefs = [link["href"] for page in (f"/list/{PRIVATE}/", f"/list/{PRIVATE}/thread/{thread}/")
             for link in member.get(page).html.select('head link[rel="alternate"]')]
    assert len(hrefs) == 5 and all("?key=" in href for href in hrefs)
    feed_reader = TestApp(app)  # no cookie, no login
    for href in hrefs:
        answer = feed_reader.get(href)
        parsed, root = read_feed(answer)
        assert parsed.entries[0].title == "Feeds secret"
        assert answer.headers["Cache-Control"] == "no-cache, private"
        assert "key=" in root.find(f"{ATOM}link[@rel='self']").get("href")
        assert "key=" not in root.find(f"{ATOM}id").text
    feed = hrefs[2]
    key = feed.split("key=")[1]
    # A key names its reader: another address with this signature opens nothing.
    forged = base64.urlsafe_b64encode(b"outsider@example.org").decode().rstrip("=") + "." + key.split(".")[1]
    feed_reader.get(feed.split("?")[0], {"key": forged}, status=403)
    feed_reader.get(feed.split("?")[0], {"key": "nonsense"}, status=403)
    # It reads what its reader may read, as Mailman says now.
    fake.roles[MEMBER] = set()
    security.memberships.forget(MEMBER)
    feed_reader.get(feed, status=403)
    fake.roles[MEMBER] = {(PRIVATE, "member")}
    security.memberships.forget(MEMBER)
    feed_reader.get(feed, status=200)
    # A new key: every address with the old one stops working.
    overview = member.get(f"/list/{PRIVATE}/")
    page = overview.click(href="/feed-keys")
    renewed = page.forms["renew-feed-key"].submit().follow()
    assert "You have a new feed key" in renewed.text
    feed_reader.get(feed, status=403)
    # The pages name the new one: the browser's copy is not "unchanged".
    new_feed = member.get(f"/list/{PRIVATE}/", headers={"If-None-Match": overview.headers["ETag"]},
                          status=200).html.select('head link[rel="alternate"]')[0]["href"]
    assert new_feed != feed
    read_feed(feed_reader.get(new_feed))
    TestApp(app).get("/feed-keys", status=403)
    member.post("/feed-keys", status=400)  # no form token


def test_a_members_feed_of_a_merged_threads_old_key_leads_to_the_thread_it_joined(app, monkeypatch):
    # A reply that came before its parent started a thread of its own, merged
    # into the parent's when the parent came: its old key is an alias.
    with prepare(registry=app.registry) as env:
        board = env["root"].lists[PRIVATE]
        archive_message(board, make_message(message_id="<late-child@example.org>", subject="Re: Minutes",
                                            in_reply_to="<late-parent@example.org>", date=START, body="Agreed.\n"))
        archive_message(board, make_message(message_id="<late-parent@example.org>", subject="Minutes",
                                            date=START - timedelta(hours=1), body="The minutes.\n"))
        transaction.commit()
    old, joined = message_id_hash("<late-child@example.org>"), message_id_hash("<late-parent@example.org>")
    fake = FakeMailman(monkeypatch)
    fake.add_user(MEMBER, "Mia Member", roles=[(PRIVATE, "member")])
    member = TestApp(app)
    log_in(member, MEMBER)
    assert member.get(f"/list/{PRIVATE}/thread/{old}/", status=301).location.endswith(f"/thread/{joined}/")
    keyed = member.get(f"/list/{PRIVATE}/thread/{joined}/").html.select('head link[rel="alternate"]')[0]["href"]
    key = keyed.split("key=")[1]
    feed_reader = TestApp(app)  # no cookie: the key alone
    moved = feed_reader.get(f"/list/{PRIVATE}/thread/{old}/t.atom", {"key": key}, status=301)
    assert moved.location.split("?")[0].endswith(f"/thread/{joined}/t.atom") and f"key={key}" in moved.location
    # A redirect that names the reader's key is theirs alone: no shared cache keeps it.
    assert "private" in moved.headers["Cache-Control"]
    parsed, _ = read_feed(feed_reader.get(moved.location))
    assert {entry.title for entry in parsed.entries} == {"Minutes", "Re: Minutes"}
    # Without a key, or with a forged one, nothing says where it went.
    for params in ({}, {"key": "nonsense"}):
        refused = feed_reader.get(f"/list/{PRIVATE}/thread/{old}/t.atom", params, status=403)
        assert joined not in refused.text


def test_a_members_search_feed_finds_the_private_lists_mail_by_the_members_key(app, monkeypatch):
    """A search in a private list the member reads: its feed link carries the key, and a feed reader gets
    the results with it; without it, or with someone else's, nothing private."""
    fake = FakeMailman(monkeypatch)
    fake.add_user(MEMBER, "Mia Member", roles=[(PRIVATE, "member")])
    fake.add_user("other@example.org", "Otto Other", roles=[])
    member = TestApp(app)
    log_in(member, MEMBER)
    page = member.get("/search", params={"q": "confidential"})
    assert "Feeds secret" in page.text
    (href,) = [link["href"] for link in page.html.select('head link[rel="alternate"]')]
    assert "key=" in href
    feed_reader = TestApp(app)
    parsed, _ = read_feed(feed_reader.get(href))
    assert [entry.title for entry in parsed.entries] == ["Feeds secret"]
    assert feed_reader.get(href).headers["Cache-Control"] == "no-cache, private"
    parsed, _ = read_feed(feed_reader.get(href.split("&key=")[0]))
    assert parsed.entries == []
    # A public search's feed needs no key.
    public = member.get("/search", params={"q": "feeds", "mlist": LIST})
    assert all("key=" not in link["href"] for link in public.html.select('head link[rel="alternate"]'))
    other = TestApp(app)
    log_in(other, "other@example.org")
    other_href = other.get("/search", params={"q": "confidential"}).html.select('head link[rel="alternate"]')
    assert all("key=" not in link["href"] for link in other_href)
