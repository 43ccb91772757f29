"""Moving in from Mailman 2: a Pipermail folder imported, and every old URL still leading somewhere."""

import gzip
import os
from datetime import datetime, timedelta, timezone
from urllib.parse import quote

import pytest
import transaction
from pyramid.scripting import prepare
from webtest import TestApp

from kittypyr.archiving import archive_message, ensure_mailing_list
from kittypyr.importing import import_mail
from kittypyr.moderation import delete_messages
from kittypyr.msgid import message_id_hash
from kittypyr.security import User
from tests.accounts import FakeMailman, forget_login_failures, log_in
from tests.functional import kittypyr, write_config
from tests.mailbuilder import attachment, make_message, multipart, text_part
from kittypyr.pipermail.attachments import folder_name_of
from kittypyr.pipermail.pages import scrubbed_links
from tests.pipermail_folder import Post, attachment_path, volume_of, write_folder
from tests.test_app import make_app

LIST = "dev@lists.example.org"
START = datetime(2007, 3, 5, 16, 12, 45, tzinfo=timezone.utc)


def thread_posts():
    """Five posts over two months, numbered with gaps (Pipermail numbers across months)."""
    people = [("Jane Doe", "jane@example.org"), ("Bo (Dev Team)", "bo@example.org")]
    posts = []
    for n, number in enumerate((0, 1, 3, 4, 7)):
        name, email = people[n % 2]
        posts.append(Post(
            number=number,
            subject="[Dev] Release plans" if n == 0 else "[Dev] Release plans",
            author=name,
            email=email,
            date=START + timedelta(days=12 * n, minutes=n),
            message_id=f"post{number}@example.org",
            in_reply_to=None if n == 0 else f"post{posts[-1].number}@example.org",
            body=f"Message number {number}.\n",
        ))
    return posts


@pytest.fixture
def app(tmp_path):
    application = make_app(tmp_path)
    yield application
    application.registry._zodb_databases[""].close()


def import_folder(app, folder, address=LIST, policy=None):
    with prepare(registry=app.registry) as env:
        if policy is not None:
            ensure_mailing_list(env["root"], address).archive_policy = policy
            transaction.commit()
        report = import_mail(env["root"], address, [folder], transaction.manager, workers=0, progress=False)
    return report


def message_url(message_id, address=LIST):
    return f"http://localhost/list/{address}/message/{message_id_hash(message_id)}/"


def moved(browser, path):
    response = browser.get(path, status=301)
    return response.headers["Location"]


def test_each_message_page_redirects_to_its_message(app, tmp_path):
    posts = thread_posts()
    folder = write_folder(tmp_path / "dev", posts)
    report = import_folder(app, folder)
    assert report.total("archived") == 5
    assert any("5 pages, 5 mapped by Message-ID" in line for line in report.summary())
    browser = TestApp(app)
    for post in posts:
        volume = f"{post.date:%Y}-{post.date:%B}"
        assert moved(browser, f"/pipermail/dev/{volume}/{post.number:06d}.html") == message_url(post.message_id)
        # The number alone names the message, whichever volume the link says.
        assert moved(browser, f"/pipermail/dev/2099-May/{post.number:06d}.html") == message_url(post.message_id)
    # A number Pipermail never gave (a gap) is not a message.
    browser.get("/pipermail/dev/2007-March/000002.html", status=404)
    assert browser.get(message_url(posts[2].message_id)).status_int == 200
    # Nor is a number no int() can read (a 500 before), nor one in other digits (a second address).
    browser.get("/pipermail/dev/2007-March/" + "1" * 4301 + ".html", status=404)
    browser.get("/pipermail/dev/2007-March/" + quote("\u0660" * 5 + "\u0661") + ".html", status=404)


def test_early_pages_name_the_parent_in_their_reply_link(app, tmp_path):
    # Mailman 2.1's early pages put the parent's Message-ID in the reply
    # link: it must not send a reply's page to the message it answers.
    posts = thread_posts()
    folder = write_folder(tmp_path / "dev", posts, style="parent")
    import_folder(app, folder)
    browser = TestApp(app)
    for post in posts:
        assert moved(browser, f"/pipermail/dev/x/{post.number:06d}.html") == message_url(post.message_id)


def test_pages_without_message_id_match_by_date_author_and_subject(app, tmp_path):
    posts = thread_posts()
    # The month file's Date: says other than the page (Pipermail dated the
    # message by its arrival): the envelope line, in local time, agrees.
    posts[1].date_header = "Fri, 30 Mar 2007 01:02:03 +0000"
    folder = write_folder(tmp_path / "dev", posts, style="none")
    report = import_folder(app, folder)
    assert any("0 mapped by Message-ID, 5 by date, author and subject, 0 unmapped" in line
               for line in report.summary())
    browser = TestApp(app)
    for post in posts:
        assert moved(browser, f"/pipermail/dev/x/{post.number:06d}.html") == message_url(post.message_id)


