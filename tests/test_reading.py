"""Reading long threads and single messages: outlines, folded patches, what a message page offers."""

import base64
from datetime import datetime, timedelta, timezone

import pytest
import transaction
from pyramid.scripting import prepare
from webtest import TestApp

from kittypyr.archiving import archive_message, ensure_mailing_list
from kittypyr.msgid import message_id_hash
from tests.mailbuilder import attachment, html_part, make_message, multipart, text_part
from tests.test_app import make_app

LIST = "mips@lists.example.org"
START = datetime(2020, 4, 2, 9, 0, tzinfo=timezone.utc)
ADA = ("Ada Lovelace", "ada@example.org")
BOB = ("Bob Reviewer", "bob@example.org")

COVER = """\
This series fixes the cache flush on Octeon.

Ada Lovelace (2):
  mips: flush the cache
  mips: document the flush

 arch/mips/mm/cache.c | 3 ++-
 1 file changed, 2 insertions(+), 1 deletion(-)
"""


def patch_body(n):
    return f"""\
The flush must happen before the TLB is written, otherwise the
old lines come back (patch {n}).

Signed-off-by: Ada Lovelace <ada@example.org>
---
 arch/mips/mm/cache.c | 3 ++-
 1 file changed, 2 insertions(+), 1 deletion(-)

diff --git a/arch/mips/mm/cache.c b/arch/mips/mm/cache.c
index 1111111..2222222 100644
--- a/arch/mips/mm/cache.c
+++ b/arch/mips/mm/cache.c
@@ -10,3 +10,4 @@ void flush(void)
 {{
-\told_flush();
+\tnew_flush();
+\tbarrier();
 }}
--
2.30.0
"""


REVIEW = """\
On Thu, Ada Lovelace wrote:
> -\told_flush();
> +\tnew_flush();

Why is the barrier needed here?
"""


def mid(name):
    return f"<{name}@example.org>"


def h(name):
    return message_id_hash(mid(name))


def mail(name, subject, minutes, reply_to=None, sender=ADA, body="Text.\n", **extra):
    return make_message(
        message_id=mid(name), subject=subject, sender=sender, date=START + timedelta(minutes=minutes),
        in_reply_to=mid(reply_to) if reply_to else None, references=[mid(reply_to)] if reply_to else None,
        body=body, **extra)


CORPUS = [
    mail("older", "An older question", -600),
    mail("cover", "[PATCH 0/2] mips: fix the cache flush", 0, body=COVER,
         to="MIPS list <mips@lists.example.org>", headers={"Cc": "Ralf <ralf@linux-mips.org>"}),
    mail("p1", "[PATCH 1/2] mips: flush the cache", 1, "cover", body=patch_body(1)),
    mail("p2", "[PATCH 2/2] mips: document the flush", 2, "cover", body=patch_body(2)),
    mail("review", "Re: [PATCH 1/2] mips: flush the cache", 30, "p1", sender=BOB, body=REVIEW),
    mail("newer", "A newer question", 600),
] + [
    # A long chain, for the outline around one message.
    mail(f"chain{n}", "Chain" if n == 0 else "Re: Chain", 2000 + n, f"chain{n - 1}" if n else None)
    for n in range(30)
] + [
    mail("attached", "The fix, attached", 9000, body=multipart(
        "mixed", text_part("The patch is attached.\n"),
        attachment(b"--- a/x\n+++ b/x\n@@ -1 +1 @@\n-\xe9t\xe9\n+summer\n", "application/octet-stream", "fix.patch"),
        attachment(b"<script>alert(1)</script>", "text/html", "page.html"),
        attachment(b"\x89PNG\r\n\x1a\n", "image/png", "shot.png"))),
    mail("long-review", "Re: [PATCH 2/2] mips: document the flush", 40, "p2", sender=BOB,
         body="You wrote:\n" + "".join(f"> quoted line {n}\n" for n in range(60)) + "\nNo.\n> short\n"),
    mail("letter", "Newsletter", 9500, body=html_part(
        '<p>Read <a href="https://example.org/notes">the notes</a>.</p><img src="https://example.net/p.gif" alt="">')),
]


