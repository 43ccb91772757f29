"""Search on results larger than a page: estimated counts, and pages ranked as an exhaustive scoring would."""

import math
import random
from contextlib import contextmanager
from datetime import datetime, timedelta, timezone

import numpy as np
import pytest
import transaction
from pyramid.scripting import prepare
from webtest import TestApp

from kittypyr import main
from kittypyr.archiving import archive_message, ensure_mailing_list
from kittypyr.catalog import docid_of
from kittypyr.lexicon import split_words
from kittypyr.search import SearchLimits, run_search
from kittypyr.zones import message_zones
from tests.mailbuilder import make_message

LIST = "big@lists.example.org"
START = datetime(2015, 1, 1, tzinfo=timezone.utc)
FILLER = ("lorem ipsum dolor amet consectetur adipiscing elit sed eiusmod tempor incididunt labore "
          "dolore magna aliqua enim minim veniam quis nostrud exercitation ullamco laboris nisi").split()
PHRASE_HOLDERS = 160  # hold "gray heron"
WORD_HOLDERS = 160  # hold both words, never side by side
# Hold "ocelot" a random number of times, in texts of random lengths: more
# than two chunks of the word's postings (kittypyr.lexicon.Postings).
RANKED = 2400
# The first of them hold it once in a long text: their chunk of postings
# cannot reach the first pages, only the last ones.
WEAK = 1100
REPLIES = 60  # to "ocelot" messages, holding it too
EXACT_UP_TO = 50
SENDERS = [("Ada", "ada@example.org"), ("Bob", "bob@example.org"), ("Cy", "cy@example.org")]


def corpus():
    """``[(n, raw)]``: generated mail, the same at every run."""
    chance = random.Random(13)
    mails = []

    def text(extra, shortest=5):
        words = [chance.choice(FILLER) for _ in range(chance.randint(shortest, 120))]
        for word in extra:
            words.insert(chance.randint(0, len(words)), word)
        return " ".join(words) + "\n"

    for n in range(PHRASE_HOLDERS):
        mails.append(text(["gray heron"]))
    for n in range(WORD_HOLDERS):
        mails.append(text(["heron"]) + text(["gray"]))
    for n in range(RANKED):
        if n < WEAK:
            mails.append(text(["ocelot"] + ["heron"] * chance.randint(0, 2), shortest=100))
        else:
            mails.append(text(["ocelot"] * chance.randint(1, 6) + ["heron"] * chance.randint(0, 2)))
    first_reply = len(mails)
    for n in range(REPLIES):
        mails.append(text(["ocelot"] * chance.randint(1, 6)))
    return [(n, make_message(message_id=f"<g{n}@example.org>", subject="Note", sender=SENDERS[n % 3],
                             date=START + timedelta(hours=n), body=body,
                             headers=_replying_to(n - first_reply) if n >= first_reply else {}))
            for n, body in enumerate(mails)]


def _replying_to(reply):
    """Reply ``reply`` answers the 1st, 11th, 21st... strong "ocelot" message."""
    parent = PHRASE_HOLDERS + WORD_HOLDERS + WEAK + 10 * reply
    return {"In-Reply-To": f"<g{parent}@example.org>", "References": f"<g{parent}@example.org>"}


def archive_app(folder, mail):
    """An application on a new archive in ``folder`` of ``mail`` (``[(list address, raw)]``), counting up to EXACT_UP_TO."""
    (folder / "blobs").mkdir()
    application = main({}, **{
        "zodbconn.uri": f"file://{folder}/Data.fs?blobstorage_dir={folder}/blobs",
        "kittypyr.base_url": "http://localhost/",
        "kittypyr.search_max_exact_count": str(EXACT_UP_TO),
    })
    with prepare(registry=application.registry) as env:
        lists = {}
        for address, raw in mail:
            if address not in lists:
                lists[address] = ensure_mailing_list(env["root"], address)
            archive_message(lists[address], raw)
        transaction.commit()
    return application


