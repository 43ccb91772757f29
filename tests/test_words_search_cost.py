"""Two words most of the mail holds: the first page as every posting scored ranks it, from a part of the postings."""

import random
from contextlib import contextmanager

import numpy as np
import pytest
import ZODB
from ZODB.FileStorage import FileStorage

from kittypyr import fulltext
from kittypyr.fulltext import FullTextIndex, WordImpacts, chunk_groups_of, evaluate, split_chunks_of
from kittypyr.lexicon import RECENT_MAX, Lexicon
from tests.test_filtered_search_cost import EveryNth
from tests.test_list_search import scoped_text

DOCUMENTS = 40_000  # two words of about 64,000 postings: more than WORDS_SCORED_WHOLE_UP_TO
PAGE = 20
FILLER = "lorem ipsum dolor amet consectetur adipiscing elit sed eiusmod tempor".split()
WORDS = ("heron", "egret", "ibis")


def text(chance):
    """As two common words of real mail: in most messages, once in a long one, often in a short one now and then."""
    words = []
    short = chance.random() < 0.05
    words += [chance.choice(FILLER) for _ in range(chance.randint(3, 40) if short else chance.randint(20, 400))]
    for word in WORDS:
        if chance.random() < 0.8:
            words += [word] * (chance.randint(1, 9) if short else 1)
    chance.shuffle(words)
    return " ".join(words)


@contextmanager
def opened(db):
    """A connection to ``db``, what it changed dropped and closed after."""
    connection = db.open()
    try:
        yield connection
    finally:
        connection.transaction_manager.abort()
        connection.close()


def index_in_file_storage(folder, count, text_of):
    """A database in ``folder`` whose root's "index" is a text index of ``text_of(docid)`` for docids 1 to ``count``."""
    db = ZODB.DB(FileStorage(str(folder / "Data.fs")))
    with db.transaction() as connection:
        index = connection.root()["index"] = FullTextIndex(Lexicon())
        for docid in range(1, count + 1):
            index.index_doc(docid, text_of(docid))
    return db


@pytest.fixture(scope="module")
def stored_index(tmp_path_factory):
    """A text index of DOCUMENTS texts, in a FileStorage."""
    chance = random.Random(11)
    db = index_in_file_storage(tmp_path_factory.mktemp("words"), DOCUMENTS, lambda docid: text(chance))
    yield db
    db.close()


def exhaustive(index, rule=None, words=WORDS[:2]):
    """Docid -> score of every document holding ``words`` (and passing ``rule``), every posting scored."""
    scored = evaluate(index, [[((word,), 0)] for word in words])
    found = dict(zip(scored.docids.tolist(), scored.scores.tolist()))
    return {docid: score for docid, score in found.items() if rule is None or rule(docid)}


def assert_holds_the_best_page(scored, expected, page=PAGE):
    floor = sorted(expected.values(), reverse=True)[page - 1]
    found = dict(zip(scored.docids.tolist(), scored.scores.tolist()))
    # Every document that can be on the page, with the very same score.
    best = {docid: score for docid, score in expected.items() if score >= floor}
    assert {docid: found.get(docid) for docid in best} == best
    assert all(expected.get(docid) == score for docid, score in found.items())


@pytest.mark.parametrize("name, rule", [("every document", None), ("one in seven", lambda docid: docid % 7 == 0)])
def test_two_common_words_find_the_best_page_and_read_a_part_of_their_chunks(stored_index, name, rule):
    with opened(stored_index) as connection:
        connection.cacheMinimize()
        index = connection.root()["index"]
        wids = index.word_ids(list(WORDS[:2]))
        chunks = sum(len(index._wordinfo[wid].ranked_chunks()[0]) for wid in wids)
        assert chunks > 200 and not index.cheap_to_score_whole(wids)
        allowed = None if rule is None else EveryNth(rule)
        scored, total, exact = index.best_words_scores(wids, PAGE, allowed, exact_up_to=50)
        # Loaded by the search: every chunk was a ghost before it.
        read = sum(chunk._p_changed is not None for wid in wids for chunk in index._wordinfo[wid].ranked_chunks()[0])

        expected = exhaustive(index, rule)
        assert_holds_the_best_page(scored, expected)
        assert not exact and abs(total - len(expected)) <= len(expected) * 0.15, (total, len(expected))
        # Every chunk of both words was read before: now the chunks sampled
        # for the count and those whose rest could reach the page.
        assert read < chunks / 4, (read, chunks)