def test_article_records_tell_apart_what_the_pages_cannot(app, tmp_path):
    twin = dict(subject="[Dev] Ping", author="Jane Doe", email="jane@example.org", date=START)
    posts = [Post(number=10, message_id="first@example.org", body="one\n", **twin),
             Post(number=11, message_id="second@example.org", body="two\n", **twin)]
    # Without the article records the two pages look the same: neither is guessed.
    plain = write_folder(tmp_path / "plain", posts, style="none")
    report = import_folder(app, plain)
    assert any("2 unmapped" in line for line in report.summary())
    assert any("several messages show its date, author and subject" in line for line in report.summary())
    browser = TestApp(app)
    missing = browser.get("/pipermail/dev/2007-March/000010.html", status=404)
    assert "[Dev] Ping" in missing.text
    link = missing.html.select_one("a.search-subject")["href"]
    assert link.startswith("http://localhost/search?") and "q=ping" in link and "mlist=dev%40lists.example.org" in link

    # The database/ records name each page's Message-ID.
    with_records = write_folder(tmp_path / "records", posts, style="none", database=True)
    report = import_folder(app, with_records)
    assert any("2 pages, 2 mapped by Message-ID" in line for line in report.summary())
    assert moved(browser, "/pipermail/dev/2007-March/000010.html") == message_url("first@example.org")
    assert moved(browser, "/pipermail/dev/2007-March/000011.html") == message_url("second@example.org")


def test_one_message_id_reused_by_different_mail(app, tmp_path):
    # Resent with an edit under the same Message-ID: kittypyr keeps both,
    # and each page leads to the one of its date.
    common = dict(subject="[Dev] Oops", author="Jane Doe", email="jane@example.org", message_id="same@example.org")
    posts = [Post(number=20, date=START, body="first version\n", **common),
             Post(number=21, date=START + timedelta(seconds=30), body="second version\n", **common)]
    folder = write_folder(tmp_path / "dev", posts)
    import_folder(app, folder)
    browser = TestApp(app)
    first = browser.get(moved(browser, "/pipermail/dev/2007-March/000020.html"))
    second = browser.get(moved(browser, "/pipermail/dev/2007-March/000021.html"))
    assert "first version" in first.text and "second version" not in first.text
    assert "second version" in second.text


def test_months_indexes_text_files_and_the_list(app, tmp_path):
    folder = write_folder(tmp_path / "dev", thread_posts())
    import_folder(app, folder)
    browser = TestApp(app)
    month = "http://localhost/list/dev@lists.example.org/2007/3/"
    for index in ("", "date.html", "thread.html", "subject.html", "author.html"):
        assert moved(browser, f"/pipermail/dev/2007-March/{index}") == month
    assert moved(browser, "/pipermail/dev/2007-March") == month
    export = ("http://localhost/list/dev@lists.example.org/export/dev-2007-03.mbox.gz"
              "?start=2007-03-01&end=2007-04-01")
    assert moved(browser, "/pipermail/dev/2007-March.txt") == export
    assert moved(browser, "/pipermail/dev/2007-March.txt.gz") == export
    december = moved(browser, "/pipermail/dev/2007-December.txt.gz")
    assert december.endswith("dev-2007-12.mbox.gz?start=2007-12-01&end=2008-01-01")
    exported = browser.get(export)
    assert exported.content_type == "application/gzip" or exported.status_int == 200
    the_list = "http://localhost/list/dev@lists.example.org/"
    for path in ("/pipermail/dev/", "/pipermail/dev", "/pipermail/dev/index.html", "/pipermail/Dev/",
                 "/mailman/listinfo/dev", "/cgi-bin/mailman/listinfo/dev", "/pipermail/private/dev/",
                 "/mailman/private/dev/", "/cgi-bin/mailman/private/dev/index.html"):
        assert moved(browser, path) == the_list, path
    assert moved(browser, "/mailman/private/dev/2007-March/000000.html") == message_url("post0@example.org")
    assert moved(browser, "/pipermail/private/dev/2007-April/000003.html") == message_url("post3@example.org")
    assert moved(browser, "/pipermail/dev.mbox/dev.mbox") == (
        "http://localhost/list/dev@lists.example.org/export/dev.mbox.gz")
    browser.get("/pipermail/nosuchlist/", status=404)
    browser.get("/mailman/listinfo/nosuchlist", status=404)
    browser.get("/pipermail/dev/2007-Smarch/", status=404)
    browser.get("/pipermail/dev/2007-March/nothing.html", status=404)


PNG = b"\x89PNG\r\n\x1a\n" + bytes(range(256))
PAGE_HTML = b"<html><body><p>Hello <b>there</b></p></body></html>\n"


