"""The archiver API as Mailman's plugin uses it (the real plugin: tests/test_mailman.py)."""

import logging

import pytest
import transaction
from pyramid.scripting import prepare
from webtest import TestApp

from kittypyr import main
from kittypyr.cli import archive_info
from kittypyr.msgid import message_id_hash
from tests.mailbuilder import make_message

KEY = "s3cret-key"
LIST = "dev@lists.example.org"
AUTH = {"Authorization": f"Token {KEY}"}
# The site's address, before the paths of the URLs the archiver API answers.
SITE = "https://lists.example.org/archives"


def make(tmp_path, **settings):
    (tmp_path / "blobs").mkdir(exist_ok=True)
    return main({}, **{
        "zodbconn.uri": f"file://{tmp_path}/Data.fs?blobstorage_dir={tmp_path}/blobs",
        "kittypyr.base_url": "https://lists.example.org/archives/",
        "kittypyr.archiver_key": KEY,
        **settings,
    })


@pytest.fixture
def app(tmp_path):
    application = make(tmp_path)
    yield application
    application.registry._zodb_databases[""].close()


def post(browser, raw, headers=AUTH, status=200, mlist=LIST):
    return browser.post("/api/mailman/archive", {"mlist": mlist}, headers=headers,
                        upload_files=[("message", "message.txt", raw)], status=status)


def test_archive_answers_the_permalink_and_stores_the_message(app):
    browser = TestApp(app)
    raw = make_message(message_id="<a1@example.org>", subject="Archived", body="hello\n")
    answer = post(browser, raw).json
    url = f"https://lists.example.org/archives/list/{LIST}/message/{message_id_hash('<a1@example.org>')}/"
    assert answer == {"url": url}
    # The same permalink Mailman asks for before archiving, for Archived-At:
    assert browser.get("/api/mailman/urls", {"mlist": LIST, "msgid": "a1@example.org"}, headers=AUTH).json == {"url": url}
    assert browser.get("/api/mailman/urls", {"mlist": LIST}, headers=AUTH).json == {
        "url": f"https://lists.example.org/archives/list/{LIST}/"}
    page = browser.get(f"/list/{LIST}/message/{message_id_hash('<a1@example.org>')}/")
    assert "Archived" in page.text
    # A duplicate is a success too, with the same URL (Mailman must not resend it forever).
    assert post(browser, raw).json == {"url": url}
    with prepare(registry=app.registry) as env:
        assert archive_info(env["root"], LIST)["messages"] == 1


@pytest.mark.parametrize("base_url", ["https://lists.example.org/archives/", ""])
def test_served_under_a_path_the_archive_answers_the_permalink_it_serves(tmp_path, base_url):
    # Behind a proxy at /archives/ the answer named /archives/archives/...,
    # a 404; the permalink Mailman asks for before archiving was right.
    application = make(tmp_path, **{"kittypyr.base_url": base_url})
    try:
        browser = TestApp(application, extra_environ={
            "SCRIPT_NAME": "/archives", "HTTP_HOST": "lists.example.org", "wsgi.url_scheme": "https"})
        raw = make_message(message_id="<p1@example.org>", subject="Under a path", body="hello\n")
        url = f"https://lists.example.org/archives/list/{LIST}/message/{message_id_hash('<p1@example.org>')}/"
        assert browser.get("/api/mailman/urls", {"mlist": LIST, "msgid": "p1@example.org"},
                           headers=AUTH).json == {"url": url}
        assert post(browser, raw).json == {"url": url}
        assert "Under a path" in browser.get(url.removeprefix("https://lists.example.org/archives")).text
    finally:
        application.registry._zodb_databases[""].close()


def test_unreadable_mail_is_quarantined_and_answers_200(app):
    browser = TestApp(app)
    garbage = b"this is no mail at all, not one header line\n"
    answer = post(browser, garbage).json
    assert answer["quarantined"] == "000001"
    with prepare(registry=app.registry) as env:
        held = env["root"].quarantine["000001"]
        assert held.list_address == LIST and held.raw_bytes() == garbage and held.reason


def test_an_empty_or_missing_upload_is_400_and_nothing_is_quarantined(app):
    browser = TestApp(app)
    assert "empty" in post(browser, b"", status=400).json["error"]
    assert "empty" in post(browser, b"  \r\n\n", status=400).json["error"]
    browser.post("/api/mailman/archive", {"mlist": LIST}, headers=AUTH, status=400)
    browser.post("/api/mailman/archive", {"mlist": LIST, "message": "not a file"}, headers=AUTH, status=400)
    with prepare(registry=app.registry) as env:
        assert len(env["root"].quarantine) == 0


@pytest.fixture
def app_failing_first_attempts(tmp_path):
    from tests import conflict_once

    conflict_once.failed_once.clear()
    application = make(tmp_path, **{"pyramid.includes": "tests.conflict_once", "retry.attempts": "3"})
    yield application
    application.registry._zodb_databases[""].close()


