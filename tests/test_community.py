"""Profiles, votes and reputation, tags, favourites and read marks, as readers see them (WebTest)."""

import re
from datetime import datetime, timedelta, timezone

import pytest
import transaction
from pyramid.scripting import prepare
from webtest import TestApp

from kittypyr.archiving import archive_message, ensure_mailing_list
from kittypyr.msgid import message_id_hash
from tests.accounts import FakeMailman, csrf_token, log_in
from tests.mailbuilder import make_message
from tests.test_app import make_app

PUBLIC = "dev@lists.example.org"
PRIVATE = "board@lists.example.org"
ADA = ("Ada Lovelace", "ada@example.org")
BOB = ("Bob Babbage", "Bob@Example.org")
SECRETIVE = ("Sam Secret", "sam@example.org")
CAROL = "carol@example.org"
DAVE = "dave@example.org"
OUTSIDER = "outsider@example.org"
START = datetime(2023, 3, 1, 9, 0, tzinfo=timezone.utc)


def h(n):
    return message_id_hash(f"<c{n}@example.org>")


def mail(n, subject, sender, reply_to=None, minutes=0):
    return make_message(
        message_id=f"<c{n}@example.org>", subject=subject, sender=sender,
        date=START + timedelta(minutes=minutes or n),
        in_reply_to=f"<c{reply_to}@example.org>" if reply_to is not None else None,
        references=[f"<c{reply_to}@example.org>"] if reply_to is not None else None,
        body=f"Message {n} about caches.\n")


def archive(app, list_address, raw):
    with prepare(registry=app.registry) as env:
        archive_message(ensure_mailing_list(env["root"], list_address), raw)
        transaction.commit()


@pytest.fixture
def site(tmp_path):
    """A public list with two threads and a private one, anew for each test."""
    app = make_app(tmp_path)
    with prepare(registry=app.registry) as env:
        public = ensure_mailing_list(env["root"], PUBLIC)
        archive_message(public, mail(0, "Cache flushes", ADA))
        archive_message(public, mail(1, "Re: Cache flushes", BOB, reply_to=0))
        archive_message(public, mail(2, "Re: Cache flushes", ADA, reply_to=1))
        archive_message(public, mail(3, "TLB sizes", BOB))
        private = ensure_mailing_list(env["root"], PRIVATE)
        private.archive_policy = "private"
        archive_message(private, mail(10, "Board budget", ADA))
        archive_message(private, mail(11, "Hush", SECRETIVE))
        transaction.commit()
    yield app
    app.registry._zodb_databases[""].close()


@pytest.fixture
def mailman(monkeypatch):
    fake = FakeMailman(monkeypatch)
    fake.add_user(CAROL, "Carol Coder", roles=[(PUBLIC, "member")])
    fake.add_user(DAVE, "Dave Debugger")
    fake.add_user(ADA[1], "Ada Lovelace", roles=[(PRIVATE, "member"), (PUBLIC, "owner")])
    fake.add_user(OUTSIDER, "Otto Outsider")
    return fake


def reader(site, address=None):
    app = TestApp(site)
    if address is not None:
        assert log_in(app, address).status_int == 303
    return app


THREAD = f"/list/{PUBLIC}/thread/{h(0)}/"
OTHER_THREAD = f"/list/{PUBLIC}/thread/{h(3)}/"


def article(page, n):
    return page.html.select_one(f"article#m-{h(n)}")


def vote_form(page, n):
    for form in page.forms.values():
        if form.action.endswith(f"/message/{h(n)}/vote"):
            return form
    return None


def vote(page, n, button):
    """Press the up (0) or down (1) button of message ``n``; return the page it leads back to."""
    answer = vote_form(page, n).submit("value", index=button)
    assert answer.status_int == 303 and answer.location.endswith(f"#m-{h(n)}")
    return answer.follow()


def score(page, n):
    return int(article(page, n).select_one("footer.votes .score").text)


def profile_link(page, n):
    return article(page, n).select_one(".sender a")["href"]


# Profiles


