"""Logging out ends the session on the server too, in every process.

A session cookie is signed, not stored: without a record in the archive a
copy taken before logging out would stay good for its two weeks.
"""

import time
from configparser import ConfigParser
from datetime import datetime, timezone
from pathlib import Path

import pytest
import transaction
from pyramid.scripting import prepare
from pyramid.session import JSONSerializer
from webob.cookies import SignedSerializer
from webtest import TestApp

from kittypyr import main
from kittypyr.archiving import archive_message, ensure_mailing_list
from kittypyr.bootstrap import EVOLVE_STEPS, ROOT_KEY, add_session_generations, bootstrap_archive
from tests.accounts import PASSWORD, FakeMailman, log_in, log_out
from tests.mailbuilder import make_message
from tests.test_app import make_app

PRIVATE = "board@lists.example.org"
MEMBER = "member@example.org"
COOKIE = "kittypyr_session"


def fill(app):
    with prepare(registry=app.registry) as env:
        mailing_list = ensure_mailing_list(env["root"], PRIVATE)
        mailing_list.archive_policy = "private"
        archive_message(mailing_list, make_message(
            message_id="<board1@example.org>", subject="Budget", sender=("Bo", "bo@example.org"),
            date=datetime(2022, 5, 1, tzinfo=timezone.utc), body="Figures.\n"))
        transaction.commit()


@pytest.fixture(scope="module")
def site(tmp_path_factory):
    app = make_app(tmp_path_factory.mktemp("logout"))
    fill(app)
    yield app
    app.registry._zodb_databases[""].close()


@pytest.fixture
def mailman(monkeypatch):
    fake = FakeMailman(monkeypatch)
    fake.add_user(MEMBER, "Mia Member", roles=[(PRIVATE, "member")])
    return fake


def replay(app, cookie):
    """A browser that has nothing but a copy of ``cookie``."""
    browser = TestApp(app)
    browser.set_cookie(COOKIE, cookie)
    return browser


def assert_anonymous(browser):
    page = browser.get(f"/list/{PRIVATE}/", status=403)
    assert "login-form" in page.forms and "Budget" not in page.text
    front = browser.get("/")
    assert "Mia Member" not in front.text and "Log in" in front.text


def test_a_cookie_copied_before_logout_is_anonymous_afterwards(site, mailman):
    browser = TestApp(site)
    assert log_in(browser, MEMBER).status_int == 303
    copied = browser.cookies[COOKIE]
    assert "Budget" in replay(site, copied).get(f"/list/{PRIVATE}/").text
    log_out(browser)
    assert_anonymous(browser)
    assert_anonymous(replay(site, copied))


def test_logging_in_again_after_logout_does_not_revive_the_old_cookie(site, mailman):
    browser = TestApp(site)
    log_in(browser, MEMBER)
    copied = browser.cookies[COOKIE]
    log_out(browser)
    assert log_in(browser, MEMBER).status_int == 303
    assert "Budget" in browser.get(f"/list/{PRIVATE}/").text
    assert_anonymous(replay(site, copied))


def test_logging_out_ends_the_accounts_sessions_in_other_browsers_too(site, mailman):
    laptop, phone = TestApp(site), TestApp(site)
    log_in(laptop, MEMBER)
    log_in(phone, MEMBER)
    log_out(laptop)
    assert_anonymous(phone)


def test_an_account_deleted_in_mailman_ends_its_sessions(site, mailman):
    """A Mailman administrator deletes an account: its signed cookies no longer log anyone in."""
    browser = TestApp(site)
    log_in(browser, MEMBER)
    copied = browser.cookies[COOKIE]
    assert "Budget" in browser.get(f"/list/{PRIVATE}/").text
    mailman.remove_user(MEMBER)  # and a minute passes
    assert_anonymous(browser)
    assert_anonymous(replay(site, copied))
    # Made again in Mailman (which tells the archive nothing), the account logs in at once.
    mailman.passwords[MEMBER], mailman.names[MEMBER] = PASSWORD, "Mia Member"
    mailman.roles[MEMBER] = {(PRIVATE, "member")}
    assert log_in(browser, MEMBER).status_int == 303
    assert "Budget" in browser.get(f"/list/{PRIVATE}/").text