def test_a_retried_archive_request_stores_the_message(app_failing_first_attempts):
    """The retry after a conflict reads the same upload, not an exhausted one."""
    app = app_failing_first_attempts
    browser = TestApp(app)
    raw = make_message(message_id="<retried@example.org>", subject="Survives a retry", body="kept\n")
    answer = post(browser, raw).json
    name = message_id_hash("<retried@example.org>")
    assert answer == {"url": f"https://lists.example.org/archives/list/{LIST}/message/{name}/"}
    from tests import conflict_once

    assert "retried@example.org" in conflict_once.failed_once  # the first attempt did fail
    with prepare(registry=app.registry) as env:
        root = env["root"]
        assert archive_info(root, LIST)["messages"] == 1
        assert root.lists[LIST].messages[name].original_bytes() == raw
        assert len(root.quarantine) == 0
    assert "Survives a retry" in browser.get(f"/list/{LIST}/message/{name}/").text


def test_a_conflict_left_after_the_last_attempt_is_a_503_said_in_one_line(tmp_path, caplog):
    """Another process wrote the same records each time: Mailman sends the message again, nothing is broken."""
    from tests import conflict_once

    conflict_once.failed_once.clear()
    app = make(tmp_path, **{"pyramid.includes": "tests.conflict_once", "retry.attempts": "1"})
    browser = TestApp(app)
    raw = make_message(message_id="<busy@example.org>", subject="Busy", body="kept later\n")
    with caplog.at_level(logging.INFO, logger="kittypyr"):
        answer = post(browser, raw, status=503)
    assert answer.headers["Retry-After"]
    said = [record for record in caplog.records if record.name == "kittypyr.views.mailman_api"]
    assert [record.levelname for record in said] == ["WARNING"] and said[0].exc_info is None
    assert "conflict" in said[0].getMessage() and "Mailman will send it again" in said[0].getMessage()
    # Sent again, it is stored.
    name = message_id_hash("<busy@example.org>")
    assert post(browser, raw).json == {"url": f"https://lists.example.org/archives/list/{LIST}/message/{name}/"}
    app.registry._zodb_databases[""].close()


def test_a_retried_form_post_sees_its_fields(app_failing_first_attempts):
    answer = TestApp(app_failing_first_attempts).post(
        "/api/mailman/echo-form", {"token": "t1", "text": "caf\u00e9 au lait"}).json
    assert answer["fields"] == {"token": "t1", "text": "caf\u00e9 au lait"}


def test_no_archive_is_honoured(app):
    browser = TestApp(app)
    raw = make_message(message_id="<na@example.org>", headers={"X-No-Archive": "yes"}, body="private\n")
    assert post(browser, raw).json == {"url": f"https://lists.example.org/archives/list/{LIST}/"}
    browser.get(f"/list/{LIST}/message/{message_id_hash('<na@example.org>')}/", status=404)


def test_the_example_configurations_key_opens_nothing(tmp_path, caplog):
    # The value deploy/kittypyr.ini shipped, published with kittypyr: the
    # API archived whatever anyone who reached it sent with it.
    example = "CHANGE-ME-as-in-mailman-hyperkitty.cfg"
    with caplog.at_level(logging.WARNING):
        application = make(tmp_path, **{"kittypyr.archiver_key": example})
    try:
        assert "kittypyr.archiver_key is still the example's" in caplog.text
        browser = TestApp(application)
        post(browser, make_message(message_id="<ex@example.org>"), headers={"Authorization": f"Token {example}"},
             status=401)
        browser.get(f"/list/{LIST}/message/{message_id_hash('<ex@example.org>')}/", status=404)
    finally:
        application.registry._zodb_databases[""].close()


def test_wrong_or_missing_key_is_401(app):
    browser = TestApp(app)
    raw = make_message(message_id="<k@example.org>")
    post(browser, raw, headers={}, status=401)
    post(browser, raw, headers={"Authorization": "Token wrong"}, status=401)
    browser.get("/api/mailman/urls", {"mlist": LIST}, status=401)
    browser.get(f"/list/{LIST}/", status=404)  # nothing was archived


def test_other_client_addresses_are_403(tmp_path):
    app = make(tmp_path, **{"kittypyr.archiver_from": "192.0.2.7 ::1"})
    try:
        browser = TestApp(app, extra_environ={"REMOTE_ADDR": "127.0.0.1"})
        post(browser, make_message(message_id="<f@example.org>"), status=403)
        allowed = TestApp(app, extra_environ={"REMOTE_ADDR": "192.0.2.7"})
        post(allowed, make_message(message_id="<f@example.org>"))
    finally:
        app.registry._zodb_databases[""].close()


