"""A word searched with a filter (``from:``, a list) reads what the page needs, not every posting of the word."""

import random

import numpy as np
import pytest
import transaction
import ZODB
from ZODB.FileStorage import FileStorage

from kittypyr.fulltext import SHARE_CHUNKS, FullTextIndex
from kittypyr.lexicon import Lexicon

DOCUMENTS = 40_000
PAGE = 20
FILLER = "lorem ipsum dolor amet consectetur adipiscing elit sed eiusmod tempor".split()


class EveryNth:
    """A filter as ``kittypyr.search.AllowedDocuments`` offers it: here, a docid rule."""

    walkable = True
    date_span = None

    def __init__(self, rule):
        self.rule = rule

    def test(self, docid):
        return self.rule(docid)

    def passing(self, docids):
        return np.array([self.rule(docid) for docid in docids], dtype=bool)

    def every(self):
        return np.array([docid for docid in range(1, DOCUMENTS + 1) if self.rule(docid)], dtype=np.int64)


@pytest.fixture(scope="module")
def stored_index(tmp_path_factory):
    """A text index of DOCUMENTS texts that all hold "heron", in a FileStorage; and each one's text."""
    path = tmp_path_factory.mktemp("walk") / "Data.fs"
    chance = random.Random(7)
    texts = {}
    db = ZODB.DB(FileStorage(str(path)))
    with db.transaction() as connection:
        index = connection.root()["index"] = FullTextIndex(Lexicon())
        for docid in range(1, DOCUMENTS + 1):
            # As a common word of real mail: once in most of its messages,
            # many times in a short one now and then.
            if chance.random() < 0.03:
                words = [chance.choice(FILLER) for _ in range(chance.randint(3, 40))]
                words += ["heron"] * chance.randint(2, 8)
            else:
                words = [chance.choice(FILLER) for _ in range(chance.randint(20, 300))]
                words += ["heron"]
            chance.shuffle(words)
            texts[docid] = " ".join(words)
            index.index_doc(docid, texts[docid])
    yield db, texts
    db.close()


def best_by_brute_force(index, rule, count):
    """The ``count`` best scores among the allowed documents, every posting scored."""
    wid = index.word_ids(["heron"])[0]
    scored = index.word_scores(wid)
    keep = np.fromiter((rule(docid) for docid in scored.docids.tolist()), dtype=bool)
    return sorted(scored.scores[keep].tolist(), reverse=True)[:count], int(keep.sum())


@pytest.mark.parametrize("name, rule", [
    ("one in seven, as a sender of every period", lambda docid: docid % 7 == 0),
    ("600 in a row, as a sender of a few months", lambda docid: 20_000 <= docid < 20_600),
])
def test_a_filtered_word_finds_the_best_page_and_reads_a_part_of_its_postings(stored_index, name, rule):
    db, _ = stored_index
    connection = db.open()
    try:
        connection.cacheMinimize()
        index = connection.root()["index"]
        wid = index.word_ids(["heron"])[0]
        chunks = len(index._wordinfo[wid].ranked_chunks()[0])
        assert chunks > 120
        connection.getTransferCounts(True)
        scored, total, exact = index.best_allowed_scores(wid, PAGE, EveryNth(rule), exact_up_to=50)
        loaded, _ = connection.getTransferCounts(True)

        expected, matching = best_by_brute_force(index, rule, PAGE)
        assert sorted(scored.scores.tolist(), reverse=True)[:PAGE] == pytest.approx(expected)
        assert all(rule(docid) for docid in scored.docids.tolist())
        assert not exact and abs(total - matching) <= matching * 0.1, (total, matching)
        if name.startswith("one in seven"):
            # The chunks sampled for the count, and of the rest those that
            # can reach the page: every chunk was read before.
            assert loaded < SHARE_CHUNKS + (chunks - SHARE_CHUNKS) / 2, (loaded, chunks)
    finally:
        connection.close()
