"""mbox exports of the original bytes: a list, a date range, a month, a thread, a message, a search.

Each message goes out exactly as it was received, in mboxrd form (RFC
4155, with every line that reads ``>*From `` given one more ``>``, so that
the quoting can be undone), gzip-compressed, streamed as it is read.

The originals are stored gzip-compressed already (``Message.original``),
and a gzip file may be a run of members (RFC 1952, 2.2): an original that
needs no quoting goes out as its stored member, untouched, between small
members holding the envelope lines. Nothing is decompressed or compressed
again for it, which is what lets a whole list stream in about the time it
takes to read its originals. The ``mbox`` catalog index (``MboxIndex``)
holds, per message, what the export needs: a reference to its original,
whether it needs work (a line to quote, no final line end), its sender and
date, so that no message record (with its whole decoded text) is read. It
is declared here and filled, for an archive made before it, at the next
start.

Which messages an export holds is asked of the catalog (list, date, month,
thread, a search's query): a deleted message has left it, and a private
list's views are closed to anyone who may not read it.
"""

import gzip
import heapq
import logging
import re
import struct
import time
import zlib
from datetime import datetime, timezone

import BTrees
import transaction
from persistent import Persistent
from pyramid.httpexceptions import HTTPBadRequest, HTTPGone, HTTPMovedPermanently, HTTPNotFound
from pyramid.response import Response
from pyramid.view import view_config
from pyramid_zodbconn import get_connection
from repoze.catalog.interfaces import ICatalogIndex
from repoze.catalog.query import Eq
from zope.index.text.parsetree import ParseError
from zope.interface import implementer

from kittypyr.bootstrap import ROOT_KEY
from kittypyr.catalog import docid_of
from kittypyr.mailboxes import EXPORT_COMMENT
from kittypyr.msgid import message_id_hash
from kittypyr.resources import Archive, MailingList, Message, Thread
from kittypyr.resources.browsing import Month, ThreadAlias
from kittypyr.resources.message import CompressedOriginal
from kittypyr.search import SearchLimits, date_query, message_query, visible_list_addresses

log = logging.getLogger(__name__)

SUFFIX = ".mbox.gz"

# A line an mbox reader could take for an envelope, quoted or not.
_FROM_LINE = re.compile(rb"^(>*From )", re.MULTILINE)
_SAFE_FILENAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._+-]{0,100}")
# An envelope sender is one printable ASCII word; anything else is written as MAILER-DAEMON.
_ENVELOPE_SENDER = re.compile(r"[!-~]{1,254}")
_DAY = re.compile(r"\d{4}-\d{2}-\d{2}")

_WEEKDAYS = ("Mon", "Tue", "Wed", "Thu", "Fri", "Sat", "Sun")
_EPOCH = time.gmtime(0)
_MONTHS = ("Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec")

# A gzip member's header: deflate, no name, no time, unknown system.
_GZIP_HEADER = b"\x1f\x8b\x08\x00\x00\x00\x00\x00\x00\xff"
# The first member's: the same with a comment (FCOMMENT) that says what the
# file is (``EXPORT_COMMENT``), which gzip and zcat pass over. Read back, the export is split at
# its envelope lines alone: none of the guesses made for mbox files of
# unknown writers (a message's own Content-Length, an envelope line after
# text on its line or after NUL bytes) could cut a message a sender made so.
_FIRST_GZIP_HEADER = b"\x1f\x8b\x08\x10\x00\x00\x00\x00\x00\xff" + EXPORT_COMMENT + b"\x00"
# Output is handed to the server in pieces of about this size. Small
# pieces keep its memory flat: over 16 whole-list exports of the 28k corpus
# its RSS grew by 85 MB with pieces of 256 KB (or 120 KB), which glibc's
# malloc leaves scattered over every server thread's heap (it did not with
# MALLOC_ARENA_MAX=1), and stayed where the first two exports left it with
# these, for the same CPU (bench/export.py --runs 16).
_CHUNK = 64 * 1024
# Every so many messages the streaming connection's cache is trimmed, so
# memory stays flat however long the list.
_TRIM_EVERY = 500


# --- mboxrd ------------------------------------------------------------------


