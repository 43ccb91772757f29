"""A stored email and its attachments."""

import gzip
import io
import zlib
from datetime import timezone

from persistent import Persistent
from ZODB.blob import Blob

from kittypyr.mail import dated_by_header_in
from kittypyr.subjects import without_list_prefix


def _blob_with(data, jar=None):
    blob = Blob()
    if jar is not None:
        # Added now, in the order made, the blobs are committed in that
        # order too, which ZODB's bookkeeping of uncommitted blob files
        # handles in constant time (in any other order, in time growing
        # with the batch); and their files start in the storage's own
        # temporary folder, whence a rename, not a copy, commits them.
        jar.add(blob)
    with blob.open("w") as f:
        f.write(data)
    return blob


def _read_blob(blob):
    with blob.open("r") as f:
        return f.read()


def compress_original(parsed):
    """The gzip form of ``parsed.raw``, made now unless a parser process made it."""
    ready = getattr(parsed, "raw_gzip", None)
    if ready is not None:
        return ready
    return gzip.compress(parsed.raw, compresslevel=6, mtime=0)


# Originals compressed to this size or less are records of their own, not
# blob files: nearly all mail (a few kilobytes), while large ones, mostly
# attachments, stay files.
ORIGINAL_RECORD_MAX = 256 * 1024


def pack_text(text):
    """``text`` zlib-compressed, as a message keeps its decoded body.

    Mail text shrinks three- to fourfold, and the body is most of a
    message's record: kept packed, it costs that much less storage and
    cache memory, for a few microseconds to unpack when a page shows it.
    """
    return zlib.compress(text.encode("utf-8", "surrogatepass"), 6)


def unpack_text(packed):
    return zlib.decompress(packed).decode("utf-8", "surrogatepass")


class CompressedOriginal(Persistent):
    """A message's original bytes, gzip-compressed, as a record of its own.

    Read like a blob (``open("r")``), loaded only when the original is
    read, and without a file each: making one file per message was most of
    an import's cost in the storage.
    """

    def __init__(self, data):
        self.data = data

    def open(self, mode="r"):
        if mode != "r":
            raise ValueError("a stored original is read-only")
        return io.BytesIO(self.data)


def _store_original(data, jar):
    if len(data) <= ORIGINAL_RECORD_MAX:
        return CompressedOriginal(data)
    return _blob_with(data, jar)


class Attachment(Persistent):
    """One MIME part kept as bytes in a ZODB blob.

    ``index`` is the part's position in the message's MIME walk, which is
    also its stable name in URLs. An attachment a Pipermail folder kept
    apart from its mail has ``pipermail_path``, its path in that folder's
    ``attachments/``, and an index from 1000 on.
    """

    pipermail_path = None
    charset = ""  # as the part declared it; "" for none (and for what was stored before it was kept)

    def __init__(self, index, filename, content_type, data, jar=None, charset=""):
        self.__name__ = str(index)
        self.__parent__ = None
        self.index = index
        self.filename = filename
        self.content_type = content_type
        if charset:
            self.charset = charset
        self.size = len(data)
        self.blob = _blob_with(data, jar)

    def open(self):
        return self.blob.open("r")

    def data(self):
        return _read_blob(self.blob)


