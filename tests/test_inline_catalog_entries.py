"""Catalog entries a message or a thread has alone or with a few live in the bucket that maps them.

The keyword indexes (``is:``, ``file:``, tags) kept each document's
keywords, and the thread and date indexes each small thread's or shared
date's docids, in records of their own: one or more records written for
every message, a fifth of a large archive's records.
"""

import pytest
import transaction
from BTrees.IOBTree import IOBTree
from BTrees.Length import Length
from BTrees.OOBTree import OOBTree
from pyramid.scripting import prepare
from repoze.catalog.indexes.keyword import CatalogKeywordIndex
from ZODB.utils import get_pickle_metadata

from kittypyr import moderation
from kittypyr.archiving import archive_message, ensure_mailing_list
from kittypyr.bootstrap import EVOLVE_STEPS, ROOT_KEY, bootstrap_archive, inline_small_catalog_entries
from kittypyr.catalog import INLINE_ENTRY_INDEXES
from kittypyr.msgid import message_id_hash
from kittypyr.queries import newest_messages
from kittypyr.security import User
from tests.test_app import make_app
from tests.test_search_recall import DEV, PATCH, SIMILAR_PATCH, found, mail

MOD = User("mod@example.org", "Mod")


def _classes_written(archive):
    """Class names of the records the archive's last transaction wrote."""
    storage = archive._p_jar.db().storage
    serial = storage.lastTransaction()
    names = []
    for transaction_record in storage.iterator(serial, serial):
        for record in transaction_record:
            names.append("%s.%s" % get_pickle_metadata(record.data))
    return names


def _archive_one(app, raw):
    with prepare(registry=app.registry) as env:
        archive = env["root"]
        archive_message(ensure_mailing_list(archive, DEV), raw, registry=app.registry)
        transaction.commit()
        return _classes_written(archive)


def _delete_one(app, n):
    """Delete the message ``mail(n, ...)`` made, as a moderator does."""
    with prepare(registry=app.registry) as env:
        moderation.delete_messages(env["root"].lists[DEV], [message_id_hash(f"<r{n}@example.org>")], MOD,
                                   registry=app.registry)
        transaction.commit()


def test_archiving_a_patch_and_a_reply_writes_no_set_of_entries_and_is_file_and_thread_find_them(tmp_path):
    app = make_app(tmp_path)
    try:
        _archive_one(app, mail(1, "The first message.\n"))
        written = _archive_one(app, mail(2, PATCH, subject="[PATCH] smp"))
        written += _archive_one(app, mail(3, SIMILAR_PATCH, subject="Re: [PATCH] smp", reply_to=2))
        # Each message wrote an OO.Set of its keywords ("patch", "reply",
        # "first", its files).
        assert "BTrees.OOBTree.OOSet" not in written
        assert found(app, "is:patch")[0] == [2, 3]
        assert found(app, "is:reply")[0] == [3]
        assert found(app, "is:first")[0] == [1, 2]
        assert found(app, "file:smp.c")[0] == [2]
        assert found(app, "file:arch/mips/kernel")[0] == [2, 3]
        with prepare(registry=app.registry) as env:
            mailing_list = env["root"].lists[DEV]
            assert [m.message_id for m in newest_messages(mailing_list, 2)] == ["r3@example.org", "r2@example.org"]
            thread = mailing_list.threads[message_id_hash("<r2@example.org>")]
            # A new thread had a set of its docids, and one of the docids
            # sharing its date (the thread's and its first message's).
            catalog = env["root"].catalog
            assert type(catalog["thread"]._fwd_index[thread.__name__]) is tuple
            assert type(catalog["date"]._fwd_index[int(thread.date_started.timestamp())]) is tuple
            assert [name for name, _ in thread.walk()] == [message_id_hash("<r2@example.org>"),
                                                             message_id_hash("<r3@example.org>")]
    finally:
        app.registry._zodb_databases[""].close()


def test_a_thread_past_a_few_messages_gets_a_set_and_its_messages_are_all_found(tmp_path):
    app = make_app(tmp_path)
    try:
        _archive_one(app, mail(20, "Start.\n", subject="Long"))
        for n in range(21, 35):
            _archive_one(app, mail(n, f"Reply {n}.\n", subject="Re: Long", reply_to=n - 1))
        with prepare(registry=app.registry) as env:
            mailing_list = env["root"].lists[DEV]
            newest = [m.message_id for m in newest_messages(mailing_list, 20)]
            assert newest == [f"r{n}@example.org" for n in range(34, 19, -1)]
            moderation.delete_messages(mailing_list, [message_id_hash(f"<r{n}@example.org>") for n in range(25, 35)],
                                       MOD, registry=app.registry)
            transaction.commit()
            newest = [m.message_id for m in newest_messages(mailing_list, 20)]
            assert newest == [f"r{n}@example.org" for n in range(24, 19, -1)]
    finally:
        app.registry._zodb_databases[""].close()