def test_every_sender_has_a_profile_linked_from_their_messages(site, mailman):
    app = reader(site)
    page = app.get(THREAD)
    ada = profile_link(page, 0)
    bob = profile_link(page, 1)
    assert ada == profile_link(page, 2) != bob
    # The address is nowhere in it: sixteen hex digits (where "ada" may
    # stand by chance, as it did once in "…ba47ada7ba1").
    path, person_id = ada.rstrip("/").rsplit("/", 1)
    assert re.fullmatch(r"[0-9a-f]{16}", person_id)
    assert path.endswith("/users") and "example" not in ada
    # The same sender, spelled in another case, is the same person.
    assert profile_link(app.get(OTHER_THREAD), 3) == bob

    profile = app.get(ada)
    assert profile.html.select_one("h1").text == "Ada Lovelace"
    assert profile.html.select_one("svg.avatar") is not None
    assert profile.html.select_one("dd.total").text == "2"
    assert "Cache flushes" in profile.html.select_one("dd.first-post").text
    assert profile.html.select_one("dd.first-post a")["href"].endswith(f"/message/{h(0)}/")
    assert profile.html.select_one("dd.last-post a")["href"].endswith(f"/message/{h(2)}/")
    assert [li.a.text for li in profile.html.select("ul.per-list li")] == ["dev"]
    assert "2 messages" in profile.html.select_one("ul.per-list li").text
    threads = profile.html.select("section.recent-threads li")
    assert [li.a.text for li in threads] == ["Cache flushes"]
    assert "started it" in threads[0].text
    assert profile.html.select_one("strong.reputation").text == "0"
    assert "ada@" not in profile.text and "ada at example" not in profile.text
    app.get("/users/0123456789abcdef/", status=404)
    app.get("/users/", status=404)


def test_a_sender_whose_every_message_is_deleted_has_no_profile_left(site, mailman):
    from kittypyr import moderation
    from kittypyr.security import User

    app = reader(site)
    bob = profile_link(app.get(THREAD), 1)
    app.get(bob)
    with prepare(registry=site.registry) as env:
        moderation.delete_sender(env["root"], BOB[1], User("admin@example.org", "Admin"), registry=site.registry)
        transaction.commit()
        # Nothing keeps the address of a sender the archive holds no mail of.
        assert BOB[1].lower() not in list(env["root"].people.addresses.values())
    app.get(bob, status=404)
    # Ada, with mail left, keeps hers.
    app.get(profile_link(app.get(THREAD), 0))


def test_a_profile_shows_private_lists_only_to_who_may_read_them(site, mailman):
    anonymous = reader(site)
    ada = profile_link(anonymous.get(THREAD), 0)
    assert "Board" not in anonymous.get(ada).text and "board" not in anonymous.get(ada).text
    assert anonymous.get(ada).html.select_one("dd.total").text == "2"
    member = reader(site, ADA[1])
    profile = member.get(ada)
    assert sorted(li.a.text for li in profile.html.select("ul.per-list li")) == ["board", "dev"]
    assert profile.html.select_one("dd.total").text == "3"
    assert profile.html.select_one("dd.last-post").a.text == "Board budget"
    # Someone who wrote only to a private list has no page for outsiders.
    secretive = member.get(f"/list/{PRIVATE}/thread/{h(11)}/")
    sam = secretive.html.select_one(f"article#m-{h(11)} .sender a")["href"]
    assert member.get(sam).html.select_one("h1").text == "Sam Secret"
    anonymous.get(sam, status=404)
    reader(site, OUTSIDER).get(sam, status=404)


# Votes and reputation


