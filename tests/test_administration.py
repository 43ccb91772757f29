"""Administration through the web: who may delete and re-thread, what readers then see (WebTest).

Roles come from FakeMailman (tests/accounts.py); site administrators from
``kittypyr.admins``.
"""

import re
from datetime import datetime, timedelta, timezone
from urllib.parse import urlsplit

import pytest
import transaction
from pyramid.scripting import prepare
from webtest import TestApp

from kittypyr.archiving import archive_message, ensure_mailing_list
from kittypyr.msgid import message_id_hash
from tests.accounts import FakeMailman, csrf_token, log_in
from tests.mailbuilder import attachment, make_message, multipart, text_part
from tests.test_app import make_app

DEV = "dev@lists.example.org"
USERS = "users@lists.example.org"
NOW = datetime.now(timezone.utc).replace(microsecond=0)
OLD = datetime(2019, 3, 14, 9, 26, tzinfo=timezone.utc)

ADMIN = "admin@example.org"
OWNER = "owner@example.org"
MODERATOR = "moderator@example.org"
MEMBER = "member@example.org"
OTHER_OWNER = "other-owner@example.org"
ANONYMOUS = None

ADA = ("Ada Lovelace", "ada@example.org")
BOB = ("Bob Builder", "bob@example.org")
CARL = ("Carl Cook", "carl@example.org")
SECRET = "zebrafinch"


def h(n):
    return message_id_hash(f"<adm{n}@example.org>")


def mail(n, reply_to=None, sender=ADA, body=None, when=None, subject=None):
    return make_message(
        message_id=f"<adm{n}@example.org>",
        subject=subject or (f"Re: topic {reply_to}" if reply_to is not None else f"Topic {n}"),
        sender=sender,
        date=when or NOW - timedelta(days=2, minutes=-n),
        in_reply_to=f"<adm{reply_to}@example.org>" if reply_to is not None else None,
        references=[f"<adm{reply_to}@example.org>"] if reply_to is not None else None,
        body=body or f"Message number {n}.\n",
    )


# Thread 0 in dev: 0 <- 1 <- 2, 1 <- 3, 0 <- 4; Bob wrote 1 (with a word
# nobody else uses and an attachment) and 4. Thread 10: 10 <- 11. Thread 20,
# in 2019, alone. In users: Bob's 30.
DEV_MAIL = [
    mail(0, subject="Kernel build"),
    mail(1, 0, sender=BOB, body=multipart(
        "mixed", text_part(f"My password is {SECRET}, oops.\n"),
        attachment(b"secret,figures\n", "text/csv", "figures.csv"))),
    mail(2, 1),
    mail(3, 1, sender=CARL),
    mail(4, 0, sender=BOB),
    mail(10, subject="Other topic"),
    mail(11, 10, sender=CARL),
    mail(20, when=OLD, subject="Old news"),
]
USERS_MAIL = [mail(30, sender=BOB, subject="Hello users")]


@pytest.fixture
def site(tmp_path):
    app = make_app(tmp_path)
    app.registry.settings["kittypyr.admins"] = ADMIN
    with prepare(registry=app.registry) as env:
        dev = ensure_mailing_list(env["root"], DEV)
        for raw in DEV_MAIL:
            archive_message(dev, raw)
        users = ensure_mailing_list(env["root"], USERS)
        for raw in USERS_MAIL:
            archive_message(users, raw)
        transaction.commit()
    yield app
    app.registry._zodb_databases[""].close()


@pytest.fixture
def mailman(monkeypatch):
    fake = FakeMailman(monkeypatch)
    fake.add_user(ADMIN, "Ada Admin")
    fake.add_user(OWNER, "Olga Owner", roles=[(DEV, "owner"), (DEV, "member")])
    fake.add_user(MODERATOR, "Max Moderator", roles=[(DEV, "moderator")])
    fake.add_user(MEMBER, "Mia Member", roles=[(DEV, "member"), (USERS, "member")])
    fake.add_user(OTHER_OWNER, "Otto Other", roles=[(USERS, "owner")])
    return fake


def browser(site, who):
    app = TestApp(site)
    if who is not None:
        assert log_in(app, who).status_int == 303
    return app


MODERATORS = [ADMIN, OWNER, MODERATOR]
NOT_MODERATORS = [ANONYMOUS, MEMBER, OTHER_OWNER]

THREAD = f"/list/{DEV}/thread/{h(0)}/"


def message_url(n, list_address=DEV):
    return f"/list/{list_address}/message/{h(n)}/"


# --- who sees what, who may do what ---------------------------------------------


@pytest.mark.parametrize("who", MODERATORS)
def test_list_administrators_see_the_controls(site, mailman, who):
    app = browser(site, who)
    page = app.get(THREAD)
    assert len(page.html.select("article.message .moderation")) == 5
    boxes = page.html.select('article.message input[type=checkbox][form="select-messages"]')
    assert [box["value"] for box in boxes] == [h(0), h(1), h(2), h(3), h(4)]
    form = page.html.select_one("form#select-messages")
    assert form["action"].endswith(f"{THREAD}delete-selected")
    assert "Delete this thread" in form.text and "Attach this thread" in form.text
    assert "Delete…" in app.get(message_url(2)).html.select_one(".moderation").text
    assert app.get(f"/list/{DEV}/").html.select_one("p.admin a")["href"].endswith(f"/list/{DEV}/admin/")
    assert app.get(f"/list/{DEV}/admin/").status_int == 200
    # Only site administrators administer the whole site.
    header_link = app.get("/").html.select_one("header nav.account a.admin")
    assert (header_link is not None) == (who == ADMIN)