@pytest.fixture(scope="module")
def browser(tmp_path_factory):
    app = make_app(tmp_path_factory.mktemp("reading"))
    with prepare(registry=app.registry) as env:
        mailing_list = ensure_mailing_list(env["root"], LIST)
        for raw in CORPUS:
            archive_message(mailing_list, raw)
        transaction.commit()
    yield TestApp(app)
    app.registry._zodb_databases[""].close()


THREAD = f"/list/{LIST}/thread/{h('cover')}/"


def message_url(name):
    return f"/list/{LIST}/message/{h(name)}/"


def article(page, name):
    return page.html.select_one(f"article#m-{h(name)}")


def test_thread_page_opens_with_its_outline_and_the_neighbouring_threads(browser):
    page = browser.get(THREAD)
    main = page.html.select_one("main")
    first_article = main.select_one("article.message")
    outline = main.select_one("details.outline")
    assert outline is not None and outline.has_attr("open")
    # Both come before the first message in the page.
    text = str(main)
    assert text.index('class="outline"') < text.index(str(first_article)[:40])
    neighbours = main.select_one("nav.neighbours")
    assert text.index('class="neighbours"') < text.index(str(first_article)[:40])
    assert "Older thread: An older question" in neighbours.text
    assert "Newer thread: A newer question" in neighbours.text

    items = outline.select("li")
    assert [li.a["href"] for li in items] == [f"#m-{h(n)}" for n in ("cover", "p1", "review", "p2", "long-review")]
    assert [li.a.text for li in items][:2] == ["[PATCH 0/2] mips: fix the cache flush",
                                               "[PATCH 1/2] mips: flush the cache"]
    assert "Bob Reviewer" in items[2].text and "2020-04-02 09:30 UTC" in items[2].text
    assert [li["data-depth"] for li in items] == ["0", "1", "2", "1", "2"]


def test_a_patch_shows_its_message_and_diffstat_with_the_diff_folded(browser):
    page = browser.get(THREAD)
    patch = article(page, "p1")
    folds = patch.select("details.patch-fold")
    assert len(folds) == 1 and not folds[0].has_attr("open")
    assert "1 file, +2 −1" in folds[0].summary.text
    # The diff itself is not in the page: a link leads to it (a script loads it in place).
    assert folds[0].select_one("pre.patch") is None
    assert folds[0].a["href"].endswith(message_url("p1") + "#diff-1")
    fragment = browser.get(folds[0]["data-diff"])
    assert fragment.content_type == "text/html"
    assert fragment.html.select_one("pre.patch span.add").text == "+\tnew_flush();"
    browser.get(message_url("p1") + "diff/2", status=404)
    browser.get(message_url("cover") + "diff/1", status=404)
    shown = patch.select_one(".body").text.replace(folds[0].text, "")
    assert "The flush must happen before the TLB is written" in shown
    assert "arch/mips/mm/cache.c | 3 ++-" in shown
    # Cover letters and reviews stay open: nothing folded in them.
    for name in ("cover", "review"):
        assert article(page, name).select("details") == []
    assert "Why is the barrier needed here?" in article(page, "review").text


def test_expand_all_and_collapse_all_work_without_a_script(browser):
    page = browser.get(THREAD)
    expand = page.html.select_one("a.expand-all")
    assert expand is not None and page.html.select_one("a.collapse-all") is not None
    opened = browser.get(expand["href"])
    assert all(d.has_attr("open") and d.select_one("pre.patch") for d in opened.html.select("article details.patch-fold"))
    assert len(opened.html.select("article details.patch-fold")) == 2
    collapsed = browser.get(opened.html.select_one("a.collapse-all")["href"])
    assert not any(d.has_attr("open") for d in collapsed.html.select("article details.patch-fold"))


def test_recipients_read_as_the_sender_and_subject_are(tmp_path):
    """Raw UTF-8 and encoded words with a language (RFC 2231) in To and Cc, as in From and Subject."""
    app = make_app(tmp_path)
    raw = make_message(message_id="<to@example.org>", headers={
        "To": "Dörte Sørensen <doerte@example.com>".encode("utf-8"),
        "Cc": "=?iso-8859-1*sv?Q?J=F6rg_S=F6rensen?= <joerg@example.com>"})
    try:
        with prepare(registry=app.registry) as env:
            archive_message(ensure_mailing_list(env["root"], LIST), raw)
            transaction.commit()
        page = TestApp(app).get(f"/list/{LIST}/message/{message_id_hash('<to@example.org>')}/")
        fields = {dt.text: dd.text.strip() for dt, dd in zip(page.html.select("dl.headers dt"),
                                                              page.html.select("dl.headers dd"))}
        assert fields["To"] == "Dörte Sørensen <doerte at example.com>"
        assert fields["Cc"] == "Jörg Sörensen <joerg at example.com>"
    finally:
        app.registry._zodb_databases[""].close()


