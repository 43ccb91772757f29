"""A common word's postings stay cheap to write however large the archive grows."""

import transaction
import ZODB
from ZODB.FileStorage import FileStorage

from kittypyr.fulltext import ChunkDirectory, RankedPostings, ceiling_of
from kittypyr.lexicon import _PAIR, PostingsChunk

CHUNKS = 200


def test_the_record_written_when_a_chunk_fills_does_not_grow_with_the_word(tmp_path):
    storage = FileStorage(str(tmp_path / "Data.fs"))
    db = ZODB.DB(storage)
    written = {}
    try:
        with db.transaction() as connection:
            connection.root()["heron"] = RankedPostings()
        docid = 0
        for filled in range(1, CHUNKS + 1):
            with db.transaction() as connection:
                postings = connection.root()["heron"]
                for _ in range(RankedPostings.CHUNK_PAIRS):
                    docid += 1
                    postings.append(docid, (1 + docid % 7) << 16 | (10 + docid % 300))
                directory = postings._directory
            written[filled] = len(storage.load(directory._p_oid)[0])
        # The record rewritten as a chunk fills names the word's groups of
        # GROUP_CHUNKS chunks and its open chunks, not every chunk (it used
        # to: with 200, three times the bytes): past its first 64 chunks it
        # grows by at most a reference (under 24 bytes) per group.
        first = max(written[filled] for filled in range(1, 65))
        last = max(written[filled] for filled in range(CHUNKS - 63, CHUNKS + 1))
        groups_added = (CHUNKS - 64) // ChunkDirectory.GROUP_CHUNKS + 1
        assert last <= first + 24 * groups_added, (first, last)

        with db.transaction() as connection:
            postings = connection.root()["heron"]
            chunks, ceilings = postings.ranked_chunks()
            assert len(chunks) == len(ceilings) == CHUNKS
            assert ceilings == tuple(ceiling_of(chunk.data) for chunk in chunks)
            docids = [pair[0] for pair in _PAIR.iter_unpack(postings.packed())]
            assert docids == list(range(1, docid + 1))
            assert len(postings) == docid
    finally:
        db.close()


def test_a_directory_written_before_groups_reads_and_grows_as_a_new_one():
    chunks = tuple(PostingsChunk(_PAIR.pack(n, 1 << 16 | 5) * 2) for n in range(100))
    ceilings = tuple(ceiling_of(chunk.data) for chunk in chunks)
    directory = ChunkDirectory.__new__(ChunkDirectory)
    directory.__setstate__({"chunks": chunks, "ceilings": ceilings})
    assert directory.chunks == chunks and directory.ceilings == ceilings

    extra = PostingsChunk(_PAIR.pack(100, 1 << 16 | 5))
    directory.add(extra, ceiling_of(extra.data))
    assert directory.chunks == chunks + (extra,)
    assert directory.ceilings == ceilings + (ceiling_of(extra.data),)
    assert len(directory.open_chunks) < ChunkDirectory.GROUP_CHUNKS
    transaction.abort()


WORDS = 600


def _plain(text, default=None):
    return text


def _records_of_last_transaction(storage):
    last = storage.lastTransaction()
    return sum(1 for transaction_ in storage.iterator(start=last) for _ in transaction_)


def test_a_batch_posting_once_to_many_large_words_writes_few_records_and_every_posting_is_found(tmp_path):
    # A batch of an archive ten times larger meets more words each of which
    # has a record of its own (past INLINE_MAX documents); each used to be
    # loaded and rewritten for one or two postings.
    from kittypyr.catalog import make_message_text_index
    from kittypyr.lexicon import INLINE_MAX, RECENT_MAX

    storage = FileStorage(str(tmp_path / "Data.fs"))
    db = ZODB.DB(storage)
    words = [f"heron{n}" for n in range(WORDS)]
    old = set(range(1, INLINE_MAX + 2))
    try:
        with db.transaction() as connection:
            connection.root()["text"] = index = make_message_text_index()
            index.discriminator = _plain
            for docid in old:
                index.index_doc(docid, " ".join(words))
        # Each word once, ten words a message.
        with db.transaction() as connection:
            index = connection.root()["text"]
            for n in range(WORDS // 10):
                index.index_doc(1000 + n, " ".join(words[10 * n:10 * n + 10]))
        written = _records_of_last_transaction(storage)
        # One record per large word touched was WORDS and more; now the
        # buckets of the recent postings and the message's own records.
        assert written < WORDS / 4, written

        with db.transaction() as connection:
            index = connection.root()["text"]
            for n, word in enumerate(words):
                assert set(index.apply(word).keys()) == old | {1000 + n // 10}, word
            # Removed, a recent posting is gone; the others stay.
            index.unindex_doc(1000)
            assert set(index.apply("heron0").keys()) == old
            assert set(index.apply("heron10").keys()) == old | {1001}
        # Enough more postings of one word join its record, in order.
        with db.transaction() as connection:
            index = connection.root()["text"]
            for docid in range(2000, 2000 + 3 * RECENT_MAX + 1):
                index.index_doc(docid, "heron10")
        with db.transaction() as connection:
            index = connection.root()["text"]
            expected = old | {1001} | set(range(2000, 2000 + 3 * RECENT_MAX + 1))
            assert set(index.apply("heron10").keys()) == expected
            wid = index.lexicon._wids["heron10"]
            record = index.index._wordinfo[wid]
            assert len(record) > len(old) + 3 * RECENT_MAX - RECENT_MAX
            assert len(index.index.postings_of(wid)) == len(expected)
            # Ranked search reads the record and the recent postings alike.
            scored, total, exact = index.index.best_word_scores(wid, 10)
            assert total == len(expected)
            assert set(scored.docids.tolist()) == expected
    finally:
        db.close()


def test_an_index_from_before_recent_postings_reads_and_grows():
    from kittypyr.catalog import make_message_text_index
    from kittypyr.lexicon import INLINE_MAX

    index = make_message_text_index()
    index.discriminator = _plain
    del index.index._recent  # as an index written before it was kept
    assert index.index._recent is None
    for docid in range(1, INLINE_MAX + 3):
        index.index_doc(docid, "heron")
    assert set(index.apply("heron").keys()) == set(range(1, INLINE_MAX + 3))
    index.index_doc(500, "heron")
    assert set(index.apply("heron").keys()) == set(range(1, INLINE_MAX + 3)) | {500}
    index.unindex_doc(500)
    index.unindex_doc(1)
    assert set(index.apply("heron").keys()) == set(range(2, INLINE_MAX + 3))