@pytest.fixture(scope="module")
def app(tmp_path_factory):
    application = archive_app(tmp_path_factory.mktemp("scale"), [(LIST, raw) for _, raw in corpus()])
    yield application
    application.registry._zodb_databases[""].close()


def search(app, query, **options):
    limits = SearchLimits.from_settings(app.registry.settings)
    with prepare(registry=app.registry) as env:
        results = run_search(env["root"], query, [LIST], limits=limits, **options)
        return results, [hit.message.message_id for hit in results.hits]


@contextmanager
def started_again(app):
    """The archive as the application's next start finds it: upgraded to the latest schema, and committed."""
    from kittypyr.bootstrap import EVOLVE_STEPS, bootstrap_archive

    with prepare(registry=app.registry) as env:
        archive = bootstrap_archive(env["root"]._p_jar.root(), app.registry)
        transaction.commit()
        assert archive.schema_version == len(EVOLVE_STEPS)
        yield archive


def number(message_id):
    return int(message_id[1:].split("@")[0])


def test_a_count_above_the_threshold_is_an_estimate_on_the_page_and_in_json(app):
    browser = TestApp(app)
    page = browser.get("/search", params={"q": '"gray heron"'})
    count = page.html.select_one("p.count").text
    assert count.startswith("about ") and "messages found" in count
    estimate = int(count.split()[1].replace(",", ""))
    assert abs(estimate - PHRASE_HOLDERS) <= PHRASE_HOLDERS * 0.25
    data = browser.get("/api/search", params={"q": '"gray heron"'}).json
    assert data["count_estimated"] is True
    assert abs(data["count"] - PHRASE_HOLDERS) <= PHRASE_HOLDERS * 0.25
    # Every result shown holds the phrase, whatever the count.
    assert {number(hit["message_id"]) for hit in data["results"]} <= set(range(PHRASE_HOLDERS))
    assert len(data["results"]) == 20


def test_the_help_page_says_from_how_many_matches_counts_are_rough(app):
    page = TestApp(app).get("/search-help")
    assert f"more than {EXACT_UP_TO} matches are counted roughly" in " ".join(page.html.text.split())


def test_a_count_within_the_threshold_is_exact(app):
    browser = TestApp(app)
    data = browser.get("/api/search", params={"q": '"gray heron" from:ada date:2015-01-01'}).json
    assert data["count_estimated"] is False and data["count"] == 8
    data = browser.get("/api/search", params={"q": "ocelot date:2015-02-20"}).json  # 24 hours, all hold it
    assert data["count_estimated"] is False and data["count"] == 24
    page = browser.get("/search", params={"q": '"gray heron" date:2015-01-01'})
    assert page.html.select_one("p.count").text.startswith("24 messages found")


def test_many_plain_matches_are_counted_about(app):
    data = TestApp(app).get("/api/search", params={"q": "ocelot"}).json
    assert RANKED + REPLIES == 2460
    assert data["count_estimated"] is True and data["count"] == 2500  # to two figures


def test_a_page_past_the_estimate_answers_the_last_real_page(app):
    browser = TestApp(app)
    page = browser.get("/search", params={"q": '"gray heron"', "sort": "date-asc", "page": "40"})
    last = math.ceil(PHRASE_HOLDERS / 20)
    assert f"Page {last} of {last}" in page.text
    # Every candidate was looked at to get there: the count is the real one.
    assert f"{PHRASE_HOLDERS} messages found" in page.html.select_one("p.count").text
    assert len(page.html.select("ol.hits li")) == PHRASE_HOLDERS - (last - 1) * 20
    results, ids = search(app, '"gray heron"', sort="date-asc", start=10_000, size=20)
    assert [number(i) for i in ids] == list(range((last - 1) * 20, PHRASE_HOLDERS))
    assert results.total == PHRASE_HOLDERS