def test_message_page_heading_headers_and_identifier(browser):
    page = browser.get(message_url("cover"))
    assert page.html.h1.text == "[PATCH 0/2] mips: fix the cache flush"
    headers = page.html.select_one("dl.headers")
    fields = {dt.text: dd for dt, dd in zip(headers.select("dt"), headers.select("dd"))}
    assert fields["To"].text.strip() == "MIPS list <mips at lists.example.org>"
    assert fields["Cc"].text.strip() == "Ralf <ralf at linux-mips.org>"
    assert "ralf@linux-mips.org" not in page.text
    # The Message-ID as it is, to paste into b4 or git send-email.
    assert fields["Message-ID"].select_one("code.message-id").text == "cover@example.org"
    assert browser.get(f"/api/list/{LIST}/email/{h('cover')}/").json["message_id"] == "cover@example.org"
    assert browser.get(f"/api/list/{LIST}/thread/{h('cover')}/").json["emails"]["results"][0][
        "message_id"] == "cover@example.org"


def test_message_page_links_to_what_it_answers_and_its_neighbours(browser):
    page = browser.get(message_url("review"))
    answers = page.html.select_one("dl.headers a.in-reply-to")
    assert answers["href"].endswith(message_url("p1")) and "[PATCH 1/2]" in answers.text
    in_thread = page.html.select_one("nav.in-thread")
    assert in_thread.select_one("a[rel=prev]")["href"].endswith(message_url("p1"))
    assert in_thread.select_one("a[rel=next]")["href"].endswith(message_url("p2"))
    others = page.html.select_one("nav.neighbours")
    assert "An older question" in others.select_one("a.older").text
    assert "A newer question" in others.select_one("a.newer").text
    crumbs = page.html.select_one("nav.breadcrumbs")
    assert crumbs.select_one(f"a[href$='/list/{LIST}/2020/4/']").text == "2020-04"
    assert crumbs.select("a")[-1]["href"].endswith(THREAD)


def test_first_message_has_no_previous_and_shows_its_patch_open(browser):
    page = browser.get(message_url("p1"))
    in_thread = page.html.select_one("nav.in-thread")
    assert in_thread.select_one("a[rel=prev]")["href"].endswith(message_url("cover"))
    assert page.html.select("article details.patch-fold") == []
    assert page.html.select_one("article pre.patch")["id"] == "diff-1"
    first = browser.get(message_url("cover"))
    assert first.html.select_one("nav.in-thread a[rel=prev]") is None
    assert first.html.select_one("dl.headers a.in-reply-to") is None


def test_message_outline_shows_the_neighbourhood_only(browser):
    page = browser.get(message_url("chain15"))
    items = page.html.select("nav.outline li")
    assert len(items) <= 12
    current = [li for li in items if li.select_one("[aria-current]")]
    assert len(current) == 1 and "Re: Chain" in current[0].text
    linked = {li.a["href"] for li in items if li.a is not None}
    assert any(href.endswith(message_url("chain0")) for href in linked)  # the thread's start
    assert any(href.endswith(message_url("chain14")) for href in linked)
    assert any(href.endswith(message_url("chain16")) for href in linked)
    assert not any(href.endswith(message_url("chain5")) for href in linked)
    whole = page.html.select_one("nav.outline a.whole-thread")
    assert whole["href"].endswith(f"/list/{LIST}/thread/{h('chain0')}/") and "30 messages" in whole.text


