"""The import's shortcuts give exactly what the plain way gives.

Words are split in parser processes, looked up once per document and once
per transaction, message ids are hashed in parser processes, and blobs are
added to the connection as they are made; none of it may change what is
stored or found.
"""

import transaction
from repoze.catalog.indexes.text import CatalogTextIndex
from ZODB import DB
from ZODB.FileStorage import FileStorage
from ZODB.MappingStorage import MappingStorage

from kittypyr.archiving import archive_message, ensure_mailing_list
from kittypyr.catalog import make_text_index, search
from kittypyr.importing import Importer, ImportReport, Parsed, parse_raw
from kittypyr import lexicon
from kittypyr.lexicon import INLINE_MAX, Postings, PreparedText, _pairs, prepare_text, split_words
from kittypyr.mailboxes import RawMail
from kittypyr.msgid import message_id_hash
from tests.mailbuilder import attachment as mb_attachment
from tests.mailbuilder import make_message, multipart, text_part

PATCH = b"\x00binary attachment\x01"

TEXTS = [
    "The quick brown fox jumps over the lazy dog; the DOG sleeps.",
    "Patch: fix the MIPS cache flush (again) -- the cache, the cache!",
    "",
    "a an the of and or",  # stop words only
    "zebra Zebra ZEBRA zebra_crossing zebra-crossing 0x1f 0x1F",
    "déjà vu, Übergrößen und naïve café",
]


def _plain(text, default=None):
    return text


def _index_both(texts, prepare=False):
    stock = CatalogTextIndex(_plain)
    ours = make_text_index()
    ours.discriminator = _plain
    for docid, text in enumerate(texts, 1):
        stock.index_doc(docid, text)
        ours.index_doc(docid, prepare_text(text) if prepare else text)
    return stock, ours


def _postings(value):
    if isinstance(value, (bytes, Postings)):
        return _pairs(value)
    return value.items()


def _doc_count(value):
    if isinstance(value, (bytes, Postings)):
        return lexicon._doc_count(value)
    return len(value)


def _state(index):
    okapi = index.index
    return (
        {wid: (_doc_count(d2f), dict(_postings(d2f))) for wid, d2f in okapi._wordinfo.items()},
        dict(okapi._docweight.items()),
        dict(okapi._docwords.items()),
        okapi._totaldoclen(),
        okapi.documentCount(),
        okapi.wordCount(),
        dict(index.lexicon._wids.items()),
        dict(index.lexicon._words.items()),
    )


def test_prepared_words_are_the_pipeline_words():
    for text in TEXTS:
        prepared = prepare_text(text)
        assert isinstance(prepared, PreparedText) and prepared == text
        assert [prepared.distinct[p] for p in prepared.positions] == split_words(text)
        assert len(set(prepared.distinct)) == len(prepared.distinct)


def test_same_index_as_zope_index_builds_prepared_or_not():
    # Enough documents that common words outgrow the small-dict postings.
    texts = TEXTS * 5
    for prepare in (False, True):
        stock, ours = _index_both(texts, prepare)
        assert _state(ours) == _state(stock)
        for query in ("cache", "zebra", "lazy", "fox OR zebra", "cache AND NOT fox",
                      '"cache flush"', "zebr*", "nothing"):
            assert dict(ours.apply(query).items()) == dict(stock.apply(query).items()), query


def test_reindex_and_unindex_stay_the_same():
    stock, ours = _index_both(TEXTS * 3)
    for index in (stock, ours):
        index.reindex_doc(2, "a new text about the cache and zebras")
        index.unindex_doc(5)
        index.index_doc(40, "fresh words after removals, cache cache")
    assert _state(ours) == _state(stock)


def test_many_distinct_words_in_one_document():
    text = " ".join(f"word{n} word{n % 7}" for n in range(600))
    stock, ours = _index_both([text, text[:500]], prepare=True)
    assert _state(ours) == _state(stock)


def test_word_ids_made_in_an_aborted_transaction_are_not_reused():
    db = DB(MappingStorage())
    connection = db.open()
    root = connection.root()
    root["index"] = index = make_text_index()
    index.discriminator = _plain
    transaction.commit()

    index.index_doc(1, "alpha beta")
    transaction.abort()
    # The aborted words are gone; the lexicon must not hand out their old ids.
    index.index_doc(2, "gamma")
    index.index_doc(3, "beta alpha gamma")
    transaction.commit()
    lexicon = index.lexicon
    assert sorted(lexicon._wids.keys()) == ["alpha", "beta", "gamma"]
    assert {lexicon._words[wid] for wid in lexicon._wids.values()} == {"alpha", "beta", "gamma"}
    assert len(set(lexicon._wids.values())) == 3
    assert sorted(index.apply("beta").keys()) == [3]
    assert sorted(index.apply("gamma").keys()) == [2, 3]
    connection.close()
    db.close()


def _raw(n, reply_to=None, body="words of the message\n", attachment=False):
    from datetime import datetime, timedelta, timezone

    if attachment:
        body = multipart("mixed", text_part(body), mb_attachment(PATCH, "application/octet-stream", "fix.bin"))
    return make_message(
        message_id=f"<speed{n}@example.org>",
        subject=f"Speed {n}",
        sender=("Ann Author", "ann@example.org"),
        date=datetime(2020, 1, 1, tzinfo=timezone.utc) + timedelta(minutes=n),
        in_reply_to=f"<speed{reply_to}@example.org>" if reply_to is not None else None,
        body=body,
    )


