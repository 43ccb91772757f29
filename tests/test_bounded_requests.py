"""What one anonymous request may cost: capped queries, any page number, huge bodies.

Asserted as a reader sees it: the search page says what it left out, a page
number past the end answers the last page, and a message of megabytes shows
its beginning and a link to the raw message.
"""

import sys
from datetime import datetime, timedelta, timezone

import pytest
import transaction
from pyramid.scripting import prepare
from webtest import TestApp

from kittypyr import main
from kittypyr.archiving import archive_message, ensure_mailing_list
from kittypyr.msgid import message_id_hash
from kittypyr.search import SearchLimits, parse_search
from kittypyr.tags import add_tag
from kittypyr.views.threads import BODY_SHOWN_CHARS
from tests.mailbuilder import make_message

LIST = "dev@lists.example.org"
START = datetime(2019, 3, 1, 9, 0, tzinfo=timezone.utc)
WIDGETS = 25  # more than one page of search results (20), one month page (50)
LIMITS = SearchLimits()

# A body four times what a page shows, its ends marked so a test can tell them apart.
HUGE_BODY = "HEAD-OF-BODY starts here.\n" + "filler line of a long log\n" * 50_000 + "TAIL-OF-BODY.\n"


def widget(n):
    return make_message(message_id=f"<w{n}@example.org>", subject=f"Widget {n}",
                        sender=("Ada Lovelace", "ada@example.org"), date=START + timedelta(hours=n),
                        body=f"The widget number {n} of the series is here at last, said the maker.\n")


def make_app(folder, **settings):
    (folder / "blobs").mkdir(exist_ok=True)
    return main({}, **{"zodbconn.uri": f"file://{folder}/Data.fs?blobstorage_dir={folder}/blobs",
                       "kittypyr.base_url": "http://localhost/", **settings})


@pytest.fixture(scope="module")
def app(tmp_path_factory):
    application = make_app(tmp_path_factory.mktemp("bounded"))
    with prepare(registry=application.registry) as env:
        mailing_list = ensure_mailing_list(env["root"], LIST)
        for n in range(WIDGETS):
            archive_message(mailing_list, widget(n))
        archive_message(mailing_list, make_message(message_id="<huge@example.org>", subject="A huge log",
                                                   date=START + timedelta(days=1), body=HUGE_BODY))
        archive_message(mailing_list, make_message(message_id="<huge-reply@example.org>",
                                                   subject="Re: A huge log", in_reply_to="<huge@example.org>",
                                                   date=START + timedelta(days=2), body="Too long.\n"))
        add_tag(mailing_list.threads.data[message_id_hash("<w1@example.org>")], "needs-review",
                "ada@example.org", registry=env["registry"])
        transaction.commit()
    yield application
    application.registry._zodb_databases[""].close()


@pytest.fixture
def browser(app):
    return TestApp(app)


def problems(page):
    return [li.text for li in page.html.select("ul.problems li")]


# Search: what a query may ask


def test_a_very_long_query_is_cut_and_the_page_says_so(browser):
    phrase = " ".join(["widget", "number", "3", "of", "the", "series"] * 3400)  # 20,400 words
    page = browser.get("/search", params={"q": f'"{phrase}"'})
    assert page.status_int == 200
    said = " ".join(problems(page))
    assert f"longer than {LIMITS.max_query_chars} characters" in said
    assert f"first {LIMITS.max_phrase_words} words" in said
    data = browser.get("/api/search", params={"q": f'"{phrase}"'}).json
    assert any(f"longer than {LIMITS.max_query_chars} characters" in p for p in data["problems"])


def test_a_long_phrase_searches_its_first_words(browser):
    said = "the widget number 3 of the series is here at last said the maker".split()
    words = said[: LIMITS.max_phrase_words] + ["nowhere"] * LIMITS.max_phrase_words
    page = browser.get("/search", params={"q": '"' + " ".join(words) + '"'})
    assert any(f"first {LIMITS.max_phrase_words} words" in p for p in problems(page))
    assert [a.text for a in page.html.select("ol.hits li a.subject")] == ["Widget 3"]


def test_an_or_of_many_branches_searches_the_first_ones(browser):
    branches = ["widget"] + [f"absent{n}" for n in range(40)]
    page = browser.get("/search", params={"q": " OR ".join(branches)})
    assert any(f"first {LIMITS.max_or_branches} alternatives" in p for p in problems(page))
    assert f"{WIDGETS} messages found" in page.text
    thousand = browser.get("/search", params={"q": " OR ".join(str(n) for n in range(1, 1001))})
    assert thousand.status_int == 200 and problems(thousand)