def posts_with_attachments():
    """A post with a scrubbed image and an HTML part, and a reply quoting its notices."""
    posts = thread_posts()
    posts[2].attachments = (("chart.png", PNG, "image/png"), ("attachment.html", PAGE_HTML, "text/html"))
    url = f"http://lists.example.org/pipermail/dev/attachments/{attachment_path(posts[2], 0, 'chart.png')}"
    posts[3].body = f"> A non-text attachment was scrubbed...\n> Url : {url}\n\nNice chart.\n"
    return posts


def test_scrubbed_attachments_are_kept_with_the_message_that_links_them(app, tmp_path):
    posts = posts_with_attachments()
    folder = write_folder(tmp_path / "dev", posts, rearchived=True)
    # A part the scrubber saved without a notice, in the message's folder,
    # and a file of a folder no message links.
    beside = attachment_path(posts[2], 0, "notes.txt")
    (folder / "attachments" / beside).write_bytes(b"some notes\n")
    (folder / "attachments" / "20070101" / "deadbeef").mkdir(parents=True)
    (folder / "attachments" / "20070101" / "deadbeef" / "orphan.bin").write_bytes(b"whose?")
    # A folder from an earlier scrubbing of the last post, which its body no
    # longer links: named by its Message-ID, with a second copy.
    earlier = folder / "attachments" / "20070301" / folder_name_of(posts[4].message_id)
    earlier.mkdir(parents=True)
    (earlier / "old.bin").write_bytes(b"old")
    (earlier / "old-0001.bin").write_bytes(b"old")
    report = import_folder(app, folder)
    summary = "\n".join(report.summary())
    assert ("8 files, 2 kept with the message that links them, 2 with the message of their folder, "
            "3 second copies of a kept file, 1 linked by no message") in summary
    assert "attachment linked by no message: 20070101/deadbeef/orphan.bin" in summary
    browser = TestApp(app)
    message = message_url(posts[2].message_id)
    # bin/arch's second copy leads to the same attachment (the last segment only names the file).
    copy = moved(browser, f"/pipermail/dev/attachments/{attachment_path(posts[2], 0, 'chart-0001.png')}")
    first = moved(browser, f"/pipermail/dev/attachments/{attachment_path(posts[2], 0, 'chart.png')}")
    assert copy.rsplit("/", 1)[0] == first.rsplit("/", 1)[0] and browser.get(copy).body == PNG
    notes = browser.get(moved(browser, f"/pipermail/dev/attachments/{beside}"))
    assert notes.body == b"some notes\n" and notes.content_type == "text/plain"
    browser.get("/pipermail/dev/attachments/20070101/deadbeef/orphan.bin", status=404)
    for prefix in ("/pipermail/dev", "/mailman/private/dev", "/pipermail/private/dev"):
        location = moved(browser, f"{prefix}/attachments/{attachment_path(posts[2], 0, 'chart.png')}")
        assert location.startswith(message + "attachment/")
        image = browser.get(location)
        assert image.body == PNG
        assert image.content_type == "image/png"
        assert image.headers["X-Content-Type-Options"] == "nosniff"
    html_path = attachment_path(posts[2], 1, "attachment.html")
    page = browser.get(moved(browser, f"/pipermail/dev/attachments/{html_path}"))
    assert page.body == PAGE_HTML
    # Saved, never shown as a page of the site.
    assert page.content_type == "application/octet-stream"
    assert page.headers["Content-Disposition"].startswith("attachment;")
    # The message is the one the month file brought: same hash, same thread,
    # its original untouched; the page lists the files and says where they came from.
    shown = browser.get(message)
    listed = [li.get_text(" ", strip=True) for li in shown.html.select("ul.attachments li")]
    assert len(listed) == 3 and all("Pipermail" in text for text in listed)
    assert "chart.png" in listed[0] and "attachment.html" in listed[1] and "notes.txt" in listed[2]
    raw = browser.get(message + "raw").body
    assert b"Url : http://lists.example.org/pipermail/dev/attachments/" in raw and PNG not in raw
    reply = browser.get(message_url(posts[3].message_id))
    assert not reply.html.select("ul.attachments li")
    with prepare(registry=app.registry) as env:
        mailing_list = env["root"].lists[LIST]
        assert mailing_list.messages[message_id_hash(posts[3].message_id)].thread == message_id_hash(
            posts[0].message_id)
        assert mailing_list.attachment_count() == 4
    # Imported again, nothing is added twice, and the summary says the same.
    again = import_folder(app, folder)
    assert "\n".join(again.summary()).count("8 files, 2 kept with the message that links them, 2 with") == 1
    last = browser.get(message_url(posts[4].message_id)).html.select("ul.attachments li")
    assert [li.a.text for li in last] == ["old.bin"]
    assert len(browser.get(message).html.select("ul.attachments li")) == 3
    # Its text attachment is searched.
    found = browser.get("/search", params={"q": "notes", "mlist": LIST})
    assert message in found.text
    browser.get("/pipermail/dev/attachments/20070101/abcdef01/other.bin", status=404)


