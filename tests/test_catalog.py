"""The catalog stays in step with the tree: whole subtrees, moves, rebuilds."""

from datetime import datetime, timedelta, timezone

import transaction
from repoze.catalog.indexes.field import CatalogFieldIndex
from repoze.catalog.query import Contains, Eq

from kittypyr.archiving import archive_message, ensure_mailing_list
from kittypyr.catalog import INDEX_FACTORIES_KEY, reindex_archive, search, sync_catalog
from kittypyr.msgid import message_id_hash
from kittypyr.resources import MailingList
from tests.mailbuilder import make_message

START = datetime(2018, 2, 27, 23, 30, tzinfo=timezone.utc)


def message(n, reply_to=None, body=None, sender="ann@example.org"):
    return make_message(
        message_id=f"<cat{n}@example.org>",
        subject=f"Subject {n}",
        sender=("Ann Author", sender),
        date=START + timedelta(hours=n),
        in_reply_to=f"<cat{reply_to}@example.org>" if reply_to is not None else None,
        body=body or f"words of message {n}\n",
    )


def paths(archive, query):
    total, resources = search(archive, query)
    return total, sorted(r.__name__ for r in resources)


def test_adding_a_filled_list_indexes_its_whole_subtree(archive):
    detached = MailingList("dev@example.org")
    for n in range(3):
        archive_message(detached, message(n, reply_to=n - 1 if n else None))
    # Not in the archive yet: nothing is catalogued.
    assert len(archive.document_map.docid_to_address) == 0

    archive.lists.add("dev@example.org", detached)
    total, names = paths(archive, Eq("list", "dev@example.org") & Eq("kind", "message"))
    assert total == 3
    assert names == sorted(message_id_hash(f"<cat{n}@example.org>") for n in range(3))
    assert paths(archive, Eq("kind", "thread"))[0] == 1
    assert paths(archive, Contains("text", "words"))[0] == 3

    archive.lists.remove("dev@example.org")
    assert len(archive.document_map.docid_to_address) == 0
    assert paths(archive, Contains("text", "words"))[0] == 0


def test_found_in_the_same_transaction_and_by_every_index(archive):
    mailing_list = ensure_mailing_list(archive, "dev@example.org")
    archive_message(mailing_list, message(1, body="the zebra crossing is broken\n", sender="Bob@Example.ORG"))
    assert paths(archive, Contains("text", "zebra"))[0] == 1
    assert paths(archive, Eq("sender", "bob@example.org"))[0] == 1
    assert paths(archive, Eq("month", "2018-02"))[0] == 2  # the message and its thread
    assert paths(archive, Eq("has_attachment", False))[0] == 1
    assert paths(archive, Eq("thread", message_id_hash("<cat1@example.org>")))[0] == 2


def test_quotes_patches_and_signatures_are_in_the_text_index(archive):
    mailing_list = ensure_mailing_list(archive, "dev@example.org")
    archive_message(mailing_list, message(1, body="original thought about giraffes\n"))
    reply = (
        "On Tue, Ann Author wrote:\n> original thought about giraffes\n\n"
        "I agree about elephants.\n\n"
        "diff --git a/x.c b/x.c\n--- a/x.c\n+++ b/x.c\n@@ -1 +1 @@\n-old_hippo\n+new_hippo\n\n"
        "-- \nBob, signing off with walruses\n"
    )
    archive_message(mailing_list, message(2, reply_to=1, body=reply))
    both = sorted([message_id_hash("<cat1@example.org>"), message_id_hash("<cat2@example.org>")])
    assert sorted(paths(archive, Contains("text", "giraffes"))[1]) == both
    assert paths(archive, Contains("text", "elephants"))[1] == [message_id_hash("<cat2@example.org>")]
    assert paths(archive, Contains("text", "new_hippo"))[1] == [message_id_hash("<cat2@example.org>")]
    assert paths(archive, Contains("text", "walruses"))[1] == [message_id_hash("<cat2@example.org>")]


def test_thread_moves_are_reindexed(archive):
    mailing_list = ensure_mailing_list(archive, "dev@example.org")
    archive_message(mailing_list, message(2, reply_to=1))
    orphan_thread = message_id_hash("<cat2@example.org>")
    assert paths(archive, Eq("thread", orphan_thread))[0] == 2
    archive_message(mailing_list, message(1))
    root = message_id_hash("<cat1@example.org>")
    assert paths(archive, Eq("thread", orphan_thread))[0] == 0
    assert paths(archive, Eq("thread", root))[0] == 3  # two messages and the thread


def test_reindex_rebuilds_and_sync_drops_stale_indexes(config, archive):
    mailing_list = ensure_mailing_list(archive, "dev@example.org")
    for n in range(4):
        archive_message(mailing_list, message(n))
    transaction.commit()
    archive.catalog["text"].clear()
    assert paths(archive, Contains("text", "words"))[0] == 0
    assert reindex_archive(archive, config.registry) == 8
    assert paths(archive, Contains("text", "words"))[0] == 4

    config.registry[INDEX_FACTORIES_KEY] = {"subject": lambda: CatalogFieldIndex("subject")}
    assert sync_catalog(archive, config.registry) == ["subject"]
    assert paths(archive, Eq("subject", "Subject 3"))[0] == 2  # the message and its thread
    del config.registry[INDEX_FACTORIES_KEY]
    sync_catalog(archive, config.registry)
    assert "subject" not in archive.catalog


def test_a_date_sort_newest_first_orders_messages_of_one_second_alike_however_deep():
    # Two pages of a search by date could repeat some messages of one
    # second and skip others: the catalog's sort newest first put them in
    # one order for a page near the front and the other past 300 deep.
    from kittypyr.catalog import SparseFieldIndex

    class Dated:
        def __init__(self, moment):
            self.moment = moment

    index = SparseFieldIndex(lambda obj, default: obj.moment)
    for docid in range(1, 5001):
        index.index_doc(docid, Dated(1_600_000_000 + docid // 7))
    docids = index.family.IF.TreeSet(range(1, 5001))
    expected = sorted(range(1, 5001), key=lambda docid: (docid // 7, docid), reverse=True)
    for limit in (20, 299, 300, 420, 1000, 5000):
        assert list(index.sort(docids, reverse=True, limit=limit)) == expected[:limit], limit
    assert list(index.sort(docids, reverse=True)) == expected
