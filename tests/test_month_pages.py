"""Month and year pages: rich thread rows, two orders, navigation between months and years."""

from datetime import datetime, timedelta, timezone

import pytest
import transaction
from pyramid.scripting import prepare
from webtest import TestApp

from kittypyr import readers, tags, votes
from kittypyr.archiving import archive_message, ensure_mailing_list
from tests.mailbuilder import attachment, make_message, multipart, text_part
from tests.test_app import make_app

LIST = "dev@lists.example.org"
ADA = ("Ada Lovelace", "ada@example.org")
BOB = ("Bob Babbage", "bob@example.org")
CARL = ("Carl Gauss", "carl@example.org")


def when(month, day, hour=12, year=2020):
    return datetime(year, month, day, hour, tzinfo=timezone.utc)


def mail(tag, date, sender, subject=None, reply_to=None, body=None):
    return make_message(
        message_id=f"<{tag}@example.org>",
        subject=subject or f"Re: {reply_to}",
        sender=sender,
        date=date,
        in_reply_to=f"<{reply_to}@example.org>" if reply_to else None,
        body=body or f"Message {tag}.\n",
    )


CORPUS = [
    mail("jan", when(1, 20), CARL, "January thread"),
    # March: "Early" starts first, "Late" gets the latest reply.
    mail("early", when(3, 2), ADA, "Early start",
         body="> quoted from elsewhere\n\nThe kernel build fails on MIPS when the cache is cold.\n"
              "Write to ada@example.org for the logs.\n"),
    mail("late", when(3, 10), BOB, "Late start",
         body=multipart("mixed", text_part("See the log attached.\n"),
                        attachment(b"log line\n", "text/plain", "build.log"))),
    mail("early1", when(3, 5), BOB, reply_to="early"),
    mail("late1", when(3, 12), CARL, reply_to="late"),
    mail("late2", when(3, 14), ADA, reply_to="late1"),
    mail("may", when(5, 1), ADA, "May thread"),
    mail("old", when(7, 1, year=2018), ADA, "Two years before"),
]


@pytest.fixture(scope="module")
def browser(tmp_path_factory):
    app = make_app(tmp_path_factory.mktemp("months"))
    with prepare(registry=app.registry) as env:
        archive = env["root"]
        mailing_list = ensure_mailing_list(archive, LIST)
        for raw in CORPUS:
            archive_message(mailing_list, raw)
        late = mailing_list.threads[mailing_list.messages[_hash("late")].thread]
        tags.add_tag(late, "needs-review", "carol@example.org", registry=app.registry)
        reader = readers.reader_for(archive, "carol@example.org", create=True)
        votes.cast_vote(archive, reader, mailing_list.messages[_hash("late1")], 1)
        transaction.commit()
    yield TestApp(app)
    app.registry._zodb_databases[""].close()


def _hash(tag):
    from kittypyr.msgid import message_id_hash

    return message_id_hash(f"<{tag}@example.org>")


def rows(page):
    return page.html.select("ol.threads > li")


def test_month_rows_show_starter_replies_participants_activity_and_excerpt(browser):
    page = browser.get(f"/list/{LIST}/2020/3/")
    late, early = rows(page)
    assert late.select_one("a.subject").text == "Late start"
    assert late.select_one(".starter").text.strip() == "Bob Babbage"
    assert late.select_one("svg.avatar") is not None
    assert "2 replies" in late.text and "3 participants" in late.text
    assert "last activity 2020-03-14" in late.text
    assert late.select_one(".attachment-mark") is not None
    assert early.select_one(".attachment-mark") is None
    assert late.select_one(".thread-score").text == "+1 vote"
    assert [a.text for a in late.select("a.tag")] == ["needs-review"]
    assert "1 reply" in early.text and "2 participants" in early.text
    excerpt = early.select_one(".excerpt").text
    assert excerpt.startswith("The kernel build fails on MIPS")
    assert "quoted from elsewhere" not in excerpt and "ada at example.org" in excerpt
    assert "ada@example.org" not in page.text


def test_month_sorts_by_latest_activity_or_by_start(browser):
    by_activity = browser.get(f"/list/{LIST}/2020/3/")
    assert [r.select_one("a.subject").text for r in rows(by_activity)] == ["Late start", "Early start"]
    by_start = browser.get(f"/list/{LIST}/2020/3/", {"sort": "start"})
    assert [r.select_one("a.subject").text for r in rows(by_start)] == ["Early start", "Late start"]
    link = by_activity.html.select_one("nav.sort a")
    assert link.text == "start date" and "sort=start" in link["href"]


