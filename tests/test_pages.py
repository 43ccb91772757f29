"""Reading the archive through WebTest, asserting what a reader sees."""

import re
from datetime import datetime, timedelta, timezone

import pytest
import transaction
from pyramid.scripting import prepare
from webtest import TestApp

from kittypyr.archiving import archive_message, ensure_mailing_list
from kittypyr.msgid import message_id_hash
from tests.mailbuilder import alternative, attachment, html_part, make_message, multipart, text_part
from tests.test_app import make_app

LIST = "dev@lists.example.org"
NOW = datetime.now(timezone.utc).replace(microsecond=0)
PNG = b"\x89PNG\r\n\x1a\n" + bytes(range(64))


def h(n):
    return message_id_hash(f"<p{n}@example.org>")


def mail(n, reply_to=None, subject=None, body=None, sender=("Ada Lovelace", "ada@example.org"), when=None):
    return make_message(
        message_id=f"<p{n}@example.org>",
        subject=subject or (f"Re: Topic {reply_to}" if reply_to is not None else f"Topic {n}"),
        sender=sender,
        date=when or NOW - timedelta(days=2, minutes=-n),
        in_reply_to=f"<p{reply_to}@example.org>" if reply_to is not None else None,
        references=[f"<p{reply_to}@example.org>"] if reply_to is not None else None,
        body=body or f"Message number {n}.\n",
    )


CORPUS = [
    mail(0, subject="Hello <script>alert('subject')</script>",
         body="Hi all,\n    indented code line\n\nWrite to ada@example.org or see https://example.org/docs.\n"),
    mail(1, 0, sender=("<img src=x onerror=alert(1)>", "evil@example.org"),
         body="> Hi all,\n> indented\n\nA reply.\n"),
    mail(2, 1, body=multipart("mixed", text_part("See the picture.\n"),
                              attachment(PNG, "image/png", "chart.png"),
                              attachment(b"MZ\x90\x00binary", "application/x-msdownload", "tool.exe"))),
    mail(3, 0, body=alternative("plain", "<p>html</p>")),
    mail(4, body=html_part("<p>Only <b>HTML</b><script>alert('body')</script></p>"), subject="HTML only"),
    mail(5, when=datetime(2019, 3, 14, 9, 26, tzinfo=timezone.utc), subject="Old news"),
]


@pytest.fixture(scope="module")
def browser(tmp_path_factory):
    app = make_app(tmp_path_factory.mktemp("pages"))
    with prepare(registry=app.registry) as env:
        mailing_list = ensure_mailing_list(env["root"], LIST)
        mailing_list.description = "Development of <things>"
        for raw in CORPUS:
            archive_message(mailing_list, raw)
        transaction.commit()
    yield TestApp(app)
    app.registry._zodb_databases[""].close()


def test_every_page_carries_protective_headers(browser):
    for url in ("/", f"/list/{LIST}/", f"/list/{LIST}/thread/{h(0)}/", f"/list/{LIST}/message/{h(0)}/"):
        response = browser.get(url)
        assert "default-src 'none'" in response.headers["Content-Security-Policy"]
        assert response.headers["X-Content-Type-Options"] == "nosniff"


def test_index_shows_list_with_description_counts_and_sparkline(browser):
    page = browser.get("/")
    item = page.html.select_one("ul.lists li")
    assert item.a.text == "dev" and item.a["href"].endswith(f"/list/{LIST}/")
    assert "Development of <things>" in item.text  # escaped, shown as text
    assert "6 messages" in item.text
    assert "2 participants in the last 30 days" in item.text
    assert item.select_one("svg.sparkline polyline") is not None
    assert "@" not in item.text
    assert browser.get("/?name=nomatch").html.select("ul.lists li") == []


def test_list_overview(browser):
    page = browser.get(f"/list/{LIST}/")
    recent = [a.text for a in page.html.select("section.recent a")]
    assert recent[0] == "HTML only" and "Old news" in recent
    # Every thread is among the recent ones: "New threads" does not list them again.
    assert page.html.select_one("section.newest") is None
    posters = page.html.select_one("section.posters").text
    assert "Ada Lovelace" in posters and "ada@example.org" not in posters
    months = {a.text: a["href"] for a in page.html.select("ul.months a")}
    assert months["2019-03"].endswith(f"/list/{LIST}/2019/3/")
    assert page.html.select_one("figure.activity svg") is not None


