"""HTML-only mail: read as reflowed text, and as its sanitized original on request."""

import pytest
import transaction
from pyramid.scripting import prepare
from webtest import TestApp

from kittypyr.archiving import archive_message, ensure_mailing_list
from kittypyr.htmltext import text_of_html
from kittypyr.msgid import message_id_hash
from tests.mailbuilder import html_part, make_message
from tests.test_app import make_app

LIST = "news@lists.example.org"

NEWSLETTER = """\
<html><head><title>Newsletter</title><style>td { color: red }</style>
<script>var tracking = 1;</script></head>
<body>
<table width="600"><tr><td>        </td><td>
  <table><tr><td><h1>Release   notes</h1></td></tr>
  <tr><td>
     <p>The new release
        is out.      Read the
        <a href="https://example.org/notes">full notes</a>.</p>



     <p>Questions? <a href="mailto:help@example.org">Write to us</a>.</p>
     <p><img src="https://tracker.example.net/pixel.gif" alt=""><img src="https://example.org/logo.png" alt="Logo"></p>
  </td></tr></table>
</td></tr></table>
<iframe src="https://example.net/ad">Your browser shows no frames</iframe>
<script type="text/javascript">document.write("<p>written by script</p>")</script>
<blockquote><p>An earlier message</p></blockquote>
<ul><li>one</li><li>two</li></ul>
<p onclick="steal()">Bye</p>
</body></html>
"""


PIXEL = "data:image/gif;base64,R0lGODlhAQABAAAAACw="
# A data: link opens a page the sender wrote, script and all, that browsers
# show under no origin the archive's policy covers.
DATA_LINKS = f"""\
<p><a href="data:text/html,&lt;script&gt;alert(1)&lt;/script&gt;">Open the invoice</a></p>
<p><a href=" DATA:text/html;base64,PHNjcmlwdD5hbGVydCgxKTwvc2NyaXB0Pg==">Open it in capitals</a></p>
<p><a href="da&#x09;ta:text/html,x">Open it split by a tab</a></p>
<p><img src="{PIXEL}" alt="Inline pixel"></p>
"""

# URLs that name this archive's own pages, or another host by the page's scheme.
SITE_RELATIVE = """\
<p id="top"><a href="//evil.example/">Elsewhere</a> <a href="/logout">Log out</a> <a href="#top">Top</a></p>
<p><img src="/list/" alt="A request to the archive"><img src="//evil.example/pixel.gif" alt="Theirs"></p>
<blockquote cite="javascript:pwn()"><p>Quoted</p></blockquote>
"""


@pytest.mark.parametrize("html, shown", [
    # Real spam and newsletters: browsers show all of them.
    ("<html><head><title>Campaign</title><meta http-equiv='Content-Type' content='text/html;'>\n"
     "<DIV align=center>Ship anything, anywhere</DIV>\n</body></html>", "Ship anything, anywhere"),
    ("<HTML><HEAD><style>td { color: red }</style>\n<BODY bgcolor=navy><p>Hello from the body</p></BODY></HTML>",
     "Hello from the body"),
    ("<HTML><body bgcolor=white><HEAD> <TITLE>ZDNet</TITLE>\n<p>Announcements this week</p></body></HTML>",
     "Announcements this week"),
], ids=["head-never-closed", "body-inside-head", "head-inside-body"])
def test_a_head_left_open_or_misplaced_hides_nothing_a_browser_shows(html, shown):
    text = text_of_html(html)
    assert text == shown, text


def test_html_becomes_paragraphs_with_links_and_nothing_hidden():
    text = text_of_html(NEWSLETTER)
    assert text.splitlines()[:3] == ["Release notes", "", "The new release is out. Read the full notes <https://example.org/notes>."]
    assert "Questions? Write to us." in text
    assert "\n\n\n" not in text
    for hidden in ("tracking", "color: red", "Newsletter", "Your browser shows no frames", "written by script"):
        assert hidden not in text
    assert "> An earlier message" in text
    assert "- one\n- two" in text
    assert text.endswith("Bye")


def h(name):
    return message_id_hash(f"<{name}@example.org>")


@pytest.fixture(scope="module")
def browser(tmp_path_factory):
    app = make_app(tmp_path_factory.mktemp("html-mail"))
    with prepare(registry=app.registry) as env:
        mailing_list = ensure_mailing_list(env["root"], LIST)
        archive_message(mailing_list, make_message(message_id="<letter@example.org>", subject="Release",
                                                   body=html_part(NEWSLETTER)))
        archive_message(mailing_list, make_message(message_id="<plain@example.org>", subject="Plain"))
        archive_message(mailing_list, make_message(message_id="<data-link@example.org>", subject="Data link",
                                                   body=html_part(DATA_LINKS)))
        archive_message(mailing_list, make_message(message_id="<relative@example.org>", subject="Relative",
                                                   body=html_part(SITE_RELATIVE)))
        transaction.commit()
    yield TestApp(app)
    app.registry._zodb_databases[""].close()


MESSAGE = f"/list/{LIST}/message/{h('letter')}/"


def test_html_only_mail_reads_as_text_with_links(browser):
    page = browser.get(MESSAGE)
    body = page.html.select_one("article .body")
    assert "The new release is out. Read the full notes" in body.text
    assert body.select_one("a[href='https://example.org/notes']") is not None
    assert "written by script" not in page.text and "tracking" not in body.text
    assert page.html.select_one("p.html-original a")["href"].endswith(f"{MESSAGE}html")
    assert browser.get(f"/list/{LIST}/message/{h('plain')}/").html.select_one("p.html-original") is None


