"""The full-text index, made cheap to fill: zope.index's, with two changes.

Words: splitting, lower-casing and stop-word removal are pure and cost as
much as the rest of indexing together, so an importing parser process runs
them (``prepare_text``) and the catalog's ``Lexicon`` only turns each
distinct word into its id. Text that was not prepared goes through the very
same pipeline here, so both paths give the same word ids.

Chinese, Japanese and Korean put no space between words: a run of their
letters is indexed as its characters and the pairs of them (see
``split_cjk_runs``); every other word is split as zope.index's Splitter
splits it, once the text is composed (NFC) and the marks that stand
inside words (a soft hyphen) are taken out.

Postings: kept packed (see below), which is what most of a commit's time
went to. Queries, scores and phrase search are zope.index's own.
"""

import array
import re
import struct
import sys
import unicodedata

from BTrees.IOBTree import IOBTree
from persistent import Persistent
from transaction.interfaces import NoTransaction
from ZODB.POSException import ConflictError
from zope.index.text import widcode
from zope.index.text.baseindex import inverse_doc_frequency
from zope.index.text.lexicon import CaseNormalizer, Lexicon as _ZopeLexicon, Splitter, StopWordRemover
from zope.index.text.okapiindex import OkapiIndex as _ZopeOkapiIndex
from zope.index.text.okapiindex import score as okapi_score

from kittypyr.merging import AppendedBytes

# Letters of the scripts written without spaces between words: Hangul Jamo,
# 々 〆 〇, Hiragana, Katakana (with the prolonged sound mark ー, without the
# middle dot ・, which separates words), Hangul compatibility Jamo, Katakana
# extensions, Han (and its extensions and compatibility forms), Hangul
# syllables, half-width Katakana and Hangul.
_CJK_LETTERS = ("\u1100-\u11ff\u3005-\u3007\u3041-\u3096\u309d-\u309f\u30a1-\u30fa\u30fc-\u30ff"
                "\u3130-\u318f\u31f0-\u31ff\u3400-\u4dbf\u4e00-\u9fff\ua960-\ua97f\uac00-\ud7ff"
                "\uf900-\ufaff\uff66-\uffdc\U00020000-\U0003134f")
has_cjk_letters = re.compile(f"[{_CJK_LETTERS}]").search
_script_runs = re.compile(f"([{_CJK_LETTERS}]+)|[^{_CJK_LETTERS}]+").finditer


def split_cjk_runs(words):
    """``words`` (runs of letters), each run of CJK letters in it cut into characters and bigrams.

    A run of CJK letters has no spaces to say where its words are, so it is
    indexed the way Lucene's CJK analyzer and Xapian's n-gram mode do: as
    its overlapping pairs of characters, ``内核补丁`` as ``内核 核补 补丁``.
    Each character comes too, before its pair (``内 内核 核 核补 补 补丁 丁``):
    a one-character query is then one word's postings, wherever the
    character stands (looking it up as the beginning of pairs would miss
    a run's last character and read the postings of hundreds of pairs).
    Cut the same way, a query's run is the same sequence at consecutive
    positions, a phrase of the index's words. Where a run of letters
    changes between CJK and another script (``Linuxカーネル``), it is cut
    in two; a run without CJK letters stays whole.
    """
    split = []
    for word in words:
        if not has_cjk_letters(word):
            split.append(word)
            continue
        for run in _script_runs(word):
            if run.group(1) is None:
                split.append(run.group())
                continue
            letters = run.group()
            for at in range(len(letters) - 1):
                split += (letters[at], letters[at:at + 2])
            split.append(letters[-1])
    return split


# Marks that stand inside a word, never between two: the soft hyphen (a
# break, if need be: HTML's &shy;), the word joiner and the zero-width
# no-break space. Left in, each would cut its word in pieces no query finds.
_IN_WORD_MARKS = dict.fromkeys(map(ord, "\u00ad\u2060\ufeff"))


