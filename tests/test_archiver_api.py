"""The archiver API as Mailman's plugin uses it (the real plugin: tests/test_mailman.py)."""

import pytest
from pyramid.scripting import prepare
from webtest import TestApp

from kittypyr import main
from kittypyr.cli import archive_info
from kittypyr.msgid import message_id_hash
from tests.mailbuilder import make_message

KEY = "s3cret-key"
LIST = "dev@lists.example.org"
AUTH = {"Authorization": f"Token {KEY}"}


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


def test_unreadable_mail_is_quarantined_and_answers_200(app):
    browser = TestApp(app)
    answer = post(browser, b"").json
    assert answer["quarantined"] == "000001"
    with prepare(registry=app.registry) as env:
        held = env["root"].quarantine["000001"]
        assert held.list_address == LIST and held.raw_bytes() == b"" and held.reason


def test_no_archive_is_honoured(app):
    browser = TestApp(app)
    raw = make_message(message_id="<na@example.org>", headers={"X-No-Archive": "yes"}, body="private\n")
    assert post(browser, raw).json == {"url": f"https://lists.example.org/archives/list/{LIST}/"}
    browser.get(f"/list/{LIST}/message/{message_id_hash('<na@example.org>')}/", status=404)


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


def test_storage_trouble_answers_an_error_so_mailman_keeps_the_mail(tmp_path):
    app = make(tmp_path)
    app.registry._zodb_databases[""].close()  # the storage is gone
    response = post(TestApp(app), make_message(message_id="<down@example.org>"), status="*")
    assert response.status_int >= 500


def test_mailman_unreachable_still_archives(tmp_path):
    from tests.functional import free_port

    app = make(tmp_path, **{"kittypyr.mailman_url": f"http://127.0.0.1:{free_port()}"})
    try:
        browser = TestApp(app)
        answer = post(browser, make_message(message_id="<u@example.org>", subject="Kept anyway")).json
        assert answer["url"].endswith(f"/message/{message_id_hash('<u@example.org>')}/")
        assert "Kept anyway" in browser.get(f"/list/{LIST}/message/{message_id_hash('<u@example.org>')}/")
    finally:
        app.registry._zodb_databases[""].close()


def test_lists_whose_policy_is_never_are_not_archived(app):
    with prepare(registry=app.registry) as env:
        from kittypyr.archiving import ensure_mailing_list

        ensure_mailing_list(env["root"], LIST).archive_policy = "never"
        env["request"].tm.commit()
    browser = TestApp(app)
    post(browser, make_message(message_id="<nv@example.org>"))
    browser.get(f"/list/{LIST}/message/{message_id_hash('<nv@example.org>')}/", status=404)
