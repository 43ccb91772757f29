"""Two words most of the mail holds: the first page as every posting scored ranks it, from a part of the postings."""

import random

import numpy as np
import pytest
import transaction
import ZODB
from ZODB.FileStorage import FileStorage

from kittypyr.fulltext import FullTextIndex, chunk_groups_of, evaluate, split_chunks_of
from kittypyr.lexicon import Lexicon
from tests.test_filtered_search_cost import EveryNth

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


@pytest.fixture(scope="module")
def stored_index(tmp_path_factory):
    """A text index of DOCUMENTS texts, in a FileStorage."""
    path = tmp_path_factory.mktemp("words") / "Data.fs"
    chance = random.Random(11)
    db = ZODB.DB(FileStorage(str(path)))
    with db.transaction() as connection:
        index = connection.root()["index"] = FullTextIndex(Lexicon())
        for docid in range(1, DOCUMENTS + 1):
            index.index_doc(docid, text(chance))
    yield db
    db.close()


def exhaustive(index, rule=None, words=WORDS[:2]):
    """Docid -> score of every document holding ``words`` (and passing ``rule``), every posting scored."""
    scored = evaluate(index, [[((word,), 0)] for word in words])
    found = dict(zip(scored.docids.tolist(), scored.scores.tolist()))
    return {docid: score for docid, score in found.items() if rule is None or rule(docid)}


def assert_holds_the_best_page(scored, expected):
    floor = sorted(expected.values(), reverse=True)[PAGE - 1]
    found = dict(zip(scored.docids.tolist(), scored.scores.tolist()))
    # Every document that can be on the page, with the very same score.
    best = {docid: score for docid, score in expected.items() if score >= floor}
    assert {docid: found.get(docid) for docid in best} == best
    assert all(expected.get(docid) == score for docid, score in found.items())


@pytest.mark.parametrize("name, rule", [("every document", None), ("one in seven", lambda docid: docid % 7 == 0)])
def test_two_common_words_find_the_best_page_and_read_a_part_of_their_chunks(stored_index, name, rule):
    connection = stored_index.open()
    try:
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
    finally:
        connection.close()


@pytest.mark.parametrize("every", [500, 5000])
def test_a_few_matches_are_counted_exactly(stored_index, every):
    # One in 5,000: fewer matches than a page.
    connection = stored_index.open()
    try:
        index = connection.root()["index"]
        wids = index.word_ids(list(WORDS[:2]))
        rule = lambda docid: docid % every == 0  # noqa: E731
        scored, total, exact = index.best_words_scores(wids, PAGE, EveryNth(rule), exact_up_to=1000)
        expected = exhaustive(index, rule)
        assert exact and total == len(expected) and len(expected) < 1000
        assert dict(zip(scored.docids.tolist(), scored.scores.tolist())) == expected
    finally:
        connection.close()


def test_a_removed_document_is_not_found_by_the_postings_a_group_keeps_high(stored_index):
    connection = stored_index.open()
    try:
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
    finally:
        transaction.abort()
        connection.close()


def test_an_index_made_before_groups_kept_high_postings_is_searched_the_same_and_then_split(stored_index, monkeypatch):
    from kittypyr import fulltext

    # A savepoint after every group split, as after every 4,000 chunks.
    monkeypatch.setattr(fulltext, "SPLIT_BETWEEN_SAVEPOINTS", 1)
    connection = stored_index.open()
    try:
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
    finally:
        transaction.abort()
        connection.close()


def test_three_common_words_find_the_best_page(stored_index):
    connection = stored_index.open()
    try:
        index = connection.root()["index"]
        wids = index.word_ids(list(WORDS))
        scored, total, exact = index.best_words_scores(wids, PAGE)
        expected = exhaustive(index, words=WORDS)
        assert_holds_the_best_page(scored, expected)
        assert not exact and abs(total - len(expected)) <= len(expected) * 0.15, (total, len(expected))
    finally:
        connection.close()