def test_a_message_the_storage_does_not_hold_after_the_commit_is_answered_503(tmp_path):
    """200 means stored: the archive reads the message back from the storage before answering."""
    from tests import commit_lost

    app = make(tmp_path, **{"pyramid.includes": "tests.commit_lost"})
    browser = TestApp(app)
    raw = make_message(message_id="<lost@example.org>", subject="Lost at commit", body="kept at last\n")
    post(browser, make_message(message_id="<first@example.org>"))  # the list exists
    commit_lost.lost.add(LIST)
    try:
        response = post(browser, raw, status=503)
        assert response.headers["Retry-After"] and "send it again" in response.json["error"]
        garbage = post(browser, b"no mail at all, and its quarantine is lost too\n", status=503)
        assert garbage.headers["Retry-After"]
    finally:
        commit_lost.lost.clear()
    name = message_id_hash("<lost@example.org>")
    with prepare(registry=app.registry) as env:
        assert name not in env["root"].lists[LIST].messages and len(env["root"].quarantine) == 0
    # Mailman sends it again, and this time it is stored and answered 200.
    assert post(browser, raw).json == {"url": f"https://lists.example.org/archives/list/{LIST}/message/{name}/"}
    assert "Lost at commit" in browser.get(f"/list/{LIST}/message/{name}/").text
    app.registry._zodb_databases[""].close()


def test_a_message_evicted_from_the_cache_as_it_commits_is_answered_200(tmp_path):
    """The commit is checked on the message as its connection left it: a ghost of the record just written.

    With one attempt a request: a retry would hide a failed check, and the
    last attempt has none.
    """
    app = make(tmp_path, **{"pyramid.includes": "tests.evicted_after_commit", "retry.attempts": "1"})
    browser = TestApp(app)
    post(browser, make_message(message_id="<first@example.org>"))
    raw = make_message(message_id="<evicted@example.org>", subject="Evicted at commit", body="still stored\n")
    name = message_id_hash("<evicted@example.org>")
    assert post(browser, raw).json == {"url": f"https://lists.example.org/archives/list/{LIST}/message/{name}/"}
    assert "Evicted at commit" in browser.get(f"/list/{LIST}/message/{name}/").text
    # A duplicate is answered 200 too, its message a ghost never loaded.
    assert post(browser, raw).json == {"url": f"https://lists.example.org/archives/list/{LIST}/message/{name}/"}
    app.registry._zodb_databases[""].close()


def test_a_transaction_that_fails_to_begin_is_begun_again_by_the_next_attempt(tmp_path):
    """The storage away as pyramid_tm begins: the next attempt still runs in a transaction of its own."""
    from tests import begin_fails_once

    app = make(tmp_path, **{"pyramid.includes": "tests.begin_fails_once", "retry.attempts": "3"})
    browser = TestApp(app)
    post(browser, make_message(message_id="<first@example.org>"))  # the list exists
    begin_fails_once.armed.append(True)
    raw = make_message(message_id="<after-restart@example.org>", subject="Begun again", body="kept\n")
    name = message_id_hash("<after-restart@example.org>")
    answer = post(browser, raw).json
    assert not begin_fails_once.armed  # the first attempt did fail
    assert answer == {"url": f"https://lists.example.org/archives/list/{LIST}/message/{name}/"}
    assert "Begun again" in browser.get(f"/list/{LIST}/message/{name}/").text
    app.registry._zodb_databases[""].close()
    transaction.manager.unregisterSynch(begin_fails_once.synchronizer)


def test_a_transaction_that_cannot_begin_at_any_attempt_is_answered_503(tmp_path):
    from tests import begin_fails_once

    app = make(tmp_path, **{"pyramid.includes": "tests.begin_fails_once", "retry.attempts": "2"})
    browser = TestApp(app)
    try:
        begin_fails_once.armed.extend([True, True])
        response = post(browser, make_message(message_id="<never-begun@example.org>"), status=503)
        assert response.headers["Retry-After"] and not begin_fails_once.armed
        begin_fails_once.armed.extend([True, True])
        assert browser.get(f"/list/{LIST}/", status=503).headers["Retry-After"]
    finally:
        app.registry._zodb_databases[""].close()
        transaction.manager.unregisterSynch(begin_fails_once.synchronizer)


def test_a_connection_whose_opening_fails_goes_back_to_the_pool(tmp_path, monkeypatch):
    """The storage away as a request opens its connection: the connection is kept, not lost."""
    import gc

    from ZEO.Exceptions import ClientDisconnected
    from ZODB.mvccadapter import MVCCAdapterInstance

    app = make(tmp_path, **{"retry.attempts": "3"})
    browser = TestApp(app)
    post(browser, make_message(message_id="<first@example.org>"))
    database = app.registry._zodb_databases[""]
    away = [True, True]
    poll = MVCCAdapterInstance.poll_invalidations

    def poll_unless_away(storage):
        if away:
            away.pop()
            raise ClientDisconnected("the storage server is restarting")
        return poll(storage)

    monkeypatch.setattr(MVCCAdapterInstance, "poll_invalidations", poll_unless_away)
    gc.disable()  # a lost connection would stay counted until the collector finds it
    try:
        connections = len(database.pool.all)
        assert "1 message" in browser.get(f"/list/{LIST}/").text  # the third attempt
        assert not away
        assert len(database.pool.all) == connections
        assert len(database.pool.available) == connections  # all back, none open
    finally:
        gc.enable()
        database.close()


def test_storage_trouble_answers_an_error_so_mailman_keeps_the_mail(tmp_path):
    app = make(tmp_path)
    app.registry._zodb_databases[""].close()  # the storage is gone
    response = post(TestApp(app), make_message(message_id="<down@example.org>"), status="*")
    assert response.status_int == 503
    assert response.headers["Retry-After"] and "send it again" in response.json["error"]