@pytest.mark.parametrize("who", NOT_MODERATORS)
def test_readers_see_no_control(site, mailman, who):
    app = browser(site, who)
    for url in (THREAD, message_url(2), f"/list/{DEV}/"):
        page = app.get(url)
        assert page.html.select(".moderation") == [], url
        assert page.html.select("form#select-messages") == [] and page.html.select("p.admin") == []
        assert "Delete…" not in page.text and "/admin/" not in page.text
    assert app.get("/").html.select_one("header nav.account a.admin") is None


def post_endpoints():
    """Every administrative POST, with the fields a real form would send."""
    return [
        (f"{message_url(1)}delete", {}),
        (f"{message_url(1)}split", {}),
        (f"{THREAD}delete", {}),
        (f"{THREAD}delete-selected", {"m": h(1)}),
        (f"/list/{DEV}/thread/{h(10)}/reattach", {"target": h(2)}),
        (f"/list/{DEV}/admin/delete-sender", {"address": BOB[1]}),
        ("/admin/delete-sender", {"address": BOB[1]}),
        ("/admin/pack", {}),
    ]


GET_PAGES = [
    f"{message_url(1)}delete", f"{message_url(1)}split", f"{THREAD}delete",
    f"{THREAD}delete-selected?m={h(1)}", f"/list/{DEV}/thread/{h(10)}/reattach",
    f"/list/{DEV}/admin/", f"/list/{DEV}/admin/log", f"/list/{DEV}/admin/delete-sender?address={BOB[1]}",
    "/admin/", "/admin/log", f"/admin/delete-sender?address={BOB[1]}",
]


@pytest.mark.parametrize("who", NOT_MODERATORS)
def test_every_administrative_page_and_post_refuses_readers(site, mailman, who):
    app = browser(site, who)
    token = csrf_token(app)
    for url, fields in post_endpoints():
        answer = app.post(url, dict(fields, reason="no", csrf_token=token), status=403)
        if who is None:
            assert answer.html.select_one("#login-form") is not None, url
        else:
            assert "may not do this" in answer.text, url
    for url in GET_PAGES:
        app.get(url, status=403)
    # Nothing happened.
    assert app.get(message_url(1)).status_int == 200
    assert len(app.get(THREAD).html.select("article.message")) == 5
    assert app.get(f"/list/{DEV}/thread/{h(10)}/").status_int == 200
    assert app.get(message_url(30, USERS)).status_int == 200


@pytest.mark.parametrize("who", [OWNER, MODERATOR])
def test_list_administrators_are_refused_the_site_pages_and_other_lists(site, mailman, who):
    app = browser(site, who)
    token = csrf_token(app)
    for url in ("/admin/", "/admin/log", f"/admin/delete-sender?address={BOB[1]}",
                f"/list/{USERS}/admin/", f"{message_url(30, USERS)}delete"):
        app.get(url, status=403)
    app.post("/admin/delete-sender", {"address": BOB[1], "csrf_token": token}, status=403)
    app.post(f"{message_url(30, USERS)}delete", {"csrf_token": token}, status=403)
    assert app.get(message_url(30, USERS)).status_int == 200


def test_a_site_administrator_packs_the_storage_while_it_serves(site, mailman, tmp_path):
    import time

    app = browser(site, ADMIN)
    token = csrf_token(app)
    app.post(f"{message_url(1)}delete", {"reason": "a leaked password", "csrf_token": token}, status=303)
    # Deleted, but still in the storage's files, as their history.
    assert _files_holding(tmp_path, SECRET.encode()) and _files_holding(tmp_path / "blobs", b"secret,figures")

    started = app.post("/admin/pack", {"csrf_token": token}, status=303).follow()
    assert "Packing the storage" in started.html.select_one(".flash").text
    deadline = time.monotonic() + 60
    while "Last packed here" not in (page := app.get("/admin/")).text and time.monotonic() < deadline:
        assert TestApp(site).get(f"/list/{DEV}/").status_int == 200  # readers are served meanwhile
        time.sleep(0.1)
    section = page.html.select_one("section.pack").text
    assert "Last packed here" in section and "bytes before" in section and "failed" not in section
    assert _files_holding(tmp_path, SECRET.encode()) == []
    assert _files_holding(tmp_path, b"secret,figures") == []
    assert "Asked for the storage to be packed" in app.get("/admin/log").text
    # The rest of the archive is as it was.
    assert overview_counts(TestApp(site)) == ["7 messages", "3 threads"]
    assert TestApp(site).get(message_url(2)).status_int == 200