def envelope_line(sender, timestamp):
    """The ``From `` line that starts a message in an mbox: its sender and date in asctime form (UTC).

    A sender that is not one printable ASCII word is written MAILER-DAEMON;
    a date outside four-digit years as the epoch, which mbox readers
    (kittypyr's own among them) take for "no date".
    """
    if not _ENVELOPE_SENDER.fullmatch(sender):
        sender = "MAILER-DAEMON"
    # time.gmtime rather than datetime and strftime: this runs once a
    # message, and the formatting was most of an export's own work.
    try:
        moment = time.gmtime(timestamp)
    except (OverflowError, OSError, ValueError):
        moment = _EPOCH
    if not 1000 <= moment.tm_year <= 9999:
        moment = _EPOCH
    return (
        f"From {sender} {_WEEKDAYS[moment.tm_wday]} {_MONTHS[moment.tm_mon - 1]} {moment.tm_mday:2d} "
        f"{moment.tm_hour:02d}:{moment.tm_min:02d}:{moment.tm_sec:02d} {moment.tm_year}\n"
    ).encode("ascii")


def quoted(raw):
    """``raw`` with one more ``>`` before every line that reads ``>*From `` (mboxrd)."""
    if b"From " not in raw:
        return raw
    return _FROM_LINE.sub(rb">\1", raw)


def needs_care(raw):
    """Whether the bytes ``raw`` cannot go into an mbox as they are: a line to quote, or no final line end."""
    return not raw.endswith(b"\n") or (b"From " in raw and _FROM_LINE.search(raw) is not None)


def _stored_gzip(original):
    """The stored gzip bytes of an original (a record of its own, or a blob file)."""
    if isinstance(original, CompressedOriginal):
        return original.data
    with original.open("r") as f:
        return f.read()


def _care_needed(original):
    """Whether a stored original cannot be passed on as it is: a line to quote, no final
    line end, or stored bytes that are not exactly one gzip member."""
    inflater = zlib.decompressobj(zlib.MAX_WBITS | 16)
    try:
        raw = inflater.decompress(_stored_gzip(original))
    except zlib.error:
        return True
    return needs_care(raw) or not inflater.eof or bool(inflater.unused_data)


def _written_after(message):
    """The date (a timestamp) an export must have passed before ``message`` goes in it, or None.

    Two different messages may carry one Message-ID: the one archived
    first is named by its hash, the others by a derived one. An import
    gives the plain hash to whichever comes first, so a message under a
    derived name goes after the one that holds the plain name, even when
    it is dated earlier; otherwise the export is in date order.
    """
    if not message.original_message_id or message.message_id == message.original_message_id:
        return None
    holder = message.mailing_list.messages.data.get(message_id_hash(message.original_message_id))
    if holder is None or holder is message or holder.timestamp <= message.timestamp:
        return None
    return int(holder.timestamp)


@implementer(ICatalogIndex)
class MboxIndex(Persistent):
    """The catalog index of what an export needs of each message, without loading the message.

    Per message docid: its original (a reference to the stored record, not
    a copy), whether it needs care (see ``_care_needed``: decompressing and
    quoting, for the few that do), its envelope sender and its date. A
    message's record holds its whole decoded text; an export of a whole
    list reads none of them. Like every index it is kept in step by the
    catalog's subscribers, so a deleted message leaves it with its
    reference (and the original is unreachable once the storage is
    packed); a change of a message's original must be notified for every
    index (``ObjectModified`` without ``indexes``) or for this one.
    """

    family = BTrees.family64
    # The form of the entries; an index of another form is made again at start-up.
    LAYOUT = 2
    layout = 1

    @classmethod
    def is_current(cls, index):
        return isinstance(index, cls) and index.layout == cls.LAYOUT

    def __init__(self):
        self.layout = self.LAYOUT
        self.entries = self.family.IO.BTree()
        # The catalogued documents that are not messages (threads), so that
        # ``docids()`` names every document the catalog gave this index.
        self.others = self.family.IF.TreeSet()

    def index_doc(self, docid, obj):
        if isinstance(obj, Message):
            self.entries[docid] = (obj.original, _care_needed(obj.original), obj.sender_address or "",
                                   int(obj.timestamp), _written_after(obj))
            if docid in self.others:
                self.others.remove(docid)
        else:
            self.unindex_doc(docid)
            self.others.add(docid)

    reindex_doc = index_doc

    def unindex_doc(self, docid):
        self.entries.pop(docid, None)
        if docid in self.others:
            self.others.remove(docid)

    def clear(self):
        self.entries.clear()
        self.others.clear()

    def docids(self):
        return self.family.IF.union(self.family.IF.TreeSet(self.entries.keys()), self.others)

    def entry(self, docid):
        """``(original, careful, sender, timestamp, not_before)`` of the message ``docid``, or None."""
        return self.entries.get(docid)

    def apply(self, query):
        raise NotImplementedError("the mbox index answers exports, not queries")

    def apply_intersect(self, query, docids):
        raise NotImplementedError("the mbox index answers exports, not queries")