def test_a_full_disk_answers_503_and_logs_one_line_a_try(app, monkeypatch, caplog):
    import errno

    import kittypyr.resources.message
    from tests.mailbuilder import attachment, multipart, text_part

    def full_disk(data, jar):
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(kittypyr.resources.message, "_blob_with", full_disk)
    raw = make_message(message_id="<full@example.org>",
                       body=multipart("mixed", text_part("see attached\n"), attachment(b"data", filename="a.bin")))
    with caplog.at_level(logging.ERROR, logger="kittypyr.views.mailman_api"):
        response = post(TestApp(app), raw, status="*")
    assert response.status_int == 503 and "send it again" in response.json["error"]
    [record] = [r for r in caplog.records if r.name == "kittypyr.views.mailman_api"]
    assert record.getMessage() == ("archiver API failed, Mailman will retry: the storage could not be written "
                                   "(No space left on device)")
    assert record.exc_info is None


def test_mailman_unreachable_still_archives_and_the_new_list_stays_closed(tmp_path):
    """Its policy unknown, a new list is private: stored, but shown to nobody yet."""
    from tests.functional import free_port

    app = make(tmp_path, **{"kittypyr.mailman_url": f"http://127.0.0.1:{free_port()}"})
    try:
        browser = TestApp(app)
        name = message_id_hash("<u@example.org>")
        answer = post(browser, make_message(message_id="<u@example.org>", subject="Kept anyway")).json
        assert answer["url"].endswith(f"/message/{name}/")
        with prepare(registry=app.registry) as env:
            mailing_list = env["root"].lists[LIST]
            assert mailing_list.messages[name].subject == "Kept anyway"
            assert mailing_list.archive_policy == "private" and not mailing_list.policy_known
        for path in (f"/list/{LIST}/message/{name}/", f"/list/{LIST}/message/{name}/raw",
                     f"/list/{LIST}/", f"/api/list/{LIST}/"):
            assert browser.get(path, status="*").status_int == 403, path
        assert "Kept anyway" not in browser.get("/search", {"q": "kept"}).text
        assert f"/list/{LIST}/" not in browser.get("/").text  # (its help text may name an example list)
        assert LIST not in browser.get("/api/lists/").text
    finally:
        app.registry._zodb_databases[""].close()


@pytest.mark.parametrize("mlist", ["../x@y", "@", "a@b@c", "dev@lists.example.org\r\nX-Evil: 1",
                                   "dev@lists.example.org\n", "x" * 10_000 + "@example.org",
                                   "dev", "dev@", "dev@.example.org", "dev@example..org", "..@example.org",
                                   "dev/../../x@example.org", ""])
def test_mlist_that_is_no_list_address_is_400_and_makes_no_list(app, mlist):
    browser = TestApp(app)
    post(browser, make_message(message_id="<bad-list@example.org>"), mlist=mlist, status=400)
    with prepare(registry=app.registry) as env:
        assert len(env["root"].lists) == 0 and len(env["root"].quarantine) == 0


@pytest.mark.parametrize("mlist", ["-dev@lists.example.org", "dev.@lists.example.org", ".dev@lists.example.org",
                                   "a..b@lists.example.org", "dev-@lists.example.org"])
def test_every_list_name_mailman_makes_is_archived(app, mlist):
    """Mailman's list names are any run of [-_.0-9a-z]: a 400 would leave such a list unarchived for good."""
    browser = TestApp(app)
    post(browser, make_message(message_id="<odd-name@example.org>", subject="Odd name"), mlist=mlist)
    page = browser.get(f"/list/{mlist}/")
    assert "Odd name" in page.text


def test_mlist_in_capitals_is_the_same_list(app):
    browser = TestApp(app)
    post(browser, make_message(message_id="<caps1@example.org>"), mlist="Dev@Lists.Example.ORG")
    post(browser, make_message(message_id="<caps2@example.org>"), mlist=LIST)
    with prepare(registry=app.registry) as env:
        assert list(env["root"].lists.keys()) == [LIST]
        assert archive_info(env["root"], LIST)["messages"] == 2


def test_lists_whose_policy_is_never_are_not_archived(app):
    with prepare(registry=app.registry) as env:
        from kittypyr.archiving import ensure_mailing_list

        ensure_mailing_list(env["root"], LIST).archive_policy = "never"
        env["request"].tm.commit()
    browser = TestApp(app)
    post(browser, make_message(message_id="<nv@example.org>"))
    with prepare(registry=app.registry) as env:
        assert archive_info(env["root"], LIST)["messages"] == 0
    # And what it holds is closed: nobody learns whether the mail is there.
    browser.get(f"/list/{LIST}/message/{message_id_hash('<nv@example.org>')}/", status=403)