def test_threads_whose_attachments_were_scrubbed_are_marked_and_pass_the_check(app, tmp_path):
    """The kept files make their messages ones with attachments: the month page marks their threads,
    and kittypyr check finds the list's figures in agreement."""
    from kittypyr.health import check_archive

    posts = posts_with_attachments()
    import_folder(app, write_folder(tmp_path / "dev", posts))
    with prepare(registry=app.registry) as env:
        findings, _ = check_archive(env["root"], app.registry)
        assert [str(finding) for finding in findings] == []
    month = TestApp(app).get(f"/list/{LIST}/{START.year}/{START.month}/")
    assert month.html.select('svg[aria-label="Has attachments"]')


def test_scrubbed_attachments_of_deleted_messages_and_private_lists(app, tmp_path):
    posts = posts_with_attachments()
    import_folder(app, write_folder(tmp_path / "dev", posts), policy="private")
    browser = TestApp(app)
    path = f"/pipermail/dev/attachments/{attachment_path(posts[2], 0, 'chart.png')}"
    refused = browser.get(path, status=403)
    assert PNG not in refused.body and "Location" not in refused.headers
    with prepare(registry=app.registry) as env:
        mailing_list = env["root"].lists[LIST]
        mailing_list.archive_policy = "public"
        delete_messages(mailing_list, [message_id_hash(posts[2].message_id)], User("admin@example.org"))
        transaction.commit()
    gone = browser.get(moved(browser, path), status=410)
    assert PNG not in gone.body


def test_a_name_in_several_domains(tmp_path):
    app = make_app(tmp_path)
    other = "dev@lists.example.com"
    try:
        import_folder(app, write_folder(tmp_path / "dev", thread_posts()))
        with prepare(registry=app.registry) as env:
            ensure_mailing_list(env["root"], other)
            transaction.commit()
        choices = TestApp(app).get("/pipermail/dev/2007-March/000000.html", status=300)
        assert [a.text for a in choices.html.select("main ul.lists a")] == [other, LIST]
    finally:
        app.registry._zodb_databases[""].close()
    settled = tmp_path / "settled"
    settled.mkdir()
    app = make_app(settled)
    app.registry.settings["kittypyr.pipermail_domain"] = "lists.example.org"
    try:
        import_folder(app, write_folder(tmp_path / "dev2", thread_posts()))
        with prepare(registry=app.registry) as env:
            ensure_mailing_list(env["root"], other)
            transaction.commit()
        assert moved(TestApp(app), "/pipermail/dev/2007-March/000000.html") == message_url("post0@example.org")
    finally:
        app.registry._zodb_databases[""].close()


def test_a_name_shared_with_a_private_list_answers_as_if_it_were_alone(app, tmp_path):
    """A choice of one, the other list hidden, would tell that a private list has that name."""
    import_folder(app, write_folder(tmp_path / "dev", thread_posts()))
    browser = TestApp(app)
    alone = browser.get("/pipermail/dev/2007-March/000000.html", status=301).headers["Location"]
    with prepare(registry=app.registry) as env:
        ensure_mailing_list(env["root"], "dev@lists.example.com").archive_policy = "private"
        transaction.commit()
    again = browser.get("/pipermail/dev/2007-March/000000.html", status=301)
    assert again.headers["Location"] == alone
    assert browser.get("/pipermail/dev/", status=301).headers["Location"].endswith(f"/list/{LIST}/")
    assert "lists.example.com" not in again.text


def test_private_list_pages_say_nothing_to_anonymous_readers(app, tmp_path):
    twin = dict(subject="[Dev] Secret merger", author="Jane Doe", email="jane@example.org", date=START)
    posts = thread_posts() + [Post(number=30, message_id="a@example.org", body="a\n", **twin),
                              Post(number=31, message_id="b@example.org", body="b\n", **twin)]
    folder = write_folder(tmp_path / "dev", posts, style="none")
    import_folder(app, folder, policy="private")
    browser = TestApp(app)
    for path in ("/pipermail/dev/2007-March/000000.html", "/pipermail/dev/2007-March/000030.html"):
        refused = browser.get(path, status=403)
        assert "Location" not in refused.headers
        assert "Release plans" not in refused.text and "Secret merger" not in refused.text


