"""Postings to large words wait in memory until their transaction commits, and nothing is lost or kept by mistake.

An import batch posts to the same large words thousands of times; their
postings are written into the index once, before the commit
(``kittypyr.lexicon.PendingPostings``). Searches in the same transaction,
savepoints, aborts and removals must see the index as if every posting had
been written at once.
"""

import pytest
import transaction
import ZODB
from ZODB.FileStorage import FileStorage

from kittypyr.catalog import make_message_text_index
from kittypyr.lexicon import _PAIR, _RECENT, BATCH_WORDS, INLINE_MAX, RECENT_MAX, RECENT_MAX_IN_BATCH, packed_postings

OLD = set(range(1, INLINE_MAX + 3))  # past INLINE_MAX: "heron" has a record of its own


def _plain(text, default=None):
    return text


@pytest.fixture
def db(tmp_path):
    database = ZODB.DB(FileStorage(str(tmp_path / "Data.fs")))
    with database.transaction() as connection:
        connection.root()["text"] = index = make_message_text_index()
        index.discriminator = _plain
        for docid in OLD:
            index.index_doc(docid, "heron egret")
    yield database
    transaction.abort()
    database.close()


def _found(index, word):
    return set(index.apply(word).keys())


def _postings(index, word):
    """The (docid, value) pairs of ``word`` as a reader gets them."""
    wid = index.lexicon._wids[word]
    return sorted(_PAIR.iter_unpack(packed_postings(index.index.postings_of(wid))))


def _record(index, word):
    """The record of the large word ``word``."""
    return index.index._wordinfo[index.lexicon._wids[word]]


def test_an_import_batch_leaves_the_records_of_words_it_met_a_few_dozen_times_unwritten(db):
    # A batch meets thousands of large words, most of them a few times:
    # loading and rewriting each one's record cost more than the rest of
    # the batch in a large archive. Their postings wait instead.
    many = [f"tern{n}" for n in range(BATCH_WORDS)]
    first = set(range(1000, 1000 + INLINE_MAX + 1))
    with db.transaction() as connection:
        index = connection.root()["text"]
        for docid in first:
            index.index_doc(docid, " ".join(many))
    with db.transaction() as connection:
        index = connection.root()["text"]
        serials = {word: _record(index, word)._p_serial for word in ("heron", many[0], many[-1])}
    # More than RECENT_MAX, and with the one "heron" has waiting since the
    # fixture, fewer than RECENT_MAX_IN_BATCH.
    added = set(range(2000, 2040))
    assert RECENT_MAX < len(added) < RECENT_MAX_IN_BATCH - 1
    with db.transaction() as connection:
        index = connection.root()["text"]
        for docid in added:
            index.index_doc(docid, "heron " + " ".join(many))
    with db.transaction() as connection:
        index = connection.root()["text"]
        assert {word: _record(index, word)._p_serial for word in serials} == serials
        assert _found(index, "heron") == OLD | added
        assert _found(index, many[-1]) == first | added
        assert len(index.index.postings_of(index.lexicon._wids[many[0]])) == len(first | added)


def test_one_message_at_a_time_a_large_word_joins_its_record_recent_max_postings_at_a_time(db):
    # One message's transaction rewrites the buckets of the recent postings
    # its words are in: they stay small while no word waits long.
    with db.transaction() as connection:
        index = connection.root()["text"]
        serial = _record(index, "heron")._p_serial
        waiting = len(index.index._recent.get(index.lexicon._wids["heron"], b"")) // _RECENT.size
    added = range(100, 100 + RECENT_MAX - waiting)
    for docid in added:
        with db.transaction() as connection:
            index = connection.root()["text"]
            if docid == added[-1]:
                assert _record(index, "heron")._p_serial == serial
            index.index_doc(docid, "heron")
    with db.transaction() as connection:
        index = connection.root()["text"]
        assert _record(index, "heron")._p_serial != serial
        assert index.index._recent.get(index.lexicon._wids["heron"]) is None
        assert _found(index, "heron") == OLD | set(added)


def test_a_transaction_finds_what_it_posted_and_the_commit_stores_it_as_posted_one_by_one(db):
    added = range(100, 100 + 5 * RECENT_MAX + 3)
    with db.transaction() as connection:
        index = connection.root()["text"]
        for docid in added:
            index.index_doc(docid, f"heron number{docid}")
        assert _found(index, "heron") == OLD | set(added)
        # Removed in the same transaction, a posting still waiting goes too.
        index.unindex_doc(100)
        assert _found(index, "heron") == OLD | set(added[1:])
    # The same postings written one by one, in an index outside any database.
    alone = make_message_text_index()
    alone.discriminator = _plain
    for docid in OLD:
        alone.index_doc(docid, "heron egret")
    for docid in added[1:]:
        alone.index_doc(docid, f"heron number{docid}")
    with db.transaction() as connection:
        index = connection.root()["text"]
        assert _found(index, "heron") == OLD | set(added[1:])
        assert _postings(index, "heron") == _postings(alone, "heron")
        assert _found(index, "number101") == {101}
        assert _found(index, "egret") == OLD