def test_text_attachments_can_be_read_in_the_page_as_text(browser):
    page = browser.get(message_url("attached"))
    links = {li.select_one("a").text: li for li in page.html.select("ul.attachments li")}
    assert set(links) == {"fix.patch", "page.html", "shot.png"}
    assert links["shot.png"].select_one("a.as-text") is None
    patch = browser.get(links["fix.patch"].select_one("a.as-text")["href"])
    assert patch.headers["Content-Type"] == "text/plain; charset=utf-8"
    assert patch.headers["Content-Disposition"].startswith("inline")
    assert patch.headers["X-Content-Type-Options"] == "nosniff"
    assert patch.text.splitlines()[3] == "-été"  # Latin-1 read as such, sent as UTF-8
    html = browser.get(links["page.html"].select_one("a.as-text")["href"])
    assert html.headers["Content-Type"] == "text/plain; charset=utf-8"
    assert html.text == "<script>alert(1)</script>"
    # The plain link still downloads the file as it came.
    download = browser.get(links["fix.patch"].select_one("a")["href"])
    assert download.headers["Content-Disposition"].startswith("attachment")


def test_a_text_attachment_is_read_in_the_charset_it_declares(tmp_path):
    """koi8-r and iso-8859-2 text each as its sender wrote it: shown as text, found by search, labelled on download."""
    russian, czech = "Рекламная пауза, зайчонок.\n", "Příliš žluťoučký kůň úpěl.\n"
    app = make_app(tmp_path)
    try:
        with prepare(registry=app.registry) as env:
            archive_message(ensure_mailing_list(env["root"], LIST), make_message(
                message_id="<charsets@example.org>", subject="Two files", sender=ADA, date=START,
                body=multipart("mixed", text_part("Two files attached.\n"),
                               attachment(russian.encode("koi8-r"), "text/plain; charset=koi8-r", "ru.txt"),
                               attachment(czech.encode("iso-8859-2"), "text/plain; charset=iso-8859-2", "cz.txt"))))
            transaction.commit()
        browser = TestApp(app)
        page = browser.get(f"/list/{LIST}/message/{message_id_hash('<charsets@example.org>')}/")
        links = {li.select_one("a").text: li for li in page.html.select("ul.attachments li")}
        assert browser.get(links["ru.txt"].select_one("a.as-text")["href"]).text == russian
        assert browser.get(links["cz.txt"].select_one("a.as-text")["href"]).text == czech
        download = browser.get(links["ru.txt"].select_one("a")["href"])
        assert download.headers["Content-Type"] == "text/plain; charset=koi8-r"
        assert download.body == russian.encode("koi8-r")
        for word in ("зайчонок", "žluťoučký"):
            assert browser.get("/search", params={"q": word}).html.select("ol.hits li"), word
        # A label that is no token (RFC 2231 lets a part spell any byte) labels nothing.
        for label in ("utf%0D%0A8", "utf%228", "utf%208"):
            with prepare(registry=app.registry) as env:
                archive_message(env["root"].lists[LIST], make_message(
                    message_id=f"<label-{label}@example.org>", subject="Odd label", sender=ADA, date=START,
                    body=multipart("mixed", text_part("One file.\n"), attachment(
                        b"plain text\n", f"text/plain; charset*=us-ascii''{label}", "odd.txt"))))
                transaction.commit()
            odd = browser.get(f"/list/{LIST}/message/{message_id_hash(f'<label-{label}@example.org>')}/")
            download = browser.get(odd.html.select_one("ul.attachments li a")["href"])
            assert download.headers["Content-Type"] == "text/plain; charset=utf-8", label
    finally:
        app.registry._zodb_databases[""].close()


@pytest.mark.parametrize("charset, bom", [("utf-16", ""), ("utf-16-le", ""), ("utf-32", ""), (None, "utf-16")])
def test_a_text_attachment_in_utf16_or_utf32_is_searched(tmp_path, charset, bom):
    """A Windows log or export in UTF-16 (declared, or told by its byte order mark): its words are found."""
    app = make_app(tmp_path)
    text = "log line qwattwide end\n"
    data = text.encode(bom) if bom else text.encode(charset)
    content_type = f"text/plain; charset={charset}" if charset else "text/plain"
    try:
        with prepare(registry=app.registry) as env:
            archive_message(ensure_mailing_list(env["root"], LIST), make_message(
                message_id="<wide@example.org>", subject="A log", sender=ADA, date=START,
                body=multipart("mixed", text_part("The log is attached.\n"), attachment(data, content_type, "log.txt"))))
            transaction.commit()
        hits = TestApp(app).get("/search", params={"q": "qwattwide"}).html.select("ol.hits li")
        assert len(hits) == 1 and "A log" in hits[0].text
    finally:
        app.registry._zodb_databases[""].close()