@pytest.mark.parametrize("every", [500, 5000])
def test_a_few_matches_are_counted_exactly(stored_index, every):
    # One in 5,000: fewer matches than a page.
    with opened(stored_index) as connection:
        index = connection.root()["index"]
        wids = index.word_ids(list(WORDS[:2]))
        rule = lambda docid: docid % every == 0  # noqa: E731
        scored, total, exact = index.best_words_scores(wids, PAGE, EveryNth(rule), exact_up_to=1000)
        expected = exhaustive(index, rule)
        assert exact and total == len(expected) and len(expected) < 1000
        assert dict(zip(scored.docids.tolist(), scored.scores.tolist())) == expected


def test_a_removed_document_is_not_found_by_the_postings_a_group_keeps_high(stored_index):
    with opened(stored_index) as connection:
        index = connection.root()["index"]
        wids = index.word_ids(list(WORDS[:2]))
        scored, _, _ = index.best_words_scores(wids, PAGE)
        best = int(scored.docids[np.argmax(scored.scores)])
        kept_high = [group for wid in wids for group in index._wordinfo[wid]._directory.groups
                     if any(best in np.frombuffer(high, dtype="<i4")[0::2] for high in group.highs)]
        assert kept_high
        index.unindex_doc(best)
        assert not any(best in np.frombuffer(high, dtype="<i4")[0::2] for group in kept_high for high in group.highs)
        # What ``kittypyr check`` verifies of them holds still.
        assert all(group.agrees() for group in chunk_groups_of(index))
        scored, _, _ = index.best_words_scores(wids, PAGE)
        assert best not in scored.docids.tolist()
        assert_holds_the_best_page(scored, exhaustive(index))


def test_an_index_made_before_groups_kept_high_postings_is_searched_the_same_and_then_split(stored_index, monkeypatch):
    from kittypyr import fulltext

    # A savepoint after every group split, as after every 4,000 chunks.
    monkeypatch.setattr(fulltext, "SPLIT_BETWEEN_SAVEPOINTS", 1)
    with opened(stored_index) as connection:
        index = connection.root()["index"]
        wids = index.word_ids(list(WORDS[:2]))
        groups = [group for wid in wids for group in index._wordinfo[wid]._directory.groups]
        for group in groups:
            # As a group made before: the class's None.
            del group.highs, group.rests
        scored, _, _ = index.best_words_scores(wids, PAGE)
        assert_holds_the_best_page(scored, exhaustive(index))

        assert split_chunks_of(index) == len(groups)
        assert all(group.highs is not None for group in groups)
        scored, _, _ = index.best_words_scores(wids, PAGE)
        assert_holds_the_best_page(scored, exhaustive(index))


def test_three_common_words_find_the_best_page(stored_index):
    with opened(stored_index) as connection:
        index = connection.root()["index"]
        wids = index.word_ids(list(WORDS))
        scored, total, exact = index.best_words_scores(wids, PAGE)
        expected = exhaustive(index, words=WORDS)
        assert_holds_the_best_page(scored, expected)
        assert not exact and abs(total - len(expected)) <= len(expected) * 0.15, (total, len(expected))


@pytest.fixture(scope="module")
def indexed_again(tmp_path_factory):
    """A text index of 12,000 texts, long ones of the first quarter indexed again among the next half.

    Indexed again, a document's postings go to its words' newest chunks,
    among larger docids: those chunks are no longer in docid order. Long
    texts score low, so the chunks' high postings stay in order and their
    other postings do not; the newest chunks and the tail, read with
    every search, stay in order too.
    """
    chance = random.Random(23)
    texts = {docid: text(chance) for docid in range(1, 12_001)}
    long_ones = [docid for docid in range(1, 3_001) if len(texts[docid].split()) > 300]
    db = ZODB.DB(FileStorage(str(tmp_path_factory.mktemp("again") / "Data.fs")))
    with db.transaction() as connection:
        index = connection.root()["index"] = FullTextIndex(Lexicon())
        for docid, text_ in texts.items():
            index.index_doc(docid, text_)
            if 3_000 < docid <= 9_000 and docid % 25 == 0:
                again = long_ones.pop()
                index.index_doc(again, texts[again])
    yield db
    db.close()