@pytest.mark.parametrize("sender", [None, "bob@example.org"])
def test_pages_past_the_end_of_a_rounded_count_are_numbered_as_the_matches_are(app, sender):
    matches = len(brute_force_ranking(app, ("ocelot",), sender))
    last = math.ceil(matches / 20)
    query = "ocelot" + (f" from:{sender}" if sender else "")
    page = TestApp(app).get("/search", params={"q": query, "page": "1000"})
    assert page.html.select_one("p.count").text.startswith("about ")
    assert f"Page {last} of {last}" in page.text
    data = TestApp(app).get("/api/search", params={"q": query, "page": "1000"}).json
    assert data["page"] == data["pages"] == last and len(data["results"]) == matches - (last - 1) * 20


def test_every_page_of_a_phrase_holds_only_and_all_its_messages(app):
    seen = []
    for start in range(0, PHRASE_HOLDERS + 20, 20):
        _, ids = search(app, '"gray heron"', sort="date-desc", start=start, size=20)
        if start >= PHRASE_HOLDERS:
            assert ids == seen[-len(ids):]  # past the end: the last page again
            break
        seen += ids
    assert sorted(number(i) for i in seen) == list(range(PHRASE_HOLDERS))
    assert [number(i) for i in seen] == sorted((number(i) for i in seen), reverse=True)


def test_one_per_thread_counts_only_real_matches(app):
    results, ids = search(app, '"gray heron"', group="thread", size=20)
    assert len(ids) == 20 and all(number(i) < PHRASE_HOLDERS for i in ids)
    assert all(hit.thread_matches == 1 for hit in results.hits)


def brute_force_ranking(app, words, sender=None, since=None, until=None):
    """Message-IDs of every message holding all ``words``, best BM25 score first, newest among equals.

    With ``sender``, only that address's messages; with ``since`` and
    ``until``, only those dated from ``since`` to before ``until`` (scored
    as among all).

    Every message's text is split and counted here, as the index would
    weight it, and scored with Okapi BM25 from those counts alone.
    """
    with prepare(registry=app.registry) as env:
        archive = env["root"]
        index = archive.catalog["text"].index
        documents = []
        for message in archive.lists[LIST].messages.values():
            zones = message_zones(message.subject, message.sender_name, message.body_text,
                                  message.attachments)
            length, frequencies = 0, dict.fromkeys(words, 0)
            for _, weight, text in zones.segments:
                split = split_words(text)
                length += len(split)
                for word in words:
                    frequencies[word] += weight * split.count(word)
            documents.append((message.message_id, message.date, length, frequencies, message.sender_address))
        k1, b = index.K1, index.B
    count = len(documents)
    mean_length = sum(length for _, _, length, _, _ in documents) / count
    holders = {word: sum(1 for _, _, _, f, _ in documents if f[word]) for word in words}
    ranked = []
    for message_id, date, length, frequencies, address in documents:
        if not all(frequencies.values()) or sender not in (None, address):
            continue
        if since is not None and not since <= date < until:
            continue
        score = sum(math.log(1.0 + count / holders[word]) * f * (k1 + 1.0)
                    / (f + k1 * (1.0 - b + b * length / mean_length))
                    for word, f in frequencies.items())
        ranked.append((round(score, 9), date, message_id))
    ranked.sort(key=lambda entry: (-entry[0], -entry[1].timestamp()))
    return [message_id for _, _, message_id in ranked]


@pytest.mark.parametrize("words, sender", [(("ocelot",), None), (("ocelot", "heron"), None),
                                           (("ocelot",), "bob@example.org")])