def test_the_pack_button_works_on_zeo_and_relstorage(shared_storage, mailman, tmp_path):
    import time

    from kittypyr import main

    app = main({}, **{"zodbconn.uri": shared_storage.uri(tmp_path / "client"), "kittypyr.admins": ADMIN,
                      "kittypyr.base_url": "http://localhost/"})
    try:
        with prepare(registry=app.registry) as env:
            for raw in DEV_MAIL:
                archive_message(ensure_mailing_list(env["root"], DEV), raw)
            transaction.commit()
        admin = browser(app, ADMIN)
        token = csrf_token(admin)
        admin.post(f"{message_url(1)}delete", {"reason": "a leaked password", "csrf_token": token}, status=303)
        admin.post("/admin/pack", {"csrf_token": token}, status=303)
        deadline = time.monotonic() + 120
        while "Last pack" not in (page := admin.get("/admin/")).text and time.monotonic() < deadline:
            time.sleep(0.2)
        section = page.html.select_one("section.pack").text
        assert "Last packed here" in section and "failed" not in section, section
        assert TestApp(app).get(message_url(2)).status_int == 200
        TestApp(app).get(message_url(1), status=410)
    finally:
        app.registry._zodb_databases[""].close()


def _files_holding(folder, needle):
    return [path for path in folder.rglob("*") if path.is_file() and needle in path.read_bytes()]


def test_a_post_without_the_form_token_is_refused(site, mailman):
    app = browser(site, ADMIN)
    app.post(f"{message_url(1)}delete", {"reason": "spam"}, status=400)
    app.post(f"{THREAD}delete", {"csrf_token": "forged"}, status=400)
    assert app.get(message_url(1)).status_int == 200


# --- deleting -------------------------------------------------------------------


def search_count(app, query, mlist=None):
    params = {"q": query}
    if mlist:
        params["mlist"] = mlist
    return app.get("/api/search", params).json["count"]


def top_posters(app, list_address=DEV):
    return [li.text.split()[0] for li in app.get(f"/list/{list_address}/").html.select("section.posters li")]


def overview_counts(app, list_address=DEV):
    return [span.text for span in app.get(f"/list/{list_address}/").html.select("main > p span.count")]


@pytest.mark.parametrize("who", MODERATORS)
def test_deleting_one_message(site, mailman, who):
    app = browser(site, who)
    reader = TestApp(site)
    assert search_count(reader, SECRET) == 1
    assert overview_counts(reader) == ["8 messages", "3 threads"]
    assert top_posters(reader) == ["Ada", "Bob", "Carl"]  # 3, 2 and 2 messages in 30 days

    thread = app.get(THREAD)
    article = thread.html.select_one(f"#m-{h(1)}")
    confirm = app.get(article.select_one(".moderation a.delete")["href"])
    assert confirm.html.h1.text == "Delete this message?"
    assert [a.text for a in confirm.html.select("ol.affected li a")] == ["Re: topic 0"]
    assert "Its 2 replies stay in the thread" in confirm.text
    form = confirm.forms["moderate-form"]
    form["reason"] = "a leaked password"
    done = form.submit(status=303)
    assert done.location.endswith(THREAD)
    page = done.follow()
    assert "The message was deleted." in page.html.select_one(".flash").text

    # Readers: the thread reads on, its replies hang from the message it answered.
    thread = reader.get(THREAD)
    assert [a["id"] for a in thread.html.select("article.message")] == [
        f"m-{h(0)}", f"m-{h(2)}", f"m-{h(3)}", f"m-{h(4)}"]
    assert [a["data-depth"] for a in thread.html.select("article.message")] == ["0", "1", "1", "1"]
    assert SECRET not in thread.text and "figures.csv" not in thread.text
    gone = reader.get(message_url(1), status=410)
    assert gone.html.h1.text == "This message was deleted"
    assert gone.html.select_one("a.thread")["href"].endswith(THREAD)
    assert SECRET not in gone.text and "Bob" not in gone.text
    assert reader.get(f"{message_url(1)}raw", status=410).html.select_one("a.thread") is not None
    reader.get(f"{message_url(1)}attachment/2/figures.csv", status=410)
    for view in ("html/1", "diff/0", "quote/0"):
        reader.get(f"{message_url(1)}{view}", status=410)
    assert reader.get(f"/api/list/{DEV}/email/{h(1)}/", status=410).json["error"] == "deleted from the archive"
    assert h(1) not in [e["hash"] for e in reader.get(f"/api/list/{DEV}/thread/{h(0)}/").json["emails"]["results"]]

    # Gone from search and statistics.
    assert search_count(reader, SECRET) == 0
    assert search_count(reader, "from:bob") == 2  # message 4, and 30 in users
    assert overview_counts(reader) == ["7 messages", "3 threads"]
    assert top_posters(reader) == ["Ada", "Carl", "Bob"]
    bob = next(li for li in reader.get(f"/list/{DEV}/").html.select("section.posters li") if "Bob" in li.text)
    assert "1 message" in bob.text
    # The dev list's entry (the index sorts by day of the last post: near midnight, users' may come first).
    (dev_entry,) = [li for li in reader.get("/").html.select("ul.lists li") if li.select_one(f'a[href$="/{DEV}/"]')]
    assert "7 messages" in dev_entry.text

    # The audit log says who, when, what and why.
    log = app.get(f"/list/{DEV}/admin/log")
    row = log.html.select_one("table.audit tbody tr")
    assert mailman.names[who] in row.select_one("td.who").text
    assert row.select_one("td.what").text.strip().startswith("Deleted 1 message")
    assert row.select_one("td.reason").text == "a leaked password"
    assert row.select_one("td.what a")["href"].endswith(message_url(1))
    assert row.select_one("time")["datetime"][:10] == datetime.now(timezone.utc).date().isoformat()