def words_form(text):
    """``text`` as its words are read: composed (NFC), without the invisible marks that stand inside words.

    macOS writes an accented letter as its letter and a combining accent
    (NFD), which the splitter would cut in two; a keyboard types it whole.
    """
    if text.isascii():
        return text
    if not unicodedata.is_normalized("NFC", text):
        text = unicodedata.normalize("NFC", text)
    return text.translate(_IN_WORD_MARKS)


class CJKSplitter(Splitter):
    """zope.index's Splitter, runs of CJK letters cut by ``split_cjk_runs``.

    ``processGlob`` (the query parser's words) is zope.index's: a word it
    gives is cut here when its ids are looked up, and ``OkapiIndex.search``
    asks a word cut in several as a phrase.
    """

    def process(self, lst):
        return split_cjk_runs(super().process([words_form(text) for text in lst]))

    def processGlob(self, lst):
        return super().processGlob([words_form(text) for text in lst])


PIPELINE = (CJKSplitter, CaseNormalizer, StopWordRemover)


def make_pipeline():
    return tuple(element() for element in PIPELINE)


_pipeline = make_pipeline()


_find_words = _pipeline[0].rx.findall
_stop_words = _pipeline[2].dict


def split_words(text, pipeline=_pipeline):
    """The words of ``text`` (a string or strings) as the lexicon indexes them, in order."""
    if pipeline is _pipeline and isinstance(text, str):
        # The three standard steps in one pass.
        ascii_only = text.isascii()
        if not ascii_only:
            text = words_form(text)
        words = _find_words(text)
        if not ascii_only and has_cjk_letters(text):
            words = split_cjk_runs(words)
        return [word for word in map(str.lower, words) if word not in _stop_words]
    words = [text] if isinstance(text, str) else list(text)
    for element in pipeline:
        words = element.process(words)
    return words


class PreparedText(str):
    """A text that carries its words, already through ``PIPELINE``.

    ``distinct`` holds each word once, in order of first appearance;
    ``positions`` gives, for every word of the text in order, its index in
    ``distinct``. The pair is much smaller to send between processes than
    the word list, and the lexicon needs each distinct word only once.
    """

    distinct = ()
    positions = ()


def prepare_text(text):
    """``text`` as a ``PreparedText``."""
    index_of = {}
    positions = [index_of.setdefault(word, len(index_of)) for word in split_words(text)]
    prepared = PreparedText(text)
    prepared.distinct = tuple(index_of)
    prepared.positions = _compact(positions, len(index_of))
    return prepared


def _compact(positions, count):
    # bytes when every position fits one, which is nearly always.
    if count <= 256:
        return bytes(positions)
    return tuple(positions)