def test_too_many_words_search_the_first_ones(browser):
    words = ["widget"] + [f"absent{n}" for n in range(LIMITS.max_terms + 5)]
    page = browser.get("/search", params={"q": " ".join(words)})
    assert any(f"first {LIMITS.max_terms} words" in p for p in problems(page))
    assert "0 messages found" in page.text  # the absent words that were kept still count
    fields = browser.get("/search", params={"q": " ".join(["from:ada"] * (LIMITS.max_terms + 5))})
    assert any(f"first {LIMITS.max_terms} words" in p for p in problems(fields))


def test_queries_within_the_limits_say_nothing():
    assert parse_search('widget "number 3" -series a OR b from:ada').problems == []


def test_the_limits_come_from_the_settings(tmp_path):
    application = make_app(tmp_path, **{"kittypyr.search_max_terms": "2",
                                        "kittypyr.search_max_phrase_words": "3",
                                        "kittypyr.search_max_or_branches": "2",
                                        "kittypyr.search_max_query_chars": "40"})
    try:
        browser = TestApp(application)
        assert any("first 2 words" in p for p in problems(browser.get("/search", params={"q": "a b c"})))
        assert any("first 3 words" in p for p in problems(browser.get("/search", params={"q": '"a b c d"'})))
        assert any("first 2 alternatives" in p
                   for p in problems(browser.get("/search", params={"q": "a OR b OR c"})))
        assert any("longer than 40 characters" in p
                   for p in problems(browser.get("/search", params={"q": "word " * 10})))
    finally:
        application.registry._zodb_databases[""].close()


def test_parse_search_takes_its_limits():
    # Words the index keeps: "a" is one it does not (too common), dropped from any query.
    parsed = parse_search("ant bee cat dog", SearchLimits(max_terms=3))
    assert parsed.groups == [["ant"], ["bee"], ["cat"]] and parsed.problems
    parsed = parse_search('"ant bee cat dog elk"', SearchLimits(max_phrase_words=2))
    assert parsed.groups == [['"ant bee"']]
    parsed = parse_search("ant OR bee OR cat OR dog", SearchLimits(max_or_branches=2))
    assert parsed.groups == [["ant", "bee"]]


def test_each_cjk_letter_counts_as_a_word_of_a_phrase(tmp_path):
    application = make_app(tmp_path)
    with prepare(registry=application.registry) as env:
        archive_message(ensure_mailing_list(env["root"], LIST),
                        make_message(message_id="<cjk@example.org>", subject="Kernel", date=START,
                                     sender=("Ada Lovelace", "ada@example.org"),
                                     body="我们明天讨论内核补丁的问题。\n"))
        transaction.commit()
    try:
        browser = TestApp(application)
        # Thirteen letters typed without a space: one run, searched as a phrase of its first eight.
        page = browser.get("/search", params={"q": "我们明天讨论内核补丁的问题"})
        assert any(f"first {LIMITS.max_phrase_words} words" in p and "Korean letter counts as one" in p
                   for p in problems(page))
        assert "1 message found" in page.text
        assert "Korean letter counts as one" in browser.get("/search-help").text
    finally:
        application.registry._zodb_databases[""].close()
    parsed = parse_search("linuxカーネルのパッチ", SearchLimits(max_phrase_words=3))
    assert parsed.groups == [["linuxカー"]] and parsed.problems
    assert parse_search("2019年 我们明天讨论内核", SearchLimits(max_phrase_words=8)).problems == []


# Page numbers: past the end, negative, garbage


HUGE_NUMBERS = [str(sys.maxsize * 10), "9" * 5000, "99999"]
GARBAGE = ["-3", "0", "abc", "2.5", "", "1e3", "\u0663", " 2 "]


# Each HTML page with ``?page=``, and what its last page shows.
HTML_PAGES = {
    "/search?q=widget": lambda page: len(page.html.select("ol.hits li")) == WIDGETS - 20,
    f"/list/{LIST}/threads": lambda page: "Widget 0" in page.text,
    f"/list/{LIST}/threads?sort=popularity": lambda page: "Widget 0" in page.text,
    f"/list/{LIST}/2019/3/": lambda page: "Widget 0" in page.text,
    f"/list/{LIST}/tag/needs-review/": lambda page: "Widget 1" in page.text,
}

JSON_PAGES = [
    "/api/search?q=widget",
    "/api/lists/",
    "/api/list/dev@lists.example.org/threads/",
]