def test_month_page_lists_threads_started_that_month(browser):
    page = browser.get(f"/list/{LIST}/2019/3/")
    assert [a.text for a in page.html.select("ol.threads a")] == ["Old news"]
    browser.get(f"/list/{LIST}/2019/13/", status=404)


def test_thread_page_nests_escapes_and_obfuscates(browser):
    page = browser.get(f"/list/{LIST}/thread/{h(0)}/")
    articles = page.html.select("article.message")
    assert [a["id"] for a in articles] == [f"m-{n}" for n in (h(0), h(1), h(2), h(3))]
    assert [a["data-depth"] for a in articles] == ["0", "1", "2", "1"]
    assert page.html.h1.text == "Hello <script>alert('subject')</script>"
    assert "<script>alert" not in page.text.replace("&lt;script&gt;", "")
    assert "<img src=x" in articles[1].select_one(".sender").text  # shown as text, never as a tag
    assert articles[1].select_one("img") is None
    body = articles[0].select_one(".body")
    assert "    indented code line" in body.text
    assert "ada at example.org" in body.text and "ada@example.org" not in page.text
    link = body.select_one("a[href='https://example.org/docs']")
    assert link is not None and link["rel"] == ["nofollow", "ugc"]
    assert articles[1].select_one("blockquote.quote") is not None
    # Addresses in bodies are never links; the only mailto: is each message's "Reply by e-mail".
    assert page.html.select(".body a[href^='mailto:']") == []
    attachment_links = [a.text for a in articles[2].select("ul.attachments a")]
    assert attachment_links == ["chart.png", "tool.exe"]
    assert articles[0].select_one("time")["datetime"].startswith(str(NOW.year))
    assert "UTC" in articles[0].select_one("time").text


def test_flat_view_orders_by_date(browser):
    page = browser.get(f"/list/{LIST}/thread/{h(0)}/?view=flat")
    assert [a["data-depth"] for a in page.html.select("article.message")] == ["0"] * 4


def test_thread_page_revalidates(browser):
    first = browser.get(f"/list/{LIST}/thread/{h(0)}/")
    assert first.headers["ETag"] and "no-cache" in first.headers["Cache-Control"]
    browser.get(f"/list/{LIST}/thread/{h(0)}/", headers={"If-None-Match": first.headers["ETag"]}, status=304)


def test_html_only_mail_is_shown_as_text(browser):
    page = browser.get(f"/list/{LIST}/message/{h(4)}/")
    body = page.html.select_one("article .body")
    assert "Only HTML" in " ".join(body.text.split())
    assert body.select_one("b") is None and "alert('body')" not in body.text
    outline = page.html.select("nav.outline li")
    assert len(outline) == 1 and outline[0].strong is not None


def test_message_raw_and_attachments(browser):
    raw = browser.get(f"/list/{LIST}/message/{h(2)}/raw")
    assert raw.content_type == "text/plain"
    assert raw.body == CORPUS[2]
    image = browser.get(f"/list/{LIST}/message/{h(2)}/attachment/2/chart.png")
    assert image.body == PNG and image.content_type == "image/png"
    assert image.headers["Content-Disposition"].startswith("inline")
    assert image.headers["X-Content-Type-Options"] == "nosniff"
    exe = browser.get(f"/list/{LIST}/message/{h(2)}/attachment/3/tool.exe")
    assert exe.headers["Content-Disposition"].startswith("attachment")
    # Saved under its name, never given a type of the sender's choosing.
    assert exe.content_type == "application/octet-stream"
    assert exe.headers["Content-Disposition"].endswith("filename*=UTF-8''tool.exe")
    redirect = browser.get(f"/list/{LIST}/message/{h(2)}/attachment/2/", status=301)
    assert redirect.location.endswith("/attachment/2/chart.png")
    browser.get(f"/list/{LIST}/message/{h(2)}/attachment/9/x", status=404)


@pytest.mark.parametrize("content_type, name", [
    ("application/javascript", "gadget.js"), ("text/javascript", "gadget.mjs"), ("text/css", "look.css"),
    ("text/html", "page.html"), ("image/svg+xml", "drawing.svg"), ("application/wasm", "code.wasm")])
