"""A search in one list of several: the page the whole index ranks for that list, read from that list's postings."""

import random
from datetime import datetime, timedelta, timezone

import numpy as np
import pytest
import transaction
from pyramid.scripting import prepare

from kittypyr import fulltext, moderation
from kittypyr.archiving import archive_message, ensure_mailing_list
from kittypyr.fulltext import ChunkGroup, evaluate
from kittypyr.lexicon import PostingsChunk
from kittypyr.scored import restricted
from kittypyr.search import SearchLimits, run_search
from kittypyr.security import User
from tests.mailbuilder import make_message
from tests.test_search_at_scale import archive_app, started_again

SMALL = "small@lists.example.org"
BIG = "big@lists.example.org"
LISTS = [SMALL, BIG]
MESSAGES = 2400  # one in four to SMALL, the rest to BIG, taking turns
START = datetime(2016, 1, 1, tzinfo=timezone.utc)
FILLER = "lorem ipsum dolor amet consectetur adipiscing elit sed eiusmod tempor incididunt labore".split()
SENDERS = [("Ada", "ada@example.org"), ("Bob", "bob@example.org"), ("Cy", "cy@example.org")]
QUERIES = ["ocelot", "ocelot heron", '"gray heron"', "ocelot from:bob@example.org", "ocelot heron from:bob@example.org",
           "ocelot OR margay", "heron -ocelot"]


def list_of(n):
    return SMALL if n % 4 == 0 else BIG


def corpus():
    """``[(list, raw)]``: the two lists' mail, the same at every run, each list's words weighted alike."""
    chance = random.Random(17)
    mails = []
    for n in range(MESSAGES):
        words = [chance.choice(FILLER) for _ in range(chance.randint(5, 150))]
        extra = ["ocelot"] * chance.choice([0, 1, 1, 2, 5]) + ["heron"] * chance.choice([0, 1, 3])
        if chance.random() < 0.2:
            extra.append("gray heron")
        if chance.random() < 0.1:
            extra.append("margay")
        for word in extra:
            words.insert(chance.randint(0, len(words)), word)
        mails.append((list_of(n), make_message(
            message_id=f"<l{n}@example.org>", subject="Note", sender=SENDERS[n % 3],
            date=START + timedelta(hours=n), body=" ".join(words) + "\n")))
    return mails


@pytest.fixture(scope="module")
def app(tmp_path_factory):
    application = archive_app(tmp_path_factory.mktemp("lists"), corpus())
    yield application
    application.registry._zodb_databases[""].close()


def search(app, query, mlist=SMALL, **options):
    limits = SearchLimits.from_settings(app.registry.settings)
    with prepare(registry=app.registry) as env:
        results = run_search(env["root"], query, LISTS, mlist=mlist, limits=limits, **options)
        return results, [hit.message.message_id for hit in results.hits]


def ranked_by_the_whole_index(app, groups, excluded=(), sender=None, address=SMALL):
    """Message-IDs of ``address``'s messages matching ``groups`` (and from ``sender``), best first, newest among equals.

    Every posting of the whole index is scored (``evaluate``, as a search
    of every list does), then cut to the list.
    """
    with prepare(registry=app.registry) as env:
        archive = env["root"]
        catalog = archive.catalog
        scored = evaluate(catalog["text"].index, groups, excluded)
        messages = list(archive.lists[address].messages.values())
        kept = [m for m in messages if sender is None or m.sender_address == sender]
        mine = np.array(sorted(m.catalog_docid for m in kept), dtype=np.int64)
        scored = restricted(scored, mine)
        by_docid = {m.catalog_docid: m for m in kept}
        ranked = sorted(zip(scored.scores.tolist(), scored.docids.tolist()),
                        key=lambda pair: (-round(pair[0], 9), -by_docid[pair[1]].timestamp))
        return [by_docid[docid].message_id for _, docid in ranked]


