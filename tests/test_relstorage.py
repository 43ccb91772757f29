"""RelStorage on PostgreSQL, as production.ini shows it: pages, attachments, a server restart.

The archive, search and concurrency tests that run on ZEO run on RelStorage
too (the ``shared_storage`` fixture); these are what only RelStorage has:
its URI, blobs kept in the database, and PostgreSQL going away.
"""

import re
from datetime import datetime, timezone
from pathlib import Path

import transaction
import zodburi
from pyramid.scripting import prepare
from webtest import TestApp

from kittypyr import main
from kittypyr.archiving import archive_message, ensure_mailing_list
from kittypyr.msgid import message_id_hash
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