def test_a_message_whose_parent_comes_later_or_that_is_deleted_leaves_the_keywords_it_no_longer_has(tmp_path):
    app = make_app(tmp_path)
    try:
        _archive_one(app, mail(5, SIMILAR_PATCH, subject="Re: smpboot", reply_to=4))
        assert found(app, "is:first")[0] == [5]
        _archive_one(app, mail(4, "Where is smpboot?\n", subject="smpboot"))
        assert found(app, "is:first")[0] == [4]
        assert found(app, "is:reply")[0] == [5]
        assert found(app, "file:smpboot.c")[0] == [5]
        _delete_one(app, 5)
        assert found(app, "is:patch")[0] == []
        assert found(app, "file:smpboot.c")[0] == []
        assert found(app, "is:first")[0] == [4]
    finally:
        app.registry._zodb_databases[""].close()


def test_a_reply_whose_thread_loses_its_first_message_is_found_as_first(tmp_path):
    app = make_app(tmp_path)
    try:
        _archive_one(app, mail(4, "Where is smpboot?\n", subject="smpboot"))
        _archive_one(app, mail(5, SIMILAR_PATCH, subject="Re: smpboot", reply_to=4))
        _archive_one(app, mail(6, "And smp.c?\n", subject="Re: smpboot", reply_to=5))
        assert found(app, "is:first")[0] == [4]
        _delete_one(app, 4)
        # Its reply opens the thread now; the reply to that reply does not.
        assert found(app, "is:first")[0] == [5]
        assert found(app, "is:reply")[0] == [5, 6]
    finally:
        app.registry._zodb_databases[""].close()


def _as_older_kittypyr_made_it(index, older_class):
    """``index``'s entries in an ``older_class``, each document's keywords or each value's docids a set."""
    old = older_class(index.discriminator)
    old._not_indexed = index._not_indexed
    if older_class is CatalogKeywordIndex:
        old._fwd_index = OOBTree(index._fwd_index)
        old._rev_index = IOBTree({docid: old.family.OO.Set(words) for docid, words in index._rev_index.items()})
    else:
        old._fwd_index = OOBTree({value: old.family.IF.TreeSet(index.documents_with(value))
                                  for value in index._fwd_index.keys()})
        old._rev_index = IOBTree(index._rev_index)
    old._num_docs = Length(index._num_docs())
    return old


def _archive_a_patch_and_a_thread(app):
    """A patch alone, then a similar one and a reply to it: the archives the upgrade tests start from."""
    _archive_one(app, mail(2, PATCH, subject="[PATCH] smp"))
    _archive_one(app, mail(6, SIMILAR_PATCH, subject="smpboot"))
    _archive_one(app, mail(8, "Which one?\n", subject="Re: smpboot", reply_to=6))


def _upgraded_from(root, registry, step):
    """The archive under ``root``, made as it was before evolve ``step`` and upgraded from there to the last."""
    root[ROOT_KEY].schema_version = EVOLVE_STEPS.index(step)
    transaction.commit()
    archive = bootstrap_archive(root, registry)
    transaction.commit()
    assert archive.schema_version == len(EVOLVE_STEPS)
    return archive


def test_an_archive_whose_indexes_hold_sets_is_upgraded_without_reading_a_message(tmp_path):
    app = make_app(tmp_path)
    try:
        _archive_a_patch_and_a_thread(app)
        with prepare(registry=app.registry) as env:
            root = env["root"]._p_jar.root()
            catalog = root[ROOT_KEY].catalog
            for name, (older_class, _) in INLINE_ENTRY_INDEXES.items():
                catalog[name] = _as_older_kittypyr_made_it(catalog[name], older_class)
            archive = _upgraded_from(root, app.registry, inline_small_catalog_entries)
            assert all(type(archive.catalog[name]) is index_class
                       for name, (_, index_class) in INLINE_ENTRY_INDEXES.items())
            assert [m.message_id for m in newest_messages(archive.lists[DEV], 3)] == [
                "r8@example.org", "r6@example.org", "r2@example.org"]
        assert found(app, "is:patch")[0] == [2, 6]
        assert found(app, "file:arch/mips/kernel")[0] == [2, 6]
        # An entry stored as a set is read as one when its message leaves.
        with prepare(registry=app.registry) as env:
            moderation.delete_messages(env["root"].lists[DEV], [message_id_hash("<r6@example.org>")], MOD,
                                       registry=app.registry)
            transaction.commit()
        assert found(app, "is:patch")[0] == [2]
        assert found(app, "file:smpboot.c")[0] == []
        written = _archive_one(app, mail(7, SIMILAR_PATCH, subject="Re: [PATCH] smp", reply_to=2))
        assert "BTrees.OOBTree.OOSet" not in written
        assert found(app, "is:reply")[0] == [7, 8]
        assert found(app, "file:smpboot.c")[0] == [7]
    finally:
        app.registry._zodb_databases[""].close()