def test_pages_listing_threads_are_not_answered_unchanged_once_a_first_message_is_deleted(site, mailman):
    # Their ETags were made of the threads' keys and readers' marks: a cache
    # asking with the old one was told "not modified", and went on showing
    # the deleted message's subject.
    from kittypyr.tags import add_tag

    with prepare(registry=site.registry) as env:
        add_tag(env["root"].lists[DEV].threads[h(0)], "build", ADMIN)
        transaction.commit()
    reader = TestApp(site)
    carl = [a["href"] for a in reader.get(message_url(3)).html.select("a[href*='/users/']")][0]
    pages = [f"/list/{DEV}/threads", f"/list/{DEV}/tag/build/", urlsplit(carl).path, f"/list/{DEV}/",
             f"/list/{DEV}/{NOW.year}/{NOW.month:02d}/"]
    before = {}
    for url in pages:
        page = reader.get(url)
        assert "Kernel build" in page.text, url
        before[url] = page.headers["ETag"]
    browser(site, ADMIN).get(f"{message_url(0)}delete").forms["moderate-form"].submit(status=303)
    for url in pages:
        page = reader.get(url, headers={"If-None-Match": before[url]})
        assert page.status_int == 200 and "Kernel build" not in page.text, url
    # A reply that changes no count of the page changes its order: not "unchanged" either.
    before = reader.get(f"/list/{DEV}/threads").headers["ETag"]
    with prepare(registry=site.registry) as env:
        archive_message(env["root"].lists[DEV], mail(12, 10, when=NOW))
        transaction.commit()
    assert reader.get(f"/list/{DEV}/threads", headers={"If-None-Match": before}).status_int == 200


def test_a_deleted_first_message_leaves_the_thread_url_in_place(site, mailman):
    app = browser(site, OWNER)
    confirm = app.get(f"{message_url(0)}delete")
    confirm.forms["moderate-form"].submit(status=303)
    thread = TestApp(site).get(THREAD)
    assert thread.html.h1.text == "Re: topic 0"
    assert [a["id"] for a in thread.html.select("article.message")] == [
        f"m-{h(1)}", f"m-{h(2)}", f"m-{h(3)}", f"m-{h(4)}"]
    gone = TestApp(site).get(message_url(0), status=410)
    assert gone.html.select_one("a.thread")["href"].endswith(THREAD)


def all_urls(app):
    """Every page, message, raw message, attachment and API address a reader can reach."""
    seen = {}
    pending = ["/", f"/list/{DEV}/", f"/list/{USERS}/", "/api/lists/", f"/api/list/{DEV}/", f"/api/list/{USERS}/"]
    while pending:
        url = pending.pop()
        if url in seen:
            continue
        answer = app.get(url, status="*")
        seen[url] = answer.status_int
        if answer.status_int != 200:
            continue
        if answer.content_type == "application/json":
            found = re.findall(r'"(http://localhost/[^"?#]*)"', answer.text)
        elif answer.content_type == "text/html":
            found = [a["href"] for a in answer.html.select("a[href]")]
        else:
            found = []
        for link in found:
            parts = urlsplit(link)
            # An export names what it holds in its query (?message=, ?start=&end=).
            path = parts.path + (f"?{parts.query}" if "/export/" in parts.path and parts.query else "")
            # Forms (administration, replying) are not addresses of the archive's content.
            if path.startswith(("/list/", "/api/list")) and "/admin/" not in path and not path.endswith(("/reply", "/new")):
                pending.append(path)
    # The JSON of every message, thread and list.
    for url in list(seen):
        for kind, api in (("message", "email"), ("thread", "thread")):
            match = re.match(rf"^/list/([^/]+)/{kind}/([A-Z2-7]+)/$", url)
            if match:
                api_url = f"/api/list/{match.group(1)}/{api}/{match.group(2)}/"
                seen[api_url] = app.get(api_url, status="*").status_int
    return seen


def test_no_other_link_breaks(site, mailman):
    reader = TestApp(site)
    before = all_urls(reader)
    assert len([u for u in before if "/message/" in u and u.endswith("/raw")]) == 9
    assert len([u for u in before if re.search(r"/list/[^/]+/\d{4}/\d+/$", u)]) == 3  # month pages
    assert any(u.endswith("figures.csv") for u in before)
    assert set(before.values()) == {200}

    # The thread's first message, which has replies, and one with an attachment.
    app = browser(site, ADMIN)
    app.get(f"{THREAD}delete-selected?m={h(0)}&m={h(1)}").forms["moderate-form"].submit(status=303)

    after = {url: reader.get(url, status="*").status_int for url in before}
    gone = {url for url in before if h(0) in url and "/thread/" not in url or h(1) in url}
    assert {url: status for url, status in after.items() if url in gone} == {url: 410 for url in gone}
    assert {url: status for url, status in after.items() if url not in gone} == {
        url: status for url, status in before.items() if url not in gone}
    assert len(gone) == 9  # page, raw, JSON and export of each; the attachment of message 1
    # Nothing that is still there is unreachable either.
    assert set(all_urls(reader)) <= set(before)