def _asked_then_archived(browser, header):
    """The paths of the permalink Mailman asks for a Message-ID header (before archiving, stripped of every <
    and > at its ends, as its plugin does), and of the one the archive answers as it archives the message."""
    raw = (f"From: a@example.org\nSubject: odd id {header}\nMessage-ID: {header}\n"
           "Date: Wed, 1 Jan 2020 12:00:00 +0000\n\nbody\n").encode()
    asked = browser.get("/api/mailman/urls", {"mlist": LIST, "msgid": header.strip().strip("<>")},
                        headers=AUTH).json["url"]
    answered = post(browser, raw).json["url"]
    return asked.replace(SITE, ""), answered.replace(SITE, "")


@pytest.mark.parametrize("header", [
    "<plain@example.org>",
    "<first@example.org> <second@example.org>",
    '<"quoted local"@example.org>',
    "<a<inner>@example.org>",
    "bare@example.org",
    "< spaced @example.org >",
    "<>",
])
def test_urls_gives_the_permalink_the_archive_answers(app, header):
    """Mailman asks for Archived-At before archiving, with the header stripped of <> as its plugin does."""
    browser = TestApp(app)
    asked, answered = _asked_then_archived(browser, header)
    assert asked == answered
    assert browser.get(answered).status_int == 200


@pytest.mark.parametrize("header", [
    "odd1@example.org>",
    "(a comment) <odd2@example.org>",
    "odd3@example.org other3@example.org",
    "=?utf-8?q?odd4=40example.org?=",
])
def test_the_archived_at_mailman_writes_for_an_odd_message_id_leads_to_the_message(app, header):
    # Mailman's plugin strips every < and > off both ends of the header and
    # asks for the permalink of what is left; the archive reads the header
    # whole. For these the two differ, and the Archived-At of every copy
    # Mailman sent answered 404.
    browser = TestApp(app)
    asked, answered = _asked_then_archived(browser, header)
    assert asked != answered  # else the header is not odd here
    assert browser.get(asked, status=301).location.endswith(answered)
    assert browser.get(answered).status_int == 200
    with prepare(registry=app.registry) as env:
        assert archive_info(env["root"], LIST)["messages"] == 1
    # The JSON API answers for it too, with the message.
    email = browser.get(asked.replace("/list/", "/api/list/").replace("/message/", "/email/")).json
    assert email["url"].endswith(answered)

    # A post under the id the permalink names is another post: it takes
    # nothing of the link Mailman gave every copy of the first.
    plain = header.strip().strip("<>")
    other = (f"From: b@example.org\nSubject: another post\nMessage-ID: <{plain}>\n"
             "Date: Thu, 2 Jan 2020 12:00:00 +0000\n\nanother body\n").encode()
    elsewhere = post(browser, other).json["url"].replace(SITE, "")
    assert elsewhere not in (answered, asked)
    assert browser.get(asked, status=301).location.endswith(answered)
    with prepare(registry=app.registry) as env:
        assert archive_info(env["root"], LIST)["messages"] == 2


def test_each_retry_is_logged(app_failing_first_attempts, caplog):
    import logging

    with caplog.at_level(logging.INFO, logger="kittypyr.retries"):
        post(TestApp(app_failing_first_attempts), make_message(message_id="<logged@example.org>"))
    retries = [r.getMessage() for r in caplog.records if r.name == "kittypyr.retries"]
    assert len(retries) == 1 and "POST /api/mailman/archive" in retries[0] and "ConflictError" in retries[0]


def test_a_forwarded_for_header_from_the_client_is_not_believed(tmp_path):
    app = make(tmp_path, **{"kittypyr.archiver_from": "192.0.2.7"})
    try:
        browser = TestApp(app, extra_environ={"REMOTE_ADDR": "127.0.0.1"})
        post(browser, make_message(message_id="<xff@example.org>"),
             headers={**AUTH, "X-Forwarded-For": "192.0.2.7"}, status=403)
    finally:
        app.registry._zodb_databases[""].close()


def test_two_different_messages_with_an_empty_message_id_are_both_kept(app):
    browser = TestApp(app)
    urls = []
    for body in ("first\n", "second\n"):
        raw = f"From: a@example.org\nSubject: no id\nMessage-ID: <>\n\n{body}".encode()
        urls.append(post(browser, raw).json["url"])
    assert urls[0] == browser.get("/api/mailman/urls", {"mlist": LIST, "msgid": ""}, headers=AUTH).json["url"]
    assert urls[0] != urls[1]
    with prepare(registry=app.registry) as env:
        assert archive_info(env["root"], LIST)["messages"] == 2


def test_different_posts_of_one_body_under_one_message_id_are_all_kept(app):
    # "+1" from three people, under one Message-ID (a broken client): told
    # apart by their dates. A resent copy keeps its Date: still one message.
    from datetime import datetime, timedelta, timezone

    browser = TestApp(app)
    first = datetime(2024, 3, 1, 9, tzinfo=timezone.utc)
    posts = [make_message(message_id="<same@example.org>", subject=subject, sender=(name, address),
                          date=first + timedelta(minutes=minutes), body="+1\n")
             for subject, name, address, minutes in (("Meeting on Monday", "Ann", "ann@example.org", 0),
                                                     ("Re: Release plan", "Bob", "bob@example.org", 30),
                                                     ("Re: Venue", "Cy", "cy@example.org", 95))]
    urls = [post(browser, raw).json["url"] for raw in posts]
    assert len(set(urls)) == 3
    for url, sender in zip(urls, ("Ann", "Bob", "Cy")):
        assert sender in browser.get(url.replace("https://lists.example.org/archives", "")).text
    assert [post(browser, raw).json["url"] for raw in posts] == urls
    with prepare(registry=app.registry) as env:
        assert archive_info(env["root"], LIST)["messages"] == 3