def test_voting_without_javascript_changing_and_taking_back(site, mailman):
    anonymous = reader(site)
    page = anonymous.get(THREAD)
    assert vote_form(page, 1) is None
    assert "Log in" in article(page, 1).select_one("footer.votes").text

    carol = reader(site, CAROL)
    page = carol.get(THREAD)
    assert score(page, 1) == 0
    page = vote(page, 1, 0)  # up
    assert score(page, 1) == 1
    up = article(page, 1).select_one("button.vote-up")
    assert up["aria-pressed"] == "true" and up["value"] == "0"  # pressing again takes it back
    assert page.html.select_one("#thread-score").text == "1"
    bob_reputation = article(page, 1).select_one(".reputation").text
    assert bob_reputation == "+1"
    assert article(page, 0).select_one(".reputation").text == "+0"  # Ada's

    page = vote(page, 1, 1)  # down instead
    assert score(page, 1) == -1
    assert article(page, 1).select_one("button.vote-down")["aria-pressed"] == "true"
    assert article(page, 1).select_one("button.vote-up")["aria-pressed"] == "false"
    assert page.html.select_one("#thread-score").text == "-1"

    page = vote(page, 1, 1)  # pressed again: taken back
    assert score(page, 1) == 0
    assert article(page, 1).select_one("button.vote-down")["aria-pressed"] == "false"
    assert page.html.select_one("#thread-score").text == "0"


def test_reputation_is_the_sum_of_votes_on_a_senders_messages(site, mailman):
    for voter, button in ((CAROL, 0), (DAVE, 0), (OUTSIDER, 1)):
        app = reader(site, voter)
        vote(app.get(THREAD), 1, button)
    app = reader(site, DAVE)
    vote(app.get(OTHER_THREAD), 3, 0)
    page = app.get(THREAD)
    assert score(page, 1) == 1
    assert article(page, 1).select_one("footer.votes .score")["title"] == "2 up, 1 down"
    # Bob: +1 on his reply, +1 on his other thread.
    assert article(page, 1).select_one(".reputation").text == "+2"
    profile = app.get(profile_link(page, 1))
    assert profile.html.select_one("strong.reputation").text == "2"


def test_a_long_threads_pages_lead_to_its_first_unread_message_and_count_every_vote(site, mailman):
    carol = reader(site, CAROL)
    carol.get(f"/list/{PUBLIC}/")  # a first visit: what is archived so far is read
    for n in range(100, 230):
        archive(site, PUBLIC, mail(n, "Re: Cache flushes", BOB, reply_to=0, minutes=100 + n))
    dave = reader(site, DAVE)
    vote(dave.get(THREAD, {"page": "2"}), 210, 0)

    page = carol.get(THREAD)
    assert len(page.html.select("article.message")) == 100 and article(page, 210) is None
    # The replies to message 0 come after message 1's branch: the first new
    # one, 100, is on this page; 230 messages in all, 130 of them new.
    assert page.html.select_one("a.first-unread")["href"] == f"#m-{h(100)}"
    assert "130 new" in page.html.select_one("p.jump").text
    # The thread's votes are counted on every page, whichever shows them.
    assert page.html.select_one("#thread-score").text == "1"
    carol.get(f"/list/{PUBLIC}/")
    archive(site, PUBLIC, mail(300, "Re: Cache flushes", ADA, reply_to=0, minutes=900))
    page = carol.get(THREAD)
    assert page.html.select_one("a.first-unread")["href"] == (
        f"http://localhost{THREAD}?page=2#m-{h(300)}")
    assert "1 new" in page.html.select_one("p.jump").text
    later = carol.get(THREAD, {"page": "2"})
    assert [a["id"] for a in later.html.select("article.message") if a.select_one(".new-mark")] == []


def test_voting_with_javascript_answers_json(site, mailman):
    carol = reader(site, CAROL)
    url = f"/list/{PUBLIC}/message/{h(1)}/vote"
    token = csrf_token(carol)
    answer = carol.post(url, {"value": "1"}, headers={"Accept": "application/json", "X-CSRF-Token": token})
    assert answer.json == {"message": h(1), "score": 1, "up": 1, "down": 0, "mine": 1, "thread_score": 1,
                           "reputation": 1}
    answer = carol.post(url, {"value": "-1", "csrf_token": token}, headers={"Accept": "application/json"})
    assert answer.json["score"] == -1 and answer.json["mine"] == -1 and answer.json["thread_score"] == -1
    # Without the form token, nothing happens.
    carol.post(url, {"value": "1"}, headers={"Accept": "application/json"}, status=400)
    assert carol.post(url, {"value": "7", "csrf_token": token}, headers={"Accept": "application/json"},
                      status=400).json["error"]
    assert score(carol.get(THREAD), 1) == -1


