"""The full-text index of every word a reader sees, and its ranking.

One index holds every zone of a message (see ``kittypyr.zones``), so an
unprefixed word finds a message wherever the word stands, and a phrase that
runs over two lines of a patch is found as the reader sees it. The zone is
not a second index: each posting's 32-bit value says it all at once::

    bits  0-15  the document's length in words (capped at 65,535)
    bits 16-24  the word's weighted frequency: own words count OWN_WEIGHT
                times, every other zone once (capped at 511)
    bits 25-30  the zones it occurs in (OWN, QUOTED, PATCH, ADDED...)

so ``added:foo`` is the postings of ``foo`` whose ADDED bit is set, and
BM25 is computed from the postings alone, without one lookup per matching
document: the words of a page of results are scored with numpy over whole
posting lists, which is what keeps a common word within milliseconds.

Import cost stays in the parser processes: ``prepare_zoned`` splits the
zones into words and computes each word's value there, and the storing
process only turns words into ids and appends the packed postings.
"""

import array
import contextvars
import heapq
import re
from contextlib import contextmanager
from itertools import islice

import numpy as np
from BTrees.IIBTree import IIBTree
from BTrees.IOBTree import IOBTree
from BTrees.OOBTree import OOBTree
from repoze.catalog.query import Query
from ZODB.POSException import ConflictError
from zope.index.text import widcode
from persistent import Persistent
from zope.index.text.baseindex import inverse_doc_frequency

from kittypyr.lexicon import (_PAIR, _RECENT_INTS, INLINE_MAX, NO_DAY, OkapiIndex, Postings, PostingsChunk, PreparedText,
                              WordPostings, WordSequences, _doc_count, _ints, _recent_pairs, _same_references, _without,
                              encode_positions, packed_postings, removed_from, split_words)
from kittypyr.merging import AppendedBytes
from kittypyr.scored import (EMPTY, Scored, all_of, best_passing, held_in, in_docid_order, intersection, restricted,
                             spread_positions, union, verified)
from kittypyr.zones import ZONE_BITS, message_zones

LENGTH_MAX = 0xFFFF
FREQUENCY_SHIFT = 16
FREQUENCY_MAX = 0x1FF
ZONE_SHIFT = 25
ZONE_MASK = (1 << ZONE_BITS) - 1
# What a posting's score depends on: its frequency and its length.
RANKING_BITS = (FREQUENCY_MAX << FREQUENCY_SHIFT) | LENGTH_MAX
# A filter's share of a word is tested on this many postings, from at most
# SHARE_CHUNKS of its chunks (see FullTextIndex._allowed_share).
SHARE_SAMPLE = 512
SHARE_CHUNKS = 64
# A word's postings counted exactly are tested one by one up to this many;
# beyond, against the filter's every allowed docid at once.
TESTED_ONE_BY_ONE = 8192
DAY = 86400  # seconds: the unit of a chunk's span of dates
# Postings a walk by chunks may test before it scores every posting instead.
WALK_TESTS_MAX = 2048
# A word in at most this many messages is weighted by those the reader may
# see (see ``ranked_without``); a more common one by all of them.
SEEN_FREQUENCY_UP_TO = 4096


class Unseen:
    """The documents a reader may not see: how many, and ``among(docids)``, how many of those are."""

    def __init__(self, count, among):
        self.count = count
        self.among = among


_unseen = contextvars.ContextVar("kittypyr_unseen_documents", default=None)


@contextmanager
def ranked_without(unseen):
    """Within it, every score leaves ``unseen`` (an ``Unseen``, or None) out of its figures.

    BM25 weighs a word by how few documents hold it. Counted over every
    list, a word of a private list would weigh less in a public one, and
    a reader who may not see the private list could tell from the order
    of two public messages alike but for one word that the private list
    holds that word. The document count leaves out the unseen documents,
    and so does the count of each word held by at most
    ``SEEN_FREQUENCY_UP_TO`` documents (its postings are looked at one by
    one); a more common word is weighted by all its documents.
    """
    token = _unseen.set(unseen)
    try:
        yield
    finally:
        _unseen.reset(token)


class ZonedText(PreparedText):
    """A message's words ready for ``FullTextIndex``: ``PreparedText`` plus each word's value.

    The string itself is empty: only the words travel from a parser
    process. ``paths`` and ``has_patch`` feed the ``file`` and ``is`` indexes.
    """

    values = ()
    paths = ()
    has_patch = False
    date = None  # the message's, in seconds: its postings' chunks keep their dates' span
    scope = None  # the address of the message's list: the index keeps its postings by list too


def prepare_zoned(zones):
    """``zones`` (a ``kittypyr.zones.Zones``) as a ``ZonedText``."""
    index_of = {}
    positions = []
    flags = []
    frequencies = []
    for zone, weight, text in zones.segments:
        for word in split_words(text):
            at = index_of.get(word)
            if at is None:
                at = index_of[word] = len(flags)
                flags.append(0)
                frequencies.append(0)
            positions.append(at)
            flags[at] |= zone
            frequencies[at] += weight
    length = min(len(positions), LENGTH_MAX)
    prepared = ZonedText("")
    prepared.distinct = tuple(index_of)
    prepared.positions = bytes(positions) if len(flags) <= 256 else array.array("I", positions)
    prepared.values = array.array("i", (
        (zone << ZONE_SHIFT) | (min(frequency, FREQUENCY_MAX) << FREQUENCY_SHIFT) | length
        for zone, frequency in zip(flags, frequencies)
    ))
    prepared.paths = tuple(sorted(zones.paths))
    prepared.has_patch = zones.has_patch
    return prepared


def zoned_text_of(message):
    """The ``ZonedText`` of a stored message: made by the parser when it just arrived, else now."""
    prepared = getattr(message, "_v_prepared_text", None)
    if not isinstance(prepared, ZonedText):
        prepared = prepare_zoned(message_zones(message.subject, message.sender_name, message.body_text,
                                               message.attachments))
        # Three indexes (text, file, is) read it in a row.
        message._v_prepared_text = prepared
    prepared.date = int(message.timestamp)
    prepared.scope = message.mailing_list.address
    return prepared


def allowed_among(allowed, docids):
    """Which of ``docids`` (an array) ``allowed`` lets through, as a boolean array.

    Up to TESTED_ONE_BY_ONE are tested one by one; more are looked up in
    the sorted array of every allowed docid.
    """
    if len(docids) <= TESTED_ONE_BY_ONE:
        return allowed.passing(docids.tolist())
    return held_in(allowed.every(), docids)


def ceiling_of(data):
    """The values of packed postings ``data`` that may score best, as packed little-endian int32.

    Each is a (frequency, length) pair that no other posting of ``data``
    beats on both: a higher frequency in as short a document, or as high a
    frequency in a shorter one. BM25 rises with the frequency and falls
    with the length whatever the mean length, so the best score of ``data``
    is always one of theirs. A chunk has a handful.
    """
    values = np.frombuffer(data, dtype="<i4")[1::2].astype(np.int64) & RANKING_BITS
    if not len(values):
        return b""
    frequency, length = values >> FREQUENCY_SHIFT, values & LENGTH_MAX
    order = np.lexsort((length, -frequency))
    values, length = values[order], length[order]
    shortest_before = np.minimum.accumulate(length)
    keep = np.ones(len(values), dtype=bool)
    keep[1:] = length[1:] < shortest_before[:-1]
    return values[keep].astype("<i4").tobytes()


# Of each full chunk in a group, this many postings are kept apart, those
# most likely to score best (see ``split_high``).
HIGH_PAIRS = 32


def split_high(data, mean_length=None, k1=OkapiIndex.K1, b=OkapiIndex.B):
    """``(high, rest)`` of a full chunk's packed postings ``data``.

    ``high``: its HIGH_PAIRS postings nearest BM25's ceiling, as packed
    pairs in their order; ``rest``: the ceiling (``ceiling_of``) of the
    others. A document of several common words can reach the first page
    only where each of its words scores near that word's best: a search
    of such words reads the high postings of every chunk and only the
    chunks whose rest can still reach the page (``WordImpacts``). The
    saturation ``f / (f + k1 (1 - b + b length / mean))`` picks them, at
    ``mean_length``, the index's mean document length as the chunk's group
    closes (``FullTextIndex.split_mean_length``): BM25's, so that they are
    those a search scores best. None: the chunk's own mean, which the
    longer documents that hold a common word raise far above the index's
    (kernel's chunks in the linux-mips archive: several times it), so
    that long documents are kept apart where short ones score best and a
    search must read their chunks whole. Which postings are kept apart
    changes only what a search reads: the rest's ceiling bounds every
    other posting whatever the mean.
    """
    pairs = np.frombuffer(data, dtype="<i4").reshape(-1, 2)
    if len(pairs) <= HIGH_PAIRS:
        return bytes(data), b""
    values = pairs[:, 1].astype(np.int64) & RANKING_BITS
    frequency = (values >> FREQUENCY_SHIFT).astype(np.float64)
    length = (values & LENGTH_MAX).astype(np.float64)
    mean = float(length.mean()) if mean_length is None else float(mean_length)
    saturation = frequency / (frequency + k1 * (1.0 - b + b * length / max(1.0, mean)))
    order = np.argsort(-saturation, kind="stable")
    high, rest = np.sort(order[:HIGH_PAIRS]), np.sort(order[HIGH_PAIRS:])
    return pairs[high].astype("<i4").tobytes(), ceiling_of(pairs[rest].astype("<i4").tobytes())