def _gzip_member(data, header=_GZIP_HEADER):
    """``data`` (under 64 KB) as a gzip member of one stored (uncompressed) deflate block.

    For the envelope lines between messages: a few dozen bytes, for which
    setting up a compressor would cost more than it saves.
    """
    size = len(data)
    return b"".join((header, struct.pack("<BHH", 1, size, size ^ 0xFFFF), data,
                     struct.pack("<II", zlib.crc32(data), size)))


class MboxWriter:
    """Builds a gzip-compressed mbox from messages; ``take()`` hands over what is ready.

    Text between stored originals is kept until the next original (or the
    end) and then written as one member.
    """

    def __init__(self):
        self.ready = []
        self.ready_size = 0
        self.pending = []
        self.written = False

    def _out(self, data):
        self.ready.append(data)
        self.ready_size += len(data)
        self.written = True

    def _flush_pending(self):
        if self.pending:
            self._out(_gzip_member(b"".join(self.pending), _GZIP_HEADER if self.written else _FIRST_GZIP_HEADER))
            self.pending = []

    def add(self, original, careful, sender, timestamp):
        """Append a message: its stored ``original``, and the rest of its ``MboxIndex`` entry."""
        if careful:
            try:
                raw = gzip.decompress(_stored_gzip(original))
            except (OSError, EOFError, zlib.error) as exc:
                # Cannot happen to bytes kittypyr stored; if it does, the
                # rest of the export is still worth having.
                log.error("an original in an export cannot be read (%r): left out", exc)
                return
            self.pending.append(envelope_line(sender, timestamp))
            self._flush_pending()
            self._out(zlib.compress(quoted(raw) + (b"" if raw.endswith(b"\n") else b"\n"), 6,
                                    zlib.MAX_WBITS | 16))
        else:
            self.pending.append(envelope_line(sender, timestamp))
            self._flush_pending()
            self._out(_stored_gzip(original))
        # The empty line that ends a message in an mbox.
        self.pending.append(b"\n")

    def take(self, at_least=_CHUNK):
        """The output ready so far, once there is ``at_least`` of it (else b"")."""
        if self.ready_size < at_least:
            return b""
        data = b"".join(self.ready)
        self.ready, self.ready_size = [], 0
        return data

    def finish(self):
        self._flush_pending()
        if not self.written:
            # gzip and zcat refuse a file of no bytes: nothing is one empty member.
            self._out(_gzip_member(b"", _FIRST_GZIP_HEADER))
        return self.take(0)


# --- choosing the messages -----------------------------------------------


def export_docids(archive, query):
    """The docids of the messages ``query`` finds, oldest first (a list of integers)."""
    _, docids = archive.catalog.query(query, sort_index="date")
    return list(docids)