def test_month_links_to_the_previous_and_next_month_with_mail(browser):
    page = browser.get(f"/list/{LIST}/2020/3/")
    previous = page.html.select_one("nav.months a[rel=prev]")
    following = page.html.select_one("nav.months a[rel=next]")
    assert previous.text.strip().startswith("2020-01") and previous["href"].endswith("/2020/1/")
    assert following.text.strip().startswith("2020-05") and following["href"].endswith("/2020/5/")
    first = browser.get(f"/list/{LIST}/2018/7/")
    assert first.html.select_one("nav.months a[rel=prev]") is None
    assert first.html.select_one("nav.months a[rel=next]")["href"].endswith("/2020/1/")
    assert page.html.select_one("nav.breadcrumbs a[href$='/2020/']").text == "2020"


def test_year_page_lists_its_months_with_counts(browser):
    page = browser.get(f"/list/{LIST}/2020/")
    assert page.html.h1.text == "dev: 2020"
    months = [(li.a.text, li.select_one(".count").text) for li in page.html.select("ul.year-months li")]
    assert months == [("January", "1 message"), ("March", "5 messages"), ("May", "1 message")]
    assert page.html.select_one("ul.year-months a")["href"].endswith(f"/list/{LIST}/2020/1/")
    assert page.html.select_one("nav.years a[rel=prev]")["href"].endswith("/2018/")
    assert page.html.select_one("nav.years a[rel=next]") is None
    browser.get(f"/list/{LIST}/2019/", status=404)


def test_overview_links_each_year(browser):
    page = browser.get(f"/list/{LIST}/")
    years = [a.text for a in page.html.select("section.months h3 a")]
    assert years == ["2020", "2018"]


def test_a_busy_month_is_paged_fifty_threads_a_page(tmp_path):
    app = make_app(tmp_path)
    with prepare(registry=app.registry) as env:
        mailing_list = ensure_mailing_list(env["root"], LIST)
        # 55 threads started in June; thread n's reply comes n hours after the last start.
        for n in range(55):
            archive_message(mailing_list, mail(f"june{n}", when(6, 1) + timedelta(hours=n), ADA, f"June {n}"))
        for n in range(55):
            archive_message(mailing_list, mail(f"june{n}r", when(6, 10) + timedelta(hours=n), BOB,
                                               reply_to=f"june{n}"))
        transaction.commit()
    browser = TestApp(app)
    try:
        subjects = lambda page: [r.select_one("a.subject").text for r in rows(page)]  # noqa: E731
        first = browser.get(f"/list/{LIST}/2020/6/")
        assert subjects(first) == [f"June {n}" for n in range(54, 4, -1)]
        assert "Page 1 of 2" in first.text
        second = first.click(linkid=None, href="page=2", index=0)
        assert subjects(second) == [f"June {n}" for n in range(4, -1, -1)] and "Page 2 of 2" in second.text
        assert subjects(browser.get(f"/list/{LIST}/2020/6/", {"page": 9})) == subjects(second)
        by_start = browser.get(f"/list/{LIST}/2020/6/", {"sort": "start", "page": 2})
        assert subjects(by_start) == [f"June {n}" for n in range(50, 55)]
    finally:
        app.registry._zodb_databases[""].close()


def test_a_long_lived_lists_overview_names_every_year_and_the_months_of_its_latest_years_only(tmp_path):
    # Forty years of mail: the overview stays the size of a page, and an
    # older month is a click away through its year's page.
    app = make_app(tmp_path)
    with prepare(registry=app.registry) as env:
        mailing_list = ensure_mailing_list(env["root"], LIST)
        for year in range(1981, 2021):
            for month in (2, 9):
                archive_message(mailing_list, mail(f"y{year}m{month}", when(month, 3, year=year), ADA,
                                                   f"News of {year}-{month}"))
        transaction.commit()
    browser = TestApp(app)
    try:
        page = browser.get(f"/list/{LIST}/")
        years = [a.text for a in page.html.select("section.months h3 a")]
        assert years == [str(year) for year in range(2020, 1980, -1)]
        months = [a.text for a in page.html.select("section.months ul.months a")]
        assert months == ["2020-09", "2020-02", "2019-09", "2019-02"]
        assert page.html.select_one("section.months h3").parent.select_one(".meta").text == "2 messages"
        old_year = page.click(href=f"/list/{LIST}/1981/$")
        assert [li.a.text for li in old_year.html.select("ul.year-months li")] == ["February", "September"]
    finally:
        app.registry._zodb_databases[""].close()