@pytest.mark.parametrize("header", ["Message-ID: <>", "Message-ID:"])
def test_two_posts_of_one_sender_in_one_second_with_an_empty_message_id_are_both_kept(app, header):
    # An empty id names no mail: another archive's copy of a post is told
    # by its id, date and sender, and an empty id is no id.
    browser = TestApp(app)
    urls = []
    for subject, word in (("first post", "alphaword"), ("second post", "betaword")):
        raw = (f"From: Ann <ann@example.org>\nSubject: {subject}\n{header}\n"
               f"Date: Wed, 1 Jan 2020 12:00:00 +0000\n\n{word} in the body\n").encode()
        urls.append(post(browser, raw).json["url"])
    assert urls[0] != urls[1]
    for url, word in zip(urls, ("alphaword", "betaword")):
        assert word in browser.get(url.replace("https://lists.example.org/archives", "")).text
        assert browser.get("/api/search", {"q": word}).json["count"] == 1
    with prepare(registry=app.registry) as env:
        assert archive_info(env["root"], LIST)["messages"] == 2


@pytest.mark.parametrize("content_type", [b"text/plain; charset=utf-16", b"message/rfc822; charset=bogus"])
def test_a_form_that_cannot_be_read_is_400_not_a_503_at_every_retry(app, content_type):
    raw = b"From: a@example.org\nSubject: s\nMessage-ID: <form1@example.org>\n\nbody\n"
    body = (b'--xx\r\nContent-Disposition: form-data; name="mlist"\r\n\r\n' + LIST.encode()
            + b'\r\n--xx\r\nContent-Disposition: form-data; name="message"; filename="message.txt"\r\n'
            + b"Content-Type: " + content_type + b"\r\n\r\n" + raw + b"\r\n--xx--\r\n")
    browser = TestApp(app)
    answer = browser.post("/api/mailman/archive", body, status=400,
                          headers={**AUTH, "Content-Type": "multipart/form-data; boundary=xx"})
    assert "form" in answer.json["error"]


def _seed_rebuilt(app, raw):
    """A message as ``kittypyr import-hyperkitty`` stores one: rebuilt from another archive's fields."""
    from kittypyr.archiving import ensure_mailing_list, store_parsed
    from kittypyr.mail import parse_message

    with prepare(registry=app.registry) as env:
        parsed = parse_message(raw)
        parsed.rebuilt = True
        store_parsed(ensure_mailing_list(env["root"], LIST), parsed, registry=app.registry)
        transaction.commit()


REBUILT = (b"From: Ada <ada@example.org>\nMessage-ID: <x@example.org>\nSubject: Release plan\n"
           b"Date: Mon, 1 Mar 2021 09:00:00 +0000\n\nShall we release on Friday? rebuiltword\n")


def test_a_post_reusing_the_message_id_of_a_rebuilt_message_takes_nothing_of_its_place(app):
    # Mailman never sends an old message again: a post under a migrated message's id is another post.
    _seed_rebuilt(app, REBUILT)
    browser = TestApp(app)
    other = (b"From: Zed <zed@example.net>\nMessage-ID: <x@example.org>\nSubject: Totally different\n"
             b"Date: Tue, 7 Sep 2021 18:00:00 +0000\n\nA different post reusing the id, zedword\n")
    url = post(browser, other).json["url"]
    assert message_id_hash("<x@example.org>") not in url
    assert browser.get("/api/search", {"q": "rebuiltword"}).json["count"] == 1
    assert browser.get("/api/search", {"q": "zedword"}).json["count"] == 1
    page = browser.get(f"/list/{LIST}/message/{message_id_hash('<x@example.org>')}/")
    assert page.html.h1.text.strip() == "Release plan"
    assert "rebuiltword" in page.text and "zedword" not in page.text
    with prepare(registry=app.registry) as env:
        assert archive_info(env["root"], LIST)["messages"] == 2


def test_an_imported_mbox_replaces_a_rebuilt_message_only_by_its_original(app, tmp_path):
    from kittypyr.importing import import_mail

    _seed_rebuilt(app, REBUILT)
    mbox = tmp_path / "list.mbox"
    mbox.write_bytes(
        b"From zed@example.net Tue Sep  7 18:00:00 2021\n"
        b"From: Zed <zed@example.net>\nMessage-ID: <x@example.org>\nSubject: Totally different\n"
        b"Date: Tue, 7 Sep 2021 18:00:00 +0000\n\nA different post reusing the id, zedword\n\n"
        b"From ada@example.org Mon Mar  1 09:00:00 2021\n"
        b"From: Ada <ada@example.org>\nMessage-ID: <x@example.org>\nSubject: Release plan\n"
        b"Date: Mon, 1 Mar 2021 09:00:00 +0000\nTo: dev@lists.example.org\n\n"
        b"Shall we release on Friday? rebuiltword, as sent\n")
    with prepare(registry=app.registry) as env:
        report = import_mail(env["root"], LIST, [str(mbox)], transaction.manager, workers=0, progress=False)
        assert report.total("archived") == 2
        mailing_list = env["root"].lists[LIST]
        original = mailing_list.messages[message_id_hash("<x@example.org>")]
        assert not original.rebuilt and "as sent" in original.body_text
        assert archive_info(env["root"], LIST)["messages"] == 2
        transaction.abort()


