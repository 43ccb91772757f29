"""Pages that may show any list cost no walk over the lists while none of them can be stale.

Freshness against Mailman (a policy changed there closes the list within
the TTL) is tested with the real Mailman core in test_mailman.py.
"""

from datetime import datetime, timedelta, timezone

import transaction
from pyramid.scripting import prepare
from webtest import TestApp

from kittypyr import mailman, main, standalone
from kittypyr.archiving import ensure_mailing_list
from kittypyr.mailman import apply_list_details
from tests.functional import free_port

LISTS = [f"list{n}@lists.example.org" for n in range(300)]


def lists_loaded(database):
    """How many MailingList records the database's connections hold loaded (not ghosts)."""
    return sum(1 for entry in database.cacheExtremeDetail()
               if entry["klass"] == "kittypyr.resources.mailinglist.MailingList" and entry["state"] is not None)


def site_of_many_lists(tmp_path, monkeypatch, synced_ago=()):
    """An app whose lists were all synced with Mailman now (``synced_ago``: address -> seconds before)."""
    (tmp_path / "blobs").mkdir()
    # Mailman is configured and taken to answer (nothing listens there:
    # the tests show when it is asked).
    monkeypatch.setattr(standalone.presence, "available", lambda registry: True)
    app = main({}, **{"zodbconn.uri": f"file://{tmp_path}/Data.fs?blobstorage_dir={tmp_path}/blobs",
                      "kittypyr.base_url": "http://localhost/",
                      "kittypyr.mailman_url": f"http://127.0.0.1:{free_port()}",
                      "kittypyr.mailman_sync_ttl": "300"})
    with prepare(registry=app.registry) as env:
        for address in LISTS:
            mailing_list = ensure_mailing_list(env["root"], address)
            apply_list_details(mailing_list, {"display_name": address, "description": "",
                                              "archive_policy": "private"})
            if address in synced_ago:
                mailing_list.synced_at -= timedelta(seconds=synced_ago[address])
        transaction.commit()
    return app


def test_a_page_on_a_site_of_many_lists_loads_none_of_them_while_none_can_be_stale(tmp_path, monkeypatch):
    app = site_of_many_lists(tmp_path, monkeypatch)
    database = app.registry._zodb_databases[""]
    try:
        browser = TestApp(app)
        # The first page after the start walks over the lists once ...
        database.cacheMinimize()
        assert "How to search" in browser.get("/search-help").text
        assert lists_loaded(database) == len(LISTS)
        # ... the next ones read none of them.
        for _ in range(3):
            database.cacheMinimize()
            assert "How to search" in browser.get("/search-help").text
            assert lists_loaded(database) == 0
    finally:
        database.close()


def test_the_lists_are_read_again_once_the_first_of_them_can_be_stale(tmp_path, monkeypatch):
    # The clock moves only when the test moves it: on a busy machine the
    # setup alone may take longer than the second this test is about.
    clock = [datetime.now(timezone.utc)]
    monkeypatch.setattr(mailman, "_now", lambda: clock[0])
    # One list is a second short of its time-to-live.
    app = site_of_many_lists(tmp_path, monkeypatch, synced_ago={LISTS[7]: 299})
    database = app.registry._zodb_databases[""]
    try:
        browser = TestApp(app)
        browser.get("/search-help")
        database.cacheMinimize()
        browser.get("/search-help")
        assert lists_loaded(database) == 0
        clock[0] += timedelta(seconds=1.2)
        database.cacheMinimize()
        browser.get("/search-help")
        assert lists_loaded(database) == len(LISTS)
    finally:
        database.close()