def test_nobody_votes_on_their_own_messages_or_without_logging_in(site, mailman):
    ada = reader(site, ADA[1])
    page = ada.get(THREAD)
    assert vote_form(page, 0) is None and vote_form(page, 1) is not None
    ada.post(f"/list/{PUBLIC}/message/{h(0)}/vote", {"value": "1", "csrf_token": csrf_token(ada)}, status=403)
    anonymous = reader(site)
    refused = anonymous.post(f"/list/{PUBLIC}/message/{h(1)}/vote", {"value": "1"}, status=403)
    assert "Please log in" in refused.text
    # Back from logging in, the form's address leads to the message.
    assert anonymous.get(f"/list/{PUBLIC}/message/{h(1)}/vote").location.endswith(f"/message/{h(1)}/")
    assert score(ada.get(THREAD), 0) == 0


def test_writes_on_a_private_list_are_for_its_members(site, mailman):
    thread = f"/list/{PRIVATE}/thread/{h(10)}/"
    outsider = reader(site, OUTSIDER)
    token = csrf_token(outsider)
    for name, data in (("message/%s/vote" % h(10), {"value": "1"}), (f"thread/{h(10)}/tag", {"tag": "x"}),
                       (f"thread/{h(10)}/favourite", {"favourite": "1"})):
        outsider.post(f"/list/{PRIVATE}/{name}", dict(data, csrf_token=token), status=403)
    carol = reader(site, CAROL)  # a member of the public list only
    carol.post(f"/list/{PRIVATE}/thread/{h(10)}/tag", {"tag": "x", "csrf_token": csrf_token(carol)},
               status=403)
    # Ada is a member: she votes on Sam's message there and may tag.
    member = reader(site, ADA[1])
    page = member.get(f"/list/{PRIVATE}/thread/{h(11)}/")
    page = vote(page, 11, 0)
    assert score(page, 11) == 1
    assert page.forms and any(f.action.endswith("/tag") for f in page.forms.values())
    assert score(member.get(thread), 10) == 0


def test_lists_sort_threads_by_activity_or_popularity(site, mailman):
    app = reader(site)
    by_activity = app.get(f"/list/{PUBLIC}/threads")
    assert [li.a.text for li in by_activity.html.select("ol.threads li")] == ["TLB sizes", "Cache flushes"]
    for voter in (CAROL, DAVE):
        vote(reader(site, voter).get(THREAD), 2, 0)
    by_votes = app.get(f"/list/{PUBLIC}/threads", {"sort": "popularity"})
    items = by_votes.html.select("ol.threads li")
    assert [li.a.text for li in items] == ["Cache flushes", "TLB sizes"]
    assert "+2 votes" in items[0].select_one(".thread-score").text
    overview = app.get(f"/list/{PUBLIC}/")
    assert [li.a.text for li in overview.html.select("section.popular li")] == ["Cache flushes"]
    # Voted down, a thread goes below those nobody voted on.
    vote(reader(site, CAROL).get(OTHER_THREAD), 3, 1)
    vote(reader(site, CAROL).get(THREAD), 2, 0)  # taken back: Cache flushes has +1 from Dave
    items = app.get(f"/list/{PUBLIC}/threads", {"sort": "popularity"}).html.select("ol.threads li")
    assert [li.a.text for li in items] == ["Cache flushes", "TLB sizes"]
    assert items[1].select_one(".thread-score").text == "-1 vote"


# Tags


def tag_form(page):
    return next(f for f in page.forms.values() if f.action.endswith("/tag"))


def untag_form(page, tag):
    return next(f for f in page.forms.values() if f.action.endswith("/untag") and f["tag"].value == tag)