class ChunkGroup(Persistent):
    """``ChunkDirectory.GROUP_CHUNKS`` full chunks of a word, their ceilings and spans: a record that no longer grows.

    It also keeps each chunk's high postings and the ceiling of its rest
    (``split_high``): read with the group, without loading a chunk.
    """

    spans = None  # a group made before spans were kept: none known
    # A group made before high postings were kept: None (see split_chunks_of).
    highs = None
    rests = None

    def __init__(self, chunks, ceilings, spans, mean_length=None):
        self.chunks = tuple(chunks)
        self.ceilings = tuple(ceilings)
        self.spans = tuple(spans)
        self.split(mean_length)

    def chunk_spans(self):
        return self.spans if self.spans is not None else (None,) * len(self.chunks)

    def split(self, mean_length=None):
        """Keep each chunk's high postings and the ceiling of its rest, from its postings as they are (``split_high``)."""
        parts = [split_high(chunk.data, mean_length) for chunk in self.chunks]
        self.highs = tuple(high for high, _ in parts)
        self.rests = tuple(rest for _, rest in parts)

    def agrees(self):
        """Whether each chunk holds the high postings kept of it, and its rest's ceiling bounds its other postings.

        Removals keep that true; a group made before high postings were
        kept has none, and agrees.
        """
        if self.highs is None:
            return True
        if not len(self.highs) == len(self.rests) == len(self.chunks):
            return False
        for chunk, high, rest in zip(self.chunks, self.highs, self.rests):
            pairs = np.frombuffer(chunk.data, dtype="<i4").reshape(-1, 2)
            kept = np.frombuffer(high, dtype="<i4").reshape(-1, 2)
            as_keys = (pairs[:, 0].astype(np.int64) << 32) | (pairs[:, 1].astype(np.int64) & 0xFFFFFFFF)
            kept_keys = (kept[:, 0].astype(np.int64) << 32) | (kept[:, 1].astype(np.int64) & 0xFFFFFFFF)
            if not np.isin(kept_keys, as_keys).all():
                return False
            values = pairs[~np.isin(as_keys, kept_keys), 1].astype(np.int64) & RANKING_BITS
            bounds = np.frombuffer(rest, dtype="<i4").astype(np.int64)
            if not len(values):
                continue
            if not len(bounds):
                return False
            # Each other posting as frequent as or less, in as long a document or longer, than a point of the ceiling.
            frequency, length = values >> FREQUENCY_SHIFT, values & LENGTH_MAX
            bounded = (frequency[:, None] <= (bounds >> FREQUENCY_SHIFT)[None, :]) & \
                (length[:, None] >= (bounds & LENGTH_MAX)[None, :])
            if not bounded.any(axis=1).all():
                return False
        return True

    def remove(self, docid):
        """Drop ``docid``'s posting from the chunk holding it (and its high postings); False if none does."""
        at = removed_from(self.chunks, docid)
        if at is None:
            return False
        if self.highs is not None:
            high = _without(self.highs[at], docid)
            if high is not None:
                self.highs = self.highs[:at] + (high,) + self.highs[at + 1:]
        return True


class ChunkDirectory(Persistent):
    """The full chunks of a large word and their ceilings: a record of its own.

    Kept apart from the word's tail, so that a new posting rewrites the
    tail alone. A chunk that fills is added here; every GROUP_CHUNKS of
    them move to a ``ChunkGroup`` of their own, so that the record rewritten
    when a chunk fills holds at most GROUP_CHUNKS chunks and a reference per
    group: a common word of a million messages has about four thousand
    chunks, and the directory written each time one filled used to name
    them all (a quarter of a million bytes). ``chunks`` and ``ceilings``
    read them all, in the order they were added.
    """

    # Small enough that the chunks not yet in a group, which a search of
    # several words may have to read whole (they have no high postings),
    # stay few: 64 until high postings were kept.
    GROUP_CHUNKS = 16
    # Each chunk's span: the first and last day (days since 1970, UTC) of
    # the messages it was filled with, or None where unknown (chunks made before spans
    # were kept, the first chunk of a word, which began inline). Removing a
    # posting leaves the span wider than needed, never false.
    open_spans = ()

    def __init__(self, chunks=(), ceilings=()):
        self.groups = ()
        self.open_chunks = ()
        self.open_ceilings = ()
        for chunk, ceiling in zip(chunks, ceilings):
            self.add(chunk, ceiling)

    def __setstate__(self, state):
        state = dict(state)
        if "chunks" in state:  # written before groups: all chunks open, grouped at the next add
            state = {"groups": (), "open_chunks": state.pop("chunks"), "open_ceilings": state.pop("ceilings")}
        super().__setstate__(state)

    @property
    def chunks(self):
        return tuple(chunk for group in self.groups for chunk in group.chunks) + self.open_chunks

    @property
    def ceilings(self):
        return tuple(ceiling for group in self.groups for ceiling in group.ceilings) + self.open_ceilings

    @property
    def spans(self):
        return tuple(span for group in self.groups for span in group.chunk_spans()) + self._open_spans()

    def _open_spans(self):
        # The open chunks added before spans were kept come first.
        return (None,) * (len(self.open_chunks) - len(self.open_spans)) + self.open_spans

    def add(self, chunk, ceiling, span=None, mean_length=None):
        """Add a full chunk; ``mean_length``: the index's mean document length, for a group it closes (``split_high``)."""
        self.open_spans = self._open_spans() + (span,)
        self.open_chunks += (chunk,)
        self.open_ceilings += (ceiling,)
        self._close_groups(mean_length)

    def _close_groups(self, mean_length=None):
        """Move the open chunks into groups of GROUP_CHUNKS, as many groups as they fill."""
        size = self.GROUP_CHUNKS
        if len(self.open_chunks) < size:
            return
        spans = self._open_spans()
        while len(self.open_chunks) >= size:
            self.groups += (ChunkGroup(self.open_chunks[:size], self.open_ceilings[:size], spans[:size],
                                       mean_length),)
            self.open_chunks, self.open_ceilings = self.open_chunks[size:], self.open_ceilings[size:]
            spans = spans[size:]
        self.open_spans = spans

    def fill_spans(self, day_of):
        """Give each chunk whose span is unknown the span of its documents' days; ``day_of(docid)`` may say None."""
        for group in self.groups:
            spans = group.chunk_spans()
            if None in spans:
                group.spans = _filled(group.chunks, spans, day_of)
        spans = self._open_spans()
        if None in spans:
            self.open_spans = _filled(self.open_chunks, spans, day_of)

    def recompute_ceilings(self):
        for group in self.groups:
            group.ceilings = tuple(ceiling_of(chunk.data) for chunk in group.chunks)
            group.split()
        self.open_ceilings = tuple(ceiling_of(chunk.data) for chunk in self.open_chunks)

    def remove(self, docid):
        """Drop ``docid``'s posting from the chunk holding it; False if none does."""
        for group in self.groups:
            if group.remove(docid):
                return True
        return removed_from(self.open_chunks, docid) is not None

    def split_groups(self, mean_length=None, every=False):
        """Give the groups made before high postings were kept theirs (``every``: every group) them anew; returns those groups.

        The open chunks are grouped first, as many as fill a group: up to
        63 were left open when groups were larger. ``mean_length``: as
        ``split_high``'s.
        """
        self._close_groups(mean_length)
        unsplit = [group for group in self.groups if every or group.highs is None]
        for group in unsplit:
            group.split(mean_length)
        return unsplit

    def pieces(self):
        """``(chunks, ceilings, highs, rests)``: lists of every full chunk, its ceiling, high postings and rest, in order.

        ``highs`` and ``rests`` hold None for a chunk whose are not kept.
        Gathered a group at a time: a common word has thousands of chunks.
        """
        chunks, ceilings, highs, rests = [], [], [], []
        for group in self.groups:
            chunks += group.chunks
            ceilings += group.ceilings
            highs += group.highs or (None,) * len(group.chunks)
            rests += group.rests or (None,) * len(group.chunks)
        unkept = (None,) * len(self.open_chunks)
        return chunks + list(self.open_chunks), ceilings + list(self.open_ceilings), highs + list(unkept), \
            rests + list(unkept)