def test_an_attachment_is_never_served_as_a_type_a_page_could_run(tmp_path, content_type, name):
    # Attachments are served from the site's own address, which its content
    # security policy trusts for scripts and styles: served as what the
    # sender said, any page of the site could load one as its script.
    app = make_app(tmp_path)
    try:
        with prepare(registry=app.registry) as env:
            archive_message(ensure_mailing_list(env["root"], LIST), mail(
                9, body=multipart("mixed", text_part("See the file.\n"),
                                  attachment(b"alert(document.cookie)", content_type, name))))
            transaction.commit()
        served = TestApp(app).get(f"/list/{LIST}/message/{h(9)}/attachment/2/{name}")
        assert served.body == b"alert(document.cookie)"
        assert served.content_type == "application/octet-stream"
        assert served.headers["Content-Disposition"].startswith("attachment")
        assert served.headers["X-Content-Type-Options"] == "nosniff"
    finally:
        app.registry._zodb_databases[""].close()


def test_unknown_names_give_helpful_404(browser):
    page = browser.get(f"/list/{LIST}/message/NOSUCHHASH/", status=404)
    assert "Not found" in page.text
    assert page.html.select_one(f"a[href$='/list/{LIST}/']") is not None
    assert page.html.select_one("main form.search input[name=q]") is not None
    browser.get("/list/nobody@example.org/", status=404)
    browser.get(f"/list/{LIST}/thread/NOPE/", status=404)


def test_absorbed_thread_redirects(tmp_path):
    app = make_app(tmp_path)
    try:
        with prepare(registry=app.registry) as env:
            mailing_list = ensure_mailing_list(env["root"], LIST)
            archive_message(mailing_list, mail(11, 10))
            archive_message(mailing_list, mail(10))
            transaction.commit()
        response = TestApp(app).get(f"/list/{LIST}/thread/{h(11)}/", status=301)
        assert response.location.endswith(f"/list/{LIST}/thread/{h(10)}/")
    finally:
        app.registry._zodb_databases[""].close()


def test_json_api(browser):
    lists = browser.get("/api/lists/").json
    assert lists["count"] == 1 and lists["results"][0]["messages"] == 6
    assert "@" not in lists["results"][0]["address"]
    threads = browser.get(f"/api/list/{LIST}/threads/").json
    assert threads["count"] == 3 and threads["results"][0]["subject"] == "HTML only"
    thread = browser.get(f"/api/list/{LIST}/thread/{h(0)}/").json
    assert [e["hash"] for e in thread["emails"]["results"]] == [h(0), h(1), h(2), h(3)]
    email = browser.get(f"/api/list/{LIST}/email/{h(0)}/").json
    assert email["sender_name"] == "Ada Lovelace" and "@" not in email["sender_address"]
    assert "ada at example.org" in email["body"]
    assert browser.get(f"/api/list/{LIST}/").json["threads"] == 3
    browser.get(f"/api/list/{LIST}/email/NOPE/", status=404)


def test_overview_and_month_pages_revalidate(browser):
    for url in (f"/list/{LIST}/", f"/list/{LIST}/2019/3/", "/"):
        first = browser.get(url)
        browser.get(url, headers={"If-None-Match": first.headers["ETag"]}, status=304)


def test_a_count_of_one_is_said_in_the_singular(browser):
    # "HTML only" is a thread of one message by one person, the newest.
    pages = ["/", f"/list/{LIST}/", f"/list/{LIST}/threads", f"/list/{LIST}/thread/{h(4)}/",
             f"/list/{LIST}/message/{h(4)}/", f"/list/{LIST}/message/{h(5)}/"]
    for url in pages:
        text = browser.get(url).text
        assert not re.search(r"(?<![\d.,])1 (messages|participants|threads|posts|votes|replies)\b", text), url
    thread = browser.get(f"/list/{LIST}/thread/{h(4)}/").html
    assert "1 message, 1 participant" in thread.select_one("p.meta").text
    overview = browser.get(f"/list/{LIST}/").html
    assert any(meta.text.strip() == "1 message" for meta in overview.select("span.meta"))