def private_list_urls(posts):
    """Old URLs of the list: of a message, of none, of a kept attachment, of no file, and of volumes."""
    chart = attachment_path(posts[2], 0, "chart.png")
    return [
        "/pipermail/dev/2007-March/000000.html", "/pipermail/dev/2007-March/000005.html",
        "/pipermail/dev/2007-April/000007.html", "/pipermail/dev/2007-April/000999.html",
        "/mailman/private/dev/2007-March/000003.html", "/pipermail/private/dev/2007-March/000002.html",
        f"/pipermail/dev/attachments/{chart}", "/pipermail/dev/attachments/20070101/abcdef01/other.bin",
        "/pipermail/dev/", "/pipermail/dev/2007-March/", "/pipermail/dev/2007-March/thread.html",
        "/pipermail/dev/2007-March.txt.gz", "/pipermail/dev/nonsense", "/pipermail/dev.mbox/dev.mbox",
        "/mailman/listinfo/dev",
    ]


def test_every_old_url_of_a_private_list_answers_403_to_who_may_not_read_it(app, tmp_path, monkeypatch):
    posts = posts_with_attachments()
    import_folder(app, write_folder(tmp_path / "dev", posts), policy="private")
    forget_login_failures(app)
    mailman = FakeMailman(monkeypatch)
    mailman.add_user("member@example.org", roles=[(LIST, "member")])
    mailman.add_user("outsider@example.org")
    hashes = [message_id_hash(post.message_id) for post in posts]
    anonymous = TestApp(app)
    outsider = TestApp(app)
    log_in(outsider, "outsider@example.org")
    for url in private_list_urls(posts):
        for browser in (anonymous, outsider):
            refused = browser.get(url, status=403)
            assert "Location" not in refused.headers, url
            # The login links name the page asked for, to go back to it; nothing else.
            shown = refused.text.replace(url, "").replace(quote(url, safe=""), "")
            assert not any(name in shown for name in hashes + ["chart.png", "Release plans"]), url
        assert anonymous.get(url, status=403).forms["login-form"]["came_from"].value == url
        assert "not a member" in outsider.get(url, status=403).text
    member = TestApp(app)
    log_in(member, "member@example.org")
    assert moved(member, "/pipermail/dev/2007-March/000000.html") == message_url(posts[0].message_id)
    assert moved(member, f"/pipermail/dev/attachments/{attachment_path(posts[2], 0, 'chart.png')}").startswith(
        message_url(posts[2].message_id) + "attachment/")


def test_import_command_maps_again_on_a_second_run(tmp_path):
    config = write_config(tmp_path)
    folder = write_folder(tmp_path / "dev", thread_posts(), database=True)
    first = kittypyr("import", config, LIST, folder, "--workers", "1", "--policy", "public")
    assert first.returncode == 0, first.stderr
    assert "read 5, archived 5" in first.stdout
    assert (f"pipermail {folder}: 5 pages, 5 mapped by Message-ID, 0 by date, author and subject, "
            "0 unmapped") in first.stdout
    again = kittypyr("import", config, LIST, folder, "--workers", "0")
    assert "duplicates 5" in again.stdout
    assert f"pipermail {folder}: 5 pages, 5 mapped by Message-ID" in again.stdout


def test_folder_imported_after_the_original_mail(app, tmp_path):
    # The list's own mbox (with its attachments whole) came first; the
    # folder then only brings its numbers, and its attachment links lead
    # to the attachments themselves.
    posts = thread_posts()
    posts[2].attachments = (("data.bin", b"\x00\x01binary"),)
    with prepare(registry=app.registry) as env:
        mailing_list = ensure_mailing_list(env["root"], LIST)
        for post in posts:
            body = post.body if not post.attachments else multipart(
                "mixed", post.body, attachment(b"\x00\x01binary", filename="data.bin"))
            archive_message(mailing_list, make_message(
                # Pipermail showed replies' subjects without their "Re:".
                message_id=f"<{post.message_id}>", subject=("Re: " if post.in_reply_to else "") + post.subject,
                sender=(post.author, post.email),
                date=post.date, in_reply_to=f"<{post.in_reply_to}>" if post.in_reply_to else None, body=body))
        transaction.commit()
    folder = write_folder(tmp_path / "dev", posts, style="none")
    (folder / "2007-March.txt").unlink()  # pages alone still map to what is archived
    report = import_folder(app, folder)
    assert any("5 pages, 0 mapped by Message-ID, 5 by date, author and subject" in line for line in report.summary())
    browser = TestApp(app)
    for post in posts:
        assert moved(browser, f"/pipermail/dev/x/{post.number:06d}.html") == message_url(post.message_id)
    location = moved(browser, f"/pipermail/dev/attachments/{attachment_path(posts[2], 0, 'data.bin')}")
    assert location.startswith(message_url(posts[2].message_id) + "attachment/")
    assert browser.get(location).body == b"\x00\x01binary"