EXPECTED = {
    "ocelot": ([[(("ocelot",), 0)]], (), None),
    "ocelot heron": ([[(("ocelot",), 0)], [(("heron",), 0)]], (), None),
    '"gray heron"': ([[(("gray", "heron"), 0)]], (), None),
    "ocelot from:bob@example.org": ([[(("ocelot",), 0)]], (), "bob@example.org"),
    "ocelot heron from:bob@example.org": ([[(("ocelot",), 0)], [(("heron",), 0)]], (), "bob@example.org"),
    "ocelot OR margay": ([[(("ocelot",), 0), (("margay",), 0)]], (), None),
    "heron -ocelot": ([[(("heron",), 0)]], [(("ocelot",), 0)], None),
}


@pytest.mark.parametrize("read_by_chunks", [False, True])
@pytest.mark.parametrize("query", QUERIES)
def test_a_search_in_one_list_pages_as_the_whole_index_ranks_that_list(app, query, read_by_chunks, monkeypatch):
    if read_by_chunks:
        # Words this archive's size reads whole are read best chunks first, as at scale.
        monkeypatch.setattr(fulltext, "WORDS_SCORED_WHOLE_UP_TO", 0)
        monkeypatch.setattr(fulltext, "PHRASE_WORDS_SCORED_WHOLE_UP_TO", 0)
    groups, excluded, sender = EXPECTED[query]
    expected = ranked_by_the_whole_index(app, groups, excluded, sender)
    assert len(expected) > 60
    for start in (0, 20, len(expected) - 10):
        _, ids = search(app, query, start=start, size=20)
        assert ids == expected[start:start + 20], start
    assert all(message_id in expected for message_id in search(app, query, group="thread")[1])


def loaded_postings(connection):
    """The docids of every postings chunk and chunk group ``connection`` has loaded."""
    docids = set()
    for _, record in connection._cache.lru_items():
        if isinstance(record, PostingsChunk):
            docids.update(np.frombuffer(record.data, dtype="<i4")[0::2].tolist())
        elif isinstance(record, ChunkGroup):
            for chunk in record.highs or ():
                docids.update(np.frombuffer(chunk, dtype="<i4")[0::2].tolist())
    return docids


@pytest.mark.parametrize("query", ["ocelot", "ocelot heron", '"gray heron"', "ocelot from:bob@example.org"])
def test_a_search_in_one_list_reads_none_of_the_other_lists_postings(app, query, monkeypatch):
    monkeypatch.setattr(fulltext, "WORDS_SCORED_WHOLE_UP_TO", 0)
    monkeypatch.setattr(fulltext, "PHRASE_WORDS_SCORED_WHOLE_UP_TO", 0)
    with prepare(registry=app.registry) as env:
        archive = env["root"]
        small = {m.catalog_docid for m in archive.lists[SMALL].messages.values()}
        connection = archive._p_jar
        connection.cacheMinimize()
        limits = SearchLimits.from_settings(app.registry.settings)
        results = run_search(archive, query, LISTS, mlist=SMALL, limits=limits)
        assert results.hits
        read = loaded_postings(connection)
    # Before, the words' postings over both lists were read, three in four of them the other list's.
    assert read and read <= small, len(read - small)


def test_a_deleted_message_leaves_its_lists_postings(app):
    _, ids = search(app, "ocelot heron")
    best = ids[0]
    with prepare(registry=app.registry) as env:
        mailing_list = env["root"].lists[SMALL]
        message = next(m for m in mailing_list.messages.values() if m.message_id == best)
        docid = message.catalog_docid
        moderation.delete_messages(mailing_list, [message.__name__], User("mod@example.org", "Mod"),
                                   registry=app.registry)
        transaction.commit()
    _, after = search(app, "ocelot heron")
    assert best not in after and after[0] == ids[1]
    with prepare(registry=app.registry) as env:
        index = env["root"].catalog["text"].index
        scope = index._scopes[SMALL]
        for wid in index.word_ids(["ocelot", "heron", "lorem"]):
            assert docid not in np.frombuffer(fulltext.packed_postings(scope.postings_of(wid)), dtype="<i4")[0::2]
        assert docid not in index._scope_of