def stream_mbox(db, docids):
    """Yield the gzip-compressed mbox of the messages ``docids`` name, in that order.

    Reads through a connection of its own, opened when the first piece is
    asked for: the request's connection is closed by then, as soon as the
    view has answered. Messages deleted in between are left out.
    """
    manager = transaction.TransactionManager()
    connection = db.open(transaction_manager=manager)
    try:
        index = connection.root()[ROOT_KEY].catalog["mbox"]
        writer = MboxWriter()

        def write(entry):
            writer.add(*entry[:4])
            # Nothing is kept of a message once written.
            if hasattr(entry[0], "_p_deactivate"):
                entry[0]._p_deactivate()

        # Messages that must wait for a later one (see _written_after), by the date they wait for.
        waiting = []
        for count, docid in enumerate(docids, 1):
            entry = index.entry(docid)
            if entry is None:
                continue  # deleted since the view chose it
            timestamp, not_before = entry[3], entry[4]
            while waiting and waiting[0][0] < timestamp:
                write(heapq.heappop(waiting)[2])
            if not_before is not None and not_before >= timestamp:
                heapq.heappush(waiting, (not_before, docid, entry))
            else:
                write(entry)
            if count % _TRIM_EVERY == 0:
                connection.cacheGC()
            data = writer.take()
            if data:
                yield data
        while waiting:
            write(heapq.heappop(waiting)[2])
        yield writer.finish()
    finally:
        manager.abort()
        # The connection goes back to the pool: it keeps nothing of the export.
        connection.cacheMinimize()
        connection.close()


def mbox_response(request, filename, docids):
    """A response streaming the messages ``docids`` as ``filename``."""
    response = Response(content_type="application/gzip")
    response.content_disposition = f'attachment; filename="{filename}"'
    # It may hold a private list's mail: kept from shared caches as every
    # answer to a reader with a session is (kittypyr.security).
    response.app_iter = stream_mbox(get_connection(request).db(), docids)
    return response


def _day(request, name):
    given = request.params.get(name, "").strip()
    if not given:
        return None
    try:
        if not _DAY.fullmatch(given):
            raise ValueError(given)
        return datetime.strptime(given, "%Y-%m-%d").replace(tzinfo=timezone.utc)
    except ValueError:
        raise HTTPBadRequest(f"{name} must be a day written YYYY-MM-DD") from None


def _thread_named(mailing_list, key):
    """The live thread ``key`` names: a thread key, an old one merged since, or any of its messages' hashes."""
    thread = mailing_list.threads.live(key)
    if thread is None:
        message = mailing_list.messages.data.get(key)
        if message is not None:
            thread = mailing_list.threads.live(message.thread)
    if thread is None:
        raise HTTPNotFound()
    return thread


def _docid_of(archive, resource):
    docid = docid_of(archive, resource)
    return [] if docid is None else [docid]


def whole_list_query(mailing_list):
    """The catalog query of every message of ``mailing_list``."""
    return Eq("kind", "message") & Eq("list", mailing_list.address)


def _epoch_bounds():
    return datetime(1970, 1, 1, tzinfo=timezone.utc), datetime(9999, 1, 1, tzinfo=timezone.utc)


# --- views ----------------------------------------------------------------------


@view_config(context=MailingList, name="export")
def export_list(context, request):
    """``/list/<address>/export/<name>.mbox.gz?start=&end=&thread=&message=``, as HyperKitty has it.

    ``start`` is the first day included and ``end`` the first day left out
    (YYYY-MM-DD, UTC); ``thread`` a thread's key (or any of its messages'
    hashes); ``message`` one message's hash, which alone is exported then.
    """
    if len(request.subpath) != 1 or not request.subpath[0].endswith(SUFFIX):
        raise HTTPNotFound()
    name = request.subpath[0]
    filename = name if _SAFE_FILENAME.fullmatch(name) else "export" + SUFFIX
    archive = request.root
    message_hash = request.params.get("message", "").strip()
    if message_hash:
        message = context.messages.data.get(message_hash)
        if message is None:
            # A deleted message's export is gone, as its page is.
            raise HTTPGone() if message_hash in context.messages.tombstones else HTTPNotFound()
        return mbox_response(request, filename, _docid_of(archive, message))
    query = whole_list_query(context)
    thread_key = request.params.get("thread", "").strip()
    if thread_key:
        query &= Eq("thread", _thread_named(context, thread_key).__name__)
    start, end = _day(request, "start"), _day(request, "end")
    if start is not None or end is not None:
        dates = date_query(start, end, *_epoch_bounds())
        if dates is None:
            return mbox_response(request, filename, [])
        query &= dates
    return mbox_response(request, filename, export_docids(archive, query))