def test_pages_hold_what_an_exhaustive_scoring_ranks_there(app, words, sender):
    expected = brute_force_ranking(app, words, sender)
    assert len(expected) > 1520 if sender is None else len(expected) > 420
    query = " ".join(words) + (f" from:{sender}" if sender else "")
    for start in (0, 20, 400, 1500):
        if start >= len(expected):
            continue
        _, ids = search(app, query, start=start, size=20)
        assert ids == expected[start:start + 20]
    results, ids = search(app, query, start=10**6, size=20)
    assert ids == expected[(len(expected) - 1) // 20 * 20:]


def test_a_word_from_a_sender_between_two_dates_pages_as_an_exhaustive_scoring_ranks(app):
    # Both a field of the message's own (the sender) and a set of the
    # catalog's (the dates) decide which of the word's best pass.
    since, until = datetime(2015, 2, 1, tzinfo=timezone.utc), datetime(2015, 3, 15, tzinfo=timezone.utc)
    expected = brute_force_ranking(app, ("ocelot",), "bob@example.org", since, until)
    assert EXACT_UP_TO < 200 < len(expected) < len(brute_force_ranking(app, ("ocelot",), "bob@example.org"))
    query = "ocelot from:bob@example.org after:2015-02-01 before:2015-03-15"
    for start in (0, 20, 200):
        _, ids = search(app, query, start=start, size=20)
        assert ids == expected[start:start + 20]
    results, _ = search(app, query)
    assert results.total_estimated and abs(results.total - len(expected)) <= len(expected) * 0.1


@pytest.mark.parametrize("words, dates", [
    (("ocelot",), "after:2015-01-20"), (("ocelot",), "before:2015-04-01"),
    (("ocelot", "heron"), "after:2015-01-20"), (("ocelot",), "date:2015-01-20..2015-04-01"),
])
def test_a_word_between_dates_that_hold_most_of_the_mail_pages_as_an_exhaustive_scoring_ranks(app, words, dates):
    # Such dates are tested as a sender is, by each posting's own date.
    bounds = {"after:2015-01-20": ("2015-01-20", "2100-01-01"), "before:2015-04-01": ("2000-01-01", "2015-04-01"),
              "date:2015-01-20..2015-04-01": ("2015-01-20", "2015-04-02")}[dates]
    since, until = (datetime.fromisoformat(bound).replace(tzinfo=timezone.utc) for bound in bounds)
    expected = brute_force_ranking(app, words, None, since, until)
    assert EXACT_UP_TO < 400 < len(expected) < len(brute_force_ranking(app, words))
    query = " ".join(words) + " " + dates
    for start in (0, 20, 380):
        _, ids = search(app, query, start=start, size=20)
        assert ids == expected[start:start + 20], (query, start)
    results, _ = search(app, query)
    assert abs(results.total - len(expected)) <= len(expected) * 0.1


@pytest.mark.parametrize("sender", [None, "bob@example.org"])
def test_one_per_thread_pages_hold_each_threads_best_message_and_its_matches(app, sender):
    ranking = brute_force_ranking(app, ("ocelot",), sender)
    with prepare(registry=app.registry) as env:
        messages = {m.message_id: m.thread for m in env["root"].lists[LIST].messages.values()}
    best, matched = {}, {}
    for message_id in ranking:
        best.setdefault(messages[message_id], message_id)
        matched[messages[message_id]] = matched.get(messages[message_id], 0) + 1
    threads = list(best)
    assert len(threads) > 420 and (sender or max(matched.values()) == 2)
    query = "ocelot" + (f" from:{sender}" if sender else "")
    for start in (0, 20, 400):
        results, ids = search(app, query, group="thread", start=start, size=20)
        assert ids == [best[key] for key in threads[start:start + 20]]
        counts = [matched[key] for key in threads[start:start + 20]]
        assert [hit.thread_matches for hit in results.hits] == counts


def test_a_filtered_word_counts_about_as_many_as_match(app):
    expected = len(brute_force_ranking(app, ("ocelot",), "bob@example.org"))
    results, _ = search(app, "ocelot from:bob")
    assert results.total_estimated and abs(results.total - expected) <= expected * 0.1


def test_an_archive_made_before_ranked_postings_is_upgraded_at_start_up(app, monkeypatch):
    from kittypyr import fulltext
    from kittypyr.bootstrap import ROOT_KEY, bootstrap_archive
    from kittypyr.fulltext import RankedPostings
    from kittypyr.lexicon import Postings

    # A savepoint after every word ranked, as a large archive has them
    # every two thousand: what went to a savepoint is committed all the same.
    monkeypatch.setattr(fulltext, "RANKED_BETWEEN_SAVEPOINTS", 1)

    expected = brute_force_ranking(app, ("ocelot",))
    with prepare(registry=app.registry) as env:
        archive = env["root"]
        wordinfo = archive.catalog["text"].index._wordinfo
        for wid, postings in list(wordinfo.items()):
            if isinstance(postings, RankedPostings):
                # As the archive's previous version stored them.
                plain = Postings()
                plain._chunks, plain._chunked = postings._chunks, postings._chunked
                plain._tail = postings._tail
                wordinfo[wid] = plain
        archive.schema_version = 5
        transaction.commit()
    with prepare(registry=app.registry) as env:
        connection = env["root"]._p_jar
        archive = bootstrap_archive(connection.root(), app.registry)
        transaction.commit()
        assert archive is connection.root()[ROOT_KEY] and archive.schema_version >= 6
        postings = [p for p in archive.catalog["text"].index._wordinfo.values() if not isinstance(p, bytes)]
        assert postings and all(isinstance(p, RankedPostings)
                                and [len(part) for part in p.ranked_chunks()] == [len(p._chunks)] * 2
                                for p in postings)
    for start in (0, 1500):
        assert search(app, "ocelot", start=start, size=20)[1] == expected[start:start + 20]


def test_an_archive_made_before_chunks_kept_their_dates_gets_them_at_start_up(app, monkeypatch):
    from kittypyr import fulltext
    from kittypyr.bootstrap import EVOLVE_STEPS, date_word_chunks
    from kittypyr.fulltext import DAY, RankedPostings

    monkeypatch.setattr(fulltext, "RANKED_BETWEEN_SAVEPOINTS", 1)
    since, until = datetime(2015, 2, 1, tzinfo=timezone.utc), datetime(2015, 3, 15, tzinfo=timezone.utc)
    expected = brute_force_ranking(app, ("ocelot",), "bob@example.org", since, until)
    with prepare(registry=app.registry) as env:
        archive = env["root"]
        ranked = [p for p in archive.catalog["text"].index._wordinfo.values() if isinstance(p, RankedPostings)]
        for postings in ranked:
            # As the archive's previous version stored them: no spans.
            postings._span = None
            if postings._directory is not None:
                postings._directory.open_spans = ()
                for group in postings._directory.groups:
                    group.spans = None
        archive.schema_version = EVOLVE_STEPS.index(date_word_chunks)
        transaction.commit()
    with started_again(app) as archive:
        index = archive.catalog["text"].index
        ocelot = index._wordinfo[index.word_ids(["ocelot"])[0]]
        spans = ocelot._directory.spans
        assert len(spans) > 5 and None not in spans and ocelot._span is not None
        messages = archive.lists[LIST].messages
        days = {}
        for message in messages.values():
            days[docid_of(archive, message)] = int(message.timestamp) // DAY
        for chunk, span in zip(ocelot._directory.chunks, spans):
            chunk_days = [days[docid] for docid in np.frombuffer(chunk.data, dtype="<i4")[0::2].tolist()]
            assert span == (min(chunk_days), max(chunk_days))
    query = "ocelot from:bob@example.org after:2015-02-01 before:2015-03-15"
    for start in (0, 200):
        assert search(app, query, start=start, size=20)[1] == expected[start:start + 20]


@pytest.mark.parametrize("sort", ["date-desc", "date-asc"])
def test_date_ordered_pages_hold_the_newest_or_oldest_matches(app, sort):
    written = sorted(n for n, _ in corpus() if n % 3 == 1)  # Bob's, dated by their number
    if sort == "date-desc":
        written.reverse()
    for start in (0, 20, 300, len(written) - 5):
        _, ids = search(app, "from:bob", sort=sort, start=start, size=20)
        assert [number(i) for i in ids] == written[start:start + 20]


@pytest.mark.parametrize("sender", [None, "bob@example.org"])
def test_two_words_read_from_their_high_postings_page_as_an_exhaustive_scoring_ranks(app, sender, monkeypatch):
    # As two words of a large archive: read from their chunks' high postings
    # and the chunks that can still reach the page (here they are few
    # enough to be scored whole otherwise).
    from kittypyr import fulltext

    monkeypatch.setattr(fulltext, "WORDS_SCORED_WHOLE_UP_TO", 0)
    words = ("ocelot", "heron")
    expected = brute_force_ranking(app, words, sender)
    assert len(expected) > 420
    query = " ".join(words) + (f" from:{sender}" if sender else "")
    for start in (0, 20, 400):
        _, ids = search(app, query, start=start, size=20)
        assert ids == expected[start:start + 20]
    results, _ = search(app, query)
    assert results.total_estimated and abs(results.total - len(expected)) <= len(expected) * 0.15, \
        (results.total, len(expected))

    with prepare(registry=app.registry) as env:
        thread_of = {m.message_id: m.thread for m in env["root"].lists[LIST].messages.values()}
    best = {}
    for message_id in expected:
        best.setdefault(thread_of[message_id], message_id)
    threads = list(best)
    results, ids = search(app, query, group="thread", size=20)
    assert ids == [best[key] for key in threads[:20]]


@pytest.mark.parametrize("sender", [None, "bob@example.org"])
def test_a_phrase_read_from_its_words_high_postings_pages_as_an_exhaustive_scoring_ranks(app, sender, monkeypatch):
    # As a phrase of two common words of a large archive: its words' best
    # postings read first, the candidates looked at best first; half of
    # those holding both words hold the phrase.
    from kittypyr import fulltext

    monkeypatch.setattr(fulltext, "PHRASE_WORDS_SCORED_WHOLE_UP_TO", 0)
    expected = [message_id for message_id in brute_force_ranking(app, ("gray", "heron"), sender)
                if number(message_id) < PHRASE_HOLDERS]
    assert len(expected) > 50
    query = '"gray heron"' + (f" from:{sender}" if sender else "")
    for start in (0, 20, len(expected) - 10):
        _, ids = search(app, query, start=start, size=20)
        assert ids == expected[start:start + 20]
    results, _ = search(app, query)
    assert abs(results.total - len(expected)) <= len(expected) * 0.25, (results.total, len(expected))
    # One per thread: each of these messages is a thread of its own.
    results, ids = search(app, query, group="thread", size=20)
    assert ids == expected[:20] and all(hit.thread_matches == 1 for hit in results.hits)
    # A phrase with a word: the page is the phrase's holders, ranked by all three words.
    expected = [message_id for message_id in brute_force_ranking(app, ("gray", "heron", "dolor"), sender)
                if number(message_id) < PHRASE_HOLDERS]
    _, ids = search(app, '"gray heron" dolor' + (f" from:{sender}" if sender else ""), size=20)
    assert ids == expected[:20]


def test_an_archive_made_before_groups_kept_high_postings_gets_them_at_start_up(app):
    from kittypyr.bootstrap import EVOLVE_STEPS, split_word_chunks
    from kittypyr.fulltext import ChunkDirectory, ChunkGroup, RankedPostings, split_high

    with prepare(registry=app.registry) as env:
        archive = env["root"]
        index = archive.catalog["text"].index
        wid = index.word_ids(["ocelot"])[0]
        ocelot = index._wordinfo[wid]
        # As the archive's previous version grouped them: 64 to a group,
        # without high postings, the rest left open.
        grown = RankedPostings()
        chance = random.Random(5)
        for docid in range(1, 100 * RankedPostings.CHUNK_PAIRS + 1):
            grown.append(docid, chance.randint(1, 9) << 16 | chance.randint(5, 900))
        directory = grown._directory
        chunks, ceilings = directory.chunks, directory.ceilings
        group = ChunkGroup.__new__(ChunkGroup)
        group.__setstate__({"chunks": chunks[:64], "ceilings": ceilings[:64], "spans": (None,) * 64})
        old = ChunkDirectory.__new__(ChunkDirectory)
        old.__setstate__({"groups": (group,), "open_chunks": chunks[64:], "open_ceilings": ceilings[64:]})
        grown._directory = old
        index._wordinfo[wid] = grown
        archive.schema_version = EVOLVE_STEPS.index(split_word_chunks)
        transaction.commit()
    try:
        with started_again(app) as archive:
            index = archive.catalog["text"].index
            directory = index._wordinfo[wid]._directory
            # The open chunks grouped as a new word's are, and every group split at the index's mean length.
            assert len(directory.open_chunks) == (100 - 64) % ChunkDirectory.GROUP_CHUNKS
            assert directory.chunks == chunks
            mean_length = index.split_mean_length()
            for group in directory.groups:
                assert group.highs == tuple(split_high(chunk.data, mean_length)[0] for chunk in group.chunks)
                assert group.rests == tuple(split_high(chunk.data, mean_length)[1] for chunk in group.chunks)
    finally:
        with prepare(registry=app.registry) as env:
            env["root"].catalog["text"].index._wordinfo[wid] = ocelot
            transaction.commit()


def test_an_archive_made_before_word_sequences_had_small_buckets_gets_them_at_start_up(app):
    from BTrees.IOBTree import IOBTree

    from kittypyr.bootstrap import EVOLVE_STEPS, move_word_sequences
    from kittypyr.lexicon import WordSequences

    with prepare(registry=app.registry) as env:
        archive = env["root"]
        index = archive.catalog["text"].index
        sequences = dict(index._docwords.items())
        # As the archive's previous version kept them: zope.index's own tree.
        index._docwords = IOBTree(sequences)
        archive.schema_version = EVOLVE_STEPS.index(move_word_sequences)
        transaction.commit()
    with started_again(app) as archive:
        moved = archive.catalog["text"].index._docwords
        assert type(moved) is WordSequences and dict(moved.items()) == sequences
    results, ids = search(app, '"gray heron"', sort="date-desc", size=PHRASE_HOLDERS)
    assert sorted(number(i) for i in ids) == list(range(PHRASE_HOLDERS))


def _hour(text):
    """The number of the first message dated on or after the day ``text`` (YYYY-MM-DD): one message an hour."""
    return int((datetime.fromisoformat(text).replace(tzinfo=timezone.utc) - START).total_seconds() // 3600)


# A search by fields alone, newest first: each query and which messages
# it finds (by number, one an hour).
FIELDS_ONLY = [
    ("list:big", lambda n: True),
    ("before:2030", lambda n: True),
    ("-from:ada", lambda n: n % 3 != 0),
    ("from:bob", lambda n: n % 3 == 1),
    ("-from:ada -from:bob", lambda n: n % 3 == 2),
    ("from:example.org -from:cy", lambda n: n % 3 != 2),
    ("after:2015-03-01", lambda n: n >= _hour("2015-03-01")),
    ("date:2015-02", lambda n: _hour("2015-02-01") <= n < _hour("2015-03-01")),
    ("after:2015-02-01 -from:cy", lambda n: n >= _hour("2015-02-01") and n % 3 != 2),
    ("before:2015-03-01 -date:2015-02", lambda n: n < _hour("2015-02-01")),
    ("from:bob after:2015-02-01 before:2015-03-15",
     lambda n: n % 3 == 1 and _hour("2015-02-01") <= n < _hour("2015-03-15")),
    ("from:example.org -from:ada date:2015-01", lambda n: n % 3 != 0 and n < _hour("2015-02-01")),
]


@pytest.mark.parametrize("sort", ["date-desc", "date-asc"])
@pytest.mark.parametrize("query, finds", FIELDS_ONLY, ids=[query for query, _ in FIELDS_ONLY])
def test_a_search_by_fields_alone_pages_its_newest_or_oldest_matches_and_counts_them(app, query, finds, sort):
    expected = sorted((n for n, _ in corpus() if finds(n)), reverse=sort == "date-desc")
    last = (len(expected) - 1) // 20 * 20
    for start in (0, 20, 380, 980, len(expected) + 500):
        results, ids = search(app, query, sort=sort, start=start, size=20)
        # A page past the end is the last one.
        shown = min(start, last)
        assert [number(i) for i in ids] == expected[shown:shown + 20], (query, start)
        assert not results.problems
        assert results.matched == len(expected), (query, start)
