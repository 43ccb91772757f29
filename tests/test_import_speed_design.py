"""The import's shortcuts give exactly what the plain way gives.

Words are split in parser processes and looked up once per document and
once per transaction, postings are packed, dates need no set per document,
message ids are hashed in parser processes, and blobs are added to the
connection as they are made; none of it may change what is stored or found,
nor what concurrent writers can merge.
"""

import os

import transaction
from repoze.catalog.indexes.text import CatalogTextIndex
from ZODB import DB
from ZODB.FileStorage import FileStorage
from ZODB.MappingStorage import MappingStorage

from kittypyr.archiving import archive_message, ensure_mailing_list
from kittypyr.catalog import make_text_index, search
from kittypyr import lexicon
from kittypyr.importing import Importer, ImportReport, Parsed, parse_raw
from kittypyr.lexicon import INLINE_MAX, RECENT_MAX, Postings, WithRecent, PreparedText, _pairs, make_pipeline, prepare_text, split_words
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
    if isinstance(value, (bytes, Postings, WithRecent)):
        return _pairs(value)
    return value.items()


def _doc_count(value):
    if isinstance(value, (bytes, Postings, WithRecent)):
        return lexicon._doc_count(value)
    return len(value)


def _state(index):
    okapi = index.index
    # Words no document has any more: zope.index keeps them in its lexicon,
    # ours forgets them (see test_unused_words_leave_the_lexicon).
    used = set(okapi._wordinfo.keys())
    # Ours as its readers see them: a large word's record and its recent postings.
    postings = {wid: okapi.postings_of(wid) for wid in used} if hasattr(okapi, "postings_of") else okapi._wordinfo
    return (
        {wid: (_doc_count(d2f), dict(_postings(d2f))) for wid, d2f in postings.items()},
        dict(okapi._docweight.items()),
        dict(okapi._docwords.items()),
        okapi._totaldoclen(),
        okapi.documentCount(),
        okapi.wordCount(),
        {word: wid for word, wid in index.lexicon._wids.items() if wid in used},
        {wid: word for wid, word in index.lexicon._words.items() if wid in used},
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

    def store(mailing_list, mail, **options):
        result = real_store(mailing_list, mail, **options)
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


def test_unused_words_leave_the_lexicon():
    stock, ours = _index_both(["a leaked hunter2 password", "the password again", "something else"])
    for index in (stock, ours):
        index.unindex_doc(1)
    assert stock.lexicon.get_wid("hunter2") != 0
    assert ours.lexicon.get_wid("hunter2") == 0 and ours.lexicon.get_wid("leaked") == 0
    assert ours.lexicon.get_wid("password") != 0
    assert "hunter2" not in set(ours.lexicon._words.values())
    assert dict(ours.apply("password").items()) == dict(stock.apply("password").items())
    # A word that comes back gets an id never used before.
    old_ids = set(stock.lexicon._words.keys())
    ours.index_doc(4, "hunter2 returns")
    assert ours.lexicon.get_wid("hunter2") not in old_ids
    assert list(ours.apply("hunter2").keys()) == [4]


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


CJK_TEXTS = ["我们明天讨论内核补丁的问题。", "Linuxカーネルのパッチ・レビュー", "패치를 보냈습니다", "2019年のMIPS", "核"]


def test_one_pass_split_is_the_pipeline():
    pipeline = make_pipeline()
    for text in TEXTS + CJK_TEXTS + ["İstanbul ǅemal ﬁne ß STRASSE", "x" * 300 + " a1 _b c_"]:
        assert split_words(text) == split_words(text, pipeline)


def test_words_without_cjk_letters_split_as_zope_index_splits_them():
    from zope.index.text.lexicon import CaseNormalizer, Splitter, StopWordRemover

    stock = (Splitter(), CaseNormalizer(), StopWordRemover())
    for text in TEXTS + ["Привет, мир; Γειά σου κόσμε", "مرحبا بالعالم", "สวัสดีชาวโลก", "ＦＵＬＬ ｗｉｄｔｈ", "ok 🙂 ok"]:
        assert split_words(text) == split_words(text, stock)


def _value_of(obj, default):
    return default if obj is None else obj


def test_sparse_field_index_answers_as_the_field_index():
    import random

    from repoze.catalog.indexes.field import FWSCAN, NBEST, TIMSORT, CatalogFieldIndex
    from repoze.catalog.query import Any, Eq, Ge, Gt, InRange, Le, Lt, NotEq

    from kittypyr.catalog import SparseFieldIndex, _unindexed_as_tree

    rng = random.Random(5)
    stock = CatalogFieldIndex(_value_of)
    sparse = _unindexed_as_tree(SparseFieldIndex(_value_of))
    values = {}
    for step in range(3000):
        docid = rng.randrange(400)
        action = rng.random()
        value = rng.choice([None, rng.randrange(1000), rng.randrange(30)])
        for index in (stock, sparse):
            if action < 0.6:
                index.index_doc(docid, value)
            elif action < 0.8:
                index.reindex_doc(docid, values.get(docid))
            else:
                index.unindex_doc(docid)
        if action < 0.6:
            values[docid] = value
        elif action >= 0.8:
            values.pop(docid, None)

    def same(query):
        assert sorted(query._apply({"v": stock}, {})) == sorted(query._apply({"v": sparse}, {})), query

    assert dict(stock._rev_index.items()) == dict(sparse._rev_index.items())
    assert sorted(stock.docids()) == sorted(sparse.docids())
    assert stock.documentCount() == sparse.documentCount()
    assert stock.wordCount() == sparse.wordCount()
    for value in (0, 5, 29, 500, 999, 1000):
        same(Eq("v", value))
        same(NotEq("v", value))
        same(Ge("v", value))
        same(Gt("v", value))
        same(Le("v", value))
        same(Lt("v", value))
    same(InRange("v", 10, 700))
    same(Any("v", [3, 4, 500, 1001]))
    docids = stock.docids()
    for sort_type in (FWSCAN, NBEST, TIMSORT):
        for reverse in (False, True):
            if reverse and sort_type == FWSCAN:
                continue
            for limit in (1, 10, None):
                if limit is None and sort_type == NBEST:
                    continue
                a = list(stock.sort(docids, reverse=reverse, limit=limit, sort_type=sort_type))
                b = list(sparse.sort(docids, reverse=reverse, limit=limit, sort_type=sort_type))
                key = [stock._rev_index.get(d) for d in a]
                assert key == [sparse._rev_index.get(d) for d in b], (sort_type, reverse, limit)
                if sort_type == FWSCAN:
                    assert a == b


def test_word_ids_encode_as_widcode_does():
    import random

    from zope.index.text import widcode

    from kittypyr.lexicon import encode_positions

    rng = random.Random(3)
    wids = [1, 127, 128, 0x3FFF, 0x4000, 0x4001, 0x1FFFFF, 0x200000, 0x200001, 0xFFFFFFF]
    wids += [rng.randrange(1, 0x10000000) for _ in range(2000)]
    positions = [rng.randrange(len(wids)) for _ in range(5000)] + list(range(len(wids)))
    assert encode_positions(wids, positions) == widcode.encode([wids[p] for p in positions])


def test_concurrent_appends_next_to_chunks_merge_and_chunking_conflicts(tmp_path, monkeypatch, caplog):
    import pytest
    from ZODB.POSException import ConflictError

    monkeypatch.setattr(Postings, "CHUNK_PAIRS", INLINE_MAX + 8)
    db = DB(FileStorage(str(tmp_path / "Data.fs")))
    first = db.open(transaction.TransactionManager())
    first.root()["index"] = index = make_text_index()
    index.discriminator = _plain
    # One chunk, a short tail: postings past INLINE_MAX join the record RECENT_MAX at a time.
    for docid in range(1, INLINE_MAX + 12 + RECENT_MAX):
        index.index_doc(docid, "shared")
    first.transaction_manager.commit()
    word = index.lexicon._wids["shared"]
    assert len(index.index._wordinfo[word]._chunks) == 1

    second = db.open(transaction.TransactionManager())
    other = second.root()["index"]
    index.index_doc(1000, "shared")
    other.index_doc(2000, "shared")
    first.transaction_manager.commit()
    second.transaction_manager.commit()
    second.transaction_manager.begin()
    assert set(other.apply("shared").keys()) == set(range(1, INLINE_MAX + 12 + RECENT_MAX)) | {1000, 2000}

    # Both fill the tail into a new chunk: that cannot be merged.
    first.transaction_manager.begin()
    for docid in range(3000, 3000 + INLINE_MAX + 8):
        index.index_doc(docid, "shared")
        other.index_doc(docid + 1000, "shared")
    first.transaction_manager.commit()
    with pytest.raises(ConflictError):
        second.transaction_manager.commit()
    second.transaction_manager.abort()
    assert "Unexpected error" not in caplog.text
    for connection in (first, second):
        connection.close()
    db.close()


class _Reference:
    """Stands for ZODB's PersistentReference: it refuses to compare unequal ones."""

    def __init__(self, oid):
        self.oid = oid

    def __eq__(self, other):
        if self.oid == other.oid:
            return True
        raise ValueError("can't reliably compare")


def test_postings_conflicts_merge_appends_only():
    import pytest
    from ZODB.POSException import ConflictError

    def state(chunks, chunked, tail):
        return {"_chunks": tuple(_Reference(oid) for oid in chunks), "_chunked": chunked, "_tail": tail}

    resolve = Postings()._p_resolveConflict
    merged = resolve(state([1], 9, b"ab"), state([1], 9, b"abcd"), state([1], 9, b"abef"))
    assert merged["_tail"] == b"abcdef" and merged["_chunked"] == 9
    with pytest.raises(ConflictError):  # both made a new chunk
        resolve(state([1], 9, b"ab"), state([1, 2], 18, b""), state([1, 3], 18, b""))
    with pytest.raises(ConflictError):  # one made a new chunk
        resolve(state([1], 9, b"ab"), state([1, 2], 18, b""), state([1], 9, b"abef"))
    with pytest.raises(ConflictError):  # one removed a posting
        resolve(state([1], 9, b"abcd"), state([1], 9, b"ab"), state([1], 9, b"abcdef"))


def test_word_ids_undone_by_a_savepoint_rollback_are_not_reused():
    db = DB(MappingStorage())
    connection = db.open()
    connection.root()["index"] = index = make_text_index()
    index.discriminator = _plain
    index.index_doc(1, "alpha")
    transaction.commit()

    savepoint = transaction.savepoint()
    index.index_doc(2, "beta gamma alpha")
    savepoint.rollback()
    index.index_doc(3, "delta")
    index.index_doc(4, "gamma beta alpha delta")
    transaction.commit()
    lexicon = index.lexicon
    assert sorted(lexicon._wids.keys()) == ["alpha", "beta", "delta", "gamma"]
    assert {lexicon._words[wid]: wid for wid in lexicon._wids.values()} == dict(lexicon._wids.items())
    assert sorted(index.apply("beta").keys()) == [4]
    assert sorted(index.apply("delta").keys()) == [3, 4]
    connection.close()
    db.close()


def test_lexicon_marked_by_two_writers_resolves():
    import pytest
    from ZODB.POSException import ConflictError

    from kittypyr.lexicon import Lexicon

    lexicon = Lexicon()

    def state(wids=1):
        return {"_wids": _Reference(wids), "_words": _Reference(2), "wordCount": _Reference(3),
                "_pipeline": make_pipeline()}

    assert lexicon._p_resolveConflict(state(), state(), state())["_words"].oid == 2
    with pytest.raises(ConflictError):
        lexicon._p_resolveConflict(state(), state(), state(wids=9))


def test_parser_processes_deliver_every_message_in_order(tmp_path):
    from kittypyr.importing import parse_all
    from tests.functional import mbox_bytes

    first = tmp_path / "first.mbox"
    first.write_bytes(mbox_bytes([_raw(n) for n in range(1, 301)]))
    broken = tmp_path / "broken.mbox.gz"
    broken.write_bytes(b"\x1f\x8b not really gzip")
    second = tmp_path / "second.mbox"
    second.write_bytes(mbox_bytes([_raw(n) for n in range(301, 311)]))
    paths = [first, broken, second]
    inline_report = ImportReport()
    inline = [(p.source, p.position, p.mail.message_id) for p in parse_all(paths, inline_report, 0)]
    assert len(inline) == 310
    for workers in (1, 3):
        report = ImportReport()
        got = [(p.source, p.position, p.mail.message_id) for p in parse_all(paths, report, workers)]
        assert got == inline
        assert [(f.path, f.read, f.error) for f in report.files] == [
            (f.path, f.read, f.error) for f in inline_report.files
        ]
    assert inline_report.file(str(broken)).error


def test_originals_are_records_and_large_ones_blobs(archive):
    from ZODB.blob import Blob

    from kittypyr.resources.message import ORIGINAL_RECORD_MAX, CompressedOriginal

    mailing_list = ensure_mailing_list(archive, "dev@example.org")
    small = _raw(1)
    # Random bytes do not compress: this one's original stays a file.
    large = make_message(message_id="<large@example.org>", subject="Large",
                         body=multipart("mixed", text_part("See the dump.\n"),
                                        mb_attachment(os.urandom(ORIGINAL_RECORD_MAX), "application/octet-stream",
                                                      "dump.bin")))
    first = archive_message(mailing_list, small)
    second = archive_message(mailing_list, large)
    transaction.commit()
    assert isinstance(first.original, CompressedOriginal) and first.original_bytes() == small
    assert isinstance(second.original, Blob) and second.original_bytes() == large
    with first.open_original() as read:
        assert read.read() == small


def _stored_record(obj):
    """The bytes the storage holds for ``obj``'s current revision."""
    data, _ = obj._p_jar.db().storage.load(obj._p_oid)
    return data


def test_body_text_is_stored_compressed_and_read_back_whole(archive):
    # The decoded text is most of a message's record: kept compressed, it
    # costs a third as much storage and cache memory.
    body = "".join(f"Line {n} of a long explanation of the cache flush.\n" for n in range(400))
    body += "déjà vu, naïve café \U0001f600\n"
    from kittypyr.mail import parse_message

    raw = _raw(1, body=body)
    mailing_list = ensure_mailing_list(archive, "dev@example.org")
    message = archive_message(mailing_list, raw)
    transaction.commit()
    record = _stored_record(message)
    assert b"long explanation of the cache flush" not in record
    assert len(record) < len(body) / 4

    message._p_invalidate()
    assert message.body_text == parse_message(raw).body_text
    assert "naïve café \U0001f600" in message.body_text
    assert search(archive, _contains("explanation"))[0] == 1


def test_body_text_of_a_message_stored_before_compression_still_reads(archive):
    mailing_list = ensure_mailing_list(archive, "dev@example.org")
    message = archive_message(mailing_list, _raw(1, body="an older message's words\n"))
    transaction.commit()
    # How a message stored by an older release looks: the text itself.
    state = message.__getstate__()
    state = {name: value for name, value in state.items() if name != "_body_packed"}
    state["body_text"] = "an older message's words\n"
    message.__setstate__(state)
    message._p_changed = True
    transaction.commit()
    message._p_invalidate()
    assert message.body_text == "an older message's words\n"
    message.body_text = "replaced\n"
    transaction.commit()
    message._p_invalidate()
    assert message.body_text == "replaced\n"


def test_a_new_posting_rewrites_a_record_that_does_not_grow_with_the_word(tmp_path, monkeypatch):
    # A message archived on its own adds a posting to each of its words:
    # the record that rewrites must not hold the references and ceilings of
    # every full chunk of a common word, which grow with the archive.
    from kittypyr.fulltext import RankedPostings, ceiling_of

    monkeypatch.setattr(RankedPostings, "CHUNK_PAIRS", 8)
    db = DB(FileStorage(str(tmp_path / "Data.fs")))
    connection = db.open()
    connection.root()["word"] = postings = RankedPostings()
    transaction.commit()
    docids = iter(range(1, 10_000))
    sizes = []
    for chunks in (4, 64):
        while len(postings._chunks) < chunks:
            docid = next(docids)
            postings.append(docid, docid % 50 + 1)
        transaction.commit()
        postings.append(next(docids), 7)
        transaction.commit()
        sizes.append(len(db.storage.load(postings._p_oid)[0]))
    assert sizes[1] <= sizes[0] + 16, sizes

    added = next(docids) - 1
    postings._p_invalidate()
    assert len(postings) == added and [docid for docid, _ in postings.pairs()] == list(range(1, added + 1))
    chunks, ceilings = postings.ranked_chunks()
    assert len(chunks) == 64 and list(ceilings) == [ceiling_of(chunk.data) for chunk in chunks]
    connection.close()
    db.close()


def test_ranked_postings_merge_concurrent_appends_and_refuse_concurrent_chunks(tmp_path, monkeypatch, caplog):
    import pytest
    from ZODB.POSException import ConflictError

    from kittypyr.fulltext import RankedPostings

    monkeypatch.setattr(RankedPostings, "CHUNK_PAIRS", 8)
    db = DB(FileStorage(str(tmp_path / "Data.fs")))
    first = db.open(transaction.TransactionManager())
    first.root()["word"] = postings = RankedPostings()
    for docid in range(1, 11):  # one chunk, a short tail
        postings.append(docid, 1)
    first.transaction_manager.commit()
    second = db.open(transaction.TransactionManager())
    other = second.root()["word"]

    postings.append(100, 1)
    other.append(200, 2)
    first.transaction_manager.commit()
    second.transaction_manager.commit()
    second.transaction_manager.begin()
    assert sorted(docid for docid, _ in other.pairs()) == list(range(1, 11)) + [100, 200]
    assert len(other.ranked_chunks()[0]) == 1

    # Both fill the tail into a new chunk: that cannot be merged.
    first.transaction_manager.begin()
    for docid in range(300, 306):
        postings.append(docid, 1)
        other.append(docid + 100, 1)
    first.transaction_manager.commit()
    with pytest.raises(ConflictError):
        second.transaction_manager.commit()
    second.transaction_manager.abort()
    assert "Unexpected error" not in caplog.text
    for connection in (first, second):
        connection.close()
    db.close()