class Dated:
    def __init__(self, when):
        self.when = when


def test_two_writers_of_one_bucket_of_dates_are_merged_when_one_date_gains_a_second_message(tmp_path):
    # A date held by one message gains a second one while another process
    # files a message under a new date in the same bucket: BTrees merge the
    # two, comparing the date's entry before and after. Kept as an int, the
    # entry did not compare with the tuple it became (TypeError, logged by
    # ZEO, and a retry).
    import ZODB
    from ZODB.FileStorage import FileStorage

    from kittypyr.catalog import SparseFieldIndex

    db = ZODB.DB(FileStorage(str(tmp_path / "Data.fs")))
    try:
        with db.transaction() as connection:
            index = connection.root()["date"] = SparseFieldIndex("when")
            for docid in range(1, 21):
                index.index_doc(docid, Dated(1_000_000 + 10 * docid))
        managers = [transaction.TransactionManager(), transaction.TransactionManager()]
        sharing, apart = [db.open(transaction_manager=manager) for manager in managers]
        sharing.root()["date"].index_doc(100, Dated(1_000_050))
        apart.root()["date"].index_doc(101, Dated(1_000_055))
        managers[0].commit()
        managers[1].commit()
        with db.transaction() as connection:
            index = connection.root()["date"]
            assert sorted(index.documents_with(1_000_050)) == [5, 100]
            assert list(index.documents_with(1_000_055)) == [101]
            assert list(index.documents_with(1_000_010)) == [1]
        sharing.close()
        apart.close()
    finally:
        db.close()


@pytest.mark.parametrize("values", [20, 500])  # the tree's one bucket in its own record, or buckets of their own
def test_two_writers_of_one_bucket_are_merged_when_a_value_outgrows_its_inline_docids(tmp_path, caplog, values):
    # A thread's ninth message turns its entry from a tuple into a set of
    # its own while another process files a message under another thread of
    # the same bucket. BTrees' own merge compared the entry's tuple with the
    # reference to the set, which refuses to be compared: an error logged
    # with its traceback, and a retry.
    import logging

    import ZODB
    from ZODB.FileStorage import FileStorage

    from kittypyr.catalog import SparseFieldIndex

    db = ZODB.DB(FileStorage(str(tmp_path / "Data.fs")))
    try:
        with db.transaction() as connection:
            index = connection.root()["thread"] = SparseFieldIndex("when")
            for docid in range(1, 9):
                index.index_doc(docid, Dated(7))  # a thread of eight
            for docid in range(9, values + 1):
                index.index_doc(docid, Dated(docid))
        managers = [transaction.TransactionManager(), transaction.TransactionManager()]
        growing, apart = [db.open(transaction_manager=manager) for manager in managers]
        growing.root()["thread"].index_doc(100, Dated(7))
        apart.root()["thread"].index_doc(101, Dated(12))
        with caplog.at_level(logging.ERROR):
            managers[0].commit()
            managers[1].commit()
        assert not [record for record in caplog.records if record.levelno >= logging.ERROR]
        with db.transaction() as connection:
            index = connection.root()["thread"]
            assert sorted(index.documents_with(7)) == [1, 2, 3, 4, 5, 6, 7, 8, 100]
            assert sorted(index.documents_with(12)) == [12, 101]
        growing.close()
        apart.close()
    finally:
        db.close()


def test_an_archive_whose_sparse_indexes_hold_plain_trees_is_upgraded(tmp_path):
    from kittypyr.bootstrap import merge_sparse_entries
    from kittypyr.catalog import SparseFieldIndex
    from kittypyr.merging import Entries

    app = make_app(tmp_path)
    try:
        _archive_a_patch_and_a_thread(app)
        with prepare(registry=app.registry) as env:
            root = env["root"]._p_jar.root()
            sparse = {name: index for name, index in root[ROOT_KEY].catalog.items()
                      if isinstance(index, SparseFieldIndex)}
            assert sorted(sparse) == ["date", "last_active", "thread"]
            held = {}
            for name, index in sparse.items():
                held[name] = list(index._fwd_index.items())
                index._fwd_index = OOBTree(index._fwd_index)  # as kittypyr made them before
            archive = _upgraded_from(root, app.registry, merge_sparse_entries)
            for name, index in sparse.items():
                assert type(archive.catalog[name]._fwd_index) is Entries
                assert list(archive.catalog[name]._fwd_index.items()) == held[name]
            assert [m.message_id for m in newest_messages(archive.lists[DEV], 3)] == [
                "r8@example.org", "r6@example.org", "r2@example.org"]
    finally:
        app.registry._zodb_databases[""].close()