def test_tagging_a_thread_and_taking_back_ones_own_tag(site, mailman):
    anonymous = reader(site)
    assert not any(f.action.endswith("/tag") for f in anonymous.get(THREAD).forms.values())
    assert "No tags yet" in anonymous.get(THREAD).text

    carol = reader(site, CAROL)
    form = tag_form(carol.get(THREAD))
    form["tag"] = "  Needs Review "
    page = form.submit().follow()
    assert [a.text for a in page.html.select("ul.tags a.tag")] == ["needs-review"]
    assert untag_form(page, "needs-review")

    dave = reader(site, DAVE)
    page = dave.get(THREAD)
    assert not any(f.action.endswith("/untag") for f in page.forms.values())  # not his to remove
    form = tag_form(page)
    form["tag"] = "needs-review"
    form.submit()
    form = tag_form(dave.get(THREAD))
    form["tag"] = "mips"
    page = form.submit().follow()
    assert [a.text for a in page.html.select("ul.tags a.tag")] == ["needs-review", "mips"]
    assert "×2" in page.html.select_one("ul.tags li").text

    bad = tag_form(page)
    bad["tag"] = "no/slashes"
    dave.post(bad.action, {"tag": "no/slashes", "csrf_token": csrf_token(dave)}, status=400)

    # Tags show in the lists of threads, and lead to the tag's page.
    overview = anonymous.get(f"/list/{PUBLIC}/")
    item = overview.html.select_one("section.recent li:has(a[href$='%s/'])" % h(0))
    assert [a.text for a in item.select("a.tag")] == ["needs-review", "mips"]
    assert [li.a.text for li in overview.html.select("section.list-tags li")] == ["mips", "needs-review"]
    month = anonymous.get(f"/list/{PUBLIC}/2023/3/")
    assert "needs-review" in month.html.select_one("ol.threads").text
    tagged = anonymous.get(f"/list/{PUBLIC}/tag/needs-review/")
    assert [li.a.text for li in tagged.html.select("ol.threads li")] == ["Cache flushes"]
    assert anonymous.get(f"/list/{PUBLIC}/tag/Needs-Review/").location.endswith("/tag/needs-review/")
    assert anonymous.get(f"/list/{PUBLIC}/tag/").html.select_one("ul.tag-cloud").text.count("1 thread\n") == 2

    # Searching understands tag:
    found = anonymous.get("/search", {"q": "tag:needs-review"})
    assert found.html.select_one("p.count").text.startswith("3 messages found")
    in_list = anonymous.get("/search", {"q": "caches tag:mips", "mlist": PUBLIC})
    assert len(in_list.html.select("ol.hits li")) == 3
    assert anonymous.get("/api/search", {"q": "tag:needs-review"}).json["count"] == 3

    untag_form(carol.get(THREAD), "needs-review").submit()
    page = carol.get(THREAD)
    assert [a.text for a in page.html.select("ul.tags a.tag")] == ["mips", "needs-review"]  # Dave's stays
    untag_form(dave.get(THREAD), "needs-review").submit()
    assert [a.text for a in dave.get(THREAD).html.select("ul.tags a.tag")] == ["mips"]
    assert anonymous.get(f"/list/{PUBLIC}/tag/needs-review/").html.select("ol.threads li") == []
    nothing = anonymous.get("/search", {"q": "tag:needs-review"})
    assert "No thread in these lists is tagged" in nothing.text


def drop_tag_form(page, tag):
    return next((f for f in page.forms.values() if f.action.endswith("/drop-tag") and f["tag"].value == tag), None)