def test_the_whole_folder_imported_after_the_lists_mbox_adds_no_second_copy(app, tmp_path):
    """Mailman 2 kept each post twice: whole in the list's mbox, decoded and scrubbed in the month file.
    Imported one after the other, each post is one message: same Message-ID, Date and sender."""
    posts = thread_posts()
    posts[2].attachments = (("data.bin", b"\x00\x01binary"),)
    with prepare(registry=app.registry) as env:
        mailing_list = ensure_mailing_list(env["root"], LIST)
        for post in posts:
            text = text_part(post.body + "Caf\u00e9.\n", cte="quoted-printable")
            body = text if not post.attachments else multipart(
                "mixed", text, attachment(b"\x00\x01binary", filename="data.bin"))
            archive_message(mailing_list, make_message(
                message_id=f"<{post.message_id}>", subject=("Re: " if post.in_reply_to else "") + post.subject,
                sender=(post.author, post.email),
                date=post.date, in_reply_to=f"<{post.in_reply_to}>" if post.in_reply_to else None, body=body))
        transaction.commit()
    folder = write_folder(tmp_path / "dev", posts)
    report = import_folder(app, folder)
    assert any("5 pages, 5 mapped by Message-ID" in line for line in report.summary()), report.summary()
    with prepare(registry=app.registry) as env:
        assert len(env["root"].lists[LIST].messages) == len(posts)
    browser = TestApp(app)
    for post in posts:
        assert moved(browser, f"/pipermail/dev/x/{post.number:06d}.html") == message_url(post.message_id)


def test_a_deleted_message_stays_gone_under_its_old_url(app, tmp_path):
    posts = thread_posts()
    import_folder(app, write_folder(tmp_path / "dev", posts))
    with prepare(registry=app.registry) as env:
        mailing_list = env["root"].lists[LIST]
        delete_messages(mailing_list, [message_id_hash(posts[1].message_id)], User("admin@example.org"))
        transaction.commit()
    browser = TestApp(app)
    location = moved(browser, "/pipermail/dev/2007-March/000001.html")
    assert browser.get(location, status=410)
    # Imported again, the deleted message is skipped and its page still leads to where it was.
    import_folder(app, write_folder(tmp_path / "again", posts))
    assert moved(browser, "/pipermail/dev/2007-March/000001.html") == location


@pytest.mark.parametrize("period", ["year", "quarter", "week", "day"])
def test_archives_of_every_period(app, tmp_path, period):
    # Mailman 2 could archive by year (2007), quarter (2007q1), week
    # (Week-of-Mon-20070305) or day (20070305) instead of month.
    posts = thread_posts()
    folder = write_folder(tmp_path / "dev", posts, period=period, database=period == "week")
    report = import_folder(app, folder)
    assert report.total("archived") == 5
    assert any("5 pages, 5 mapped by Message-ID" in line for line in report.summary())
    browser = TestApp(app)
    the_list = "http://localhost/list/dev@lists.example.org/"
    for post in posts:
        volume = volume_of(post, period)
        assert moved(browser, f"/pipermail/dev/{volume}/{post.number:06d}.html") == message_url(post.message_id)
        local = post.date - timedelta(hours=7)  # the fixture's server zone
        page = moved(browser, f"/pipermail/dev/{volume}/thread.html")
        if period in ("year", "quarter"):
            assert page == f"{the_list}{local.year}/"
        else:
            assert page == f"{the_list}{local.year}/{local.month}/"
        export = moved(browser, f"/pipermail/dev/{volume}.txt.gz")
        assert export.startswith(f"{the_list}export/dev-{volume}.mbox.gz?start=")
        exported = gzip.decompress(browser.get(export).body)
        assert f"Message-ID: <{post.message_id}>".encode() in exported
    week = moved(browser, "/pipermail/dev/Week-of-Mon-20070305.txt")
    assert week.endswith("?start=2007-03-05&end=2007-03-12")
    quarter = moved(browser, "/pipermail/dev/2007q1.txt")
    assert quarter.endswith("?start=2007-01-01&end=2007-04-01")
    browser.get("/pipermail/dev/2007q5/", status=404)
    browser.get("/pipermail/dev/20071345.txt", status=404)


def test_volumes_kept_compressed_only(app, tmp_path):
    posts = thread_posts()
    folder = write_folder(tmp_path / "dev", posts, compressed_only=True)
    assert not list(folder.glob("*.txt"))
    report = import_folder(app, folder)
    assert report.total("archived") == 5
    browser = TestApp(app)
    for post in posts:
        assert moved(browser, f"/pipermail/dev/x/{post.number:06d}.html") == message_url(post.message_id)