def test_sanitized_html_view_runs_no_script_and_loads_no_remote_image(browser):
    page = browser.get(MESSAGE + "html")
    policy = page.headers["Content-Security-Policy"]
    assert "script-src 'none'" in policy or ("default-src 'none'" in policy and "script-src" not in policy)
    assert "https:" not in policy
    content = page.html.select_one("div.html-mail")
    assert content.select_one("h1").text == "Release   notes"
    assert content.select("script, iframe, style") == []
    assert "steal" not in page.text and "tracking" not in page.text
    images = content.select("img")
    assert images and all(not img.get("src") for img in images)
    assert content.select_one("a[href='https://example.org/notes']")["rel"] == ["nofollow", "noopener",
                                                                               "noreferrer", "ugc"]
    shown = browser.get(page.html.select_one("a.show-images")["href"])
    assert "https:" in shown.headers["Content-Security-Policy"]
    assert "script-src 'none'" in shown.headers["Content-Security-Policy"]
    assert [img["src"] for img in shown.html.select("div.html-mail img")] == [
        "https://tracker.example.net/pixel.gif", "https://example.org/logo.png"]
    browser.get(f"/list/{LIST}/message/{h('plain')}/html", status=404)


def test_sanitized_html_view_keeps_no_data_link_but_keeps_inline_images(browser):
    page = browser.get(f"/list/{LIST}/message/{h('data-link')}/html")
    content = page.html.select_one("div.html-mail")
    for text in ("Open the invoice", "Open it in capitals", "Open it split by a tab"):
        assert text in content.text
    assert content.select("a[href]") == []
    assert "alert" not in page.text
    assert [img["src"] for img in content.select("img")] == [PIXEL]


def test_sanitized_html_view_keeps_no_url_that_leads_back_into_the_archive(browser):
    """With images shown, <img src="/..."> would have the reader's browser ask the archive, cookies and all."""
    page = browser.get(f"/list/{LIST}/message/{h('relative')}/html?images=show")
    content = page.html.select_one("div.html-mail")
    assert [a.get("href") for a in content.select("a")] == [None, None, "#top"]
    assert [img.get("src") for img in content.select("img")] == [None, None]
    assert content.select_one("blockquote").get("cite") is None
    assert "Elsewhere" in content.text and "Quoted" in content.text


HOSTILE_HTML_CHILD = """
import resource, sys
from kittypyr.mail import parse_message

# Minutes of work for the standard library's tokenizer alone, which rescans
# to the end for each tag or comment left open: twenty seconds are plenty.
resource.setrlimit(resource.RLIMIT_CPU, (20, 20))
html = {"tags": b"<a " * 150_000, "attributes": b'<a b="' * 100_000, "comments": b"<!--" * 200_000,
        # Tags whose quoted value holds a ">", sections never closed: each
        # made the tokenizer search to the end again, yet looked closed.
        "quoted": b"<a b='>' " * 40_000, "double quoted": b'<a b=">" ' * 40_000,
        "sections": b"<![CDATA[ > " * 40_000}[sys.argv[1]]
raw = (b"From: Ann <ann@example.org>\\nSubject: hostile\\nMessage-ID: <hostile@example.org>\\n"
       b"Date: Mon, 1 Jan 2024 00:00:00 +0000\\nMIME-Version: 1.0\\nContent-Type: text/html; charset=utf-8\\n\\n"
       b"<p>Before the flood.</p>" + html)
print(repr(parse_message(raw).body_text))
"""


@pytest.mark.parametrize("flood", ["tags", "attributes", "comments", "quoted", "double quoted", "sections"])
def test_html_full_of_open_tags_or_comments_is_read_in_one_pass(flood):
    import os
    import subprocess
    import sys

    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    outcome = subprocess.run([sys.executable, "-c", HOSTILE_HTML_CHILD, flood], capture_output=True, text=True,
                             cwd=root, env={**os.environ, "PYTHONPATH": root}, timeout=300)
    assert outcome.returncode == 0, outcome.stderr[-500:]
    # What a browser shows: the paragraph; the open tag or comment hides the rest.
    assert outcome.stdout.strip() == repr("Before the flood.")


@pytest.mark.parametrize("section", ["<![ if !supportLists ]>", "<![if !supportLists]>", "<![html", "<![CDATA[x]]>",
                                     "<!DOCTYPE", "<!", "<?php echo 1 ?>", "</ >", "<a href='x>y'>"])
def test_html_only_mail_with_odd_markup_keeps_its_header_and_text(section):
    # "<![ " (a marked section, as Word writes them) made the standard
    # library's tokenizer fail an assertion: the whole mail was read as
    # damaged, and lost its Message-ID, subject, sender and threading.
    from kittypyr.mail import parse_message

    raw = ("From: Ann <ann@example.org>\nSubject: Quarterly figures\nMessage-ID: <marked@example.org>\n"
           "In-Reply-To: <parent@example.org>\nDate: Wed, 01 Jan 2020 12:00:00 +0000\n"
           "Content-Type: text/html; charset=utf-8\n\n"
           f"<html><body><p>See the figures below.</p>{section}<p>one</p><p>two</p></body></html>\n").encode()
    parsed = parse_message(raw)
    assert (parsed.message_id, parsed.subject, parsed.sender_address) == (
        "marked@example.org", "Quarterly figures", "ann@example.org")
    assert parsed.in_reply_to == "parent@example.org"
    assert parsed.body_text.startswith("See the figures below.")
    assert "two" in parsed.body_text