def test_a_list_with_no_message_finds_nothing(app):
    with prepare(registry=app.registry) as env:
        ensure_mailing_list(env["root"], "empty@lists.example.org")
        transaction.commit()
    limits = SearchLimits.from_settings(app.registry.settings)
    with prepare(registry=app.registry) as env:
        results = run_search(env["root"], "ocelot heron", LISTS + ["empty@lists.example.org"],
                             mlist="empty@lists.example.org", limits=limits)
        assert results.hits == [] and results.total == 0


def scope_postings(index, address):
    """Word -> the docids of ``address``'s postings of it, in the order they were added."""
    scope = index._scopes[address]
    return {wid: np.frombuffer(fulltext.packed_postings(scope.postings_of(wid)), dtype="<i4").tolist()
            for wid in scope._wordinfo.keys()}


def test_an_archive_made_before_lists_kept_their_postings_gets_them_at_start_up(app):
    queries = ["ocelot heron", '"gray heron"', "ocelot from:bob@example.org"]
    before = {query: search(app, query, start=20)[1] for query in queries}
    with prepare(registry=app.registry) as env:
        index = env["root"].catalog["text"].index
        kept = {address: scope_postings(index, address) for address in LISTS}
        # As an archive indexed before: no postings by list.
        del index._scopes, index._numbered, index._scope_of
        env["root"].schema_version = 16
        transaction.commit()
    with started_again(app) as archive:
        index = archive.catalog["text"].index
        # The same postings, values and order, each chunk with the span of its days.
        for address in LISTS:
            assert scope_postings(index, address) == kept[address]
        spans = [span for postings in index._scopes[SMALL]._wordinfo.values()
                 if getattr(postings, "_directory", None) is not None for span in postings._directory.spans]
        assert spans and None not in spans
    for query in queries:
        assert search(app, query, start=20)[1] == before[query]


def test_the_only_list_keeps_no_postings_of_its_own_until_a_second_list_gets_mail(tmp_path, monkeypatch):
    first = "first@lists.example.org"
    mail = [(first if address == BIG else "second@lists.example.org", raw) for address, raw in corpus()[:800]]
    application = archive_app(tmp_path, [(address, raw) for address, raw in mail if address == first])
    try:
        with prepare(registry=application.registry) as env:
            index = env["root"].catalog["text"].index
            # Nothing written twice while a search of the list is one of the whole index.
            assert index._lone == first and not index._scopes and not index._scope_of
            # As an archive indexed before postings by list: upgraded, it is the lone list at once.
            del index._scopes, index._numbered, index._scope_of, index._lone
            env["root"].schema_version = 16
            transaction.commit()
        with started_again(application) as archive:
            index = archive.catalog["text"].index
            assert index._lone == first and not index._scopes and not index._scope_of
            ensure_mailing_list(archive, "second@lists.example.org")
            transaction.commit()
        expected = ranked_by_the_whole_index(application, EXPECTED["ocelot heron"][0], address=first)
        limits = SearchLimits.from_settings(application.registry.settings)
        monkeypatch.setattr(fulltext, "WORDS_SCORED_WHOLE_UP_TO", 0)
        with prepare(registry=application.registry) as env:
            # Not yet split: read from the whole index, the same page.
            results = run_search(env["root"], "ocelot heron", [first, "second@lists.example.org"], mlist=first,
                                 limits=limits)
            assert [hit.message.message_id for hit in results.hits] == expected[:20]
            second = env["root"].lists["second@lists.example.org"]
            archive_message(second, next(raw for address, raw in mail if address != first))
            transaction.commit()
        with prepare(registry=application.registry) as env:
            archive = env["root"]
            index = archive.catalog["text"].index
            assert index._lone is None and set(index._scopes.keys()) == {first, "second@lists.example.org"}
            assert fulltext.scopes_disagreeing(index, archive.catalog["list"]._rev_index.get) == []
            mine = {m.catalog_docid for m in archive.lists[first].messages.values()}
            archive._p_jar.cacheMinimize()
            results = run_search(archive, "ocelot heron", [first, "second@lists.example.org"], mlist=first,
                                 limits=limits)
            assert [hit.message.message_id for hit in results.hits] == expected[:20]
            read = loaded_postings(archive._p_jar)
            assert read and read <= mine
    finally:
        application.registry._zodb_databases[""].close()