def test_deleting_selected_messages(site, mailman):
    app = browser(site, MODERATOR)
    confirm = app.get(f"{THREAD}delete-selected", {"m": [h(2), h(4), h(11)]})
    # A message of another thread is not deleted through this one.
    assert sorted(a["href"] for a in confirm.html.select("ol.affected a")) == sorted(
        f"http://localhost{message_url(n)}" for n in (2, 4))
    form = confirm.forms["moderate-form"]
    assert sorted(field.value for field in form.fields["m"]) == sorted([h(2), h(4)])
    assert form.submit(status=303).follow().html.select_one(".flash").text.strip() == "2 messages deleted."
    reader = TestApp(site)
    assert [a["id"] for a in reader.get(THREAD).html.select("article.message")] == [
        f"m-{h(0)}", f"m-{h(1)}", f"m-{h(3)}"]
    for n in (2, 4):
        reader.get(message_url(n), status=410)
    assert reader.get(message_url(11)).status_int == 200
    nothing = app.get(f"{THREAD}delete-selected", status=400)
    assert "No message of this thread was selected" in nothing.text and "moderate-form" not in nothing.forms


def test_deleting_a_whole_thread(site, mailman):
    app = browser(site, ADMIN)
    thread_page = app.get(THREAD)
    confirm = app.get(thread_page.html.select_one("form#select-messages a.delete-thread")["href"])
    assert len(confirm.html.select("ol.affected li")) == 5
    done = confirm.forms["moderate-form"].submit(status=303)
    assert done.location.endswith(f"/list/{DEV}/")
    reader = TestApp(site)
    gone = reader.get(THREAD, status=410)
    assert gone.html.h1.text == "This thread was deleted" and gone.html.select_one("a.thread") is None
    for n in range(5):
        reader.get(message_url(n), status=410)
    reader.get(f"/api/list/{DEV}/thread/{h(0)}/", status=410)
    # Its feed and its mbox, which feed readers and scripts fetch: gone too, not "never was".
    reader.get(f"{THREAD}t.atom", status=410)
    reader.get(f"{THREAD}t.mbox.gz", status=410)
    assert overview_counts(reader) == ["3 messages", "2 threads"]
    started = NOW - timedelta(days=2)
    month = reader.get(f"/list/{DEV}/{started.year}/{started.month}/")
    assert "Kernel build" not in month.text and "Other topic" in month.text
    assert top_posters(reader) == ["Ada", "Carl"]
    assert search_count(reader, "kernel") == 0
    assert [t["key"] for t in reader.get(f"/api/list/{DEV}/threads/").json["results"]] == [h(10), h(20)]


def test_a_deletion_leaves_mail_that_came_after_its_confirmation_was_shown(site, mailman):
    # A reply that came while the administrator read "Delete this whole
    # thread?" (or every message of a sender) was deleted with the rest:
    # answered 200 to Mailman, then 410, never shown to who deleted it.
    app = browser(site, ADMIN)
    confirm_thread = app.get(f"{THREAD}delete")
    owner = browser(site, OWNER)
    form = owner.get(f"/list/{DEV}/admin/").forms["sender-form"]
    form["address"] = BOB[1]
    confirm_sender = form.submit()
    with prepare(registry=site.registry) as env:
        archive_message(env["root"].lists[DEV], mail(5, 2, sender=BOB, body="Came while you read.\n"))
        transaction.commit()
    for confirm in (confirm_thread, confirm_sender):
        again = confirm.forms["moderate-form"].submit(status=409)
        assert "changed since" in again.text
        assert f"http://localhost{message_url(5)}" in [a["href"] for a in again.html.select("ol.affected a")]
        TestApp(site).get(message_url(5), status=200)
    assert TestApp(site).get(THREAD).status_int == 200
    # What is shown now is what goes.
    again.forms["moderate-form"].submit(status=303)
    TestApp(site).get(message_url(5), status=410)


def test_a_sender_removed_from_one_list(site, mailman):
    app = browser(site, OWNER)
    admin_page = app.get(f"/list/{DEV}/admin/")
    form = admin_page.forms["sender-form"]
    form["address"] = "Bob@Example.org"
    confirm = form.submit()
    assert confirm.html.h1.text == "Delete every message from bob@example.org?"
    assert [a["href"] for a in confirm.html.select("ol.affected a")] == [
        f"http://localhost{message_url(n)}" for n in (1, 4)]
    assert "Hello users" not in confirm.text
    confirm.forms["moderate-form"]["reason"] = "asked to be forgotten"
    done = confirm.forms["moderate-form"].submit(status=303).follow()
    assert "Deleted 2 messages from bob@example.org." in done.text
    reader = TestApp(site)
    assert search_count(reader, "from:bob@example.org", DEV) == 0
    assert search_count(reader, "from:bob@example.org") == 1  # in users, not this owner's list
    assert top_posters(reader) == ["Ada", "Carl"]
    assert "Bob" not in reader.get(f"/list/{DEV}/").text
    log = app.get(f"/list/{DEV}/admin/log").html.select_one("table.audit tbody tr")
    assert "Deleted all 2 messages from bob@example.org" in log.text
    assert "asked to be forgotten" in log.text
    # Also reachable from each of their messages.
    assert app.get(message_url(3)).html.select_one(".moderation a.delete-sender")["href"].endswith(
        f"/list/{DEV}/admin/delete-sender?address=carl%40example.org")
    nothing = app.get(f"/list/{DEV}/admin/delete-sender", {"address": BOB[1]})
    assert "There is no message from bob@example.org in this list." in nothing.text


