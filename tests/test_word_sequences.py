"""A phrase is looked for in each candidate's word sequence: one check reads a few documents' sequences, not dozens."""

import random

import pytest
from BTrees.IOBTree import IOBucket

from kittypyr.lexicon import WordSequences
from tests.test_words_search_cost import index_in_file_storage, opened

DOCUMENTS = 6_000
FILLER = "lorem ipsum dolor amet consectetur adipiscing elit sed eiusmod tempor".split()
CHECKED = 100


def text(chance, number):
    words = [chance.choice(FILLER) for _ in range(chance.randint(20, 300))]
    # Every third document holds the phrase; the others both words apart.
    if number % 3 == 0:
        words.insert(chance.randint(0, len(words)), "gray heron")
    else:
        words = ["heron"] + words + ["gray"]
    return " ".join(words)


@pytest.fixture(scope="module")
def stored_index(tmp_path_factory):
    """A text index of DOCUMENTS texts (docids in the order they came, as the archive gives them), in a FileStorage."""
    chance = random.Random(3)
    db = index_in_file_storage(tmp_path_factory.mktemp("sequences"), DOCUMENTS, lambda docid: text(chance, docid))
    yield db
    db.close()


def loaded_sequences(connection, before):
    """How many documents' word sequences the buckets loaded since ``before`` (oids then in memory) hold."""
    return sum(len(obj) for oid, obj in connection._cache.lru_items()
               if oid not in before and type(obj) is IOBucket)


def test_checking_a_phrase_in_candidates_spread_over_the_archive_reads_few_other_sequences(stored_index):
    with opened(stored_index) as connection:
        index = connection.root()["index"]
        assert type(index._docwords) is WordSequences
        candidates = index.term(["gray", "heron"], verify=False)
        assert len(candidates) == DOCUMENTS
        connection.cacheMinimize()
        before = {oid for oid, _ in connection._cache.lru_items()}
        # As a page by relevance checks them: at places all over the archive.
        step = DOCUMENTS // CHECKED - 1
        checked = candidates.docids[step // 2::step][:CHECKED].tolist()
        assert [docid for docid in checked if candidates.check(docid)] == \
            [docid for docid in checked if docid % 3 == 0]
        read = loaded_sequences(connection, before)
        assert CHECKED <= read <= WordSequences.max_leaf_size * CHECKED, read


def test_a_phrase_is_found_in_every_document_that_holds_it_and_no_other(stored_index):
    with opened(stored_index) as connection:
        index = connection.root()["index"]
        found = index.term(["gray", "heron"]).docids.tolist()
        assert found == [docid for docid in range(1, DOCUMENTS + 1) if docid % 3 == 0]
        # Forgetting a document forgets its sequence too.
        index.unindex_doc(3)
        assert 3 not in index._docwords and 3 not in index.term(["gray", "heron"]).docids.tolist()


def test_a_phrase_is_not_found_where_another_word_begins_as_its_last_word_is_written():
    # Word ids are written with the fewest bytes they need: "beta", the
    # second word, in one byte, the first byte of ids 256 to 383. A message
    # holding "alpha" then one of those, and "beta" further on, is not one
    # holding "alpha beta".
    from kittypyr.fulltext import FullTextIndex
    from kittypyr.lexicon import Lexicon, encode_positions

    index = FullTextIndex(Lexicon())
    index.index_doc(1, "alpha beta")
    index.index_doc(2, " ".join(f"filler{n}" for n in range(400)))
    alpha, beta = index.word_ids(["alpha", "beta"])
    word_of = {wid: word for word, wid in index._lexicon._wids.items()}
    longer = [wid for wid in word_of if wid != beta and encode_positions([wid], [0]).startswith(
        encode_positions([beta], [0]))]
    assert longer
    index.index_doc(3, f"alpha {word_of[longer[0]]} and beta")
    index.index_doc(4, f"{word_of[longer[0]]} alpha beta")
    assert index.term(["alpha", "beta"]).docids.tolist() == [1, 4]
    assert index.phrase_check([alpha, beta])(4) and not index.phrase_check([alpha, beta])(3)
    # The same holds for a word alone.
    assert index.holding(beta, [1, 2, 3, 4]) == [1, 3, 4]
    assert index.holding(longer[0], [1, 3, 4]) == [3, 4]