@pytest.mark.parametrize("page", [5, PAGE, 200, 2000])
def test_documents_indexed_again_later_are_ranked_among_the_others(indexed_again, page):
    with opened(indexed_again) as connection:
        index = connection.root()["index"]
        wids = index.word_ids(list(WORDS[:2]))
        scored, _, _ = index.best_words_scores(wids, page, exact_up_to=0)
        assert_holds_the_best_page(scored, exhaustive(index), page)


@pytest.mark.parametrize("which", ["in docid order", "indexed again"])
def test_what_a_word_has_read_is_its_chunks_read_whole_and_the_others_high_postings(stored_index, indexed_again,
                                                                                    which):
    db = stored_index if which == "in docid order" else indexed_again
    with opened(db) as connection:
        index = connection.root()["index"]
        wid = index.word_ids([WORDS[1]])[0]
        postings = index.postings_of(wid)
        documents, mean_length = index._statistics()
        word = WordImpacts(index, wid, postings, 1.5, mean_length)
        chunks, _, highs, _ = postings.chunk_pieces()
        bounds = word._unread.copy()
        reading = np.zeros(len(chunks), dtype=bool)
        # Lower and lower floors, as when more of a phrase's candidates are
        # looked for: a chunk or two at a time, then the rest at once.
        floors = np.sort(bounds[np.isfinite(bounds)])[::-1]
        for floor in [*floors[:len(floors) // 2], floors[-1]]:
            word.read_reaching(floor)
            reading |= np.isfinite(bounds) & (bounds >= floor)
            parts = [chunk.data if read else (high or b"") for chunk, high, read in zip(chunks, highs, reading)]
            pairs = np.frombuffer(b"".join(parts) + bytes(postings._tail), dtype="<i4").reshape(-1, 2)
            expected = dict(zip(pairs[:, 0].tolist(), index._bm25(pairs[:, 1].astype(np.int64), 1.5,
                                                                   mean_length).tolist()))
            found = word.found()
            assert np.all(np.diff(found.docids) > 0)
            assert dict(zip(found.docids.tolist(), found.scores.tolist())) == expected


PHRASE_DOCUMENTS = 20_000


def phrase_text(chance):
    """As a phrase of two common words: both words in most messages, side by side in about half of those."""
    words = [chance.choice(FILLER) for _ in range(chance.randint(20, 400))]
    if chance.random() < 0.8:
        if chance.random() < 0.5:
            for _ in range(chance.randint(1, 3)):
                words.insert(chance.randint(0, len(words)), "heron egret")
        else:
            words = ["egret"] * chance.randint(1, 2) + words + ["heron"] * chance.randint(1, 2)
    return " ".join(words)


@pytest.fixture(scope="module")
def phrase_index(tmp_path_factory):
    """A text index of PHRASE_DOCUMENTS texts, in a FileStorage."""
    chance = random.Random(17)
    db = index_in_file_storage(tmp_path_factory.mktemp("phrase"), PHRASE_DOCUMENTS, lambda docid: phrase_text(chance))
    yield db
    db.close()


def exhaustive_phrase(index, words):
    """Docid -> score of every document holding the phrase ``words``, every posting scored."""
    phrase = index.term(list(words))
    return dict(zip(phrase.docids.tolist(), phrase.scores.tolist()))


def test_a_phrase_of_two_common_words_is_looked_for_among_their_best_postings(phrase_index):
    with opened(phrase_index) as connection:
        connection.cacheMinimize()
        index = connection.root()["index"]
        wids = index.word_ids(["heron", "egret"])
        chunks = sum(len(index._wordinfo[wid].ranked_chunks()[0]) for wid in wids)
        scored, total, exact = index.best_words_scores(wids, PAGE, None, 50, index.phrase_check(wids))
        read = sum(chunk._p_changed is not None for wid in wids for chunk in index._wordinfo[wid].ranked_chunks()[0])

        expected = exhaustive_phrase(index, ["heron", "egret"])
        assert len(scored) >= PAGE and not exact
        assert_holds_the_best_page(scored, expected)
        assert abs(total - len(expected)) <= len(expected) * 0.15, (total, len(expected))
        # Every posting of both words was read before, to score the phrase's candidates.
        assert read < chunks / 3, (read, chunks)


def test_a_phrase_its_words_seldom_make_is_found_among_more_of_their_best(phrase_index):
    # "egret heron" only where two "heron egret" were put side by side.
    with opened(phrase_index) as connection:
        index = connection.root()["index"]
        words = ["egret", "heron"]
        wids = index.word_ids(words)
        expected = exhaustive_phrase(index, words)
        assert PAGE < len(expected) < PHRASE_DOCUMENTS / 50
        scored, total, exact = index.best_words_scores(wids, PAGE, None, 50, index.phrase_check(wids))
        assert_holds_the_best_page(scored, expected)
        assert not exact and total >= len(scored)
        # More asked for than there are: every document holding the words looked at, and counted.
        scored, total, exact = index.best_words_scores(wids, 1000, None, 50, index.phrase_check(wids))
        assert dict(zip(scored.docids.tolist(), scored.scores.tolist())) == expected
        assert exact and total == len(expected)


# Of the documents holding "heron", chunk by chunk: a few short ones, once;
# some long ones, four times; most longer still, once. Among many short
# documents without it, the index's mean length is a fifth of its chunks'.
SHORT, LONG = 40, 80


def heron_text(position):
    """The text of the ``position``-th document holding "heron" (from 0)."""
    at = position % fulltext.RankedPostings.CHUNK_PAIRS
    if at < SHORT:
        return "heron " + " ".join(FILLER[:4])
    if at < LONG:
        return " ".join(["heron"] * 4 + [FILLER[n % len(FILLER)] for n in range(96)])
    return " ".join(["heron"] + [FILLER[n % len(FILLER)] for n in range(149)])


def heron_lengths(groups):
    """The length of each document a group keeps high, chunk by chunk."""
    return [set((np.frombuffer(high, dtype="<i4")[1::2] & fulltext.LENGTH_MAX).tolist())
            for group in groups for high in group.highs]


def test_a_group_keeps_apart_the_postings_that_score_best_at_the_index_mean_length():
    """The five-word documents score best at the index's mean length; the long ones at the chunks' own."""
    index = FullTextIndex(Lexicon())
    # Another list's first document: each list keeps postings of its own from then on.
    index.index_doc(1, scoped_text("lorem", "other"))
    docid = 1
    for _ in range(20_000):
        docid += 1
        index.index_doc(docid, scoped_text("ipsum dolor amet", "dev"))
    # A group's postings, and those a word's record takes at once after them.
    group_postings = fulltext.ChunkDirectory.GROUP_CHUNKS * fulltext.RankedPostings.CHUNK_PAIRS + RECENT_MAX
    for position in range(group_postings):
        docid += 1
        index.index_doc(docid, scoped_text(heron_text(position), "dev"))
    wid, = index.word_ids(["heron"])
    _, mean_length = index._statistics()
    assert mean_length < 30
    for postings in (index._wordinfo[wid], index._scopes["dev"]._wordinfo[wid]):
        groups = postings._directory.groups
        assert len(groups) == 1
        # Of each chunk, HIGH_PAIRS of its SHORT five-word documents, no other.
        assert heron_lengths(groups) == [{5}] * fulltext.ChunkDirectory.GROUP_CHUNKS

    # As an index that picked them at the chunks' own mean kept them, until its upgrade.
    for postings in (index._wordinfo[wid], index._scopes["dev"]._wordinfo[wid]):
        for group in postings._directory.groups:
            group.split(None)
        assert heron_lengths(postings._directory.groups) != [{5}] * fulltext.ChunkDirectory.GROUP_CHUNKS
    del index._scopes["dev"].index
    every_group = [group for owner in (index, index._scopes["dev"]) for postings in owner._wordinfo.values()
                   for group in getattr(getattr(postings, "_directory", None), "groups", ())]
    assert split_chunks_of(index, every=True) == len(every_group)
    for postings in (index._wordinfo[wid], index._scopes["dev"]._wordinfo[wid]):
        assert heron_lengths(postings._directory.groups) == [{5}] * fulltext.ChunkDirectory.GROUP_CHUNKS
        assert all(group.agrees() for group in postings._directory.groups)
    assert index._scopes["dev"].index is index