def test_a_name_a_sender_used_only_in_a_deleted_message_leaves_with_it(site, mailman):
    # Bob's newest message, under another name, is deleted: the list shows
    # the name of his messages left, and search no longer knows the other.
    with prepare(registry=site.registry) as env:
        archive_message(env["root"].lists[DEV], mail(5, 0, sender=("Bobby Tablesworth", BOB[1])))
        transaction.commit()
    reader = TestApp(site)
    assert "Tablesworth" in reader.get(f"/list/{DEV}/").html.select_one("section.posters").text
    app = browser(site, OWNER)
    confirm = app.get(app.get(THREAD).html.select_one(f"#m-{h(5)} .moderation a.delete")["href"])
    confirm.forms["moderate-form"].submit(status=303)
    posters = reader.get(f"/list/{DEV}/").html.select_one("section.posters").text
    assert "Tablesworth" not in posters and "Bob Builder" in posters
    assert search_count(reader, "from:Tablesworth") == 0
    assert search_count(reader, "from:Builder") == 3  # 1 and 4 here, 30 in users


def test_a_sender_removed_from_every_list(site, mailman):
    app = browser(site, ADMIN)
    form = app.get("/").click("Administration").forms["sender-form"]
    form["address"] = BOB[1]
    confirm = form.submit()
    assert len(confirm.html.select("ol.affected li")) == 3
    assert "Hello users" in confirm.text and "users" in confirm.html.select("ol.affected li")[-1].text
    confirm.forms["moderate-form"].submit(status=303)
    reader = TestApp(site)
    assert search_count(reader, "from:bob") == 0
    assert overview_counts(reader, USERS) == ["0 messages", "0 threads"]
    reader.get(message_url(30, USERS), status=410)
    reader.get(f"/list/{USERS}/thread/{h(30)}/", status=410)
    log = app.get("/admin/log").html.select("table.audit tbody tr")
    assert len(log) == 2 and all("(a deletion in every list)" in row.text for row in log)
    # Each list's administrators see their own list's part only.
    owner_log = browser(site, OWNER).get(f"/list/{DEV}/admin/log").html.select("table.audit tbody tr")
    assert len(owner_log) == 1 and "2 messages" in owner_log[0].text and USERS not in owner_log[0].text


# --- re-threading -------------------------------------------------------------------


def test_attaching_a_thread_below_another_message(site, mailman):
    app = browser(site, MODERATOR)
    other = f"/list/{DEV}/thread/{h(10)}/"
    form_page = app.get(app.get(other).html.select_one("form#select-messages a.reattach")["href"])
    form = form_page.forms["reattach-form"]
    form["target"] = f"http://localhost{message_url(3)}"
    confirm = form.submit()
    assert confirm.html.h1.text == "Attach this thread below another message?"
    assert "move below “Re: topic 1” by Carl Cook" in confirm.text
    done = confirm.forms["moderate-form"].submit(status=303)
    assert done.location.endswith(f"{THREAD}#m-{h(3)}")
    reader = TestApp(site)
    assert reader.get(other, status=301).location.endswith(THREAD)
    thread = reader.get(THREAD)
    depths = {a["id"]: a["data-depth"] for a in thread.html.select("article.message")}
    assert depths[f"m-{h(10)}"] == "3" and depths[f"m-{h(11)}"] == "4"
    for n in (10, 11):
        page = reader.get(message_url(n))
        assert page.html.select_one("nav.breadcrumbs").text.strip().endswith("Kernel build")
    assert overview_counts(reader) == ["8 messages", "2 threads"]
    assert "below message" in app.get(f"/list/{DEV}/admin/log").html.select_one("td.what").text


def test_attaching_needs_a_message_of_another_thread_of_the_list(site, mailman):
    app = browser(site, ADMIN)
    url = f"/list/{DEV}/thread/{h(10)}/reattach"
    for target, error in ((h(11), "in this very thread"), ("no such thing", "No message of this list"),
                          (f"/list/{USERS}/message/{h(30)}/", "No message of this list")):
        page = app.get(url, {"target": target}, status=400)
        assert error in page.html.select_one("p.error").text
    token = csrf_token(app)
    app.post(url, {"target": h(11), "csrf_token": token}, status=409)
    assert app.get(f"/list/{DEV}/thread/{h(10)}/").status_int == 200