def test_a_password_changed_in_mailman_ends_the_sessions_opened_before(site, mailman):
    """A reader who changes a password a thief may know: the thief's copy of the cookie logs no one in."""
    browser = TestApp(site)
    log_in(browser, MEMBER)
    copied = browser.cookies[COOKIE]
    assert "Budget" in replay(site, copied).get(f"/list/{PRIVATE}/").text
    mailman.change_password(MEMBER, "a new password")  # and a minute passes
    assert_anonymous(replay(site, copied))
    assert_anonymous(browser)
    assert log_in(browser, MEMBER, "a new password").status_int == 303
    assert "Budget" in browser.get(f"/list/{PRIVATE}/").text
    assert_anonymous(replay(site, copied))


def test_no_session_is_opened_while_mailman_cannot_tell_the_account_a_password_change_would_end(
        site, mailman, monkeypatch):
    # Mailman accepted the password, then did not answer the account's
    # lookup: a session opened so would be ended by no password change.
    from kittypyr.security import memberships

    real = memberships.account
    monkeypatch.setattr(memberships, "account", lambda registry, address: True)
    browser = TestApp(site)
    refused = log_in(browser, MEMBER)
    assert refused.status_int == 503 and "Please try again later" in refused.text
    assert_anonymous(browser)
    monkeypatch.setattr(memberships, "account", real)
    assert log_in(browser, MEMBER).status_int == 303
    copied = browser.cookies[COOKIE]
    mailman.change_password(MEMBER, "another new password")
    assert_anonymous(replay(site, copied))


def test_a_session_of_a_deleted_account_does_not_come_back_with_a_new_account_of_its_address(site, mailman):
    browser = TestApp(site)
    log_in(browser, MEMBER)
    copied = browser.cookies[COOKIE]
    mailman.remove_user(MEMBER)  # to shut a thief out, and a minute passes
    assert_anonymous(replay(site, copied))
    # The address's owner signs up again: another account, the same password even.
    mailman.add_user(MEMBER, "Mia Member", roles=[(PRIVATE, "member")])
    assert_anonymous(replay(site, copied))
    assert log_in(browser, MEMBER).status_int == 303
    assert "Budget" in browser.get(f"/list/{PRIVATE}/").text


def shared_app(folder, storage):
    folder.mkdir()
    return main({}, **{
        "zodbconn.uri": storage.uri(folder),
        "kittypyr.base_url": "http://localhost/",
        # Both processes sign cookies with the same secret, as a site's do.
        "kittypyr.secret": "the same secret in every process",
    })


def test_a_logout_in_one_process_ends_the_session_in_the_others(tmp_path, shared_storage, mailman):
    # Two applications, each with its own database connection to one ZEO
    # server or PostgreSQL database, as two waitress processes of a site
    # would have.
    first, second = (shared_app(tmp_path / "first", shared_storage),
                     shared_app(tmp_path / "second", shared_storage))
    try:
        fill(first)
        browser = TestApp(first)
        log_in(browser, MEMBER)
        copied = browser.cookies[COOKIE]
        log_out(replay(second, copied))
        shared_storage.catch_up(first.registry._zodb_databases[""])
        assert_anonymous(replay(first, copied))
        assert_anonymous(browser)
    finally:
        for app in (first, second):
            app.registry._zodb_databases[""].close()


def test_an_archive_from_before_logout_records_is_upgraded(tmp_path):
    app = make_app(tmp_path)
    try:
        with prepare(registry=app.registry) as env:
            root = env["root"]._p_jar.root()
            del root[ROOT_KEY].session_generations
            # As the version before the step that adds them left it.
            root[ROOT_KEY].schema_version = EVOLVE_STEPS.index(add_session_generations)
            transaction.commit()
            archive = bootstrap_archive(root, app.registry)
            assert archive.schema_version == len(EVOLVE_STEPS)
            assert len(archive.session_generations) == 0
            transaction.abort()
    finally:
        app.registry._zodb_databases[""].close()


EXAMPLE_CONFIGS = [Path(__file__).resolve().parent.parent / name
                   for name in ("production.ini", "deploy/kittypyr.ini", "development.ini")]
# What the example configurations said before they left the secret to the
# archive: published with kittypyr, so sites may still have them.
PUBLISHED_SECRETS = ["CHANGE-ME", "CHANGE-ME-to-a-long-random-string", "change-me-development-only"]