def test_messages_without_message_id_and_encoded_or_escaped_subjects(app, tmp_path):
    posts = thread_posts()
    # No Message-ID at all: Pipermail's article record names it by its number.
    posts[1].message_id = None
    posts[2].in_reply_to = None
    # A subject encoded in the month file, shown decoded (and HTML-escaped) on the page.
    posts[3].subject = "[Dev] Café <déjà> & co"
    posts[3].subject_header = "=?utf-8?q?=5BDev=5D_Caf=C3=A9_=3Cd=C3=A9j=C3=A0=3E_=26_co?="
    for database in (False, True):
        folder = write_folder(tmp_path / f"dev{database}", posts, database=database)
        assert "&lt;d" in (folder / f"{volume_of(posts[3])}" / "000004.html").read_text()
        report = import_folder(app, folder)
        assert any("5 pages, 4 mapped by Message-ID, 1 by date, author and subject, 0 unmapped" in line
                   for line in report.summary()), report.summary()
        browser = TestApp(app)
        with prepare(registry=app.registry) as env:
            messages = env["root"].lists[LIST].messages
            no_id = [m for m in messages.values() if m.message_id_derived]
            assert [m.subject for m in no_id] == ["[Dev] Release plans"]
            no_id_url = f"http://localhost/list/{LIST}/message/{no_id[0].__name__}/"
        assert moved(browser, "/pipermail/dev/x/000001.html") == no_id_url
        assert moved(browser, "/pipermail/dev/x/000004.html") == message_url(posts[3].message_id)


def test_scrubber_notices_of_every_form_are_read():
    # The notices Mailman 2.1's scrubber wrote over its versions; a quoted
    # notice or a link in a sentence does not hold the file.
    base = "http://lists.example.org/pipermail/dev/attachments"
    text = "\n".join([
        "Hello.",
        "-------------- next part --------------",
        "A non-text attachment was scrubbed...",
        "Name: chart.png", "Type: image/png", "Size: 12 bytes", "Desc: not available",
        f"Url : {base}/20070305/0a1b2c3d/chart.png",
        "-------------- next part --------------",
        "An HTML attachment was scrubbed...",
        f"URL: <{base}/20070305/0a1b2c3d/attachment.html>",
        "-------------- next part --------------",
        "An embedded message was scrubbed...",
        "From: Jane <jane at example.org>", "Subject: forwarded", "Date: Mon, 5 Mar 2007", "Size: 900",
        f"Url: {base}/20070305/0a1b2c3d/attachment.eml",
        "-------------- next part --------------",
        "A non-text attachment was scrubbed...",
        "Name: My%20Notes.bin", "Type: application/octet-stream",
        f"URL: <{base}/20070305/0a1b2c3d/My%20Notes.bin>",
        f"> Url : {base}/20070101/deadbeef/quoted.bin",
        f"See {base}/20070101/deadbeef/mentioned.bin for more.",
        # A body is untrusted: no path out of attachments/.
        f"Url : {base}/20070101/deadbeef/..%2F..%2F..%2Fsecret.txt",
        f"Url : {base}/20070101/deadbeef/..",
    ])
    assert scrubbed_links(text) == {
        "20070305/0a1b2c3d/chart.png": "image/png",
        "20070305/0a1b2c3d/attachment.html": "text/html",
        "20070305/0a1b2c3d/attachment.eml": None,
        "20070305/0a1b2c3d/My Notes.bin": "application/octet-stream",
    }


def test_a_second_folder_does_not_report_the_first_ones_files(app, tmp_path):
    import_folder(app, write_folder(tmp_path / "first", posts_with_attachments()))
    later = [Post(number=40, subject="[Dev] Later", author="Jane Doe", email="jane@example.org",
                  date=START + timedelta(days=300), message_id="later@example.org")]
    summary = import_folder(app, write_folder(tmp_path / "second", later)).summary()
    assert not any("not in the folder" in line for line in summary), summary
    browser = TestApp(app)
    first = posts_with_attachments()[2]
    assert moved(browser, f"/pipermail/dev/attachments/{attachment_path(first, 0, 'chart.png')}").startswith(
        message_url(first.message_id) + "attachment/")


def test_pages_showing_encoded_words_match_by_date_author_and_subject(app, tmp_path):
    # Some Pipermail pages show a subject whose charset Pipermail could not
    # read as the encoded words it came in.
    posts = thread_posts()
    posts[3].subject = "[Dev] Café crème"
    posts[3].subject_header = posts[3].page_subject = "=?utf-8?q?=5BDev=5D_Caf=C3=A9_cr=C3=A8me?="
    folder = write_folder(tmp_path / "dev", posts, style="none")
    report = import_folder(app, folder)
    assert any("0 mapped by Message-ID, 5 by date, author and subject, 0 unmapped" in line
               for line in report.summary()), report.summary()
    assert moved(TestApp(app), "/pipermail/dev/x/000004.html") == message_url(posts[3].message_id)