def test_a_savepoint_rollback_takes_back_the_postings_made_after_it_and_keeps_those_before(db):
    with db.transaction() as connection:
        index = connection.root()["text"]
        before = set(range(100, 110))
        for docid in before:
            index.index_doc(docid, "heron")
        savepoint = connection.transaction_manager.savepoint()
        for docid in range(200, 210):
            index.index_doc(docid, "heron egret")
        # A search after the savepoint writes what was waiting, the
        # postings from before the savepoint too: the rollback must keep those.
        assert _found(index, "heron") == OLD | before | set(range(200, 210))
        savepoint.rollback()
        assert _found(index, "heron") == OLD | before
        assert _found(index, "egret") == OLD
        after = set(range(300, 305))
        for docid in after:
            index.index_doc(docid, "heron")
    with db.transaction() as connection:
        index = connection.root()["text"]
        assert _found(index, "heron") == OLD | before | after
        assert _found(index, "egret") == OLD
        assert index.documentCount() == len(OLD | before | after)


def test_an_aborted_transaction_leaves_no_posting_behind(db):
    connection = db.open()
    try:
        index = connection.root()["text"]
        for docid in range(100, 150):
            index.index_doc(docid, "heron")
        transaction.abort()
        index = connection.root()["text"]
        for docid in range(200, 203):
            index.index_doc(docid, "heron")
        transaction.commit()
    finally:
        connection.close()
    with db.transaction() as connection:
        index = connection.root()["text"]
        assert _found(index, "heron") == OLD | {200, 201, 202}
        assert index.documentCount() == len(OLD) + 3


def test_messages_archived_in_one_batch_are_found_by_every_word_once_committed(db):
    # Many words past INLINE_MAX, each posted to by many documents of one
    # transaction: some join the word's record, some wait in its recent postings.
    words = [f"word{n}" for n in range(40)]
    with db.transaction() as connection:
        index = connection.root()["text"]
        for docid in range(1000, 1000 + INLINE_MAX + 1):
            index.index_doc(docid, " ".join(words))
    with db.transaction() as connection:
        index = connection.root()["text"]
        for docid in range(2000, 2400):
            index.index_doc(docid, " ".join(words[docid % 7::7]))
    with db.transaction() as connection:
        index = connection.root()["text"]
        for n, word in enumerate(words):
            expected = set(range(1000, 1000 + INLINE_MAX + 1)) | {d for d in range(2000, 2400) if d % 7 <= n
                                                                   and (n - d % 7) % 7 == 0}
            assert _found(index, word) == expected, word
            wid = index.lexicon._wids[word]
            assert len(index.index.postings_of(wid)) == len(expected)


@pytest.mark.parametrize("already", [0, 1, 255, 256, 300])
@pytest.mark.parametrize("unknown_day_at", [None, 0, 40, 700])
def test_postings_added_at_once_are_kept_as_if_added_one_by_one(already, unknown_day_at):
    from kittypyr.fulltext import RankedPostings
    from kittypyr.lexicon import _RECENT, NO_DAY

    def day_of(n):
        return None if n == unknown_day_at else 15000 + (n * 37) % 90

    one_by_one, at_once = RankedPostings(), RankedPostings()
    for n in range(already):
        one_by_one.append(n, 1 << 16 | n, day_of(n))
        at_once.append(n, 1 << 16 | n, day_of(n))
    added = range(already, already + 800)
    for n in added:
        one_by_one.append(n, 1 << 16 | n, day_of(n))
    at_once.extend(b"".join(_RECENT.pack(n, 1 << 16 | n, NO_DAY if day_of(n) is None else day_of(n)) for n in added))
    assert at_once.packed() == one_by_one.packed()
    assert len(at_once) == len(one_by_one) == already + 800
    assert at_once._span == one_by_one._span
    chunks, ceilings = at_once.ranked_chunks()
    expected_chunks, expected_ceilings = one_by_one.ranked_chunks()
    assert [chunk.data for chunk in chunks] == [chunk.data for chunk in expected_chunks]
    assert ceilings == expected_ceilings
    assert at_once._directory.spans == one_by_one._directory.spans