def test_the_raw_mail_is_labelled_with_a_charset_that_reads_it(tmp_path):
    """UTF-8 when it is UTF-8, else the charset the mail declares, else none: never one that garbles it."""
    russian = "Рекламная пауза.\n"
    app = make_app(tmp_path)
    mails = {
        "utf8": make_message(message_id="<raw-utf8@example.org>", body="Grüße.\n", charset="utf-8"),
        "koi8": make_message(message_id="<raw-koi8@example.org>", body=russian.encode("koi8-r"), charset="koi8-r"),
        "latin1": make_message(message_id="<raw-latin1@example.org>", body="Grüße.\n".encode("latin-1"),
                               charset=None),
        # A charset named in the text is no declaration.
        "named": make_message(message_id="<raw-named@example.org>",
                              body="Write <meta charset=utf-16> in the page, Grüße.\n".encode("latin-1"),
                              charset=None),
        # A first part declared UTF-8, a Latin-1 attachment: the bytes are not UTF-8.
        "mixed": (b"Message-ID: <raw-mixed@example.org>\nFrom: a@example.org\nSubject: Mixed\n"
                  b"Date: Thu, 2 Apr 2020 09:00:00 +0000\nMIME-Version: 1.0\n"
                  b'Content-Type: multipart/mixed; boundary="b"\n\n--b\n'
                  b"Content-Type: text/plain; charset=utf-8\nContent-Transfer-Encoding: 8bit\n\n"
                  + "Grüße.\n".encode("utf-8") + b"--b\n"
                  b"Content-Type: text/plain; charset=iso-8859-1\nContent-Transfer-Encoding: 8bit\n"
                  b'Content-Disposition: attachment; filename="old.txt"\n\n'
                  + "Grüße.\n".encode("latin-1") + b"--b--\n"),
        # A UTF-16 attachment, a Latin-1 body: UTF-16 would read the whole mail as garbage.
        "wide": (b"Message-ID: <raw-wide@example.org>\nFrom: a@example.org\nSubject: Wide\n"
                 b"Date: Thu, 2 Apr 2020 09:00:00 +0000\nMIME-Version: 1.0\n"
                 b'Content-Type: multipart/mixed; boundary="b"\n\n--b\n'
                 b"Content-Type: text/plain; charset=utf-16\nContent-Transfer-Encoding: base64\n"
                 b'Content-Disposition: attachment; filename="log.txt"\n\n'
                 + base64.encodebytes("A log.\n".encode("utf-16")) + b"--b\n"
                 b"Content-Type: text/plain; charset=iso-8859-1\nContent-Transfer-Encoding: 8bit\n\n"
                 + "Grüße.\n".encode("latin-1") + b"--b--\n"),
    }
    try:
        with prepare(registry=app.registry) as env:
            for raw in mails.values():
                archive_message(ensure_mailing_list(env["root"], LIST), raw)
            transaction.commit()
        browser = TestApp(app)
        labels = {}
        for name, raw in mails.items():
            message_id = f"<raw-{name}@example.org>"
            answer = browser.get(f"/list/{LIST}/message/{message_id_hash(message_id)}/raw")
            assert answer.body == raw
            labels[name] = answer.headers["Content-Type"]
        assert labels == {"utf8": "text/plain; charset=utf-8", "koi8": "text/plain; charset=koi8-r",
                          "latin1": "text/plain", "named": "text/plain", "mixed": "text/plain; charset=iso-8859-1",
                          "wide": "text/plain; charset=iso-8859-1"}
    finally:
        app.registry._zodb_databases[""].close()


def test_a_long_quote_is_a_link_on_the_thread_page_and_whole_on_the_message_page(browser):
    page = browser.get(THREAD)
    review = article(page, "long-review")
    (fold,) = review.select("details.quote-fold")
    assert "60 quoted lines" in fold.summary.text and "quoted line 30" not in fold.text
    assert fold.a["href"].endswith(message_url("long-review") + "#quote-1")
    fragment = browser.get(fold["data-quote"])
    assert fragment.html.select_one("blockquote.quote").text.count("quoted line") == 60
    assert "No." in review.text and "> short" in review.text  # short quotes stay in the page
    single = browser.get(message_url("long-review"))
    assert single.html.select_one("#quote-1").text.count("quoted line") == 60
    browser.get(message_url("long-review") + "quote/3", status=404)