def test_a_kept_attachment_of_a_message_no_longer_anywhere_is_not_found(app, tmp_path):
    posts = posts_with_attachments()
    import_folder(app, write_folder(tmp_path / "dev", posts))
    with prepare(registry=app.registry) as env:
        mailing_list = env["root"].lists[LIST]
        name = message_id_hash(posts[2].message_id)
        delete_messages(mailing_list, [name], User("admin@example.org"))
        del mailing_list.messages.tombstones[name]  # as an archive restored from before the import
        transaction.commit()
    TestApp(app).get(f"/pipermail/dev/attachments/{attachment_path(posts[2], 0, 'chart.png')}", status=404)


def test_an_attachment_file_that_cannot_be_read_is_named_and_the_rest_kept(tmp_path):
    # A dangling link (or a FIFO) among the scrubbed files of a message
    # whose other files are kept: the import names it, keeps everything
    # else and maps the pages, and says so without a traceback.
    config = write_config(tmp_path)
    posts = posts_with_attachments()
    folder = write_folder(tmp_path / "dev", posts)
    gone = attachment_path(posts[2], 0, "gone.txt")
    (folder / "attachments" / gone).symlink_to(tmp_path / "moved-away.txt")
    waiting = attachment_path(posts[2], 0, "pipe.bin")
    os.mkfifo(folder / "attachments" / waiting)

    result = kittypyr("import", config, LIST, folder, "--workers", "0", timeout=300)

    assert result.returncode == 1, result.stdout + result.stderr
    assert "Traceback" not in result.stderr, result.stderr
    assert "read 5, archived 5, duplicates 0, skipped 0, failed 0" in result.stdout
    assert f"error: attachment not read: {folder / 'attachments' / gone}: No such file or directory" in result.stdout
    assert f"error: attachment not read: {folder / 'attachments' / waiting}: not a regular file" in result.stdout
    assert "2 kept with the message that links them" in result.stdout
    assert f"pipermail {folder}: 5 pages, 5 mapped by Message-ID" in result.stdout


def test_a_damaged_page_of_unclosed_tags_is_read_in_linear_time():
    # A page cut short or made by hand, with thousands of tags that are
    # never closed: each was searched to the page's end, for minutes.
    import time

    from kittypyr.pipermail.pages import read_page

    for opening in ("<H1>", "<TITLE>", "<B>", "<I>", '<A HREF="mailto:x">', "<!--beginarticle-->"):
        data = ("<HTML>" + opening * 40000 + "</HTML>").encode()
        started = time.process_time()
        page = read_page(data, 12, "2007-March")
        assert time.process_time() - started < 2, opening
        assert page.number == 12 and page.attachments == {}


def test_a_page_or_article_file_that_cannot_be_read_is_named_and_the_rest_mapped(tmp_path):
    config = write_config(tmp_path)
    folder = write_folder(tmp_path / "dev", thread_posts(), database=True)
    page = folder / "2007-March" / "000099.html"
    os.mkfifo(page)  # read, it would be waited on forever
    dangling = folder / "2007-March" / "000098.html"
    dangling.symlink_to(tmp_path / "moved-away.html")
    articles = folder / "database" / "2007-May-article"
    os.mkfifo(articles)

    result = kittypyr("import", config, LIST, folder, "--workers", "0", timeout=120)

    assert result.returncode == 1, result.stdout + result.stderr
    assert "Traceback" not in result.stderr
    assert "read 5, archived 5, duplicates 0, skipped 0, failed 0" in result.stdout
    assert f"pipermail {folder}: 5 pages, 5 mapped by Message-ID" in result.stdout
    assert f"error: page not read: {page}: not a regular file" in result.stdout
    assert f"error: page not read: {dangling}: No such file or directory" in result.stdout
    assert f"error: page not read: {articles}: not a regular file" in result.stdout


def test_stray_files_and_link_loops_in_the_attachments_folder_are_named(tmp_path):
    config = write_config(tmp_path)
    folder = write_folder(tmp_path / "dev", posts_with_attachments())
    (folder / "attachments" / "index.html").write_text("a page some web server kept here\n")
    (folder / "attachments" / "loop-a").symlink_to("loop-b")
    (folder / "attachments" / "loop-b").symlink_to("loop-a")

    result = kittypyr("import", config, LIST, folder, "--workers", "0", timeout=300)

    assert "Traceback" not in result.stderr, result.stderr
    assert result.returncode == 0, result.stdout
    assert "2 kept with the message that links them" in result.stdout
    for stray in ("index.html", "loop-a", "loop-b"):
        assert f"attachment linked by no message: {stray}\n" in result.stdout
    assert f"pipermail {folder}: 5 pages, 5 mapped by Message-ID" in result.stdout
