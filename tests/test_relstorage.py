"""RelStorage on PostgreSQL, as production.ini shows it: pages, attachments, a server restart.

The archive, search and concurrency tests that run on ZEO run on RelStorage
too (the ``shared_storage`` fixture); these are what only RelStorage has:
its URI, blobs kept in the database, and PostgreSQL going away.
"""

import re
import time
from datetime import datetime, timezone
from pathlib import Path

import transaction
import zodburi
from pyramid.scripting import prepare
from webtest import TestApp

from kittypyr import main
from kittypyr.archiving import archive_message, ensure_mailing_list
from kittypyr.msgid import message_id_hash
from tests.functional import assert_faults_answered_503_and_no_mail_lost
from tests.mailbuilder import attachment, make_message, multipart, text_part

LIST = "pg@lists.example.org"
PRODUCTION_INI = Path(__file__).resolve().parent.parent / "production.ini"


def production_uri(postgresql, database, here):
    """production.ini's RelStorage example, pointed at the test cluster's ``database``."""
    line = next(line for line in PRODUCTION_INI.read_text().splitlines()
                if line.startswith("# zodbconn.uri = postgres://"))
    uri = line.split("=", 1)[1].strip().replace("%(here)s", str(here))
    return re.sub(r"^postgres://[^/]+/[^?]+", f"postgres://{postgresql.user}@127.0.0.1:{postgresql.port}/{database}",
                  uri)


def test_the_production_example_serves_an_archive_with_attachments_across_a_postgresql_restart(
        tmp_path, postgresql):
    database = postgresql.create_database()
    uri = production_uri(postgresql, database, tmp_path)
    factory, db_options = zodburi.resolve_uri(uri)
    assert type(factory()).__name__ == "RelStorage" and db_options["cache_size"] == 20000

    app = main({}, **{"zodbconn.uri": uri, "kittypyr.base_url": "http://localhost/"})
    try:
        with prepare(registry=app.registry) as env:
            mailing_list = ensure_mailing_list(env["root"], LIST)
            archive_message(mailing_list, make_message(
                message_id="<pg1@example.org>", subject="Readings", sender=("Pat", "pat@example.org"),
                date=datetime(2024, 5, 1, tzinfo=timezone.utc),
                body=multipart("mixed", text_part("The barometer readings.\n"),
                               attachment(b"1013 hPa\n" * 2000, "text/plain", "readings.txt"))))
            transaction.commit()
        browser = TestApp(app)
        message = f"/list/{LIST}/message/{message_id_hash('<pg1@example.org>')}/"
        assert "barometer readings" in browser.get(message).text
        assert browser.get(f"{message}attachment/2/readings.txt").body == b"1013 hPa\n" * 2000

        postgresql.restart()
        # The process's connections to the old server are gone; the next
        # request opens new ones and answers as before.
        assert "barometer readings" in browser.get(message).text
        assert "Readings" in browser.get("/search", params={"q": "barometer", "mlist": LIST}).text
        assert browser.get(f"{message}attachment/2/readings.txt").body == b"1013 hPa\n" * 2000
    finally:
        app.registry._zodb_databases[""].close()

    # Another process, on another host say, with a blob cache of its own:
    # the attachment comes from the database.
    (tmp_path / "other").mkdir()
    other = main({}, **{"zodbconn.uri": production_uri(postgresql, database, tmp_path / "other"),
                        "kittypyr.base_url": "http://localhost/"})
    try:
        assert TestApp(other).get(f"{message}attachment/2/readings.txt").body == b"1013 hPa\n" * 2000
    finally:
        other.registry._zodb_databases[""].close()


def test_while_postgresql_is_down_pages_and_the_archiver_answer_503_and_then_serve_again(tmp_path, postgresql):
    # A restart of PostgreSQL: the requests in that moment are told to come
    # back (503: readers and Mailman's plugin send them again), not 500.
    uri = postgresql.uri(postgresql.create_database(), tmp_path / "blob-cache")
    app = main({}, **{"zodbconn.uri": uri, "kittypyr.base_url": "http://localhost/",
                      "kittypyr.archiver_key": "pg-key", "retry.attempts": "2"})
    browser = TestApp(app)
    mail = make_message(message_id="<pgdown@example.org>", subject="While down", body="Later.\n")

    def archive():
        return browser.post("/api/mailman/archive", {"mlist": LIST}, headers={"Authorization": "Token pg-key"},
                            upload_files=[("message", "message.txt", mail)], status="*")

    try:
        with prepare(registry=app.registry) as env:
            ensure_mailing_list(env["root"], LIST)
            transaction.commit()
        assert browser.get(f"/list/{LIST}/").status_int == 200
        postgresql.stop()
        try:
            page = browser.get(f"/list/{LIST}/", status=503)
            assert page.headers["Retry-After"] and "try again" in page.text
            answer = archive()
            assert answer.status_int == 503 and "try again" in answer.json["error"]
        finally:
            postgresql.start()
        assert archive().status_int == 200
        assert "While down" in browser.get(f"/list/{LIST}/message/{message_id_hash('<pgdown@example.org>')}/").text
    finally:
        try:
            app.registry._zodb_databases[""].close()
        except KeyError:
            # ZODB's DB.close stops at a connection whose open failed
            # while PostgreSQL was down (its transaction manager never had
            # it); what is left open goes with the test process.
            pass


def test_postgresql_restarts_under_archiver_and_page_requests_answer_200_or_503_and_lose_no_mail(
        tmp_path, postgresql):
    # pserve on RelStorage as production runs it, while PostgreSQL restarts
    # three times and is stopped twice for a moment.
    database = postgresql.create_database()

    def restarts():
        for pause in (None, 0.2, None, 1.0, None):
            time.sleep(1.5)
            if pause is None:
                postgresql.restart()
            else:
                postgresql.stop()
                time.sleep(pause)
                postgresql.start()

    assert_faults_answered_503_and_no_mail_lost(
        tmp_path, lambda folder: postgresql.uri(database, folder / "blob-cache"), restarts, LIST)