def test_imported_message_is_stored_and_found_like_an_archived_one(archive):
    raws = [_raw(1), _raw(2, reply_to=1, body="giraffes and zebras\n"), _raw(3, reply_to=9)]
    parsed = [parse_raw(RawMail(raw, "x.mbox", n, None)) for n, raw in enumerate(raws, 1)]
    assert parsed[0].mail.raw is None
    reply = parsed[1].mail
    assert reply.id_hashes[reply.in_reply_to] == message_id_hash("<speed1@example.org>")
    report = ImportReport()
    Importer(archive, "dev@example.org", transaction.manager, report).run(parsed)
    assert report.total("archived") == 3
    mailing_list = archive.lists["dev@example.org"]
    first = mailing_list.messages[message_id_hash("<speed1@example.org>")]
    second = mailing_list.messages[message_id_hash("<speed2@example.org>")]
    assert first.original_bytes() == raws[0]
    assert first.size == len(raws[0])
    assert second.parent == first.__name__ and second.thread == first.__name__
    assert message_id_hash("<speed9@example.org>") in mailing_list.waiting_for_parent
    assert search(archive, _contains("giraffes"))[0] == 1
    assert search(archive, _contains("speed"))[0] == 3

    # The same messages archived the plain way are duplicates: same ids, same content.
    other = ensure_mailing_list(archive, "dev@example.org")
    assert archive_message(other, raws[1]) is second


def _contains(word):
    from repoze.catalog.query import Contains

    return Contains("text", word)


def test_blobs_of_a_batch_commit_and_read_back(archive):
    parsed = [
        parse_raw(RawMail(_raw(n, attachment=n % 2 == 0), "x.mbox", n, None)) for n in range(1, 41)
    ]
    report = ImportReport()
    Importer(archive, "dev@example.org", transaction.manager, report, batch_size=16).run(parsed)
    assert report.total("archived") == 40
    messages = archive.lists["dev@example.org"].messages
    for item in parsed:
        message = messages[message_id_hash(item.mail.message_id)]
        assert message.original_bytes() == _raw(item.position, attachment=item.position % 2 == 0)
        if item.position % 2 == 0:
            assert [a.data() for a in message.attachments] == [PATCH]


def test_a_message_that_breaks_leaves_no_blob_behind(archive, monkeypatch):
    import kittypyr.importing as importing

    parsed = [parse_raw(RawMail(_raw(n), "x.mbox", n, None)) for n in range(1, 4)]
    real_store = importing.store_parsed

    def store(mailing_list, mail):
        result = real_store(mailing_list, mail)
        if mail.message_id == "speed2@example.org":
            raise RuntimeError("broken on purpose")
        return result

    monkeypatch.setattr(importing, "store_parsed", store)
    report = ImportReport()
    Importer(archive, "dev@example.org", transaction.manager, report).run(parsed)
    assert report.total("archived") == 2 and report.total("failed") == 1
    messages = archive.lists["dev@example.org"].messages
    assert message_id_hash("<speed2@example.org>") not in messages
    for n in (1, 3):
        assert messages[message_id_hash(f"<speed{n}@example.org>")].original_bytes() == _raw(n)


def test_parsed_is_usable_when_made_elsewhere():
    # A ``Parsed`` from an older parser, with the original and no extras.
    from kittypyr.mail import parse_message

    mail = parse_message(_raw(7))
    assert Parsed("x", 1, mail).mail.raw == _raw(7)


def test_large_postings_chunk_and_stay_the_same(monkeypatch):
    monkeypatch.setattr(Postings, "CHUNK_PAIRS", 16)
    texts = [f"common word{n % 5} rare{n} " + "again " * (n % 3) for n in range(INLINE_MAX * 3)]
    stock, ours = _index_both(texts)
    common = ours.lexicon._wids["common"]
    assert isinstance(ours.index._wordinfo[common], Postings)
    assert len(ours.index._wordinfo[common]._chunks) > 2
    assert _state(ours) == _state(stock)
    for index in (stock, ours):
        for docid in (1, 17, 100, INLINE_MAX * 3):  # in chunks and in the tail
            index.unindex_doc(docid)
        index.reindex_doc(50, "common again again again word3")
        index.reindex_doc(51, "nothing shared")
    assert _state(ours) == _state(stock)
    for query in ("common", "again", "word3", "rare7", "common AND again", '"common word1"'):
        assert dict(ours.apply(query).items()) == dict(stock.apply(query).items()), query
    for docid in range(1, INLINE_MAX * 3 + 1):
        for index in (stock, ours):
            index.unindex_doc(docid)
    assert _state(ours) == _state(stock)
    assert len(ours.index._wordinfo) == 0 and ours.index.wordCount() == 0


def test_concurrent_appends_to_the_same_postings_both_survive(tmp_path):
    db = DB(FileStorage(str(tmp_path / "Data.fs")))
    first = db.open(transaction.TransactionManager())
    first_root = first.root()
    first_root["index"] = index = make_text_index()
    index.discriminator = _plain
    for docid in range(1, INLINE_MAX + 2):
        index.index_doc(docid, "shared words")
    first.transaction_manager.commit()

    second = db.open(transaction.TransactionManager())
    other = second.root()["index"]
    # Both writers know "shared" and "words" already: they touch the same postings only.
    index.index_doc(1000, "shared")
    other.index_doc(2000, "shared")
    first.transaction_manager.commit()
    second.transaction_manager.commit()

    check = db.open(transaction.TransactionManager())
    merged = check.root()["index"]
    assert set(merged.apply("shared").keys()) == set(range(1, INLINE_MAX + 2)) | {1000, 2000}
    for connection in (first, second, check):
        connection.close()
    db.close()