def _mail(message_id, body, sender="a@example.org", date="Wed, 1 Jan 2020 12:00:00 +0000"):
    return (f"From: {sender}\nSubject: s\nMessage-ID: {message_id}\nDate: {date}\n\n{body}").encode()


def _shows(browser, url, text):
    answer = browser.get(url.replace(SITE, ""), status="*")
    return answer.status_int == 200 and text in answer.text


def test_two_posts_mailman_sends_with_one_message_id_date_and_sender_are_both_kept(app):
    # A mailer that makes its Message-IDs from the time sends two alerts in
    # one second: the second was taken for "another archive's copy" of the
    # first (a rule for imported archives, whose copies are scrubbed), and
    # answered 200 with the first one's URL.
    browser = TestApp(app)
    first = post(browser, _mail("<20240101120000.cron@host.example>", "ALERT disk full on db1\n")).json["url"]
    second = post(browser, _mail("<20240101120000.cron@host.example>", "ALERT load high on web2\n")).json["url"]
    assert first != second
    assert _shows(browser, first, "disk full on db1") and _shows(browser, second, "load high on web2")
    # Mailman sending the second again changes nothing.
    assert post(browser, _mail("<20240101120000.cron@host.example>", "ALERT load high on web2\n")).json["url"] == second
    with prepare(registry=app.registry) as env:
        assert archive_info(env["root"], LIST)["messages"] == 2


def test_a_post_whose_derived_ids_are_taken_by_other_posts_is_still_kept(app):
    from kittypyr.mail import parse_message

    browser = TestApp(app)
    reused = "reused@example.org"
    body, date = "B: the post that was lost\n", "Thu, 2 Jan 2020 12:00:00 +0000"
    parsed = parse_message(_mail(f"<{reused}>", body, "b@example.org", date))
    by_body = f"{reused}#{parsed.fingerprint[:16]}"
    by_date = f"{by_body}.{int(parsed.date.timestamp()):x}"
    post(browser, _mail(f"<{reused}>", "A, the first\n"))
    post(browser, _mail(f"<{by_body}>", "C takes the first derived id\n", "c@example.org"))
    post(browser, _mail(f"<{by_date}>", "D takes the second\n", "d@example.org"))
    url = post(browser, _mail(f"<{reused}>", body, "b@example.org", date)).json["url"]
    assert _shows(browser, url, "the post that was lost")
    assert post(browser, _mail(f"<{reused}>", body, "b@example.org", date)).json["url"] == url
    with prepare(registry=app.registry) as env:
        assert archive_info(env["root"], LIST)["messages"] == 4


def test_a_deleted_post_under_the_id_an_archived_at_names_stays_deleted(app):
    from kittypyr.health import check_archive
    from kittypyr.moderation import delete_messages
    from kittypyr.security import User

    browser = TestApp(app)
    post(browser, _mail("odd1@example.org>", "P, an odd header\n"))
    spam = _mail("<odd1@example.org>", "Q, spam\n", "q@example.org", "Thu, 2 Jan 2020 12:00:00 +0000")
    url = post(browser, spam).json["url"]
    name = url.rstrip("/").rsplit("/", 1)[1]
    with prepare(registry=app.registry) as env:
        delete_messages(env["root"].lists[LIST], [name], User("mod@example.org", "Mod"), registry=app.registry)
        env["request"].tm.commit()
    assert post(browser, spam).json["url"] == url
    browser.get(url.replace(SITE, ""), status=410)
    with prepare(registry=app.registry) as env:
        assert archive_info(env["root"], LIST)["messages"] == 1
        assert check_archive(env["root"], app.registry)[0] == []


def test_mail_quarantined_is_answered_with_no_message_named_in_its_body(app):
    browser = TestApp(app)
    victim = post(browser, _mail("<victim@example.org>", "Victim post\n")).json["url"]
    answer = post(browser, b"no header here\r\n\r\nMessage-ID: <victim@example.org>\r\n").json
    assert answer["quarantined"] and answer["url"] != victim