class Message(Persistent):
    """One archived email.

    Its ``__name__`` is the Message-ID hash; ``parent`` and ``thread`` hold
    the hashes of its parent message and of its thread's key, so that moving
    a message between threads never changes its URL. The original bytes are
    kept compressed, in a record of their own (a blob when large).
    """

    __name__ = None
    __parent__ = None
    # Rebuilt from another archive's fields (HyperKitty keeps no original):
    # the original, when it comes, takes its place.
    rebuilt = False
    # Handed over by Mailman's archiver, not imported: two posts Mailman
    # delivered under one Message-ID with other bodies are two posts.
    by_mailman = False
    # The body text, packed (pack_text); None on a message stored by an
    # older release, which kept the text itself as ``body_text``.
    _body_packed = None
    # Attachments beyond kittypyr.mail.MAX_ATTACHMENTS: in the original only.
    attachments_left_out = 0

    def __init__(self, parsed, message_id, jar=None, subject_prefix=""):
        """``jar``: the connection the message will be stored with, if known.

        ``subject_prefix``: its list's, left out of its subject (the
        original keeps it).
        """
        self.rebuilt = bool(getattr(parsed, "rebuilt", False))
        self.message_id = message_id
        self.message_id_derived = parsed.message_id_derived or message_id != parsed.message_id
        self.original_message_id = parsed.message_id
        self.fingerprint = parsed.fingerprint
        self._dated_by_header = bool(getattr(parsed, "dated_by_header", False))
        self.subject = without_list_prefix(parsed.subject, subject_prefix)
        self.sender_name = parsed.sender_name
        self.sender_address = parsed.sender_address
        self.date = parsed.date.astimezone(timezone.utc)
        self.date_offset = parsed.date_offset
        self.in_reply_to = parsed.in_reply_to
        self.references = tuple(parsed.references)
        # A parser process sends the body packed already.
        packed = getattr(parsed, "body_packed", None)
        self._body_packed = pack_text(parsed.body_text) if packed is None else packed
        # Volatile: spares the catalog from deriving it again on arrival.
        self._v_searchable_text = parsed.index_text
        self._v_prepared_text = getattr(parsed, "prepared_text", None)
        self.defects = tuple(parsed.defects)
        if getattr(parsed, "attachments_left_out", 0):
            self.attachments_left_out = parsed.attachments_left_out
        self.parent = None
        self.thread = None
        self.catalog_docid = None  # set by kittypyr.catalog when catalogued
        # A parser process sends the size and the compressed form only.
        size = getattr(parsed, "raw_size", None)
        self.size = len(parsed.raw) if size is None else size
        # gzip-compressed: mail shrinks three- to fourfold, and a blob file
        # stays readable with zcat.
        self.original = _store_original(compress_original(parsed), jar)
        attachments = []
        for part in parsed.attachments:
            attachment = Attachment(part.index, part.filename, part.content_type, part.data, jar,
                                    charset=getattr(part, "charset", ""))
            attachment.__parent__ = self
            attachments.append(attachment)
        self.attachments = tuple(attachments)

    # What stays when the original replaces a rebuilt message: its name, its
    # place in the thread (so votes, tags and links keyed by them hold) and
    # the docid the catalog holds it under (a message stored before messages
    # kept theirs has none, and gets none here).
    _KEPT_ON_REPLACE = ("message_id", "message_id_derived", "parent", "thread", "catalog_docid")

    # Whether ``date`` is the message's own Date header; None on a message
    # stored by an older release, which its defects tell.
    _dated_by_header = None

    @property
    def dated_by_header(self):
        if self._dated_by_header is None:
            return dated_by_header_in(self.defects)
        return self._dated_by_header

    def replace_content(self, parsed, jar=None, subject_prefix=""):
        """Take the content of ``parsed`` (the original of this rebuilt message) in place."""
        fresh = Message(parsed, self.message_id, jar or self._p_jar, subject_prefix)
        self._p_activate()
        vars(self).pop("body_text", None)  # an older release's unpacked text
        for name, value in vars(fresh).items():
            if name not in self._KEPT_ON_REPLACE and not name.startswith("_p_"):
                setattr(self, name, value)
        for attachment in self.attachments:
            attachment.__parent__ = self

    @property
    def body_text(self):
        """The text a reader sees: the plain parts, or the HTML made text."""
        packed = self._body_packed  # loads a ghost's state first
        if packed is None:
            return vars(self).get("body_text", "")
        return unpack_text(packed)

    @body_text.setter
    def body_text(self, text):
        self._p_activate()
        vars(self).pop("body_text", None)
        self._body_packed = pack_text(text)

    @property
    def message_id_hash(self):
        return self.__name__

    @property
    def mailing_list(self):
        return self.__parent__.__parent__

    @property
    def timestamp(self):
        return self.date.timestamp()

    def original_bytes(self):
        """The message exactly as it was received."""
        return gzip.decompress(_read_blob(self.original))

    def open_original(self):
        """A binary file object reading the message as it was received."""
        return gzip.GzipFile(fileobj=self.original.open("r"), mode="rb")

    def attachment(self, index):
        """The attachment at MIME walk position ``index``; KeyError if none."""
        for attachment in self.attachments:
            if attachment.index == index:
                return attachment
        raise KeyError(index)
