"""The keyword indexes (``is:``, ``file:``, tags) keep no record of their own for each message."""

import transaction
from BTrees.IOBTree import IOBTree
from BTrees.Length import Length
from BTrees.OOBTree import OOBTree
from pyramid.scripting import prepare
from repoze.catalog.indexes.keyword import CatalogKeywordIndex
from ZODB.utils import get_pickle_metadata

from kittypyr import moderation
from kittypyr.archiving import archive_message, ensure_mailing_list
from kittypyr.bootstrap import EVOLVE_STEPS, ROOT_KEY, bootstrap_archive, compact_keyword_entries
from kittypyr.catalog import COMPACT_KEYWORD_INDEXES, CompactKeywordIndex
from kittypyr.msgid import message_id_hash
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


def test_archiving_a_patch_and_a_reply_writes_no_keyword_set_and_is_and_file_find_them(tmp_path):
    app = make_app(tmp_path)
    try:
        _archive_one(app, mail(1, "The first message.\n"))
        written = _archive_one(app, mail(2, PATCH, subject="[PATCH] smp"))
        written += _archive_one(app, mail(3, SIMILAR_PATCH, subject="Re: [PATCH] smp", reply_to=2))
        # zope.index's keyword index wrote an OO.Set record for each
        # message's keywords ("patch", "reply", "first", its files).
        assert "BTrees.OOBTree.OOSet" not in written
        assert found(app, "is:patch")[0] == [2, 3]
        assert found(app, "is:reply")[0] == [3]
        assert found(app, "is:first")[0] == [1, 2]
        assert found(app, "file:smp.c")[0] == [2]
        assert found(app, "file:arch/mips/kernel")[0] == [2, 3]
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
        with prepare(registry=app.registry) as env:
            mailing_list = env["root"].lists[DEV]
            moderation.delete_messages(mailing_list, [message_id_hash("<r5@example.org>")], MOD,
                                       registry=app.registry)
            transaction.commit()
        assert found(app, "is:patch")[0] == []
        assert found(app, "file:smpboot.c")[0] == []
        assert found(app, "is:first")[0] == [4]
    finally:
        app.registry._zodb_databases[""].close()


def _as_older_kittypyr_made_it(index):
    """``index``'s entries in a CatalogKeywordIndex, each document's keywords an OO.Set."""
    old = CatalogKeywordIndex(index.discriminator)
    old._not_indexed = index._not_indexed
    old._fwd_index = OOBTree(index._fwd_index)
    old._rev_index = IOBTree({docid: old.family.OO.Set(words) for docid, words in index._rev_index.items()})
    old._num_docs = Length(index._num_docs())
    return old


def test_an_archive_whose_keyword_indexes_hold_sets_is_upgraded_without_reading_a_message(tmp_path):
    app = make_app(tmp_path)
    try:
        _archive_one(app, mail(2, PATCH, subject="[PATCH] smp"))
        _archive_one(app, mail(6, SIMILAR_PATCH, subject="smpboot"))
        with prepare(registry=app.registry) as env:
            root = env["root"]._p_jar.root()
            catalog = root[ROOT_KEY].catalog
            for name in COMPACT_KEYWORD_INDEXES:
                catalog[name] = _as_older_kittypyr_made_it(catalog[name])
            root[ROOT_KEY].schema_version = EVOLVE_STEPS.index(compact_keyword_entries)
            transaction.commit()
            archive = bootstrap_archive(root, app.registry)
            transaction.commit()
            assert archive.schema_version == len(EVOLVE_STEPS)
            assert all(type(archive.catalog[name]) is CompactKeywordIndex for name in COMPACT_KEYWORD_INDEXES)
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
        assert found(app, "is:reply")[0] == [7]
        assert found(app, "file:smpboot.c")[0] == [7]
    finally:
        app.registry._zodb_databases[""].close()
