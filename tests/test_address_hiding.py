"""Addresses in subjects and attachment names are written ``jdoe at example.com`` wherever they show."""

from datetime import datetime, timezone

import pytest
import transaction
from pyramid.scripting import prepare
from webtest import TestApp

from kittypyr.archiving import archive_message, ensure_mailing_list
from kittypyr.msgid import message_id_hash
from tests.mailbuilder import attachment, make_message, multipart, text_part
from tests.test_app import make_app

LIST = "dev@lists.example.org"
SUBJECT = "Re: mail jdoe@example.com about it"
FILENAME = "to-jdoe@example.com.txt"
ADDRESS = "jdoe@example.com"
HIDDEN = "jdoe at example.com"
WHEN = datetime(2024, 5, 6, 10, 0, tzinfo=timezone.utc)
MESSAGE_ID = "<hiding@example.org>"
HASH = message_id_hash(MESSAGE_ID)

MESSAGE = f"/list/{LIST}/message/{HASH}/"
THREAD = f"/list/{LIST}/thread/{HASH}/"


@pytest.fixture(scope="module")
def browser(tmp_path_factory):
    app = make_app(tmp_path_factory.mktemp("hiding"))
    with prepare(registry=app.registry) as env:
        mailing_list = ensure_mailing_list(env["root"], LIST)
        archive_message(mailing_list, make_message(
            message_id=MESSAGE_ID, subject=SUBJECT, sender=("Jane Roe", "jane@example.org"), date=WHEN,
            body=multipart("mixed", text_part("Please forward the notes.\n"),
                           attachment(b"notes\n", "text/plain", FILENAME))))
        transaction.commit()
    yield TestApp(app)
    app.registry._zodb_databases[""].close()


def assert_hidden(text):
    assert ADDRESS not in text
    assert HIDDEN in text


def test_list_and_month_pages(browser):
    for url in (f"/list/{LIST}/", f"/list/{LIST}/2024/5/", f"/list/{LIST}/threads"):
        assert_hidden(browser.get(url).text)


def test_thread_page_and_its_title(browser):
    page = browser.get(THREAD)
    assert_hidden(page.text)
    assert page.html.title.text.startswith(f"Re: mail {HIDDEN} about it")
    assert page.html.h1.text == f"Re: mail {HIDDEN} about it"
    assert [a.text for a in page.html.select("ul.attachments a:not(.as-text)")] == [f"to-{HIDDEN}.txt"]


def test_message_page_title_and_attachment(browser):
    page = browser.get(MESSAGE)
    assert_hidden(page.text)
    assert HIDDEN in page.html.title.text
    link = page.html.select_one("ul.attachments a")
    assert link.text == f"to-{HIDDEN}.txt"
    download = browser.get(link["href"])
    assert download.body == b"notes\n"
    # The saved file keeps its real name: only pages hide the address.
    assert "to-jdoe%40example.com.txt" in download.headers["Content-Disposition"]
    # The short attachment URL leads to the one with the safe name.
    redirect = browser.get(f"{MESSAGE}attachment/2/", status=301)
    assert ADDRESS not in redirect.location and redirect.location.endswith(link["href"])


def test_search_page(browser):
    page = browser.get("/search", params={"q": "forward"})
    assert "1 message found" in page.text
    assert_hidden(page.text)


def test_sender_profile(browser):
    profile = browser.get(browser.get(MESSAGE).html.select_one(".sender a")["href"])
    assert_hidden(profile.text)


def test_json_api(browser):
    for url in (f"/api/list/{LIST}/threads/", f"/api/list/{LIST}/thread/{HASH}/",
                f"/api/list/{LIST}/email/{HASH}/"):
        assert_hidden(browser.get(url).text)
    email = browser.get(f"/api/list/{LIST}/email/{HASH}/").json
    assert email["subject"] == f"Re: mail {HIDDEN} about it"
    assert email["attachments"][0]["filename"] == f"to-{HIDDEN}.txt"
    found = browser.get("/api/search", params={"q": "forward"})
    assert found.json["count"] == 1
    assert_hidden(found.text)
