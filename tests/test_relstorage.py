"""RelStorage on PostgreSQL, as production.ini shows it: pages, attachments, a server restart.

The archive, search and concurrency tests that run on ZEO run on RelStorage
too (the ``shared_storage`` fixture); these are what only RelStorage has:
its URI, blobs kept in the database, and PostgreSQL going away.
"""

import re
import threading
import time
from datetime import datetime, timezone
from pathlib import Path

import requests
import transaction
import zodburi
from pyramid.scripting import prepare
from webtest import TestApp

from kittypyr import main
from kittypyr.archiving import archive_message, ensure_mailing_list
from kittypyr.msgid import message_id_hash
from tests.functional import free_port, served, write_config
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
        tmp_path, lambda folder: postgresql.uri(database, folder / "blob-cache"), restarts)


def assert_faults_answered_503_and_no_mail_lost(tmp_path, uri_of, faults):
    """Mail posted by four senders and pages read by three readers from pserve while ``faults()`` runs.

    Each answer is 200 or "come back" (503 with Retry-After), never 500; a
    sender sends its mail again until it is answered 200, as Mailman does;
    each mail answered 200 is stored, once, as another process finds
    afterwards. ``uri_of(folder)`` is the storage's URI for a process there.
    """
    port = free_port()
    web = tmp_path / "web"
    web.mkdir()
    config = write_config(web, uri=uri_of(web), port=port, extra="kittypyr.archiver_key = fault-key")
    answers = []  # (what, status, Retry-After)
    stored = []  # Message-IDs answered 200
    stop = threading.Event()

    def post(base, message_id):
        mail = make_message(message_id=f"<{message_id}@example.org>", subject=f"Mail {message_id}",
                            body="Sent while the storage restarts.\n")
        answer = requests.post(f"{base}/api/mailman/archive", data={"mlist": LIST},
                               files={"message": ("message.txt", mail)},
                               headers={"Authorization": "Token fault-key"}, timeout=60)
        answers.append(("archive", answer.status_code, answer.headers.get("Retry-After")))
        if answer.status_code == 200:
            stored.append(message_id)
        return answer.status_code

    def sender(base, number):
        sent = 0
        while not stop.is_set():
            if post(base, f"restart-{number}-{sent}") == 200:
                sent += 1
            else:
                time.sleep(0.05)  # Mailman keeps the mail and sends it again

    def reader(base):
        while not stop.is_set():
            for path in (f"/list/{LIST}/", "/", f"/search?q=restarts&mlist={LIST}"):
                answer = requests.get(base + path, timeout=60)
                answers.append((path, answer.status_code, answer.headers.get("Retry-After")))

    with served(config, port) as base:
        assert post(base, "restart-first") == 200
        clients = [threading.Thread(target=sender, args=(base, number)) for number in range(4)]
        clients += [threading.Thread(target=reader, args=(base,)) for _ in range(3)]
        for client in clients:
            client.start()
        try:
            faults()
            time.sleep(2)
        finally:
            stop.set()
            for client in clients:
                client.join(timeout=120)

    assert [(what, status) for what, status, retry_after in answers
            if not (status == 200 or (status == 503 and retry_after))] == []
    assert ("archive", 503) in {(what, status) for what, status, _ in answers}  # the faults were felt
    assert len(stored) == len(set(stored)) > 20

    port = free_port()
    other = tmp_path / "other"
    other.mkdir()
    with served(write_config(other, uri=uri_of(other), port=port), port) as base:
        missing = [message_id for message_id in stored
                   if f"Mail {message_id}" not in requests.get(
                       f"{base}/list/{LIST}/message/{message_id_hash(f'<{message_id}@example.org>')}/",
                       timeout=60).text]
        assert missing == []
        assert f"{len(stored)} messages" in requests.get(f"{base}/list/{LIST}/", timeout=60).text