def test_another_post_under_a_deleted_message_id_is_kept_and_the_deleted_one_stays_deleted(app):
    # A mailer that reuses its Message-IDs: the admins deleted one alert,
    # and every later alert under that id was answered 200 with the deleted
    # message's URL (410) and never stored.
    from kittypyr.moderation import delete_messages
    from kittypyr.security import User

    browser = TestApp(app)
    deleted = _mail("<alert@host.example>", "ALERT the one deleted\n")
    url = post(browser, deleted).json["url"]
    with prepare(registry=app.registry) as env:
        delete_messages(env["root"].lists[LIST], [url.rstrip("/").rsplit("/", 1)[1]], User("mod@example.org", "Mod"),
                        registry=app.registry)
        env["request"].tm.commit()
    later = post(browser, _mail("<alert@host.example>", "ALERT a later one\n", date="Fri, 3 Jan 2020 08:00:00 +0000"))
    assert later.json["url"] != url and _shows(browser, later.json["url"], "a later one")
    # The deleted one, sent again, stays deleted.
    assert post(browser, deleted).json["url"] == url
    browser.get(url.replace(SITE, ""), status=410)
    with prepare(registry=app.registry) as env:
        assert archive_info(env["root"], LIST)["messages"] == 1


def test_mail_in_utf7_that_decodes_to_half_a_character_leaves_every_page_readable(app):
    # "+2AA-" is UTF-7 for half of a UTF-16 pair: kept as it decoded, it
    # could not be written out, and the message, its list's overview, its
    # month and every search finding it answered 500.
    browser = TestApp(app)
    raw = (b"Message-ID: <u7@example.org>\nFrom: =?utf-7?q?Eve+2AA-?= <eve@example.org>\n"
           b"Subject: =?utf-7?q?Hello+2AA-?= sevenword\nDate: Wed, 01 Jan 2020 12:00:00 +0000\n"
           b"Content-Type: text/plain; charset=utf-7\n\nbody sevenbody +2AA- end\n")
    url = post(browser, raw).json["url"].replace(SITE, "")
    for path in (url, f"/list/{LIST}/", f"/list/{LIST}/2020/1/", "/search?q=sevenbody", "/search?q=sevenword",
                 f"/list/{LIST}/feed/"):
        page = browser.get(path)
        assert "sevenbody" in page.text or "sevenword" in page.text, path
    assert "Eve" in browser.get(url).text


@pytest.mark.parametrize("name", ["Mallory", ""])
def test_a_sender_address_longer_than_any_address_is_not_carried_on_every_page(app, name):
    # The name and subject were cut short, the address kept whole: one post
    # from a megabyte-long address made its list's overview 2 MB and the
    # sender's profile 5 MB for as long as it stayed.
    browser = TestApp(app)
    address = "a." * 500_000 + "a@example.org"
    raw = (f"Message-ID: <long@example.org>\nFrom: {name} <{address}>\nSubject: longaddress\n"
           "Date: Wed, 01 Jan 2020 12:00:00 +0000\n\nHello.\n").encode()
    url = post(browser, raw).json["url"].replace(SITE, "")
    for path in (url, f"/list/{LIST}/", f"/list/{LIST}/2020/1/", "/search?q=longaddress", f"/list/{LIST}/feed/"):
        page = browser.get(path)
        assert "longaddress" in page.text and len(page.body) < 100_000, path
    with prepare(registry=app.registry) as env:
        stored = next(iter(env["root"].lists[LIST].messages.values()))
        assert stored.sender_address == "" and stored.sender_name == name


def test_mail_for_a_list_known_as_never_archived_is_answered_503_while_mailman_cannot_be_asked(tmp_path):
    # Mailman hands mail over only for lists it archives: the "never" kept
    # here may be out of date, and the mail is not dropped on its word.
    from tests.functional import free_port

    app = make(tmp_path, **{"kittypyr.mailman_url": f"http://127.0.0.1:{free_port()}"})
    try:
        with prepare(registry=app.registry) as env:
            from kittypyr.archiving import ensure_mailing_list

            mailing_list = ensure_mailing_list(env["root"], LIST)
            mailing_list.archive_policy, mailing_list.policy_known = "never", True
            env["request"].tm.commit()
        answer = post(TestApp(app), make_message(message_id="<nv2@example.org>"), status=503)
        assert answer.headers["Retry-After"] and "send it again later" in answer.json["error"]
    finally:
        app.registry._zodb_databases[""].close()


@pytest.mark.parametrize("order", ["the message first", "its reply first"])
def test_a_reply_to_the_id_an_odd_message_ids_permalink_names_hangs_below_that_message(app, order):
    # Mailman's Archived-At names "y@v" for the header "y@v>"; a reply to
    # <y@v> found no message of that hash and started a thread of its own,
    # for ever (and so did one to the id a later post reused).
    browser = TestApp(app)
    odd = (b"From: a@example.org\nSubject: odd id\nMessage-ID: y@v>\n"
           b"Date: Wed, 1 Jan 2020 12:00:00 +0000\n\nbody\n")
    reply = (b"From: b@example.org\nSubject: Re: odd id\nMessage-ID: <reply@v>\nIn-Reply-To: <y@v>\n"
             b"Date: Wed, 1 Jan 2020 13:00:00 +0000\n\nanswer\n")
    for raw in ((odd, reply) if order == "the message first" else (reply, odd)):
        post(browser, raw)
    with prepare(registry=app.registry) as env:
        messages = env["root"].lists[LIST].messages
        [first] = [m for m in messages.values() if m.subject == "odd id"]
        assert messages[message_id_hash("<reply@v>")].parent == first.__name__
        assert archive_info(env["root"], LIST)["threads"] == 1