class Lexicon(_ZopeLexicon):
    """zope.index's Lexicon, looking each distinct word up once.

    A document repeats its words (about two tokens in three are repeats in
    list mail), and a batch of documents shares most of its vocabulary, so
    word ids are kept in a map that lives as long as the transaction: ids
    made in an aborted transaction, or undone by a savepoint's rollback,
    must never be reused, and the map is reset at every transaction
    boundary and dropped with the lexicon's own changes.
    """

    def __init__(self, *pipeline):
        super().__init__(*(pipeline or make_pipeline()))

    def use_cjk_splitter(self):
        """Split runs of CJK letters from now on, for new text and queries alike.

        A lexicon made before holds zope.index's Splitter, whose words are
        whole runs of letters: it is replaced by ``CJKSplitter``.
        """
        self._pipeline = tuple(CJKSplitter() if type(element) is Splitter else element
                               for element in self._pipeline)

    def _standard_pipeline(self):
        return tuple(type(element) for element in self._pipeline) == PIPELINE

    def _transaction_wids(self):
        jar = self._p_jar
        if jar is None:
            return {}
        current = jar.transaction_manager.get()
        cached = getattr(self, "_v_wids", None)
        if cached is None or cached[0] is not current:
            cached = self._v_wids = (current, {})
        return cached[1]

    def distinct_words(self, text):
        """``(distinct words, positions)`` of ``text``, as ``PreparedText`` has them."""
        if isinstance(text, PreparedText) and self._standard_pipeline():
            return text.distinct, text.positions
        if text is None:
            text = ""
        if self._standard_pipeline() and isinstance(text, str):
            prepared = prepare_text(text)
            return prepared.distinct, prepared.positions
        words = split_words(text, self._pipeline)
        index_of = {}
        positions = [index_of.setdefault(word, len(index_of)) for word in words]
        return tuple(index_of), positions

    def distinct_word_ids(self, text):
        """``(ids of the distinct words, positions)``; unknown words get new ids."""
        distinct, positions = self.distinct_words(text)
        # As zope.index does: read the latest committed count, so that
        # concurrent writers rarely hand out the same new id.
        self.wordCount._p_deactivate()
        known = self._transaction_wids()
        lookup = self._wids.get
        created = False
        wids = []
        for word in distinct:
            wid = known.get(word)
            if wid is None:
                wid = lookup(word)
                if wid is None:
                    wid = self._getWordIdCreate(word)
                    created = True
                known[word] = wid
            wids.append(wid)
        if created and self._p_jar is not None:
            # Marked changed, the lexicon is invalidated, and its map of
            # word ids dropped, by an abort or a savepoint rollback that
            # undoes the words just made.
            self._p_changed = True
        return wids, positions

    def forget_word_id(self, wid):
        """Drop the word with id ``wid``: no document has it any more.

        A deleted message must not leave its words behind (a leaked
        password would stay in the lexicon otherwise). The id is not handed
        out again: new ids keep counting up from ``wordCount``.
        """
        word = self._words.pop(wid, None)
        if word is not None:
            self._wids.pop(word, None)
            self._transaction_wids().pop(word, None)

    def _p_resolveConflict(self, old, committed, new):
        # Its own record never really changes (see distinct_word_ids): two
        # writers that both marked it agree, unless it was replaced.
        def shape(state):
            return sorted(state), [type(element) for element in state.get("_pipeline", ())]

        if not shape(old) == shape(committed) == shape(new):
            raise ConflictError("lexicon changed by concurrent writers")
        for name in ("_wids", "_words", "wordCount"):
            if not (_same_references((old[name],), (committed[name],))
                    and _same_references((old[name],), (new[name],))):
                raise ConflictError("lexicon changed by concurrent writers")
        return committed

    def sourceToWordIds(self, text):
        wids, positions = self.distinct_word_ids(text)
        return [wids[position] for position in positions]


# --- postings: docid -> frequency of one word, kept compact ----------------
#
# zope.index keeps them as a dict (fewer than 10 documents) or an IFBTree.
# Pickling either costs two objects per posting (ZODB calls its
# persistent_id hook on every one), and an IFBTree is a record of its own,
# rewritten whole while small: the commit of an import batch spent most of
# its time there. Here a word's postings are packed little-endian int32
# pairs: bytes inside the word's bucket up to INLINE_MAX documents (a bucket
# that every batch rewrites anyway), then a ``Postings`` record whose full
# chunks are records of their own, so that a batch rewrites only the tail.
#
# Even the tail was too much at scale: an archive ten times larger has eight
# times more words past INLINE_MAX, and each batch loaded and rewrote the
# record of nearly every one it met (a kilobyte each, half a chunk), most of
# them for a posting or two. A large word's newest postings therefore wait
# in the index's ``_recent`` tree, many words to a bucket, and join the
# word's record RECENT_MAX at a time (see ``OkapiIndex.postings_of`` for
# how readers see both).
#
# A transaction that posts to BATCH_WORDS large words or more (an import
# batch) lets them wait up to RECENT_MAX_IN_BATCH: such a batch rewrites
# nearly every bucket of ``_recent`` anyway, and in the tenth block of a
# list ten times the corpus it still loaded and rewrote 73,000 words'
# records at 16 (30,000 at 48). One message's transaction rewrites only
# the buckets of its words, whose size follows how long words wait: there
# RECENT_MAX holds (about 200 kB written a message at ten times the
# corpus, against 340 kB at 48).
#
# Within a transaction they wait in memory first (``PendingPostings``): an
# import batch of thousands of messages posts to the same large words again
# and again, and each word's entry in ``_recent`` is then read and written
# once a transaction rather than once a posting.