def scoped_text(words, scope):
    from kittypyr.zones import OWN, Zones

    zones = Zones()
    zones.add(OWN, 1, words)
    text = fulltext.prepare_zoned(zones)
    text.scope = scope
    return text


def test_a_split_of_the_lone_list_and_a_message_to_it_at_the_same_time_conflict(tmp_path):
    import ZODB
    from ZODB.FileStorage import FileStorage
    from ZODB.POSException import ConflictError

    from kittypyr.lexicon import Lexicon

    db = ZODB.DB(FileStorage(str(tmp_path / "Data.fs")))
    try:
        with db.transaction() as connection:
            index = connection.root()["index"] = fulltext.FullTextIndex(Lexicon())
            for docid in range(1, 200):
                index.index_doc(docid, scoped_text("ocelot heron lorem", "a"))
        managers = [transaction.TransactionManager(), transaction.TransactionManager()]
        archiving, splitting = [db.open(transaction_manager=manager) for manager in managers]
        # Two messages to the lone list at once: no conflict.
        archiving.root()["index"].index_doc(500, scoped_text("ocelot", "a"))
        other = db.open(transaction_manager=transaction.TransactionManager())
        other.root()["index"].index_doc(501, scoped_text("heron", "a"))
        other.transaction_manager.commit()
        other.close()
        managers[0].commit()
        # A message to the lone list while another list's first one splits it.
        archiving.root()["index"].index_doc(502, scoped_text("ocelot", "a"))
        managers[1].begin()
        index = splitting.root()["index"]
        scope_of = {docid: "a" for docid in index._docweight.keys()}
        # Alone in its transaction: nothing else of the two overlaps.
        fulltext.scope_postings_of(index, scope_of.get, lambda docid: None, only="a")
        managers[1].commit()
        with pytest.raises(ConflictError):
            managers[0].commit()
        managers[0].abort()
        # Tried again, as a request is: in its list's postings now.
        index = archiving.root()["index"]
        index.index_doc(502, scoped_text("ocelot", "a"))
        managers[0].commit()
        wid, = index.word_ids(["ocelot"])
        held = np.frombuffer(fulltext.packed_postings(index._scopes["a"].postings_of(wid)), dtype="<i4")[0::2]
        assert {500, 502} <= set(held.tolist()) and index._lone is None
        assert {index._scope_of.get(docid) for docid in (500, 501, 502)} == {index._scopes["a"].number}
        archiving.close()
        splitting.close()
    finally:
        db.close()


def test_a_text_index_made_again_gives_every_list_postings_of_its_own(app):
    from kittypyr.catalog import sync_catalog

    with prepare(registry=app.registry) as env:
        archive = env["root"]
        del archive.catalog["text"]
        sync_catalog(archive, app.registry)
        transaction.commit()
    with prepare(registry=app.registry) as env:
        catalog = env["root"].catalog
        index = catalog["text"].index
        assert index._lone is None and {SMALL, BIG} <= set(index._scopes.keys())
        assert fulltext.scopes_disagreeing(index, catalog["list"]._rev_index.get) == []
    expected = ranked_by_the_whole_index(app, EXPECTED["ocelot heron"][0])
    assert search(app, "ocelot heron")[1] == expected[:20]


def test_a_lists_view_of_the_index_holds_nothing_of_another_list(app):
    with prepare(registry=app.registry) as env:
        archive = env["root"]
        index = archive.catalog["text"].index
        view = index.within(SMALL)
        wids = index.word_ids(["gray", "heron"])
        theirs = [m.catalog_docid for m in archive.lists[BIG].messages.values()
                  if index.phrase_check(wids)(m.catalog_docid)]
        mine = [m.catalog_docid for m in archive.lists[SMALL].messages.values()
                if index.phrase_check(wids)(m.catalog_docid)]
        assert theirs and mine
        # What counts a thread's matches or checks a phrase asks the view too.
        assert not any(view.phrase_check(wids)(docid) for docid in theirs)
        assert all(view.phrase_check(wids)(docid) for docid in mine)
        assert view.holding(wids[1], theirs + mine) == mine
        assert index.within(BIG).holding(wids[1], theirs + mine) == theirs