def test_a_lists_moderators_take_a_tag_off_a_thread_for_everyone(site, mailman):
    # Any reader with an account may tag: vandalism must have an answer.
    for address in (CAROL, DAVE):
        tagger = reader(site, address)
        form = tag_form(tagger.get(THREAD))
        form["tag"] = "buy-cheap-pills"
        form.submit()
    carol = reader(site, CAROL)
    assert drop_tag_form(carol.get(THREAD), "buy-cheap-pills") is None  # a member, not a moderator
    carol.post(f"{THREAD}drop-tag", {"tag": "buy-cheap-pills", "csrf_token": csrf_token(carol)}, status=403)

    owner = reader(site, ADA[1])
    page = drop_tag_form(owner.get(THREAD), "buy-cheap-pills").submit().follow()
    assert page.html.select("ul.tags a.tag") == []
    anonymous = reader(site)
    assert "No thread in these lists is tagged" in anonymous.get("/search", {"q": "tag:buy-cheap-pills"}).text
    assert anonymous.get(f"/list/{PUBLIC}/tag/buy-cheap-pills/").html.select("ol.threads li") == []
    with prepare(registry=site.registry) as env:
        entry = env["root"].audit_log.newest(size=1, list_address=PUBLIC)[0]
        assert entry.actor == ADA[1] and entry.threads == (h(0),)
        # By its key, never its subject: the log outlives what it names (a thread deleted after).
        assert entry.summary == f"Took the tag buy-cheap-pills off the thread {h(0)}"
        transaction.abort()


def test_a_reader_gives_one_thread_a_bounded_number_of_tags(site, mailman):
    from kittypyr.tags import MAX_TAGS_PER_READER

    dave = reader(site, DAVE)
    for n in range(MAX_TAGS_PER_READER):
        form = tag_form(dave.get(THREAD))
        form["tag"] = f"tag{n}"
        form.submit(status=303)
    refused = dave.post(f"{THREAD}tag", {"tag": "one-more", "csrf_token": csrf_token(dave)}, status=400)
    assert f"at most {MAX_TAGS_PER_READER} tags" in refused.text
    assert "one-more" not in dave.get(THREAD).text
    # Someone else still may.
    carol = reader(site, CAROL)
    form = tag_form(carol.get(THREAD))
    form["tag"] = "one-more"
    assert "one-more" in form.submit().follow().text


def test_tags_of_private_lists_stay_private(site, mailman):
    member = reader(site, ADA[1])
    form = tag_form(member.get(f"/list/{PRIVATE}/thread/{h(10)}/"))
    form["tag"] = "budget"
    form.submit()
    assert member.get("/search", {"q": "tag:budget"}).html.select_one("p.count").text.startswith("1 message found")
    anonymous = reader(site)
    assert "No thread in these lists is tagged" in anonymous.get("/search", {"q": "tag:budget"}).text
    anonymous.get(f"/list/{PRIVATE}/tag/budget/", status=403)


# Favourites


def test_favourites_are_marked_and_listed_on_the_readers_page(site, mailman):
    anonymous = reader(site)
    assert not any(f.action.endswith("/favourite") for f in anonymous.get(THREAD).forms.values())
    assert "Please log in" in anonymous.get("/users/me/", status=403).text

    carol = reader(site, CAROL)
    assert "No favourite threads yet" in carol.get("/users/me/").text
    form = next(f for f in carol.get(THREAD).forms.values() if f.action.endswith("/favourite"))
    page = form.submit().follow()
    button = page.html.select_one("form.favourite button")
    assert button["aria-pressed"] == "true" and "A favourite of yours" in button.text
    mine = carol.get("/users/me/")
    assert [li.a.text for li in mine.html.select("section.favourites li")] == ["Cache flushes"]
    assert "★" in carol.get(f"/list/{PUBLIC}/").html.select_one("section.recent li:has(a[href$='%s/'])"
                                                                 % h(0)).text
    # Only one's own.
    assert "No favourite threads yet" in reader(site, DAVE).get("/users/me/").text

    form = next(f for f in carol.get(THREAD).forms.values() if f.action.endswith("/favourite"))
    form.submit()
    assert "No favourite threads yet" in carol.get("/users/me/").text


# Read and unread


def unread_titles(page, section="section.recent"):
    return [li.a.text for li in page.html.select(f"{section} li") if li.select_one(".unread-mark")]