_PAIR = struct.Struct("<ii")
_LITTLE_ENDIAN = sys.byteorder == "little"
INLINE_MAX = 64
# A recent posting: docid, value and the day (``_add_new_document``), NO_DAY when unknown.
_RECENT = struct.Struct("<iii")
_RECENT_INTS = 3
NO_DAY = -(1 << 31)
RECENT_MAX = 16
RECENT_MAX_IN_BATCH = 48
BATCH_WORDS = 1000


def _ints(data):
    values = array.array("i")
    values.frombytes(data)
    if not _LITTLE_ENDIAN:
        values.byteswap()
    return values


def _packed(values):
    if not _LITTLE_ENDIAN:
        values = array.array("i", values)
        values.byteswap()
    return values.tobytes()


def _without(data, docid, width=2):
    """``data`` (packed postings of ``width`` ints, the docid first) without ``docid``'s, or None if it has none."""
    values = _ints(data)
    try:
        at = values[0::width].index(docid)
    except ValueError:
        return None
    del values[width * at:width * at + width]
    return _packed(values)


def removed_from(chunks, docid):
    """Drop ``docid``'s posting from the one of ``chunks`` (``PostingsChunk``) holding it; its position, or None."""
    for at, chunk in enumerate(chunks):
        data = _without(chunk.data, docid)
        if data is not None:
            chunk.data = data
            return at
    return None


def _replaced(data, docid, value, width=2):
    """``data`` (as ``_without`` reads it) with ``docid``'s value (its second int) changed, or None if it has none."""
    values = _ints(data)
    try:
        at = values[0::width].index(docid)
    except ValueError:
        return None
    values[width * at + 1] = value
    return _packed(values)


def _pairs_of(data):
    values = _ints(data)
    return list(zip(values[0::2], values[1::2]))