def app_on(folder, **settings):
    folder.mkdir(exist_ok=True)
    (folder / "blobs").mkdir(exist_ok=True)
    return main({}, **dict({"zodbconn.uri": f"file://{folder}/Data.fs?blobstorage_dir={folder}/blobs",
                            "kittypyr.base_url": "http://localhost/"}, **settings))


@pytest.mark.parametrize("published", PUBLISHED_SECRETS)
def test_a_published_example_secret_signs_no_session(tmp_path, published):
    # A site left with the example's kittypyr.secret must not take a cookie
    # anyone could have signed with it.
    app = app_on(tmp_path, **{"kittypyr.secret": published, "kittypyr.admins": "admin@example.org"})
    try:
        fill(app)
        signer = SignedSerializer(published, "kittypyr.session.", "sha512", serializer=JSONSerializer())
        now = time.time()
        forged = signer.dumps((now, now, {"user": {"address": "admin@example.org", "display_name": "Forged",
                                                   "user_id": "", "generation": 0}})).decode("ascii")
        browser = replay(app, forged)
        # Refused as an anonymous reader is (this site has no Mailman: no accounts at all).
        page = browser.get("/admin/", status=403)
        assert "No accounts here" in page.text and "Forged" not in page.text
        page = browser.get(f"/list/{PRIVATE}/", status=403)
        assert "No accounts here" in page.text and "Budget" not in page.text
    finally:
        app.registry._zodb_databases[""].close()


@pytest.mark.parametrize("config", EXAMPLE_CONFIGS, ids=lambda path: path.name)
def test_the_example_configurations_start_without_a_warning_and_keep_sessions(tmp_path, config, mailman, caplog):
    # The examples leave kittypyr.secret to the archive: nothing to change
    # before a first start, and nothing published to sign with.
    parser = ConfigParser(interpolation=None)
    parser.read(config)
    # Its own settings but where the site is served and its Mailman.
    settings = {key: value for key, value in parser["app:main"].items()
                if key.startswith("kittypyr.") and key != "kittypyr.base_url" and not key.startswith("kittypyr.mailman")}
    caplog.set_level("WARNING", logger="kittypyr")
    app = app_on(tmp_path / "first", **settings)
    try:
        fill(app)
        browser = TestApp(app)
        assert log_in(browser, MEMBER).status_int == 303
        cookie = browser.cookies[COOKIE]
    finally:
        app.registry._zodb_databases[""].close()
    assert [record.getMessage() for record in caplog.records if record.levelname == "WARNING"] == []
    again = app_on(tmp_path / "first", **settings)
    try:
        assert "Budget" in replay(again, cookie).get(f"/list/{PRIVATE}/").text
    finally:
        again.registry._zodb_databases[""].close()


def test_without_a_secret_a_session_outlives_a_restart(tmp_path, mailman):
    app = app_on(tmp_path / "archive")
    try:
        fill(app)
        browser = TestApp(app)
        log_in(browser, MEMBER)
        cookie = browser.cookies[COOKIE]
    finally:
        app.registry._zodb_databases[""].close()
    restarted = app_on(tmp_path / "archive")
    try:
        assert "Budget" in replay(restarted, cookie).get(f"/list/{PRIVATE}/").text
    finally:
        restarted.registry._zodb_databases[""].close()
    # Another archive has a secret of its own: the cookie means nothing there.
    other = app_on(tmp_path / "other")
    try:
        fill(other)
        assert_anonymous(replay(other, cookie))
    finally:
        other.registry._zodb_databases[""].close()


def test_without_a_secret_every_process_of_an_archive_takes_its_sessions(tmp_path, shared_storage, mailman):
    apps = []
    for name in ("first", "second"):
        (tmp_path / name).mkdir()
        apps.append(main({}, **{"zodbconn.uri": shared_storage.uri(tmp_path / name),
                                "kittypyr.base_url": "http://localhost/"}))
    first, second = apps
    try:
        fill(first)
        browser = TestApp(first)
        log_in(browser, MEMBER)
        shared_storage.catch_up(second.registry._zodb_databases[""])
        assert "Budget" in replay(second, browser.cookies[COOKIE]).get(f"/list/{PRIVATE}/").text
    finally:
        for app in apps:
            app.registry._zodb_databases[""].close()