class RankedPostings(Postings):
    """The postings of a word of the text index, with each full chunk's ceiling.

    A page of results needs only the documents that can reach it: the
    ceilings (``ceiling_of``, one per chunk, kept in the word's
    ``ChunkDirectory``) give each chunk's best possible score without
    loading it, so a common word loads only its chunks that can beat the
    page's last score (``FullTextIndex.best_word_scores``). Removing a
    posting can only lower a chunk's best, so a ceiling stays true without
    being recomputed.
    """

    _directory = None  # until the first chunk fills
    # A quarter of a plain word's: archiving a message rewrites the tail of
    # each of its words, half a chunk on average.
    CHUNK_PAIRS = 256
    # The first and last day (days since 1970, UTC) of the tail's
    # messages, which its chunk keeps when it fills: () while the tail is
    # empty, None when a date is unknown (the postings a word had inline, a
    # record older than spans). Days, not seconds: a word's postings mostly
    # come in date order, and a day changes the span far less often.
    _span = None

    def __init__(self, data=b""):
        self._chunked = 0
        self._tail = bytearray(data)
        self._span = None if data else ()

    @property
    def _chunks(self):
        directory = self._directory
        return () if directory is None else directory.chunks

    @classmethod
    def of(cls, postings):
        """A ``RankedPostings`` with the chunks and tail of ``postings`` (a ``Postings``)."""
        ranked = cls(postings._tail)
        if postings._chunks:
            ranked._directory = ChunkDirectory(postings._chunks,
                                               (ceiling_of(chunk.data) for chunk in postings._chunks))
        ranked._chunked = postings._chunked
        return ranked

    def append(self, docid, value, day=None, mean_length=None):
        """Add a posting; ``day``: the message's date, in days since 1970 (UTC), None if unknown.

        ``mean_length``: the index's mean document length, for a group of
        chunks the posting closes (``split_high``).
        """
        # Augmented assignment on the attribute marks the record changed.
        self._tail += _PAIR.pack(docid, value)
        span = self._span
        # Archiving appends a posting per word of every message: the span
        # is written only when the day leaves it.
        if span and day is not None:
            if day > span[1]:
                self._span = (span[0], day)
            elif day < span[0]:
                self._span = (day, span[1])
        elif span is not None:
            self._span = None if day is None else (day, day)
        if len(self._tail) >= self.CHUNK_PAIRS * _PAIR.size:
            self._fill_chunk(mean_length)

    def _fill_chunk(self, mean_length=None):
        """The full tail becomes a chunk of its own, listed in the word's directory."""
        chunk = PostingsChunk(bytes(self._tail))
        directory = self._directory
        if directory is None:
            self._directory = directory = ChunkDirectory()
        directory.add(chunk, ceiling_of(chunk.data), self._span, mean_length)
        self._chunked += len(self._tail) // _PAIR.size
        self._tail = bytearray()
        self._span = ()

    def extend(self, recent, mean_length=None):
        """Add the postings of ``recent`` (packed _RECENT: docid, value, day), in order: ``append`` each, at once."""
        values = _ints(recent)
        pairs = _recent_pairs(recent)
        days = values[2::_RECENT_INTS]
        chunk_bytes = self.CHUNK_PAIRS * _PAIR.size
        start = 0
        while start < len(pairs):
            taken = pairs[start:start + chunk_bytes - len(self._tail)]
            first = start // _PAIR.size
            self._span = _widened_span(self._span, days[first:first + len(taken) // _PAIR.size])
            self._tail += taken
            start += len(taken)
            if len(self._tail) >= chunk_bytes:
                self._fill_chunk(mean_length)

    def packed_within(self, first, end):
        """The packed postings of the tail and of every chunk that may hold a message dated in [first, end) (seconds).

        A chunk whose span lies outside is not loaded.
        """
        directory = self._directory
        if directory is None:
            return bytes(self._tail)
        first_day, last_day = first // DAY, (end - 1) // DAY
        kept = [chunk.data for chunk, span in zip(directory.chunks, directory.spans)
                if span is None or (span[0] <= last_day and span[1] >= first_day)]
        return b"".join(kept + [bytes(self._tail)])

    def _remove_from_chunks(self, docid):
        # The directory drops the copy a group keeps high too.
        directory = self._directory
        return directory is not None and directory.remove(docid)

    def replace(self, docid, value):
        # zope.index's own reindexing path (FullTextIndex forgets and adds
        # instead): a raised frequency may raise a ceiling.
        if not super().replace(docid, value):
            return False
        if self._directory is not None:
            self._directory.recompute_ceilings()
        return True

    def ranked_chunks(self):
        """``(chunks, ceilings)``: the full chunks and each one's ceiling."""
        directory = self._directory
        if directory is None:
            return (), ()
        return directory.chunks, directory.ceilings

    def chunk_pieces(self):
        """``ChunkDirectory.pieces``: the full chunks, their ceilings, high postings and rests."""
        directory = self._directory
        return ([], [], [], []) if directory is None else directory.pieces()

    def _same_chunks(self, old, committed, new):
        # A filled chunk changes the directory and the count alike.
        return _same_references((old.get("_directory"),), (committed.get("_directory"),)) and \
            _same_references((old.get("_directory"),), (new.get("_directory"),))

    def _p_resolveConflict(self, old, committed, new):
        merged = super()._p_resolveConflict(old, committed, new)
        # Both appended to the same tail: its span covers both's dates.
        merged["_span"] = _joined_spans(committed.get("_span"), new.get("_span"))
        return merged


def _filled(chunks, spans, day_of):
    return tuple(span if span is not None else span_of_days(chunk.data, day_of) for chunk, span in zip(chunks, spans))


def span_of_days(packed, day_of):
    """The first and last day of the documents of packed postings; () if none, None if a day is unknown."""
    days = [day_of(docid) for docid in np.frombuffer(packed, dtype="<i4")[0::2].tolist()]
    if None in days:
        return None
    return (min(days), max(days)) if days else ()


def _widened_span(span, days):
    """``span`` (a tail's: () empty, None unknown) once postings of ``days`` (NO_DAY: unknown) are added."""
    if span is None or not days:
        return span
    if NO_DAY in days:
        return None
    low, high = min(days), max(days)
    return (low, high) if not span else (min(span[0], low), max(span[1], high))


def _joined_spans(one, other):
    """The span covering two spans: () is empty, None unknown."""
    if one is None or other is None:
        return None
    if not one or not other:
        return one or other
    return min(one[0], other[0]), max(one[1], other[1])


# Words ranked between two savepoints of the upgrade (see rank_chunks_of).
RANKED_BETWEEN_SAVEPOINTS = 2000


def rank_chunks_of(index):
    """Give every large word of ``index`` (a ``FullTextIndex``) its chunks' ceilings; returns how many.

    Each chunk is read once; the chunks themselves are kept as they are.
    Every RANKED_BETWEEN_SAVEPOINTS words the transaction's changes go to
    a savepoint and the connection's cache is trimmed: the chunks read and
    the records made would otherwise all stay in memory until the commit,
    and a process keeps the memory it took (600 MB at the first start on
    an archive of 280,000 messages, against 130 MB).
    """
    wordinfo = index._wordinfo
    plain = [wid for wid, postings in wordinfo.items() if type(postings) is Postings]
    for done, wid in enumerate(plain, 1):
        wordinfo[wid] = RankedPostings.of(wordinfo[wid])
        _lighten_upgrade(index, done)
    return len(plain)


def _lighten_upgrade(index, done):
    """After every RANKED_BETWEEN_SAVEPOINTS words an upgrade of ``index`` changed: a savepoint, the cache trimmed."""
    if done % RANKED_BETWEEN_SAVEPOINTS == 0:
        _savepoint_and_trim(index)


def _savepoint_and_trim(index):
    """The changes of an upgrade of ``index`` so far to a savepoint, and its connection's cache trimmed."""
    connection = getattr(index, "_p_jar", None)
    if connection is not None:
        connection.transaction_manager.get().savepoint(optimistic=True)
        connection.cacheGC()


# Chunks read by split_chunks_of between two savepoints (about 2 KB each):
# 228 MB at the first start of a 250,000-message archive, 299 MB with 20,000.
SPLIT_BETWEEN_SAVEPOINTS = 4_000


def chunk_groups_of(index):
    """Every group of chunks of ``index``'s large words."""
    for postings in index._wordinfo.values():
        directory = getattr(postings, "_directory", None)
        if directory is not None:
            yield from directory.groups


def split_chunks_of(index, every=False):
    """Give the chunk groups of ``index``'s large words made before high postings were kept theirs; how many.

    Every chunk of such a group is read once, with a savepoint and the
    cache trimmed every SPLIT_BETWEEN_SAVEPOINTS chunks (as
    ``rank_chunks_of``); a group made since is left as it is. ``every``:
    every group of the index's words and of its lists' (``ScopePostings``)
    is split anew at the index's mean length (``split_high``), and each
    list's postings learn their index.
    """
    owners = [index]
    if every and index._scopes is not None:
        for scope in index._scopes.values():
            scope.index = index
            owners.append(scope)
    mean_length = index.split_mean_length()
    split = chunks_read = 0
    for postings in (postings for owner in owners for postings in owner._wordinfo.values()):
        directory = getattr(postings, "_directory", None)
        if directory is None:
            continue
        groups = directory.split_groups(mean_length, every)
        split += len(groups)
        # A common word has thousands of chunks: counted by chunks read.
        chunks_read += sum(len(group.chunks) for group in groups)
        if chunks_read >= SPLIT_BETWEEN_SAVEPOINTS:
            chunks_read = 0
            _savepoint_and_trim(index)
    return split


# Word sequences moved by move_word_sequences_of between two savepoints
# (about a kilobyte each).
SEQUENCES_BETWEEN_SAVEPOINTS = 20_000


def move_word_sequences_of(index):
    """Move ``index``'s word sequences into a ``WordSequences`` if they are not in one; how many were moved.

    Each is stored again as it is (an older one may be a string), in docid
    order, a batch of SEQUENCES_BETWEEN_SAVEPOINTS at a time with a
    savepoint and the cache trimmed after each.
    """
    older = index._docwords
    if type(older) is WordSequences:
        return 0
    moved = index._docwords = WordSequences()
    count = 0
    after = None
    while True:
        batch = list(islice(older.items(after, excludemin=after is not None), SEQUENCES_BETWEEN_SAVEPOINTS))
        if not batch:
            return count
        moved.update(batch)
        count += len(batch)
        after = batch[-1][0]
        _savepoint_and_trim(index)


def date_chunks_of(index, day_of):
    """Give the chunks and tails of ``index``'s large words whose span is unknown the span of their days.

    ``day_of(docid)``: a document's day (days since 1970), None if
    unknown. For an archive indexed before chunks kept their dates: every
    chunk is read once, with the same savepoints as ``rank_chunks_of``.
    A word's first chunk, begun inline, gets its span too. Returns how
    many words were looked at.
    """
    looked = 0
    for postings in index._wordinfo.values():
        if not isinstance(postings, RankedPostings):
            continue
        looked += 1
        if postings._directory is not None:
            postings._directory.fill_spans(day_of)
        if postings._span is None:
            postings._span = span_of_days(bytes(postings._tail), day_of)
        _lighten_upgrade(index, looked)
    return looked


class KeptHighAtTheMean:
    """Word postings whose large words' records keep high postings (``RankedPostings``), picked at ``split_mean_length()``."""

    def split_mean_length(self):
        """BM25's mean document length now, for a group of chunks closed now (``split_high``); None: the chunk's own."""
        raise NotImplementedError

    def _extend_postings(self, postings, recent):
        postings.extend(recent, mean_length=self.split_mean_length())


class ScopePostings(KeptHighAtTheMean, WordPostings, Persistent):
    """The postings of one list's messages in the text index, kept as the index keeps every message's.

    A search in one list of many reads these (``FullTextIndex.within``)
    rather than the words' postings over the whole archive, which a list
    that is a small part of it would have to read nearly whole to find a
    page of its own: what the search reads follows the list's size. The
    word sequences, lengths and weights stay the index's.
    """

    postings_class = RankedPostings
    # The FullTextIndex whose list's postings these are, for its mean
    # document length (``split_high``); None in those made before it was kept.
    index = None

    def __init__(self, name, number, index=None):
        self.name = name
        self.number = number
        self.index = index
        self._wordinfo = AppendedBytes()
        self._recent = AppendedBytes()

    def split_mean_length(self):
        # The index's: a list's postings score as the index's do.
        return None if self.index is None else self.index.split_mean_length()

    def _take_postings(self, wid, pairs, days):
        """Give word ``wid`` (new here) ``pairs`` (int32 docid, value rows, in order) and their ``days`` (NO_DAY: unknown)."""
        if len(pairs) <= INLINE_MAX:
            self._wordinfo[wid] = pairs.astype("<i4").tobytes()
            return
        postings = self.postings_class()
        rows = np.empty((len(pairs), _RECENT_INTS), dtype="<i4")
        rows[:, :2], rows[:, 2] = pairs, days
        self._extend_postings(postings, rows.tobytes())
        self._wordinfo[wid] = postings


# Postings put into lists' ScopePostings by scope_postings_of between two savepoints.
SCOPED_BETWEEN_SAVEPOINTS = 2_000_000


def days_by_catalog(catalog):
    """``day_of(docid)``: a document's day (days since 1970) by ``catalog``'s ``date`` index, None if unknown."""
    dates = getattr(catalog.get("date"), "_rev_index", None)
    seconds_of = dates.get if dates is not None else (lambda docid: None)

    def day_of(docid):
        seconds = seconds_of(docid)
        return None if seconds is None else seconds // DAY

    return day_of


def scope_postings_of(index, scope_of, day_of, only=None):
    """Give the lists of ``index`` (a ``FullTextIndex``) postings of their own, from the index's; how many documents they hold.

    ``scope_of(docid)``: the address of a document's list, None if it
    has none; ``day_of(docid)``: its day (days since 1970), None if
    unknown. ``only``: the one list to give them (the lone list, which had
    none); else every list but the lone one gets them anew. Each word's
    postings are read once and split by list, in the order they were
    added, with a savepoint and the cache trimmed every
    SCOPED_BETWEEN_SAVEPOINTS postings.
    """
    if only is None or index._scopes is None:
        index.keep_lists_anew(index._lone if only is None else None)
    if only is not None and only == index._lone:
        index._lone = None
    docids, names = _documents_and_lists(index, scope_of)
    numbers = np.zeros(len(docids), dtype=np.int64)
    days = np.full(len(docids), NO_DAY, dtype=np.int64)
    for at, (docid, name) in enumerate(zip(docids.tolist(), names)):
        if name is None or name == index._lone or (only is not None and name != only):
            continue
        numbers[at] = index._scope_named(name).number
        day = day_of(docid)
        if day is not None:
            days[at] = day
    held = numbers > 0
    index._scope_of.update(dict(zip(docids[held].tolist(), numbers[held].tolist())))
    since_savepoint = 0
    for wid in list(index._wordinfo.keys()):
        pairs, at, word_numbers = _postings_by_list(index, wid, docids, numbers)
        for number in np.unique(word_numbers[word_numbers > 0]).tolist():
            mine = word_numbers == number
            index._numbered[number]._take_postings(wid, pairs[mine], days[at[mine]])
        since_savepoint += len(pairs)
        if since_savepoint >= SCOPED_BETWEEN_SAVEPOINTS:
            since_savepoint = 0
            _savepoint_and_trim(index)
    return int(held.sum())


def _documents_and_lists(index, scope_of):
    """``(docids, names)``: every document of ``index`` (a sorted array) and its list's address by ``scope_of``."""
    docids = np.fromiter(index._docweight.keys(), dtype=np.int64, count=len(index._docweight))
    return docids, [scope_of(docid) for docid in docids.tolist()]


def _postings_by_list(index, wid, docids, numbers):
    """``(pairs, at, word_numbers)``: word ``wid``'s postings in ``index``, where each one's docid is in
    ``docids`` (sorted), and the number there in ``numbers`` (0 for a docid not among them)."""
    pairs = np.frombuffer(packed_postings(index.postings_of(wid)), dtype="<i4").reshape(-1, 2)
    at = np.minimum(np.searchsorted(docids, pairs[:, 0]), max(0, len(docids) - 1))
    found = docids[at] == pairs[:, 0] if len(docids) else np.zeros(len(pairs), dtype=bool)
    return pairs, at, np.where(found, numbers[at], 0)


def _by_docid(pairs):
    return pairs[np.argsort(pairs[:, 0], kind="stable")]


def scopes_disagreeing(index, scope_of):
    """The addresses of the lists whose postings by list disagree with what ``index`` holds of their documents, sorted.

    ``scope_of(docid)``: the address of a document's list, None if it has
    none. A list's postings must hold, of every word, the postings of its
    documents and no other; every word's postings are read once.
    """
    names = {number: scope.name for number, scope in index._numbered.items()}
    numbers = {name: number for number, name in names.items()}
    wrong = set()
    docids, lists = _documents_and_lists(index, scope_of)
    expected = np.zeros(len(docids), dtype=np.int64)
    for at, (docid, name) in enumerate(zip(docids.tolist(), lists)):
        if name is None or name == index._lone:
            continue  # the lone list has no postings of its own
        # A list without postings of its own: -1, which no posting has.
        expected[at] = numbers.get(name, -1)
        if expected[at] < 0:
            wrong.add(name)
        if index._scope_of.get(docid) != expected[at]:
            wrong.add(name)
    for docid, number in index._scope_of.items():
        if docid not in index._docweight:
            wrong.add(names.get(number, f"list number {number}"))
    words_of = {number: set() for number in names}
    for wid in index._wordinfo.keys():
        pairs, _, word_numbers = _postings_by_list(index, wid, docids, expected)
        for number in np.unique(word_numbers[word_numbers > 0]).tolist():
            words_of[number].add(wid)
            held = index._numbered[number].postings_of(wid)
            have = np.frombuffer(packed_postings(held) if held is not None else b"", dtype="<i4").reshape(-1, 2)
            if not np.array_equal(_by_docid(have), _by_docid(pairs[word_numbers == number])):
                wrong.add(names[number])
    for number, scope in index._numbered.items():
        if set(scope._wordinfo.keys()) != words_of[number]:
            wrong.add(scope.name)
    return sorted(wrong)


class FullTextIndex(KeptHighAtTheMean, OkapiIndex):
    """kittypyr's OkapiIndex whose posting values carry zones, frequency and length.

    zope.index's query parser (``Contains``) still works on it, scored the
    same way; ``kittypyr.search`` asks ``term`` and ``phrase`` directly.
    """

    postings_class = RankedPostings
    # By list: its name (address) -> ScopePostings, its number -> the
    # same, and each document's list's number. Made by ``clear``, or by
    # ``scope_postings_of`` for an index from before them.
    _scopes = _numbered = _scope_of = None
    # The list whose documents have no postings of their own: the index's
    # first, while it is the only one (a search in it reads the whole
    # index), until a document of another list comes (``lone_to_split``).
    _lone = None

    def clear(self):
        super().clear()
        self.keep_lists_anew()

    def keep_lists_anew(self, lone=None):
        """No postings by list yet; ``lone``: the list whose documents the index already holds, if one."""
        self._scopes, self._numbered, self._scope_of = OOBTree(), IOBTree(), IIBTree()
        self._lone = lone

    def lone_to_split(self, name):
        """Whether the lone list must get postings of its own before a document of list ``name`` is indexed."""
        return self._lone is not None and (name != self._lone or bool(self._scopes))

    def _post_in_scope(self, docid, name, postings, day):
        """Post ``docid`` in the postings of its list ``name`` too, unless that is the lone list."""
        if name == self._lone or (self._lone is None and not self._scopes):
            # Written again with each of its documents: a split of the lone
            # list (scope_postings_of) at the same time conflicts with them,
            # and two of them at once do not (_p_resolveConflict).
            self._lone = name
            return
        scope = self._scope_named(name)
        scope._add_new_document(docid, postings, day)
        self._scope_of[docid] = scope.number

    def split_mean_length(self):
        count = self.documentCount()
        return self._totaldoclen() / count if count else None

    def _p_resolveConflict(self, old, committed, new):
        if set(committed) == set(new) and all(_same_references((value,), (new[key],))
                                              for key, value in committed.items()):
            return committed
        raise ConflictError("the text index's own record changed by concurrent writers")

    def _scope_named(self, name):
        """The ``ScopePostings`` of the list ``name``, made at its first document."""
        scope = self._scopes.get(name)
        if scope is None:
            number = self._numbered.maxKey() + 1 if self._numbered else 1
            scope = self._scopes[name] = self._numbered[number] = ScopePostings(name, number, self)
        return scope

    def within(self, name):
        """The index as a search in the list ``name`` alone sees it (a ``ScopedIndex``); None if that list has no postings of its own."""
        if self._scopes is None or name == self._lone:
            return None
        return ScopedIndex(self, self._scopes.get(name))

    def unindex_doc(self, docid):
        number = None if self._scope_of is None else self._scope_of.get(docid)
        if number is not None and docid in self._docwords:
            scope = self._numbered[number]
            for wid in set(self.get_words(docid)):
                try:
                    scope._remove_posting(wid, docid)
                except KeyError:
                    pass  # not there: as it should be once the document is gone
            del self._scope_of[docid]
        super().unindex_doc(docid)

    def index_doc(self, docid, text):
        if docid in self._docwords:
            # A message's text rarely changes: forgetting it whole and
            # adding it again keeps one way of writing postings.
            self.unindex_doc(docid)
        if not isinstance(text, ZonedText):
            from kittypyr.zones import OWN, Zones

            zones = Zones()
            zones.add(OWN, 1, text if isinstance(text, str) else " ".join(text or ()))
            text = prepare_zoned(zones)
        wids, positions = self._lexicon.distinct_word_ids(text)
        day = None if text.date is None else text.date // DAY
        postings = list(zip(wids, text.values))
        self._add_new_document(docid, postings, day)
        if text.scope is not None and self._scopes is not None:
            self._post_in_scope(docid, text.scope, postings, day)
        count = len(positions)
        self._docweight[docid] = count
        # widcode's characters are all below 256: as bytes a third smaller
        # than the UTF-8 a pickled string takes, and searched the same way.
        self._docwords[docid] = encode_positions(wids, positions).encode("latin-1")
        self.documentCount.change(1)
        self._change_doc_len(count)
        return count

    def get_words(self, docid):
        words = self._docwords[docid]
        return widcode.decode(words.decode("latin-1") if type(words) is bytes else words)

    def search_phrase(self, phrase):
        # zope.index's parser asks phrases here: the same answer as ``term``.
        words = self._lexicon.parseTerms(phrase) if isinstance(phrase, str) else list(phrase)
        scored = self.term(words)
        bucket = self.family.IF.BTree()
        if scored is not None:
            bucket.update(dict(zip(scored.docids.tolist(), scored.scores.tolist())))
        return bucket

    # --- scoring ------------------------------------------------------------

    def _statistics(self):
        count = float(self.documentCount())
        mean_length = (self._totaldoclen() / count) if count else 1.0
        unseen = _unseen.get()
        if unseen is not None:
            count = max(1.0, count - unseen.count)
        return count, mean_length

    def _frequency(self, wid, postings, docids=None):
        """How many documents hold the word of ``postings`` (as ``_wordinfo`` holds them), for its weight.

        Those the reader may not see are left out (``ranked_without``);
        ``docids``: the word's, when the caller has read them already.
        """
        total = _doc_count(postings)
        unseen = _unseen.get()
        if unseen is None or total > SEEN_FREQUENCY_UP_TO:
            return total
        if docids is None:
            docids = np.frombuffer(packed_postings(postings), dtype="<i4")[0::2]
        return max(1, total - unseen.among(docids.tolist()))

    def word_scores(self, wid, zones=0):
        """``Scored`` of the documents holding word ``wid`` (in one of ``zones``, if given)."""
        postings = self.postings_of(wid)
        if postings is None:
            return EMPTY
        pairs = np.frombuffer(packed_postings(postings), dtype="<i4").reshape(-1, 2)
        docids, values = pairs[:, 0].astype(np.int64), pairs[:, 1].astype(np.int64)
        if not len(docids):
            return EMPTY
        count, mean_length = self._statistics()
        idf = inverse_doc_frequency(self._frequency(wid, postings, docids), count)
        if zones:
            keep = ((values >> ZONE_SHIFT) & zones) != 0
            docids, values = docids[keep], values[keep]
        return in_docid_order(docids, self._bm25(values, idf, mean_length))

    def _bm25(self, values, idf, mean_length):
        # f (k1 + 1) idf / (f + k1 (1 - b + b length / mean)), in place:
        # a common word's postings are scored whole when a filter asks it.
        k1, b = self.K1, self.B
        frequency = ((values >> FREQUENCY_SHIFT) & FREQUENCY_MAX).astype(np.float64)
        denominator = (values & LENGTH_MAX).astype(np.float64)
        denominator *= k1 * b / mean_length
        denominator += k1 * (1.0 - b)
        denominator += frequency
        frequency *= (k1 + 1.0) * idf
        frequency /= denominator
        return frequency

    def holding(self, wid, docids):
        """Those of ``docids`` whose text holds the word ``wid``, read from their word sequences."""
        holds = self.phrase_check([wid])
        return [docid for docid in docids if holds(docid)]

    def _chunk_bounds(self, ceilings, idf, mean_length):
        """The best score each chunk can hold, from its ceiling (``ceiling_of``)."""
        sizes = np.fromiter(map(len, ceilings), dtype=np.int64, count=len(ceilings)) // 4
        bounds = np.zeros(len(ceilings))
        if not sizes.any():
            return bounds
        values = np.frombuffer(b"".join(ceilings), dtype="<i4").astype(np.int64)
        scores = self._bm25(values, idf, mean_length)
        starts = np.concatenate([[0], np.cumsum(sizes)[:-1]])
        held = sizes > 0
        bounds[held] = np.maximum.reduceat(scores, starts[held])
        return bounds

    def best_allowed_scores(self, wid, count, allowed, exact_up_to):
        """``(scored, total, exact)`` as ``best_word_scores``, among the documents ``allowed`` lets through.

        ``allowed`` is an ``AllowedDocuments``: a test of one docid, and the
        sorted array of every allowed docid, made only when it is needed.
        When it is ``walkable`` (its tests read each document's own value:
        a sender, a list), the word's chunks are walked best first
        (``_walked_allowed_scores``): the cost follows the page, not the
        number of postings. A date, or a filter that had to be asked as a
        set (a subject, a tag), often keeps a few periods alone, which lie
        in a few runs of chunks that a walk by ceilings would reach last:
        every posting is scored instead (``_scored_allowed_scores``, one
        numpy pass).
        """
        if allowed.walkable:
            return self._walked_allowed_scores(wid, count, allowed, exact_up_to)
        return self._scored_allowed_scores(wid, count, allowed, exact_up_to)

    def _walked_allowed_scores(self, wid, count, allowed, exact_up_to):
        """``best_allowed_scores`` by the word's chunks, best ceiling first.

        As ``best_word_scores`` does, and of each chunk its postings that
        could still reach the page are tested, best first, until the
        ``count``-th best allowed score beats every chunk left. The total is
        the filter's share, tested on postings spread over the whole list
        (``_allowed_share``), times their number; when it is at most
        ``exact_up_to`` every posting is tested and the matches counted.
        """
        postings = self.postings_of(wid)
        if postings is None:
            return EMPTY, 0, True
        ranked = getattr(postings, "ranked_chunks", None)
        chunks, ceilings = ranked() if ranked is not None else ((), ())
        tail = bytes(postings._tail) if chunks else packed_postings(postings)
        share = self._allowed_share(chunks, tail, allowed)
        total = round(share * _doc_count(postings))
        documents, mean_length = self._statistics()
        idf = inverse_doc_frequency(self._frequency(wid, postings), documents)
        if total <= exact_up_to or share == 0:
            pairs = np.frombuffer(packed_postings(postings), dtype="<i4").reshape(-1, 2)
            docids = pairs[:, 0].astype(np.int64)
            keep = allowed_among(allowed, docids)
            kept = in_docid_order(docids[keep], self._bm25(pairs[keep, 1], idf, mean_length))
            return kept, len(kept), True
        if count / share > WALK_TESTS_MAX:
            # Too rare a filter to find a page among the best postings.
            return self._scored_allowed_scores(wid, count, allowed, exact_up_to)

        best = []  # the count best allowed scores so far, a heap
        found_docids, found_scores = [], []
        tested = 0

        def test_best_of(data):
            """Test the postings of ``data`` that can reach the page; False past the budget."""
            nonlocal tested
            pairs = np.frombuffer(data, dtype="<i4").reshape(-1, 2)
            scores = self._bm25(pairs[:, 1], idf, mean_length)
            floor = best[0] if len(best) >= count else -np.inf
            reaching = np.flatnonzero(scores >= floor)
            reaching = reaching[np.argsort(-scores[reaching], kind="stable")]
            docids = pairs[:, 0]
            for at in reaching.tolist():
                score = scores[at]
                # Ties are kept: among equal scores the newest is shown first.
                if len(best) >= count and score < best[0]:
                    break
                tested += 1
                if tested > WALK_TESTS_MAX:
                    return False
                docid = int(docids[at])
                if allowed.test(docid):
                    found_docids.append(docid)
                    found_scores.append(score)
                    if len(best) < count:
                        heapq.heappush(best, score)
                    elif score > best[0]:
                        heapq.heapreplace(best, score)
            return True

        walking = test_best_of(tail)
        bounds = self._chunk_bounds(ceilings, idf, mean_length)
        for data in self._best_chunks_first(chunks, bounds, lambda: best[0] if len(best) >= count else -np.inf):
            walking = test_best_of(data)
            if not walking:
                break
        if not walking:
            # The filter's documents stand apart from the word's best (a
            # sender of a few months): scoring everything costs less.
            return self._scored_allowed_scores(wid, count, allowed, exact_up_to)
        docids = np.array(found_docids, dtype=np.int64)
        scores = np.array(found_scores, dtype=np.float64)
        if len(best) >= count:
            keep = scores >= best[0]
            docids, scores = docids[keep], scores[keep]
        return in_docid_order(docids, scores), max(total, len(docids)), False

    def _scored_allowed_scores(self, wid, count, allowed, exact_up_to):
        """``best_allowed_scores`` by every posting of the word, scored at once.

        A field keeps a share of the word's documents that no chunk's
        ceiling knows of, so every posting is scored (one numpy pass); but
        only the best of them, as many as the share predicts the page
        needs (four times more while too few), are looked up in
        ``allowed``, and the total is estimated from postings spread over
        all of them. When that estimate is at most ``exact_up_to`` the
        matches are counted: every posting is looked up.
        """
        postings = self.postings_of(wid)
        if postings is None:
            return EMPTY, 0, True
        documents, mean_length = self._statistics()
        idf = inverse_doc_frequency(self._frequency(wid, postings), documents)
        # A date range keeps the chunks filled in its time (and those of
        # unknown dates): the rest cannot hold an allowed document.
        within = getattr(postings, "packed_within", None)
        span = allowed.date_span
        packed = within(*span) if span is not None and within is not None else packed_postings(postings)
        # Read as they are stored (int32): the docids that pass are few.
        pairs = np.frombuffer(packed, dtype="<i4").reshape(-1, 2)
        docids, values = pairs[:, 0], pairs[:, 1]
        if not len(docids):
            return EMPTY, 0, True
        scores = self._bm25(values, idf, mean_length)
        spread = spread_positions(len(docids), 2000)
        share = int(allowed.passing(docids[spread].tolist()).sum()) / len(spread)
        total = round(share * len(docids))
        if total <= exact_up_to or share == 0:
            every = Scored(docids.astype(np.int64), scores)
            kept = restricted(in_docid_order(every.docids, every.scores), allowed.every())
            return kept, len(kept), True
        looked = min(len(docids), max(256, int(4 * count / share)))
        while True:
            if looked >= len(docids):
                best = np.arange(len(docids))
            else:
                best = np.argpartition(-scores, looked - 1)[:looked]
            keep = allowed.passing(docids[best].tolist())
            passed = best[keep]
            if looked >= len(docids):
                return in_docid_order(docids[passed].astype(np.int64), scores[passed]), len(passed), True
            # Every posting not looked at scores at most the lowest looked at.
            if len(passed) >= count and np.partition(scores[passed], len(passed) - count)[
                    len(passed) - count] > scores[best].min():
                found = in_docid_order(docids[passed].astype(np.int64), scores[passed])
                return found, max(total, len(passed)), False
            looked = min(len(docids), looked * 4)

    def _allowed_share(self, chunks, tail, allowed):
        """The share of a word's postings that ``allowed`` lets through, tested on a spread sample (``_spread_sample``)."""
        sampled, weights = self._spread_sample(chunks, tail)
        if not len(sampled):
            return 0.0
        passed = allowed.passing(sampled.tolist())
        return float(weights[passed].sum() / weights.sum())

    @staticmethod
    def _spread_sample(chunks, tail, sample=SHARE_SAMPLE, spread=SHARE_CHUNKS):
        """``(docids, weights)``: up to ``sample`` postings of a word, and how many postings each stands for.

        Taken evenly from the tail and from up to ``spread`` chunks spread
        over the word's whole list (kept in the order mail was archived:
        every period is heard), each chunk's postings weighted by its size.
        """
        if chunks:
            picked = spread_positions(len(chunks), spread)
            parts = [chunks[at].data for at in picked.tolist()] + ([tail] if tail else [])
        else:
            parts = [tail]
        each = max(1, sample // len(parts))
        sampled, weights = [], []
        for data in parts:
            docids = np.frombuffer(data, dtype="<i4")[0::2]
            if len(docids):
                step = max(1, len(docids) // each)
                taken = docids[step // 2::step]
                sampled.append(taken)
                # Each sampled posting stands for the postings of its part.
                weights.append(np.full(len(taken), len(docids) / len(taken)))
        if not sampled:
            return np.empty(0, dtype=np.int64), np.empty(0)
        return np.concatenate(sampled).astype(np.int64), np.concatenate(weights)

    def _share_holding(self, rarest, others, allowed, check=None):
        """``(holding, passing)``: the shares of the postings of ``rarest`` (a ``WordImpacts``) whose document
        holds every word of ``others`` and is ``allowed``, and of those that pass ``check`` too.

        The filter, a cheap test, is tried on a spread sample; the words and
        the check, each a read of a document's word sequence, on at most
        MATCH_SAMPLE of the documents it let through.
        """
        sampled, weights = self._spread_sample(rarest.chunks, rarest.tail, spread=MATCH_SAMPLE_CHUNKS)
        if not len(sampled):
            return 0.0, 0.0
        share = 1.0
        if allowed is not None:
            passed = allowed.passing(sampled.tolist())
            share = float(weights[passed].sum() / weights.sum())
            sampled, weights = sampled[passed], weights[passed]
            if not len(sampled):
                return 0.0, 0.0
        picked = spread_positions(len(sampled), MATCH_SAMPLE)
        sampled, weights = sampled[picked], weights[picked]
        held = set(sampled.tolist())
        for wid in others:
            held = set(self.holding(wid, sorted(held)))
        holding = np.fromiter((docid in held for docid in sampled.tolist()), dtype=bool, count=len(sampled))
        holding_share = share * float(weights[holding].sum() / weights.sum())
        if check is None:
            return holding_share, holding_share
        passing = np.fromiter((docid in held and check(docid) for docid in sampled.tolist()), dtype=bool,
                              count=len(sampled))
        return holding_share, share * float(weights[passing].sum() / weights.sum())

    def _best_chunks_first(self, chunks, bounds, floor):
        """The packed postings of ``chunks`` that can still reach the page, best ``bounds`` first.

        ``floor()`` is the page's last score so far; reading stops at the
        first chunk whose bound is below it. Equal scores are ordered by
        date: a chunk whose best only equals the floor may still hold a
        newer one. Chunks come in batches that double, best first: one pass
        of numpy over many chunks costs less than one per chunk.
        """
        order = np.argsort(-bounds, kind="stable").tolist()
        position, batch = 0, 1
        while position < len(order):
            lowest = floor()
            taking = [at for at in order[position:position + batch] if bounds[at] >= lowest]
            if not taking:
                return
            position, batch = position + batch, batch * 2
            yield b"".join([chunks[at].data for at in taking])

    def best_word_scores(self, wid, count):
        """``(scored, total, exact)`` for the documents holding word ``wid``, for ``scored.top``.

        ``scored`` holds every document that can be among the ``count``
        best (and others): the word's chunks are read best ceiling first,
        until the ``count``-th best score so far beats every chunk left.
        ``total`` is how many documents match, from the word's postings.
        """
        postings = self.postings_of(wid)
        ranked = getattr(postings, "ranked_chunks", None)
        ranked = ranked() if ranked is not None else None
        if ranked is None:
            scored = self.word_scores(wid)
            return scored, len(scored), True
        chunks, ceilings = ranked
        documents, mean_length = self._statistics()
        idf = inverse_doc_frequency(self._frequency(wid, postings), documents)

        def scored_pairs(data):
            pairs = np.frombuffer(data, dtype="<i4").reshape(-1, 2)
            return pairs[:, 0].astype(np.int64), self._bm25(pairs[:, 1], idf, mean_length)

        found = [scored_pairs(bytes(postings._tail))]
        best = found[0][1]
        bounds = self._chunk_bounds(ceilings, idf, mean_length)
        for data in self._best_chunks_first(chunks, bounds, lambda: best.min() if len(best) >= count else -np.inf):
            docids, scores = scored_pairs(data)
            found.append((docids, scores))
            best = np.concatenate([best, scores])
            if len(best) > count:
                best = np.partition(best, len(best) - count)[len(best) - count:]
        docids = np.concatenate([part[0] for part in found])
        scores = np.concatenate([part[1] for part in found])
        if len(best) >= count:
            # What scores below the count-th best can never be shown.
            keep = scores >= best.min()
            docids, scores = docids[keep], scores[keep]
        return in_docid_order(docids, scores), len(postings), True

    def best_words_scores(self, wids, count, allowed=None, exact_up_to=1000, check=None):
        """``(scored, total, exact)`` for the documents holding every word of ``wids``, as ``best_word_scores``.

        ``wids``: distinct word ids, every zone; ``allowed``: None, or an
        ``AllowedDocuments`` the documents must pass. Each word's tail and
        its chunks' high postings (``split_high``) are read first, and the
        documents found in all of them scored; then of each word the chunks
        whose other postings could still reach the ``count`` best, added to
        every other word's best, are read whole, until none is left that
        can (``WordImpacts``). So two words most of the mail holds read a
        part of their postings instead of all of them, and the page is the
        same as when every posting is scored. ``total`` is estimated from a
        sample of the rarest word's postings (``MATCH_SAMPLE``); when it is
        at most ``exact_up_to``, or everything was read, the matches are
        counted.

        ``check``: a test the documents must pass too (their phrases), each
        a read of a word sequence. A phrase scores as its words do, so its
        best are among the words' best: those are looked at best first
        until ``count`` pass, and when fewer do, more of the words' best are
        read, as many as the share that passed says are needed and at least
        four times as many (each document looked at once). ``scored``
        then holds the ``count`` best that pass, or every one that does
        when the documents holding the words are at most ``exact_up_to``.
        """
        every = [self.postings_of(wid) for wid in wids]
        if any(postings is None for postings in every):
            return EMPTY, 0, True
        documents, mean_length = self._statistics()
        words = []
        for wid, postings in zip(wids, every):
            idf = inverse_doc_frequency(self._frequency(wid, postings), documents)
            words.append(WordImpacts(self, wid, postings, idf, mean_length))
        # Added in the order ``evaluate`` adds them: the same scores to the last bit.
        words.sort(key=lambda word: word.count)
        best_sum = sum(word.maximum for word in words)
        looked = count
        while True:
            scored, floor = self._best_found(words, allowed, looked, best_sum)
            if check is None:
                break
            passing = best_passing(Scored(scored.docids, scored.scores, check), count)
            if len(passing) >= count or len(scored) < looked:
                break
            # Every candidate was looked at: enough more, at the share that
            # passed (a phrase may be rare among its words' best), and at
            # least four times as many.
            looked = max(4 * looked, -(-5 * count * len(scored) // (4 * max(1, len(passing)))))
        read_whole = all(word.read_whole for word in words)
        if read_whole and (check is None or len(scored) <= exact_up_to):
            scored = verified(Scored(scored.docids, scored.scores, check))
            return scored, len(scored), True
        if check is not None and len(passing) < count:
            # Fewer than ``looked`` hold the words, and every one was looked at.
            return passing, len(passing), True
        rarest = words[0]
        share, share_passing = self._share_holding(rarest, [word.wid for word in words[1:]], allowed, check)
        # ``scored`` may lack what scores below the floor: every document
        # found in all the words is counted only when the sample says few.
        if not read_whole and round(share * rarest.count) <= exact_up_to \
                and len(self._found_in_all(words, allowed)) <= exact_up_to:
            for word in words:
                word.read_reaching(-np.inf)
            found = self._found_in_all(words, allowed)
            scored = verified(Scored(found.docids, found.scores, check))
            return scored, len(scored), True
        total = round(share_passing * rarest.count)
        if check is not None:
            return passing, max(total, len(passing)), False
        # What scores below the count-th best can never be shown.
        keep = scored.scores >= floor
        return Scored(scored.docids[keep], scored.scores[keep]), max(total, len(scored)), False

    def _best_found(self, words, allowed, count, best_sum):
        """``(scored, floor)``: every document that can be among the ``count`` best of ``words``, read so far.

        ``floor`` is the ``count``-th best score (-inf when fewer are found):
        of each word, the chunks whose postings could still reach it are
        read. Once a floor is known, each word's postings that cannot reach
        it, even with every other word's best, are left out before the
        documents in all of them are found: ``scored`` may then lack
        documents scoring below ``floor`` (all of them when every word was
        read whole, for an exact count).
        """
        floor = -np.inf
        while True:
            whole = all(word.read_whole for word in words)
            scored = self._found_in_all(words, allowed, -np.inf if whole else floor, best_sum)
            if len(scored) >= count:
                floor = np.partition(scored.scores, len(scored) - count)[len(scored) - count]
            opened = [word.read_reaching(word.needed(floor, best_sum)) for word in words]
            if not any(opened):
                return scored, floor

    def cheap_to_score_whole(self, wids, phrases=False):
        """Whether the words ``wids`` have at most WORDS_SCORED_WHOLE_UP_TO postings together.

        Scoring every one of them then costs less than ``best_words_scores``.
        ``phrases``: whether some of them make phrases (then at most
        PHRASE_WORDS_SCORED_WHOLE_UP_TO).
        """
        most = PHRASE_WORDS_SCORED_WHOLE_UP_TO if phrases else WORDS_SCORED_WHOLE_UP_TO
        return sum(_doc_count(self.postings_of(wid) or b"") for wid in wids) <= most

    @staticmethod
    def _found_in_all(words, allowed, floor=-np.inf, best_sum=0.0):
        """``Scored`` of the documents found in what was read of every word of ``words``, and ``allowed``.

        Added in the order ``evaluate`` adds them: the same scores to the
        last bit. ``floor``: each word's postings that cannot reach it even
        with every other word at its best (``best_sum``: all words' best
        together) are left out.
        """
        scored = words[0].found(words[0].needed(floor, best_sum))
        if allowed is not None and len(scored):
            # The rarest word's first: a filter of one list among many
            # leaves the intersections a part of it to do.
            keep = allowed_among(allowed, scored.docids)
            scored = Scored(scored.docids[keep], scored.scores[keep])
        for word in words[1:]:
            if not len(scored):
                break
            scored = intersection(scored, word.found(word.needed(floor, best_sum)))
        return scored

    def _search_wids(self, wids):
        # The same scores for zope.index's own query parser.
        found = []
        for wid in wids:
            scored = self.word_scores(wid)
            bucket = self.family.IF.Bucket()
            bucket.update(dict(zip(scored.docids.tolist(), scored.scores.tolist())))
            found.append((bucket, 1))
        return found

    def word_ids(self, words):
        """The ids of ``words`` as the index has them; None for a word it never saw.

        Stop words are left out, as they are from the indexed text.
        """
        wids = []
        for word in words:
            for wid in self._lexicon.termToWordIds(word):
                wids.append(wid if wid and wid in self._wordinfo else None)
        return wids

    def term(self, words, zones=0, verify=True):
        """``Scored`` of the documents holding ``words`` (one word, or a phrase), in ``zones``.

        A phrase is its words' documents whose word sequence holds it; with
        ``verify`` false, those documents are only candidates, with the
        ``check`` that looks for the phrase in one of them.
        Returns None when every word is a stop word (the term asks nothing).
        """
        wids = self.word_ids(words)
        if not wids:
            return None
        if None in wids:
            return EMPTY
        scored = None
        for wid in dict.fromkeys(wids):
            part = self.word_scores(wid, zones)
            scored = part if scored is None else intersection(scored, part)
            if not len(scored):
                return EMPTY
        if len(wids) > 1:
            scored = Scored(scored.docids, scored.scores, self.phrase_check(wids))
            if verify:
                scored = verified(scored)
        return scored

    def phrase_check(self, wids):
        """Whether a document's word sequence holds the words ``wids`` side by side, in order: docid -> bool.

        A document no longer indexed holds none.
        """
        code = encode_positions(wids, range(len(wids)))
        # A word's code begins the longer codes of 128 other ids (widcode):
        # the run must end where a code ends, before a byte with its high bit
        # set (the next code's first) or the end. Its start is one already.
        as_bytes = re.compile(re.escape(code.encode("latin-1")) + rb"(?![\x00-\x7f])").search
        as_text = re.compile(re.escape(code) + r"(?![\x00-\x7f])").search
        docwords = self._docwords

        def holds(docid):
            words = docwords.get(docid)
            if words is None:
                return False
            return (as_bytes if type(words) is bytes else as_text)(words) is not None

        return holds


class ScopedIndex(FullTextIndex):
    """A ``FullTextIndex`` as a search in one list sees it: that list's postings (``ScopePostings``), nothing else.

    Everything else is the index's own: the words' weights and the mean
    length among every list, so a page scores as the whole index's search
    cut to the list did; the word sequences, in which a document of
    another list holds nothing. Made for a search, never stored.
    """

    def __init__(self, index, scope):
        self._index = index
        self._scope = scope
        self._number = None if scope is None else scope.number
        self._lexicon = index._lexicon
        self._docwords = index._docwords
        self._docweight = index._docweight
        self.documentCount = index.documentCount
        self._totaldoclen = index._totaldoclen
        self.wordCount = index.wordCount
        self._scope_of = index._scope_of
        self._wordinfo = {} if scope is None else scope._wordinfo

    def postings_of(self, wid):
        return None if self._scope is None else self._scope.postings_of(wid)

    def _frequency(self, wid, postings, docids=None):
        index = self._index
        return index._frequency(wid, index.postings_of(wid))

    def phrase_check(self, wids):
        holds = super().phrase_check(wids)
        scope_of, number = self._scope_of.get, self._number
        return lambda docid: scope_of(docid) == number and holds(docid)

    def index_doc(self, docid, text):
        raise TypeError("a ScopedIndex is read, never written: index into the FullTextIndex")

    unindex_doc = index_doc


# Words with at most this many postings together are scored whole: below,
# that costs less than reading their chunks' high postings first.
WORDS_SCORED_WHOLE_UP_TO = 50_000
# The same for the words of a phrase: scored whole, every candidate is a
# page's or the count's sample's, and each costs a read of its word sequence.
PHRASE_WORDS_SCORED_WHOLE_UP_TO = 10_000

# A search of several words estimates how many documents hold them all from
# this many postings of the rarest, from at most this many of its chunks: each
# posting tested reads a document's word sequence.
MATCH_SAMPLE = 160
MATCH_SAMPLE_CHUNKS = 8


class WordImpacts:
    """One word of a search of several words: what of its postings is read, and the bounds of the rest.

    At first its tail (the recent postings with it) and each full chunk's
    high postings (``split_high``); a chunk without them (not yet in a
    group, or in a group made before) counts as unread. ``maximum`` is
    the best score any of its postings can have.
    """

    def __init__(self, index, wid, postings, idf, mean_length):
        self.wid = wid
        self.count = _doc_count(postings)
        self._score = lambda values: index._bm25(values, idf, mean_length)
        chunks, ceilings, highs, rests = postings.chunk_pieces() if hasattr(postings, "chunk_pieces") \
            else ([], [], [], [])
        self.tail = bytes(postings._tail) if chunks else packed_postings(postings)
        self.chunks = chunks
        # What is read of each chunk: its high postings (empty where not
        # kept: it counts as unread), or all of it once read whole.
        self._read = [high or b"" for high in highs]
        rests = [ceiling if high is None else rest for ceiling, high, rest in zip(ceilings, highs, rests)]
        # The best score of each chunk's unread postings (-inf: none left).
        self._unread = index._chunk_bounds(rests, idf, mean_length)
        self._unread[np.fromiter(map(len, rests), dtype=np.int64, count=len(rests)) == 0] = -np.inf
        # Chunks hold docids in the order mail came, the tail the newest:
        # joined so, their postings are in docid order and need no sort.
        docids, scores = self._scored_pairs(b"".join([*filter(None, highs), self.tail]))
        self._found = in_docid_order(docids, scores)
        # Where each chunk's part of ``_found`` starts (the tail's after the
        # last), while ``_found`` is the chunks' postings in their order: a
        # chunk read whole then replaces its part alone (``_replace_parts``).
        self._starts = None
        if self._found.docids is docids:
            sizes = np.fromiter(map(len, self._read), dtype=np.int64, count=len(highs)) // _PAIR.size
            self._starts = np.concatenate([[0], np.cumsum(sizes)])
        # A chunk's best is its high postings' or its rest's.
        self.maximum = max(self._found.scores.max(initial=0.0), self._unread.max(initial=0.0))

    @property
    def read_whole(self):
        return not np.isfinite(self._unread).any()

    def needed(self, floor, best_sum):
        """The least a posting of this word must score for its document to reach ``floor``.

        ``best_sum``: every word's best together; the others at theirs.
        """
        return floor - (best_sum - self.maximum)

    def found(self, needed=-np.inf):
        """``Scored`` of the postings read so far, in docid order; those scoring below ``needed`` left out."""
        found = self._found
        if not np.isfinite(needed):
            return found
        # A hair lower than the sum says, so that rounding drops no tie.
        keep = found.scores >= needed - 1e-9 * (1.0 + abs(needed))
        return Scored(found.docids[keep], found.scores[keep])

    def read_reaching(self, floor):
        """Read whole each chunk whose unread postings may score ``floor`` or more; whether any was."""
        unread = self._unread
        reaching = np.flatnonzero(np.isfinite(unread) & (unread >= floor))
        if not len(reaching):
            return False
        unread[reaching] = -np.inf
        read, chunks = self._read, self.chunks
        at_chunks = reaching.tolist()
        for at in at_chunks:
            read[at] = chunks[at].data
        if self._starts is None or len(at_chunks) > len(chunks) // 4:
            # Out of docid order before, or a quarter of the chunks read at
            # once: made again from every part, as at the start.
            self._found = in_docid_order(*self._scored_pairs(b"".join([*filter(None, read), self.tail])))
            self._starts = None
        else:
            self._replace_parts(at_chunks)
        return True

    def _replace_parts(self, at_chunks):
        """``_found`` with the parts of the chunks ``at_chunks`` (in order) replaced by what is read of them now.

        Only those chunks are scored; the rest of ``_found`` is copied as
        it is. Should the parts joined so not be in docid order (a message
        indexed again lies in a newer chunk), they are sorted, as a whole
        rebuild would sort them, and later reads rebuild it whole.
        """
        found, starts = self._found, self._starts.tolist()
        new_docids, new_scores = self._scored_pairs(b"".join([self._read[at] for at in at_chunks]))
        sizes = np.diff(self._starts)
        docids, scores, taken, copied = [], [], 0, 0
        for at in at_chunks:
            size = len(self._read[at]) // _PAIR.size
            docids += [found.docids[copied:starts[at]], new_docids[taken:taken + size]]
            scores += [found.scores[copied:starts[at]], new_scores[taken:taken + size]]
            copied, taken = starts[at + 1], taken + size
            sizes[at] = size
        joined = np.concatenate(docids + [found.docids[copied:]])
        self._found = in_docid_order(joined, np.concatenate(scores + [found.scores[copied:]]))
        self._starts[1:] = np.cumsum(sizes)
        if self._found.docids is not joined:
            self._starts = None

    def _scored_pairs(self, packed):
        """``(docids, scores)`` of packed postings, in their order."""
        pairs = np.frombuffer(packed, dtype="<i4").reshape(-1, 2)
        return pairs[:, 0].astype(np.int64), self._score(pairs[:, 1])


def evaluate(index, groups, excluded=(), verify=True):
    """The documents of ``index`` matching every group and no excluded term, scored.

    ``groups`` is an AND of ORs of terms, each term a ``(words, zones)``
    pair (see ``FullTextIndex.term``). Returns None when no group asks
    anything (no group, or only stop words): the caller decides what that
    means (every document, usually). With ``verify`` false, a phrase that
    is a group of its own is left to the result's ``check``: looking for a
    phrase costs a document's word sequence, so it is done only for the
    candidates a page shows (or counts) rather than for all of them.
    """
    scored = None
    parts = []
    checks = []
    for group in groups:
        alone = not verify and len(group) == 1
        found = [index.term(words, zones, verify=not alone) for words, zones in group]
        found = [result for result in found if result is not None]
        if alone and found:
            checks.append(found[0].check)
        if found:
            parts.append(union(found))
    for part in sorted(parts, key=len):
        scored = part if scored is None else intersection(scored, part)
        if not len(scored):
            return EMPTY
    if scored is None:
        return None
    for words, zones in excluded:
        found = index.term(words, zones)
        if found is not None and len(found):
            scored = restricted(scored, found.docids, keep=False)
    return Scored(scored.docids, scored.scores, all_of(checks))


def all_documents(index):
    """Every document of ``index``, scored 0."""
    docids = np.fromiter(index._docweight.keys(), dtype=np.int64, count=len(index._docweight))
    return Scored(docids, np.zeros(len(docids)))


class FullText(Query):
    """A catalog query term: the messages matching ``groups`` and none of ``excluded``, weighted.

    Lets ``catalog.query`` combine the zoned text search with the other
    indexes, for callers that want a plain catalog query (exports, feeds).
    """

    def __init__(self, groups, excluded=(), index_name="text"):
        self.groups = [[(tuple(words), zones) for words, zones in group] for group in groups]
        self.excluded = [(tuple(words), zones) for words, zones in excluded]
        self.index_name = index_name

    def __str__(self):
        return f"FullText({self.groups!r}, excluding {self.excluded!r})"

    def scored(self, catalog, verify=True, index=None):
        """``Scored`` of the matching messages; see ``evaluate`` for ``verify``.

        ``index``: a ``ScopedIndex`` to read rather than the catalog's; the
        answer is then None when the words ask nothing of it (no group).
        """
        if index is not None and index is not catalog[self.index_name].index:
            return evaluate(index, self.groups, self.excluded, verify)
        index = catalog[self.index_name].index
        scored = evaluate(index, self.groups, self.excluded, verify)
        if scored is None:
            scored = evaluate(index, [], ()) if not self.excluded else restricted(
                all_documents(index), _excluded_docids(index, self.excluded), keep=False)
        return scored if scored is not None else all_documents(index)

    def _apply(self, catalog, names):
        scored = self.scored(catalog)
        bucket = catalog[self.index_name].family.IF.Bucket()
        bucket.update(dict(zip(scored.docids.tolist(), scored.scores.tolist())))
        return bucket


def _excluded_docids(index, excluded):
    found = [index.term(words, zones) for words, zones in excluded]
    found = [part for part in found if part is not None and len(part)]
    return union(found).docids if found else np.empty(0, dtype=np.int64)