def test_direction_overrides_and_control_characters_of_a_subject_or_name_are_not_shown(tmp_path):
    """An unclosed right-to-left override in a name or subject reverses what follows it on the line
    (a date, a list's name); a terminal escape or a NUL is no text either."""
    app = make_app(tmp_path)
    try:
        with prepare(registry=app.registry) as env:
            archive_message(ensure_mailing_list(env["root"], LIST), make_message(
                message_id="<rtl@example.org>", subject="\u202eRTL subject \u2066unclosed \x1b[31mred\x07",
                sender=("\u202eEvil\u202c Name \u2067x", "rtl@example.org"), date=START,
                body="Words of the rtl mail.\n"))
            transaction.commit()
        browser = TestApp(app)
        key = message_id_hash("<rtl@example.org>")
        pages = [browser.get(path).text for path in (
            f"/list/{LIST}/message/{key}/", f"/list/{LIST}/thread/{key}/", f"/list/{LIST}/",
            f"/list/{LIST}/{START.year}/{START.month}/", "/search?q=rtl")]
        for text in pages:
            assert "RTL subject unclosed [31mred" in text or "RTL subject" in text
            for character in "\u202e\u202c\u2066\u2067\x1b\x07":
                assert character not in text, repr(character)
        assert "Evil Name x" in pages[0]
    finally:
        app.registry._zodb_databases[""].close()


def test_a_long_thread_is_read_page_by_page_and_each_message_links_to_its_page(tmp_path):
    # 250 messages: an announcement and its replies, some answered in turn.
    # It was one page of them all, every body rendered for every reader.
    app = make_app(tmp_path)
    raws = [mail("hub0", "Release day", 0)] + [
        mail(f"hub{n}", "Re: Release day", n, f"hub{n - 1}" if n % 5 == 0 else "hub0") for n in range(1, 250)]
    with prepare(registry=app.registry) as env:
        mailing_list = ensure_mailing_list(env["root"], LIST)
        for raw in raws:
            archive_message(mailing_list, raw)
        transaction.commit()
        walked = [name for name, _ in mailing_list.threads[h("hub0")].walk()]
    browser = TestApp(app)
    thread = f"/list/{LIST}/thread/{h('hub0')}/"
    try:
        first = browser.get(thread)
        shown = [a["id"][2:] for a in first.html.select("article.message")]
        assert shown == walked[:100]
        assert first.html.select_one("nav.thread-outline h2").text == "Outline: messages 1–100 of 250"
        assert [a["href"] for a in first.html.select("nav.pages a")] == [f"http://localhost{thread}?page=2"] * 2
        assert "Page 1 of 3" in first.html.select_one("nav.pages").text
        assert "250 messages" in first.html.select_one("p.meta").text

        last = browser.get(thread, {"page": "3"})
        assert [a["id"][2:] for a in last.html.select("article.message")] == walked[200:]
        assert last.html.select_one("nav.pages a[rel=prev]")["href"].endswith("?page=2")
        assert last.html.select_one("nav.pages a[rel=next]") is None
        assert browser.get(thread, {"page": "99"}).html.select_one("nav.pages span").text == "Page 3 of 3"

        by_date = browser.get(thread, {"view": "flat", "page": "2"})
        assert [a["id"][2:] for a in by_date.html.select("article.message")] == [
            h(f"hub{n}") for n in range(100, 200)]
        assert by_date.html.select_one("nav.pages a[rel=next]")["href"].endswith("?view=flat&page=3")
        assert by_date.html.select_one("a.expand-all")["href"].endswith("?view=flat&expand=all&page=2")

        # A message's page leads to the page of the thread showing it.
        place = walked.index(h("hub150"))
        message = browser.get(f"/list/{LIST}/message/{h('hub150')}/")
        assert message.html.select_one("a.whole-thread")["href"] == (
            f"http://localhost{thread}?page={place // 100 + 1}#m-{h('hub150')}")
        assert "250 messages" in message.html.select_one("a.whole-thread").text
    finally:
        app.registry._zodb_databases[""].close()