def test_splitting_a_thread(site, mailman):
    app = browser(site, OWNER)
    thread = app.get(THREAD).html
    # Its first message starts it already: no link that could only lead to a refusal.
    assert thread.select_one(f"#m-{h(0)} .moderation a.delete") is not None
    assert thread.select_one(f"#m-{h(0)} .moderation a.split") is None
    assert app.get(message_url(0)).html.select_one(".moderation a.split") is None
    confirm = app.get(thread.select_one(f"#m-{h(1)} .moderation a.split")["href"])
    assert [a["href"] for a in confirm.html.select("ol.affected a")] == [
        f"http://localhost{message_url(n)}" for n in (1, 2, 3)]
    done = confirm.forms["moderate-form"].submit(status=303)
    new = f"/list/{DEV}/thread/{h(1)}/"
    assert done.location.endswith(new)
    reader = TestApp(site)
    assert [a["id"] for a in reader.get(new).html.select("article.message")] == [
        f"m-{h(1)}", f"m-{h(2)}", f"m-{h(3)}"]
    assert [a["id"] for a in reader.get(THREAD).html.select("article.message")] == [f"m-{h(0)}", f"m-{h(4)}"]
    for n in (1, 2, 3):
        assert reader.get(message_url(n)).status_int == 200
    assert overview_counts(reader) == ["8 messages", "4 threads"]
    refused = app.get(f"{message_url(20)}split", status=409)
    assert "nothing to split off" in refused.text and "moderate-form" not in refused.forms


# --- the log and what stays deleted -----------------------------------------------------


def test_the_audit_logs_and_who_reads_them(site, mailman):
    admin = browser(site, ADMIN)
    admin.get(f"{message_url(4)}delete").forms["moderate-form"].submit()
    owner = browser(site, OTHER_OWNER)
    confirm = owner.get(f"{message_url(30, USERS)}delete")
    confirm.forms["moderate-form"]["reason"] = "spam <b>really</b>"
    confirm.forms["moderate-form"].submit()

    site_log = admin.get("/admin/log").html.select("table.audit tbody tr")
    assert [row.select_one("td.who .name").text for row in site_log] == ["Otto Other", "Ada Admin"]
    assert site_log[0].select_one("td.reason").text == "spam <b>really</b>"  # shown as text
    assert f"in {USERS}" in site_log[0].select_one("td.what").text
    for who in (OWNER, MODERATOR):
        rows = browser(site, who).get(f"/list/{DEV}/admin/log").html.select("table.audit tbody tr")
        assert len(rows) == 1 and "Ada Admin" in rows[0].text and "spam" not in rows[0].text
    for who in NOT_MODERATORS[:2]:
        browser(site, who).get(f"/list/{DEV}/admin/log", status=403)
    browser(site, OWNER).get("/admin/log", status=403)
    browser(site, OWNER).get(f"/list/{USERS}/admin/log", status=403)
    rows = owner.get(f"/list/{USERS}/admin/log").html.select("table.audit tbody tr")
    assert len(rows) == 1 and "Otto Other" in rows[0].text


def test_mailman_resending_a_deleted_message_does_not_bring_it_back(tmp_path, mailman):
    from tests.test_archiver_api import AUTH, make, post

    app = make(tmp_path, **{"kittypyr.admins": ADMIN, "kittypyr.base_url": "http://localhost/"})
    try:
        raw = mail(1, body=f"{SECRET}\n")
        reader = TestApp(app)
        url = post(reader, raw, mlist=DEV).json["url"]
        admin = browser(app, ADMIN)
        admin.get(f"{message_url(1)}delete").forms["moderate-form"].submit(status=303)
        # Mailman sends it again (its spool, a resend): answered like a duplicate, not archived.
        assert post(reader, raw, mlist=DEV).json == {"url": url}
        reader.get(message_url(1), status=410)
        assert search_count(reader, SECRET) == 0
        assert reader.get("/api/mailman/urls", {"mlist": DEV, "msgid": "<adm1@example.org>"},
                          headers=AUTH).json == {"url": url}
    finally:
        app.registry._zodb_databases[""].close()


def test_mailmans_copy_of_a_post_deleted_as_another_archive_kept_it_does_not_bring_it_back(tmp_path, mailman):
    # Imported from another archive's copy (quoted-printable there), deleted,
    # then handed over by Mailman as it was sent (8bit): its body's bytes
    # differ, so it was taken for another post reusing the id and archived
    # under a derived one, text and all. Alive, the two are one post.
    from tests.test_archiver_api import make, post

    head = (f"From: Bob Builder <bob@example.org>\nTo: {DEV}\nSubject: credentials\n"
            "Date: Tue, 01 Dec 2026 10:00:00 +0000\nMessage-ID: <leak@example.org>\nMIME-Version: 1.0\n"
            "Content-Type: text/plain; charset=utf-8\n").encode()
    original = head + f"Content-Transfer-Encoding: 8bit\n\n{SECRET} \u2014 oops.\n".encode()
    other_copy = head + f"Content-Transfer-Encoding: quoted-printable\n\n{SECRET} =E2=80=94 oops.\n".encode()
    app = make(tmp_path, **{"kittypyr.admins": ADMIN, "kittypyr.base_url": "http://localhost/"})
    try:
        with prepare(registry=app.registry) as env:
            archive_message(ensure_mailing_list(env["root"], DEV), other_copy)
            transaction.commit()
        name = message_id_hash("<leak@example.org>")
        admin = browser(app, ADMIN)
        admin.get(f"/list/{DEV}/message/{name}/delete").forms["moderate-form"].submit(status=303)
        reader = TestApp(app)
        url = post(reader, original, mlist=DEV).json["url"]
        assert url == f"http://localhost/list/{DEV}/message/{name}/"
        reader.get(f"/list/{DEV}/message/{name}/", status=410)
        assert search_count(reader, SECRET) == 0
        with prepare(registry=app.registry) as env:
            assert len(env["root"].lists[DEV].messages) == 0
    finally:
        app.registry._zodb_databases[""].close()