def _recent_pairs(data):
    """Packed recent postings (docid, value, day) as packed pairs."""
    values = _ints(data)
    pairs = array.array("i", bytes(len(values) // _RECENT_INTS * 2 * 4))
    pairs[0::2] = values[0::_RECENT_INTS]
    pairs[1::2] = values[1::_RECENT_INTS]
    return _packed(pairs)


class WithRecent:
    """A large word's postings as readers see them: its record's, then its recent ones.

    Not stored: made by ``OkapiIndex.postings_of`` for a word that has
    postings waiting in the index's ``_recent`` tree. Whatever it does not
    answer itself (``ranked_chunks``...) is the record's.
    """

    __slots__ = ("record", "recent")

    def __init__(self, record, recent):
        self.record = record
        self.recent = recent  # packed pairs

    def __getattr__(self, name):
        return getattr(self.record, name)

    @property
    def _tail(self):
        return bytes(self.record._tail) + self.recent

    def __len__(self):
        return len(self.record) + len(self.recent) // _PAIR.size

    def packed(self):
        return self.record.packed() + self.recent

    def pairs(self):
        return self.record.pairs() + _pairs_of(self.recent)

    def packed_within(self, first, end):
        return self.record.packed_within(first, end) + self.recent


class PostingsChunk(Persistent):
    """Full chunk of a ``Postings``: packed pairs, changed only by removals."""

    def __init__(self, data):
        self.data = data


class Postings(Persistent):
    """The postings of a word found in more than INLINE_MAX documents.

    Full chunks are records of their own; the tail, where new postings go,
    is a bytearray in memory (appending must not copy it) and bytes in the
    record.
    """

    CHUNK_PAIRS = 1024

    def __init__(self, data=b""):
        self._chunks = ()
        self._chunked = 0  # pairs in the chunks
        self._tail = bytearray(data)

    def __getstate__(self):
        state = dict(super().__getstate__())
        state["_tail"] = bytes(state["_tail"])
        return state

    def __setstate__(self, state):
        state = dict(state)
        state["_tail"] = bytearray(state["_tail"])
        super().__setstate__(state)

    def __len__(self):
        return self._chunked + len(self._tail) // _PAIR.size

    def append(self, docid, frequency, day=None):
        """Add a posting for a document known to have none (``day``: see RankedPostings)."""
        # Augmented assignment on the attribute marks the record changed.
        self._tail += _PAIR.pack(docid, frequency)
        if len(self._tail) >= self.CHUNK_PAIRS * _PAIR.size:
            self._chunks += (PostingsChunk(bytes(self._tail)),)
            self._chunked += len(self._tail) // _PAIR.size
            self._tail = bytearray()

    def extend(self, recent):
        """Add the postings of ``recent`` (packed _RECENT: docid, value, day), in order."""
        for docid, value, day in _RECENT.iter_unpack(recent):
            self.append(docid, value, None if day == NO_DAY else day)

    def remove(self, docid):
        """Drop ``docid``'s posting; KeyError if it has none."""
        tail = _without(self._tail, docid)
        if tail is not None:
            self._tail = bytearray(tail)
            return
        if not self._remove_from_chunks(docid):
            raise KeyError(docid)
        self._chunked -= 1

    def _remove_from_chunks(self, docid):
        """Drop ``docid``'s posting from the full chunk holding it; False if none does."""
        return removed_from(self._chunks, docid) is not None

    def replace(self, docid, frequency):
        """Change ``docid``'s frequency; False if it has no posting."""
        tail = _replaced(self._tail, docid, frequency)
        if tail is not None:
            self._tail = bytearray(tail)
            return True
        for chunk in self._chunks:
            data = _replaced(chunk.data, docid, frequency)
            if data is not None:
                chunk.data = data
                return True
        return False

    def packed(self):
        """Every posting as packed pairs, in the order they were added."""
        return b"".join([chunk.data for chunk in self._chunks] + [bytes(self._tail)])

    def pairs(self):
        pairs = []
        for chunk in self._chunks:
            pairs += _pairs_of(chunk.data)
        return pairs + _pairs_of(self._tail)

    def _same_chunks(self, old, committed, new):
        """Whether three states of this record name the same full chunks."""
        return (_same_references(old["_chunks"], committed["_chunks"])
                and _same_references(old["_chunks"], new["_chunks"]))

    def _p_resolveConflict(self, old, committed, new):
        # Two writers that each only appended to the same tail: keep both
        # (BTrees merge such inserts too, and so did the IFBTrees before).
        if not (self._same_chunks(old, committed, new)
                and old["_chunked"] == committed["_chunked"] == new["_chunked"]):
            raise ConflictError("postings chunked or removed by concurrent writers")
        base = old["_tail"]
        if not (committed["_tail"].startswith(base) and new["_tail"].startswith(base)):
            raise ConflictError("postings removed by a concurrent writer")
        merged = dict(committed)
        merged["_tail"] = committed["_tail"] + new["_tail"][len(base):]
        return merged


def _same_references(these, those):
    """Whether two tuples of references name the same records."""
    # References met in conflict resolution refuse to compare unequal ones.
    try:
        return len(these) == len(those) and all(a == b for a, b in zip(these, those))
    except ValueError:
        return False


def _doc_count(postings):
    if type(postings) is bytes:
        return len(postings) // _PAIR.size
    return len(postings)


def packed_postings(postings):
    """A word's postings (as ``_wordinfo`` holds them) as packed little-endian int32 pairs."""
    if type(postings) is bytes:
        return postings
    return postings.packed()


def _pairs(postings):
    if type(postings) is bytes:
        return _pairs_of(postings)
    return postings.pairs()


def encode_positions(wids, positions):
    """``widcode.encode([wids[p] for p in positions])``, each wid encoded once."""
    codes = [_widcode(wid) for wid in wids]
    return "".join([codes[p] for p in positions])


def _widcode(wid):
    # widcode's own table for the small ids, its arithmetic inlined for the
    # usual ones (below 2**21: three characters).
    if wid < _WIDCODE_TABLE_SIZE:
        return _widcode_table[wid]
    if wid < 0x200000:
        return chr(0x80 + (wid >> 14)) + chr((wid >> 7) & 0x7F) + chr(wid & 0x7F)
    return widcode.encode([wid])


_WIDCODE_TABLE_SIZE = 0x4000
_widcode_table = tuple(widcode.encode([wid]) for wid in range(_WIDCODE_TABLE_SIZE))


class PendingPostings:
    """The postings to large words of the indexes a transaction wrote, kept until it commits.

    Made at a transaction's first such posting and joined to it as a data
    manager, so that a savepoint's rollback puts them back as they were at
    the savepoint and an abort drops them; a before-commit hook writes them
    into their indexes (``OkapiIndex._write_pending``), whose commit is the
    transaction's own. Anything that reads or changes a word's postings in
    the meantime writes that word's pending postings first
    (``OkapiIndex._waiting``). Postings made after the hook ran (by a later
    hook) go to the index at once.
    """

    def __init__(self):
        self.indexes = {}  # id(index) -> (index, {wid: bytearray of packed _RECENT})
        self.written = False

    @classmethod
    def of(cls, index, create):
        """The pending words of ``index`` in its connection's transaction; None if there is none, or it cannot wait."""
        jar = index._p_jar
        if jar is None:
            return None
        try:
            transaction = jar.transaction_manager.get()
        except NoTransaction:  # an explicit manager between transactions: nothing waits
            return None
        try:
            pending = transaction.data(cls)
        except KeyError:
            if not create:
                return None
            pending = cls()
            transaction.set_data(cls, pending)
            transaction.join(pending)
            transaction.addBeforeCommitHook(pending.write)
        if pending.written:
            return None
        entry = pending.indexes.get(id(index))
        if entry is None:
            if not create:
                return None
            # Held here, the index stays the same object until the commit.
            entry = pending.indexes[id(index)] = (index, {})
        return entry[1]

    def write(self):
        self.written = True
        for index, words in self.indexes.values():
            index._write_pending(words)
        self.indexes.clear()

    # --- data manager: nothing of its own to commit -------------------------

    transaction_manager = None

    def abort(self, transaction):
        self.indexes.clear()

    def tpc_begin(self, transaction):
        pass

    def commit(self, transaction):
        pass

    def tpc_vote(self, transaction):
        pass

    def tpc_finish(self, transaction):
        self.indexes.clear()

    def tpc_abort(self, transaction):
        self.indexes.clear()

    def sortKey(self):
        return f"kittypyr.lexicon.PendingPostings:{id(self)}"

    def savepoint(self):
        return _PendingAtSavepoint(self)


class _PendingAtSavepoint:
    """What a ``PendingPostings`` held at a savepoint, put back by its rollback."""

    def __init__(self, pending):
        self.pending = pending
        self.held = {key: (index, {wid: bytes(packed) for wid, packed in words.items()})
                     for key, (index, words) in pending.indexes.items()}

    def rollback(self):
        self.pending.indexes = {key: (index, {wid: bytearray(packed) for wid, packed in words.items()})
                                for key, (index, words) in self.held.items()}


class WordSequences(IOBTree):
    """Docid -> a document's word ids in the order of its text (widcode), a few documents to a bucket.

    A phrase is looked for in its candidates' sequences (about a kilobyte
    each), one read apiece at places spread over the whole index: a bucket
    of zope.index's own tree holds 30 to 60 of them, so each check read
    thirty times the sequence it wanted. Docids come in order, so buckets
    stay half full: about 8 here. Inner nodes hold few buckets too: each
    one read leaves a placeholder for every bucket it points to.
    """

    max_leaf_size = 16
    max_internal_size = 64


class WordPostings:
    """Words' postings as described above: ``_wordinfo`` and ``_recent``, written at commit.

    ``_wordinfo``: wid -> packed pairs for a word in at most INLINE_MAX
    documents, its ``postings_class`` record for a larger one. Kept by
    ``OkapiIndex`` for every document it holds, and by
    ``kittypyr.fulltext.ScopePostings`` for those of one list.
    """

    # What a word's postings grow into past INLINE_MAX documents.
    postings_class = Postings
    # wid -> the recent postings of a large word, packed _RECENT; made at
    # the first such posting in an index from before it.
    _recent = None

    def postings_of(self, wid):
        """The postings of word ``wid`` as a reader needs them, None if it has none.

        Packed pairs (bytes) for a word in at most INLINE_MAX documents; its
        record for a larger one, or a ``WithRecent`` when postings wait.
        """
        postings = self._wordinfo.get(wid)
        if postings is None or type(postings) is bytes:
            return postings
        recent = self._waiting(wid)
        return postings if recent is None else WithRecent(postings, _recent_pairs(recent))

    def _waiting(self, wid):
        """The recent postings of the large word ``wid``, packed _RECENT; None if it has none.

        Its postings pending in the transaction are written first: whoever
        asks reads them or changes them next.
        """
        pending = PendingPostings.of(self, create=False)
        if pending:
            added = pending.pop(wid, None)
            if added is not None:
                self._write_pending({wid: added})
        return None if self._recent is None else self._recent.get(wid)

    def _write_pending(self, words):
        """Post ``words`` ({wid: packed _RECENT}, postings of large words) as recent, or into the words' records."""
        recent = self._recent
        if recent is None:
            recent = self._recent = AppendedBytes()
        wordinfo = self._wordinfo
        held = (RECENT_MAX_IN_BATCH if len(words) >= BATCH_WORDS else RECENT_MAX) * _RECENT.size
        for wid, added in words.items():
            waiting = recent.get(wid, b"") + added
            if len(waiting) < held:
                recent[wid] = bytes(waiting)
                continue
            self._extend_postings(wordinfo[wid], waiting)
            recent.pop(wid, None)

    def _extend_postings(self, postings, recent):
        """Add ``recent`` (packed _RECENT) to the record ``postings`` of a large word."""
        postings.extend(recent)

    def _add_new_document(self, docid, wid_counts, day=None):
        """Post ``docid`` (in none of the postings yet) under each of its words.

        ``day``: the document's date in days since 1970, for postings that
        keep their chunks' span of dates (``kittypyr.fulltext.RankedPostings``).
        """
        wordinfo = self._wordinfo
        get = wordinfo.get
        pair = _PAIR.pack
        inline_max = INLINE_MAX * _PAIR.size
        new_words = 0
        pending = PendingPostings.of(self, create=True)
        day_or_none = NO_DAY if day is None else day
        for wid, count in wid_counts:
            if pending is not None:
                added = pending.get(wid)
                if added is not None:
                    added += _RECENT.pack(docid, count, day_or_none)
                    continue
            postings = get(wid)
            if postings is None:
                wordinfo[wid] = pair(docid, count)
                new_words += 1
            elif type(postings) is bytes:
                if len(postings) < inline_max:
                    wordinfo[wid] = postings + pair(docid, count)
                else:
                    grown = self.postings_class(postings)
                    grown.append(docid, count, day)
                    wordinfo[wid] = grown
            else:
                added = _RECENT.pack(docid, count, day_or_none)
                if pending is not None:
                    pending[wid] = bytearray(added)
                else:
                    self._write_pending({wid: added})
        if new_words:
            self._words_added(new_words)

    def _words_added(self, count):
        """``count`` words got their first posting."""

    def _remove_posting(self, wid, docid):
        """Drop ``docid``'s posting of word ``wid`` (KeyError if it has none); whether the word has none left.

        A word left without postings is taken out of ``_wordinfo``.
        """
        postings = self._wordinfo[wid]
        if type(postings) is bytes:
            remaining = _without(postings, docid)
            if remaining is None:
                raise KeyError(docid)
            if remaining:
                self._wordinfo[wid] = remaining
                return False
        else:
            recent = self._waiting(wid)
            remaining = None if recent is None else _without(recent, docid, _RECENT_INTS)
            if remaining is None:
                postings.remove(docid)
            elif remaining:
                self._recent[wid] = remaining
            else:
                del self._recent[wid]
                recent = None
            if len(postings) or recent is not None:
                return False
        del self._wordinfo[wid]
        return True


class OkapiIndex(WordPostings, _ZopeOkapiIndex):
    """zope.index's OkapiIndex, with compact postings fed by ``Lexicon``.

    Scoring, the query language, phrase search and the other structures
    are zope.index's own; postings are kept as described above, and a new
    document's distinct word ids come from the lexicon already counted.
    """

    def clear(self):
        super().clear()
        # Two messages archived at once append to the postings of the words
        # they share: this tree merges such appends (kittypyr.merging).
        self._wordinfo = AppendedBytes()
        self._recent = AppendedBytes()
        self._docwords = WordSequences()

    def _words_added(self, count):
        self.wordCount.change(count)

    def index_doc(self, docid, text):
        distinct_word_ids = getattr(self._lexicon, "distinct_word_ids", None)
        if distinct_word_ids is None or docid in self._docwords:
            return super().index_doc(docid, text)
        distinct, positions = distinct_word_ids(text)
        counts = [0] * len(distinct)
        for position in positions:
            counts[position] += 1
        # Two distinct words never share an id, so these are the word counts.
        self._add_new_document(docid, zip(distinct, counts))
        count = len(positions)
        self._docweight[docid] = count
        self._docwords[docid] = encode_positions(distinct, positions)
        self.documentCount.change(1)
        self._change_doc_len(count)
        return count

    def documents_holding_unsplit_words(self):
        """Docids, in order, of the documents holding a word the lexicon would now split.

        Such a word was indexed before runs of CJK letters were split
        (``split_cjk_runs``); a word without a CJK letter splits as it did.
        A pair of CJK letters indexed since splits too (its letters come
        with it), so its documents are among them: indexing them again
        changes nothing. Read from the lexicon and the postings alone.
        """
        lexicon = self._lexicon
        docids = set()
        for word, wid in lexicon.items():
            if has_cjk_letters(word) and split_words(word, lexicon._pipeline) != [word]:
                postings = self.postings_of(wid)
                if postings is not None:
                    docids.update(docid for docid, _ in _pairs(postings))
        return sorted(docids)

    def search(self, term):
        # A run of CJK letters is one word to zope.index's query parser and
        # several to the lexicon (split_cjk_runs): they are asked as a
        # phrase, as they stand in the text, not as any one of them.
        if len(self._lexicon.termToWordIds(term)) > 1:
            return self.search_phrase(term)
        return super().search(term)

    def _mass_add_wordinfo(self, wid2weight, docid):
        for wid, weight in wid2weight.items():
            self._add_wordinfo(wid, weight, docid)

    def _add_wordinfo(self, wid, f, docid):
        postings = self._wordinfo.get(wid)
        if type(postings) is bytes:
            replaced = _replaced(postings, docid, f)
            if replaced is not None:
                self._wordinfo[wid] = replaced
                return
        elif postings is not None:
            recent = self._waiting(wid)
            replaced = None if recent is None else _replaced(recent, docid, f, _RECENT_INTS)
            if replaced is not None:
                self._recent[wid] = replaced
                return
            if postings.replace(docid, f):
                return
        self._add_new_document(docid, ((wid, f),))

    def _del_wordinfo(self, wid, docid):
        if not self._remove_posting(wid, docid):
            return
        self.wordCount.change(-1)
        forget = getattr(self._lexicon, "forget_word_id", None)
        if forget is not None:
            forget(wid)

    def _search_wids(self, wids):
        if not wids:
            return []
        N = float(self.documentCount())
        meandoclen = self._totaldoclen() / N
        docid2len = self._docweight
        L = []
        for t in wids:
            postings = self.postings_of(t)
            idf = inverse_doc_frequency(_doc_count(postings), N)
            result = self.family.IF.Bucket()
            items = _pairs(postings)
            if okapi_score is not None:
                okapi_score(result, items, docid2len, idf, meandoclen)
            else:
                K1, B = self.K1, self.B
                for docid, f in items:
                    lenweight = 1.0 - B + B * docid2len[docid] / meandoclen
                    result[docid] = f * (K1 + 1.0) / (f + K1 * lenweight) * idf
            L.append((result, 1))
        return L

    def query_weight(self, terms):
        wids = []
        for term in terms:
            wids.extend(self._lexicon.termToWordIds(term))
        N = float(len(self._docweight))
        tfmax = 1.0 + self.K1
        total = 0
        for t in self._remove_oov_wids(wids):
            total += inverse_doc_frequency(_doc_count(self.postings_of(t)), N) * tfmax
        return total
