"""Messages and threads keep their catalog docid: archiving into a large list writes no bucket of the path map."""

from datetime import datetime, timedelta, timezone

import transaction
from pyramid.scripting import prepare
from pyramid.traversal import resource_path
from webtest import TestApp

from kittypyr import moderation
from kittypyr.archiving import archive_message, ensure_mailing_list
from kittypyr.catalog import docid_of, reindex_archive
from kittypyr.msgid import message_id_hash
from kittypyr.security import User
from tests.mailbuilder import make_message
from tests.test_app import app  # noqa: F401 (the fixture: a fresh app on its own storage)

LIST = "big@lists.example.org"
START = datetime(2020, 1, 1, tzinfo=timezone.utc)
HELD = 1500
BATCH = 100


def _archive(mailing_list, registry, prefix, count, word):
    for n in range(count):
        archive_message(mailing_list, make_message(
            message_id=f"<{prefix}{n}@example.org>", subject=f"Note {n}", sender=("Ann", "ann@example.org"),
            date=START + timedelta(minutes=n), body=f"A note about {word}, number {n}.\n"), registry=registry)


def _written_buckets(tree, serial):
    """The buckets of ``tree`` whose last write is the transaction ``serial``."""
    written, bucket = 0, tree._firstbucket
    while bucket is not None:
        written += bucket._p_serial == serial
        bucket = bucket._next
    return written


def test_a_batch_into_a_large_list_writes_no_path_map_bucket_and_every_message_is_found(app):
    with prepare(registry=app.registry) as env:
        archive = env["root"]
        mailing_list = ensure_mailing_list(archive, LIST)
        _archive(mailing_list, app.registry, "held", HELD, "herons")
        transaction.commit()
        _archive(mailing_list, app.registry, "new", BATCH, "bitterns")
        transaction.commit()
        serial = archive._p_jar.db().lastTransaction()
        paths = archive.document_map.address_to_docid
        # The map from path to docid had a bucket rewritten for nearly
        # every message (and thread) a batch added to a large list.
        assert _written_buckets(paths, serial) == 0
        new = [mailing_list.messages[message_id_hash(f"<new{n}@example.org>")] for n in range(BATCH)]
        docids = [docid_of(archive, message) for message in new]
        assert None not in docids and len(set(docids)) == BATCH
        assert [archive.document_map.address_for_docid(docid) for docid in docids] == \
            [resource_path(message) for message in new]
        moderation.delete_messages(mailing_list, [new[0].__name__], User("mod@example.org", "Mod"),
                                   registry=app.registry)
        transaction.commit()
        assert archive.document_map.address_for_docid(docids[0]) is None
    browser = TestApp(app)
    assert browser.get("/api/search?q=bitterns").json["count"] == BATCH - 1
    assert browser.get("/api/search?q=herons").json["count"] == HELD
    page = browser.get(f"/list/{LIST}/message/{new[1].__name__}/")
    assert "A note about bitterns, number 1." in page.text


def test_a_rebuilt_catalog_finds_every_message_again(app):
    with prepare(registry=app.registry) as env:
        archive = env["root"]
        mailing_list = ensure_mailing_list(archive, LIST)
        _archive(mailing_list, app.registry, "m", 30, "egrets")
        transaction.commit()
        reindex_archive(archive, app.registry, commit=transaction.commit)
        for message in mailing_list.messages.values():
            docid = docid_of(archive, message)
            assert archive.document_map.address_for_docid(docid) == resource_path(message)
        transaction.commit()
    browser = TestApp(app)
    assert browser.get("/api/search?q=egrets").json["count"] == 30