@pytest.mark.parametrize("who", MODERATORS)
def test_each_list_administrator_may_do_each_operation(site, mailman, who):
    app = browser(site, who)
    reader = TestApp(site)

    def confirm_and_submit(url, **params):
        confirm = app.get(url, params)
        assert confirm.status_int == 200 and confirm.html.select("ol.affected li"), url
        return confirm.forms["moderate-form"].submit(status=303)

    confirm_and_submit(f"{message_url(1)}split")
    assert len(reader.get(f"/list/{DEV}/thread/{h(1)}/").html.select("article.message")) == 3
    confirm_and_submit(f"/list/{DEV}/thread/{h(10)}/reattach", target=h(3))
    reader.get(f"/list/{DEV}/thread/{h(10)}/", status=301)
    confirm_and_submit(f"/list/{DEV}/thread/{h(1)}/delete-selected", m=[h(2), h(11)])
    confirm_and_submit(f"{message_url(4)}delete")
    confirm_and_submit(f"/list/{DEV}/admin/delete-sender", address=CARL[1])
    confirm_and_submit(f"{THREAD}delete")
    for n in (0, 2, 3, 4, 11):
        reader.get(message_url(n), status=410)
    assert [a["id"] for a in reader.get(f"/list/{DEV}/thread/{h(1)}/").html.select("article.message")] == [
        f"m-{h(1)}", f"m-{h(10)}"]
    assert overview_counts(reader) == ["3 messages", "2 threads"]
    rows = app.get(f"/list/{DEV}/admin/log").html.select("table.audit tbody tr")
    assert [row["class"][0] for row in rows] == [
        "delete-thread", "delete-sender", "delete-messages", "delete-messages", "reattach-thread", "split-thread"]
    assert {row.select_one("td.who .name").text for row in rows} == {mailman.names[who]}


def test_a_private_list_keeps_its_deleted_messages_as_closed_as_the_rest(site, mailman):
    with prepare(registry=site.registry) as env:
        env["root"].lists[DEV].archive_policy = "private"
        transaction.commit()
    browser(site, OWNER).get(f"{message_url(1)}delete").forms["moderate-form"].submit(status=303)
    for who in (ANONYMOUS, OTHER_OWNER):
        app = browser(site, who)
        for url in (message_url(1), f"{message_url(1)}raw", f"/api/list/{DEV}/email/{h(1)}/"):
            assert "deleted" not in app.get(url, status=403).text
    member = browser(site, MEMBER)
    assert member.get(message_url(1), status=410).html.select_one("a.thread")["href"].endswith(THREAD)


def test_a_server_packs_by_itself_on_its_schedule(tmp_path):
    import time

    from kittypyr import main, moderation
    from kittypyr.security import User

    (tmp_path / "blobs").mkdir()
    # A period of under two seconds: looked at every fifth of a second.
    app = main({}, **{"zodbconn.uri": f"file://{tmp_path}/Data.fs?blobstorage_dir={tmp_path}/blobs",
                      "kittypyr.base_url": "http://localhost/", "kittypyr.pack_every_days": "0.00002"})
    try:
        with prepare(registry=app.registry) as env:
            dev = ensure_mailing_list(env["root"], DEV)
            for raw in DEV_MAIL:
                archive_message(dev, raw)
            transaction.commit()
            moderation.delete_messages(dev, [h(1)], User(ADMIN, "Ada Admin"), "a leaked password")
            transaction.commit()
        deadline = time.monotonic() + 60
        while _files_holding(tmp_path, SECRET.encode()) and time.monotonic() < deadline:
            time.sleep(0.2)
        assert _files_holding(tmp_path, SECRET.encode()) == []
        assert _files_holding(tmp_path, b"secret,figures") == []
        with prepare(registry=app.registry) as env:
            assert datetime.now(timezone.utc) - env["root"].packed_at < timedelta(seconds=30)
        assert TestApp(app).get(message_url(2)).status_int == 200
    finally:
        app.registry._zodb_databases[""].close()


def test_one_process_of_many_claims_each_scheduled_pack(archive):
    from kittypyr.packing import PackSchedule, StoragePacker

    db = archive._p_jar.db()
    week = timedelta(days=7)
    first, second = (PackSchedule(db, StoragePacker(), week) for _ in range(2))
    start = datetime(2026, 1, 5, tzinfo=timezone.utc)
    # The first look sets the clock going: a new site packs a week after it started.
    assert not first.claim(now=start)
    assert not second.claim(now=start + timedelta(days=6))
    assert first.claim(now=start + timedelta(days=7, minutes=1))
    assert not second.claim(now=start + timedelta(days=7, minutes=2))
    assert second.claim(now=start + timedelta(days=14, minutes=2))