@pytest.mark.parametrize("number", HUGE_NUMBERS)
def test_a_page_past_the_end_answers_the_last_page(browser, number):
    for url, shows_last_page in HTML_PAGES.items():
        joiner = "&" if "?" in url else "?"
        page = browser.get(url + joiner, params={"page": number}, expect_errors=True)
        assert page.status_int == 200, url
        assert shows_last_page(page), url
    for url in JSON_PAGES:
        joiner = "&" if "?" in url else "?"
        data = browser.get(url + joiner, params={"page": number}).json
        assert data["page"] == data["pages"] and data["results"], url
    key = message_id_hash("<huge@example.org>")
    thread = browser.get(f"/api/list/{LIST}/thread/{key}/", params={"page": number}).json
    assert thread["emails"]["page"] == thread["emails"]["pages"] and thread["emails"]["results"]


@pytest.mark.parametrize("number", GARBAGE)
def test_a_page_number_that_is_not_one_answers_the_first_page(browser, number):
    for url in list(HTML_PAGES) + JSON_PAGES:
        joiner = "&" if "?" in url else "?"
        page = browser.get(url + joiner, params={"page": number}, expect_errors=True)
        assert page.status_int == 200, url
    data = browser.get("/api/search", params={"q": "widget", "page": number}).json
    assert data["page"] == (2 if number.strip() == "2" else 1)


# A message of megabytes


def test_a_huge_message_shows_its_beginning_and_links_to_the_raw_message(browser):
    key = message_id_hash("<huge@example.org>")
    page = browser.get(f"/list/{LIST}/message/{key}/")
    assert page.status_int == 200
    assert "HEAD-OF-BODY" in page.text and "TAIL-OF-BODY" not in page.text
    assert len(page.body) < 2 * BODY_SHOWN_CHARS
    note = page.html.select_one(".body-cut")
    assert "first" in note.text and note.a["href"].endswith(f"/message/{key}/raw")
    assert "TAIL-OF-BODY" in browser.get(note.a["href"]).text


def test_the_thread_of_a_huge_message_shows_its_beginning_too(browser):
    key = message_id_hash("<huge@example.org>")
    page = browser.get(f"/list/{LIST}/thread/{key}/")
    assert "HEAD-OF-BODY" in page.text and "TAIL-OF-BODY" not in page.text
    assert "Too long." in page.text
    assert page.html.select_one(".body-cut a")["href"].endswith(f"/message/{key}/raw")
    assert len(page.html.select(".body-cut")) == 1  # the short reply is whole


def test_a_short_message_is_whole(browser):
    page = browser.get(f"/list/{LIST}/message/{message_id_hash('<w3@example.org>')}/")
    assert "The widget number 3 of the series is here at last" in page.text
    assert not page.html.select(".body-cut")


def test_the_help_page_names_the_limits(browser):
    page = browser.get("/search-help")
    assert f"first {LIMITS.max_query_chars} characters" in page.text
    assert f"first {LIMITS.max_phrase_words} words of a phrase" in page.text


# Bytes that are not UTF-8

@pytest.mark.parametrize("url", ["/search?q=%FF", "/search?q=%ED%A0%80", "/api/search?q=%FF", "/search.atom?q=%FF",
                                 "/%FF", f"/list/{LIST}/%FF/", f"/list/{LIST}/?page=%FF"])
def test_an_address_that_is_not_utf8_answers_400_not_500(browser, url):
    """A link pasted from a page in another charset, or a probe: a clear refusal, not a traceback."""
    answer = browser.get(url, status=400)
    assert "not UTF-8" in answer.text
    assert browser.get("/search", params={"q": "widget"}).status_int == 200


# Digits of other scripts: "²".isdigit() is true, int("²") fails; int("٢٠٢٤") is 2024.

@pytest.mark.parametrize("tail", ["%C2%B2%C2%B2%C2%B2%C2%B2/", "2019/%C2%B2/", "%D9%A2%D9%A0%D9%A1%D9%A9/",
                                  "2019/%D9%A3/", "message/{key}/attachment/%C2%B2/x", "message/{key}/diff/%C2%B2",
                                  "message/{key}/quote/%C2%B2", "message/{key}/html/%C2%B2",
                                  "message/{key}/attachment/%D9%A1/x"])
def test_a_number_in_other_digits_is_no_page(browser, tail):
    """A year, month or part number spelt in other digits names nothing: 404, not a traceback nor a second URL."""
    url = f"/list/{LIST}/" + tail.format(key=message_id_hash("<w3@example.org>"))
    browser.get(url, status=404)