def test_threads_with_new_messages_are_unread_until_opened(site, mailman):
    carol = reader(site, CAROL)
    overview = carol.get(f"/list/{PUBLIC}/")
    assert unread_titles(overview) == []  # a first visit: everything so far counts as read
    archive(site, PUBLIC, mail(4, "Re: Cache flushes", BOB, reply_to=2, minutes=60))
    archive(site, PUBLIC, mail(5, "Re: Cache flushes", ADA, reply_to=4, minutes=61))
    archive(site, PUBLIC, mail(6, "Brand new topic", BOB, minutes=62))
    overview = carol.get(f"/list/{PUBLIC}/")
    assert sorted(unread_titles(overview)) == ["Brand new topic", "Cache flushes"]
    assert unread_titles(carol.get(f"/list/{PUBLIC}/threads"), "ol.threads") == [
        "Brand new topic", "Cache flushes"]
    assert unread_titles(carol.get(f"/list/{PUBLIC}/2023/3/"), "ol.threads") == [
        "Brand new topic", "Cache flushes"]  # latest activity first

    page = carol.get(THREAD)
    new = [a["id"] for a in page.html.select("article.message") if a.select_one(".new-mark")]
    assert new == [f"m-{h(4)}", f"m-{h(5)}"]
    assert page.html.select_one("a.first-unread")["href"] == f"#m-{h(4)}"
    assert "2 new" in page.html.select_one("p.jump").text
    # Opened, it is read: no marks the next time.
    page = carol.get(THREAD)
    assert page.html.select_one("a.first-unread") is None and page.html.select(".new-mark") == []
    assert unread_titles(carol.get(f"/list/{PUBLIC}/")) == ["Brand new topic"]
    # Someone else's marks are their own.
    dave = reader(site, DAVE)
    assert unread_titles(dave.get(f"/list/{PUBLIC}/")) == []
    archive(site, PUBLIC, mail(7, "Re: Brand new topic", ADA, reply_to=6, minutes=63))
    assert unread_titles(dave.get(f"/list/{PUBLIC}/")) == ["Brand new topic"]

    form = next(f for f in carol.get(f"/list/{PUBLIC}/").forms.values() if f.action.endswith("/mark-read"))
    overview = form.submit().follow()
    assert unread_titles(overview) == []


def test_anonymous_readers_leave_nothing_on_the_server(site, mailman):
    app = reader(site)
    for url in (THREAD, f"/list/{PUBLIC}/", f"/list/{PUBLIC}/threads", f"/list/{PUBLIC}/tag/",
                profile_link(app.get(THREAD), 0)):
        response = app.get(url)
        assert "Set-Cookie" not in response.headers, url
    page = app.get(THREAD)
    # What the browser needs to keep read marks itself.
    section = page.html.select_one("section.thread-community")
    assert section["data-thread"] == f"{PUBLIC}/{h(0)}" and float(section["data-last"]) > 0
    marks = app.get(f"/list/{PUBLIC}/").html.select_one("section.recent .thread-marks")
    assert marks["data-thread"].startswith(PUBLIC + "/") and float(marks["data-last"]) > 0
    with prepare(registry=site.registry) as env:
        assert len(env["root"].readers) == 0


# The reader's own page


def test_the_readers_own_page(site, mailman):
    ada = reader(site, ADA[1])
    vote(ada.get(THREAD), 1, 0)
    vote(ada.get(OTHER_THREAD), 3, 1)
    vote(reader(site, CAROL).get(THREAD), 2, 0)
    page = ada.get("/users/me/")
    assert page.html.select_one("h1").text == "Ada Lovelace"
    assert page.html.select_one("strong.reputation").text == "1"
    assert page.html.select_one("a.public-profile")["href"] == profile_link(ada.get(THREAD), 0)
    votes = page.html.select("section.my-votes li")
    assert [(li.select_one(".vote-value").text, li.a.text) for li in votes] == [
        ("▼ down", "TLB sizes"), ("▲ up", "Re: Cache flushes")]
    assert sorted(li.a.text for li in page.html.select("section.my-posts ul.per-list li")) == ["board", "dev"]
    assert [li.a.text for li in page.html.select("section.my-posts ol.threads li")] == [
        "Board budget", "Cache flushes"]
    lists = {li.a.text: li.select_one(".meta").text for li in page.html.select("section.subscriptions li")}
    assert lists == {"board": "member", "dev": "owner"}
    assert "private" in page.headers["Cache-Control"]
    assert "Your page" in ada.get("/").html.select_one("a.my-page").text


