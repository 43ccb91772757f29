"""A word searched within dates reads the chunks of its postings filled in those dates, not the word's whole history."""

import random

import numpy as np
import pytest
import ZODB
from ZODB.FileStorage import FileStorage

from kittypyr.fulltext import DAY, ChunkDirectory, FullTextIndex, RankedPostings, ceiling_of, prepare_zoned
from kittypyr.lexicon import _PAIR, Lexicon, PostingsChunk
from kittypyr.zones import OWN, Zones

DOCUMENTS = 40_000
BLOCKS = 4  # imported one after the other, each over the same ten years
PAGE = 20
START = 1_262_304_000  # 2010-01-01
YEAR = 365 * 86400
FILLER = "lorem ipsum dolor amet consectetur adipiscing elit sed eiusmod tempor".split()


def date_of(docid):
    """Each block's documents in date order over ten years, as a list ten times as dense."""
    per_block = DOCUMENTS // BLOCKS
    return START + (docid - 1) % per_block * (10 * YEAR // per_block)


class DatedRange:
    """A date condition as ``kittypyr.search.AllowedDocuments`` offers it."""

    walkable = False

    def __init__(self, first, end):
        self.date_span = (first, end)

    def held(self, docid):
        return self.date_span[0] <= date_of(docid) < self.date_span[1]

    def test(self, docid):
        return self.held(docid)

    def passing(self, docids):
        return np.array([self.held(docid) for docid in docids], dtype=bool)

    def every(self):
        return np.array([d for d in range(1, DOCUMENTS + 1) if self.held(d)], dtype=np.int64)


def dated_text(words, date):
    zones = Zones()
    zones.add(OWN, 1, " ".join(words))
    prepared = prepare_zoned(zones)
    prepared.date = date
    return prepared


@pytest.fixture(scope="module")
def stored_index(tmp_path_factory):
    db = ZODB.DB(FileStorage(str(tmp_path_factory.mktemp("dated") / "Data.fs")))
    chance = random.Random(11)
    with db.transaction() as connection:
        index = connection.root()["index"] = FullTextIndex(Lexicon())
        for docid in range(1, DOCUMENTS + 1):
            words = [chance.choice(FILLER) for _ in range(chance.randint(5, 200))] + ["heron"] * chance.randint(1, 4)
            index.index_doc(docid, dated_text(words, date_of(docid)))
    yield db
    db.close()


def best_by_brute_force(index, allowed, count):
    wid = index.word_ids(["heron"])[0]
    scored = index.word_scores(wid)
    keep = np.array([allowed.held(docid) for docid in scored.docids.tolist()], dtype=bool)
    return sorted(scored.scores[keep].tolist(), reverse=True)[:count], int(keep.sum())


@pytest.mark.parametrize("years", [(2013, 2014), (2010, 2012), (2019, 2020)])
def test_a_word_within_dates_finds_the_best_page_and_reads_the_chunks_of_those_dates(stored_index, years):
    connection = stored_index.open()
    try:
        connection.cacheMinimize()
        index = connection.root()["index"]
        wid = index.word_ids(["heron"])[0]
        chunks = len(index._wordinfo[wid].ranked_chunks()[0])
        assert chunks > 150
        allowed = DatedRange(START + (years[0] - 2010) * YEAR, START + (years[1] - 2010) * YEAR)
        connection.getTransferCounts(True)
        scored, total, exact = index.best_allowed_scores(wid, PAGE, allowed, exact_up_to=50)
        loaded, _ = connection.getTransferCounts(True)

        expected, matching = best_by_brute_force(index, allowed, PAGE)
        assert sorted(scored.scores.tolist(), reverse=True)[:PAGE] == pytest.approx(expected)
        assert all(allowed.held(docid) for docid in scored.docids.tolist())
        assert abs(total - matching) <= matching * 0.1, (total, matching)
        # Every chunk was read before; now those of the years asked (a
        # tenth or a fifth of each block's), a few at their edges, and the
        # word's first, whose dates are not known.
        share = (years[1] - years[0]) / 10
        assert loaded < chunks * share + 4 * BLOCKS + 8, (loaded, chunks)
    finally:
        connection.close()


def test_each_chunk_keeps_the_span_of_its_days_and_the_first_one_is_unknown():
    postings = RankedPostings(_PAIR.pack(1, 5) * 3)  # a word grown out of its inline postings
    days = {}
    for docid in range(4, 4 + 3 * RankedPostings.CHUNK_PAIRS):
        days[docid] = 18_000 + (docid * 7919) % 500
        postings.append(docid, 5, days[docid])
    spans = postings._directory.spans
    assert spans[0] is None
    for chunk, span in zip(postings._directory.chunks[1:], spans[1:]):
        chunk_days = [days[docid] for docid, _ in _PAIR.iter_unpack(chunk.data)]
        assert span == (min(chunk_days), max(chunk_days))
    # Outside every known span: the unknown chunk and the tail are read.
    within = postings.packed_within(0, 17_000 * DAY)
    assert within == postings._directory.chunks[0].data + bytes(postings._tail)
    assert len(postings.packed_within(0, 19_000 * DAY)) == len(postings.packed())
    # A range is read to the day: the last second of a chunk's last day meets it.
    last_day = spans[1][1]
    assert postings._directory.chunks[1].data in postings.packed_within((last_day + 1) * DAY - 1, 20_000 * DAY)


def test_two_writers_appending_to_one_tail_keep_a_span_of_both():
    postings = RankedPostings()
    postings.append(1, 5, 100)
    old = postings.__getstate__()
    postings.append(2, 5, 50)
    committed = postings.__getstate__()
    other = RankedPostings()
    other.__setstate__(old)
    other.append(3, 5, 300)
    merged = postings._p_resolveConflict(old, committed, other.__getstate__())
    assert merged["_span"] == (50, 300)
    unknown = dict(other.__getstate__(), _span=None)
    assert postings._p_resolveConflict(old, committed, unknown)["_span"] is None


def test_a_directory_made_before_spans_reads_its_chunks_as_unknown_and_grows_with_spans():
    chunks = tuple(PostingsChunk(_PAIR.pack(n, 1 << 16 | 5) * 2) for n in range(70))
    directory = ChunkDirectory.__new__(ChunkDirectory)
    directory.__setstate__({"chunks": chunks, "ceilings": tuple(ceiling_of(c.data) for c in chunks)})
    assert directory.spans == (None,) * 70
    extra = PostingsChunk(_PAIR.pack(70, 1 << 16 | 5))
    directory.add(extra, ceiling_of(extra.data), (10, 20))
    assert directory.spans == (None,) * 70 + ((10, 20),)
    assert directory.chunks == chunks + (extra,)
