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
        # However many chunks the word has, the record rewritten as one fills
        # is about as large as with its first 64 (it used to name every
        # chunk: with 200, three times the bytes).
        first = max(written[filled] for filled in range(1, 65))
        last = max(written[filled] for filled in range(CHUNKS - 63, CHUNKS + 1))
        assert last <= first * 1.1, (first, last)

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