# Deleting messages, and threads joining


def test_deleting_a_message_takes_its_votes_out_of_reputations(site, mailman):
    for voter in (CAROL, DAVE):
        vote(reader(site, voter).get(THREAD), 1, 0)
    app = reader(site, CAROL)
    bob = profile_link(app.get(THREAD), 1)
    assert app.get(bob).html.select_one("strong.reputation").text == "2"
    with prepare(registry=site.registry) as env:
        mailing_list = env["root"].lists[PUBLIC]
        message = mailing_list.messages[h(1)]
        mailing_list.threads[h(0)].remove_message(message)
        mailing_list.messages.remove(h(1))
        transaction.commit()
    profile = app.get(bob)
    assert profile.html.select_one("strong.reputation").text == "0"
    assert profile.html.select_one("dd.total").text == "1"
    page = app.get(THREAD)
    assert page.html.select_one("#thread-score").text == "0"
    assert "Re: Cache flushes" not in app.get("/users/me/").html.select_one("section.my-votes").text
    items = app.get(f"/list/{PUBLIC}/threads", {"sort": "popularity"}).html.select("ol.threads li")
    assert [li.select_one(".thread-score") for li in items] == [None, None]


def test_votes_and_tags_follow_a_thread_into_the_one_that_absorbs_it(site, mailman):
    # A reply whose parent has not arrived yet starts a thread of its own.
    archive(site, PUBLIC, mail(21, "Re: Late", BOB, reply_to=20, minutes=90))
    carol = reader(site, CAROL)
    orphan = f"/list/{PUBLIC}/thread/{h(21)}/"
    vote(carol.get(orphan), 21, 0)
    form = tag_form(carol.get(orphan))
    form["tag"] = "late"
    form.submit()
    archive(site, PUBLIC, mail(20, "Late", ADA, minutes=80))
    joined = f"/list/{PUBLIC}/thread/{h(20)}/"
    assert carol.get(orphan).location.endswith(joined)
    page = carol.get(joined)
    assert score(page, 21) == 1 and page.html.select_one("#thread-score").text == "1"
    assert [a.text for a in page.html.select("ul.tags a.tag")] == ["late"]
    assert untag_form(page, "late")
    tagged = carol.get(f"/list/{PUBLIC}/tag/late/")
    assert [li.a["href"] for li in tagged.html.select("ol.threads li")] == ["http://localhost" + joined]
    items = carol.get(f"/list/{PUBLIC}/threads", {"sort": "popularity"}).html.select("ol.threads li")
    assert items[0].a.text == "Late" and "+1 vote" in items[0].text and "+1 votes" not in items[0].text


# Administration meets community


def test_deleting_a_message_takes_its_votes_and_post_out_of_the_senders_profile(site, mailman):
    for voter in (CAROL, DAVE):
        vote(reader(site, voter).get(THREAD), 1, 0)
    vote(reader(site, CAROL).get(OTHER_THREAD), 3, 0)
    page = reader(site).get(THREAD)
    bob = profile_link(page, 1)
    profile = reader(site).get(bob)
    assert profile.html.select_one("strong.reputation").text == "3"
    assert profile.html.select_one("dd.total").text == "2"

    owner = reader(site, ADA[1])  # an owner of the public list
    owner.get(f"/list/{PUBLIC}/message/{h(1)}/delete").forms["moderate-form"].submit(status=303)

    profile = reader(site).get(bob)
    assert profile.html.select_one("strong.reputation").text == "1"  # only TLB sizes' vote is left
    assert profile.html.select_one("dd.total").text == "1"
    page = reader(site).get(THREAD)
    assert article(page, 1) is None
    assert article(page, 0).select_one(".reputation").text == "+0"