@view_config(context=Thread, name="t.mbox.gz")
def export_thread(context, request):
    """``/list/<address>/thread/<key>/t.mbox.gz``: the thread's messages, oldest first."""
    mailing_list = context.mailing_list
    query = whole_list_query(mailing_list) & Eq("thread", context.__name__)
    filename = f"{mailing_list.address.split('@')[0]}-{context.__name__}{SUFFIX}"
    if not _SAFE_FILENAME.fullmatch(filename):
        filename = f"{context.__name__}{SUFFIX}"
    return mbox_response(request, filename, export_docids(request.root, query))


@view_config(context=ThreadAlias, name="t.mbox.gz")
def export_thread_alias(context, request):
    """A merged thread's old key leads to the export of the thread it joined."""
    return HTTPMovedPermanently(location=request.resource_url(context.target, request.view_name))


@view_config(context=Archive, name="search.mbox.gz")
def export_search(context, request):
    """``/search.mbox.gz?q=&mlist=``: what the search finds, in the lists the reader may see, oldest first."""
    text = request.params.get("q", "").strip()
    docids = []
    if text:
        asked = message_query(context, text, visible_list_addresses(request),
                              mlist=request.params.get("mlist") or None,
                              limits=SearchLimits.from_settings(request.registry.settings))
        if asked.catalog_query is not None:
            try:
                docids = export_docids(context, asked.catalog_query)
            except ParseError as exc:
                raise HTTPBadRequest(f"The words could not be searched ({exc}).") from None
    return mbox_response(request, "search" + SUFFIX, docids)


# --- links on pages ---------------------------------------------------------------


def month_export_url(request, month):
    """The export of a month's messages, named and ranged as HyperKitty links them."""
    mailing_list = month.mailing_list
    following = (month.year + (month.month == 12), month.month % 12 + 1)
    name = f"{mailing_list.address.split('@')[0]}-{month.key}{SUFFIX}"
    return request.resource_url(mailing_list, "export", name, query=(
        ("start", f"{month.key}-01"), ("end", f"{following[0]:04d}-{following[1]:02d}-01")))


def range_export_url(request, mailing_list, label, first, after):
    """The export of the messages of the days from ``first`` to before ``after`` (dates).

    It is named ``<list>-<label>.mbox.gz``.
    """
    name = f"{mailing_list.address.split('@')[0]}-{label}{SUFFIX}"
    return request.resource_url(mailing_list, "export", name, query=(
        ("start", first.isoformat()), ("end", after.isoformat())))


def mbox_links(request):
    """``[(label, url)]``: the mbox downloads of the page's resource, for its template to show."""
    context = getattr(request, "context", None)
    if isinstance(context, Archive):
        if request.view_name == "search" and request.params.get("q", "").strip():
            query = [("q", request.params["q"])]
            if request.params.get("mlist"):
                query.append(("mlist", request.params["mlist"]))
            return [("Download these results (mbox)", request.resource_url(context, "search.mbox.gz",
                                                                            query=query))]
        return []
    if isinstance(context, (MailingList, Month, Thread, Message)):
        mailing_list = context if isinstance(context, MailingList) else context.mailing_list
        if request.view_name or not request.has_permission("view", mailing_list):
            return []
        if isinstance(context, MailingList):
            name = f"{mailing_list.address.split('@')[0]}{SUFFIX}"
            return [("Download the whole archive (mbox)", request.resource_url(mailing_list, "export", name))]
        if isinstance(context, Month):
            return [("Download this month (mbox)", month_export_url(request, context))]
        if isinstance(context, Thread):
            return [("Download this thread (mbox)", request.resource_url(context, "t.mbox.gz"))]
        links = [("Download this message (mbox)", request.resource_url(
            mailing_list, "export", f"{context.__name__}{SUFFIX}", query={"message": context.__name__}))]
        thread = mailing_list.threads.data.get(context.thread)
        if thread is not None:
            links.append(("Download its thread (mbox)", request.resource_url(thread, "t.mbox.gz")))
        return links
    return []


def includeme(config):
    config.add_catalog_index("mbox", MboxIndex)
    config.add_request_method(mbox_links, "mbox_links", reify=True)
    config.scan(__name__)
