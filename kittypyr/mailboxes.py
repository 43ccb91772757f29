"""Reading raw messages out of mail archive files.

Supported sources: mbox files (mboxo and mboxrd, plain or compressed with
gzip, bzip2 or xz),
single RFC 5322 messages (".eml"), Pipermail (Mailman 2) monthly ``.txt``
archives, and Maildir directories.

Everything here is streaming: an mbox is read in chunks and split at the
byte level, so multi-gigabyte archives never sit in memory as a whole; only
the message currently being cut out does.
"""

import bz2
import errno
import functools
import lzma
import os
import re
import stat
import zlib
from dataclasses import dataclass, replace
from datetime import date, datetime, timedelta, timezone
from typing import Iterator, Optional

__all__ = ["MailSourceError", "RawMail", "detect_format", "read_mail", "read_regular_file"]

# Large enough that the per-read Python overhead disappears against the
# C-level searching, small enough to stay cache- and memory-friendly.
_CHUNK = 1 << 20

# How much of a file (decompressed) is looked at to decide what it is.
_SNIFF_BYTES = 1 << 16
# Compressed bytes given to the decompressor at a time while sniffing.
_SNIFF_STEP = 1 << 9

# How each compression a file may come in starts, and a decompressor of one
# of its members (gzip) or streams (bzip2, xz): files joined with `cat`
# hold several.
_COMPRESSIONS = (
    ("gzip", re.compile(rb"\x1f\x8b"), lambda: zlib.decompressobj(zlib.MAX_WBITS | 16)),
    ("bzip2", re.compile(rb"BZh[1-9]"), bz2.BZ2Decompressor),
    ("xz", re.compile(rb"\xfd7zXZ\x00"), lambda: lzma.LZMADecompressor(lzma.FORMAT_XZ)),
)

# Pipermail's volume names, one form per archive period (Mailman 2's
# archive_volume_frequency): 2007 (year), 2007q1 (quarter), 2007-March
# (month, always in English), Week-of-Mon-20070305 (week), 20070305 (day).
_PIPERMAIL_VOLUME = re.compile(
    r"^(?:(?P<year>\d{4})(?:-(?P<month>January|February|March|April|May|June|July|August|September"
    r"|October|November|December)|q(?P<quarter>[1-4])|(?P<day>\d{4}))?|Week-of-Mon-(?P<monday>\d{8}))$"
)
# Pipermail compresses with gzip; a volume recompressed otherwise is read too.
_PIPERMAIL_NAME = re.compile(r"^(?P<volume>[\w-]+)\.txt(?:\.(?:gz|bz2|xz))?$")
# A month's name in a file renamed by hand (``2007-june.txt``).
_ANY_CASE_MONTH = re.compile(r"^(\d{4}-)([A-Za-z]+)$")

# Pipermail writes the envelope sender as "jdoe at example.com"; this one,
# for mail whose sender it could not read, as it is.
_PIPERMAIL_ENVELOPE = re.compile(rb"From [^\s@]+ at [^\s@]+\s")
_PIPERMAIL_NO_SENDER = b"From bogus@does.not.exist.com "


class MailSourceError(Exception):
    """A source could not be read (fully). str() names the file and the reason."""

    def __init__(self, path, reason):
        super().__init__(path, reason)
        self.path = str(path)
        self.reason = reason

    def __str__(self):
        return f"{self.path}: {self.reason}"


@dataclass
class RawMail:
    """One message as stored in a source.

    ``raw`` holds the message bytes without the mbox ``From `` line, with
    line endings as in the file; for mbox files ``>From `` quoting is undone,
    for Pipermail files the "x at y" address headers are restored. ``position`` is the
    1-based ordinal of the message within ``source``. ``envelope_date`` is the
    UTC-aware date from the ``From `` line, or None when there is none or it
    cannot be read. ``doubts`` are sentences saying where (line and byte) the
    split that starts this message, or a ``From `` line left inside it, was
    a guess. ``failure`` says why a message could not be read at all (a
    Maildir file that is a dangling link, say); ``raw`` is empty then.
    ``name`` is the message's own file within ``source`` (a Maildir's
    ``cur/<name>``), "" when it has none. ``exported``: ``source`` is an mbox
    export of kittypyr (``is_kittypyr_export``), each message in it a post
    of its own.
    """

    raw: bytes
    source: str
    position: int
    envelope_date: Optional[datetime]
    doubts: tuple = ()
    failure: str = ""
    name: str = ""
    exported: bool = False


# --- envelope ("From ") lines -------------------------------------------

# Body text may start a line with "From " right after a blank line (mboxo
# and Pipermail do not quote it), so a separator must also carry a time and a
# year; "From my point of view" has neither.
_ENV_TIME = re.compile(rb"(?<!\d)\d{1,2}:\d{2}(?!\d)")
_ENV_YEAR = re.compile(rb"(?<![\d:+\-])\d{4}(?![\d:])")

_MONTHS = {
    name: number
    for number, name in enumerate(
        (b"jan", b"feb", b"mar", b"apr", b"may", b"jun",
         b"jul", b"aug", b"sep", b"oct", b"nov", b"dec"),
        start=1,
    )
}
_MONTH_RE = rb"(jan|feb|mar|apr|may|jun|jul|aug|sep|oct|nov|dec)[a-z]*\.?"
_TZ_RE = rb"([+-]\d{4}|[a-z]{1,5}(?![a-z]))"
_TIME_RE = rb"(\d{1,2}):(\d{2})(?::(\d{2}))?"

# asctime as written by MTAs ("Tue Mar  6 09:12:45 2007"), optionally with a
# zone before or after the year and trailing junk such as "remote from x".
_ASCTIME = re.compile(
    _MONTH_RE + rb"\s+(\d{1,2}),?\s+" + _TIME_RE
    + rb"(?:\s+" + _TZ_RE + rb")?\s+(\d{4})(?!\d)(?:\s+" + _TZ_RE + rb")?",
    re.IGNORECASE,
)
# Some tools write an RFC 5322 date instead ("Sat, 1 Jan 2005 13:40:56 +0000").
_RFCDATE = re.compile(
    rb"(?<!\d)(\d{1,2})\s+" + _MONTH_RE + rb"\s+(\d{4})\s+" + _TIME_RE
    + rb"(?:\s+" + _TZ_RE + rb")?",
    re.IGNORECASE,
)

_ZONES = {
    b"ut": 0, b"utc": 0, b"gmt": 0, b"z": 0, b"wet": 0,
    b"bst": 60, b"cet": 60, b"met": 60, b"west": 60,
    b"cest": 120, b"mest": 120, b"eet": 120, b"eest": 180,
    b"msk": 180, b"ist": 330, b"jst": 540, b"kst": 540,
    b"aest": 600, b"aedt": 660, b"nzst": 720, b"nzdt": 780,
    b"ast": -240, b"adt": -180,
    b"est": -300, b"edt": -240, b"cst": -360, b"cdt": -300,
    b"mst": -420, b"mdt": -360, b"pst": -480, b"pdt": -420,
}

# Dates that tools write when they have none: public-inbox/mboxrd exports use
# the epoch, git format-patch a fixed magic date. Neither says anything about
# when the message was received.
_PLACEHOLDER_DATES = {
    datetime(1970, 1, 1, tzinfo=timezone.utc),
    datetime(2001, 9, 17, tzinfo=timezone.utc),
}


def _is_envelope(line):
    """Whether a line starting with b"From " looks like an mbox separator."""
    return (
        _ENV_TIME.search(line, 5) is not None
        and _ENV_YEAR.search(line, 5) is not None
    )


_DAY_NAME_RE = rb"(?:mon|tue|wed|thu|fri|sat|sun)[a-z]*\.?,?"

# A whole envelope line: "From", an optional sender (an address, Pipermail's
# "jdoe at example.com", "-" as Mozilla writes it, a broken one with spaces
# in it, or nothing at all), then a date that ends the line, in asctime form
# (seconds optional, a zone before or after the year or both, a UUCP
# "remote from x" after it) or in RFC 5322 form. Body text that starts
# "From " is rarely exactly this.
_FULL_ENVELOPE = re.compile(
    rb"From\s+(?:\S.*?\s+)?(?:" + _DAY_NAME_RE + rb"\s+)?(?:"
    + _MONTH_RE + rb"\s+\d{1,2},?\s+" + _TIME_RE
    + rb"(?:\s+" + _TZ_RE + rb")?\s+\d{4}(?:\s+" + _TZ_RE + rb")?(?:\s+remote from \S+)?"
    + rb"|\d{1,2}\s+" + _MONTH_RE + rb"\s+\d{4}\s+" + _TIME_RE + rb"(?:\s+" + _TZ_RE + rb")?"
    + rb")\s*\Z",
    re.IGNORECASE,
)

# The envelope line Pipermail (and Mailman 2) writes: "From <sender>  <ctime>".
# When a message's body has no final newline (a scrubbed attachment leaves a
# "Url : ..." line last) Pipermail writes the next envelope right after it,
# with no blank line between: there this form, with a header block after
# it, is a normal separator.
_WRITER_ENVELOPE = re.compile(
    rb"From \S+(?: at \S+)?  (?:Mon|Tue|Wed|Thu|Fri|Sat|Sun) "
    rb"(?:Jan|Feb|Mar|Apr|May|Jun|Jul|Aug|Sep|Oct|Nov|Dec) "
    rb"[ \d]\d \d\d:\d\d:\d\d \d{4}\Z"
)

_FULL, _LOOSE = "full", "loose"
# A "From " line after a blank line with no date that reads as one (none,
# a two-digit year, seconds since 1970): a separator only when a header
# block follows it, as tools that write no date leave them.
_UNDATED = "undated"


# Archives often repeat one envelope line (public-inbox writes the same
# placeholder for every message).
@functools.lru_cache(maxsize=512)
def _envelope_form(line):
    """_FULL for a whole envelope line, _LOOSE for a ``From `` line that only
    has a time and a year somewhere, None for anything else."""
    line = line.rstrip(b"\r\n")
    if not _is_envelope(line):
        return None
    return _FULL if _FULL_ENVELOPE.match(line) else _LOOSE


def _zone_offset(token):
    if not token:
        return None
    if token[:1] in b"+-":
        minutes = int(token[1:3]) * 60 + int(token[3:5])
        return -minutes if token[:1] == b"-" else minutes
    return _ZONES.get(token.lower())


# Archives often repeat the same envelope line (public-inbox writes one
# placeholder line for every message), so parsing is worth caching.
@functools.lru_cache(maxsize=512)
def _envelope_date(line):
    """Parse the date of a ``From `` line into an aware UTC datetime, or None.

    Never raises: a From_ line without a usable date gives None, and so do
    the well-known placeholder dates.
    """
    try:
        text = line[5:]
        match = _ASCTIME.search(text)
        if match:
            month, day, hour, minute, second, zone1, year, zone2 = match.groups()
            zone = zone1 or zone2
        else:
            match = _RFCDATE.search(text)
            if not match:
                return None
            day, month, year, hour, minute, second, zone = match.groups()
        offset = _zone_offset(zone)
        moment = datetime(
            int(year),
            _MONTHS[month[:3].lower()],
            int(day),
            int(hour),
            int(minute),
            min(int(second or 0), 59),
            tzinfo=timezone.utc,
        )
        if offset:
            moment -= timedelta(minutes=offset)
        if moment in _PLACEHOLDER_DATES:
            return None
        return moment
    except (ValueError, OverflowError, KeyError):
        return None


# --- message post-processing --------------------------------------------

_MBOXRD_QUOTED = re.compile(rb"^>(>*From )", re.MULTILINE)


def _unquote(raw):
    if b">From " in raw:
        return _MBOXRD_QUOTED.sub(rb"\1", raw)
    return raw


_HEADER_END = re.compile(rb"\r?\n\r?\n")

# Address-bearing header fields (with their folded continuation lines).
_ADDRESS_FIELD = re.compile(
    rb"^((?:from|sender|reply-to|to|cc)[ \t]*:)(.*(?:\r?\n[ \t].*)*)",
    re.IGNORECASE | re.MULTILINE,
)
# An address that Pipermail wrote as "local at domain". The domain must end
# in an alphabetic label after a dot so that phrases in display names
# ("(Meet at noon)") are left alone.
_OBFUSCATED = re.compile(
    rb"(?<![^\s<(\",:;])"
    rb"([A-Za-z0-9!#$%&'*+/=?^_`{|}~.\-]+) at "
    rb"((?:[A-Za-z0-9](?:[A-Za-z0-9\-]*[A-Za-z0-9])?\.)+[A-Za-z]{2,63})"
    rb"(?=[\s>)\",;]|$)"
)


def _restore_field(match):
    return match.group(1) + _OBFUSCATED.sub(rb"\1@\2", match.group(2))


def _restore_addresses(raw):
    """Undo Pipermail's "x at y" in the address headers of one message."""
    end = _HEADER_END.search(raw)
    cut = end.start() if end else len(raw)
    header = raw[:cut]
    if b" at " not in header:
        return raw
    return _ADDRESS_FIELD.sub(_restore_field, header) + raw[cut:]


# --- opening and sniffing -----------------------------------------------


class _CorruptData(Exception):
    """Compressed data that does not decompress (zlib, bz2 and lzma each say so their own way)."""


def _describe(exc):
    if isinstance(exc, EOFError):
        return "compressed data ends early (truncated file?)"
    if isinstance(exc, (zlib.error, _CorruptData)):
        return f"corrupt compressed data ({exc})"
    if isinstance(exc, OSError):
        if exc.strerror:
            return exc.strerror
        return str(exc) or type(exc).__name__
    return str(exc) or type(exc).__name__


class _Decompressing:
    """A minimal reader of compressed data: gzip members, or bzip2 or xz
    streams, one after another (files joined with `cat` hold several).

    gzip.GzipFile (and bz2's and lzma's files) discard everything a read()
    decompressed when it then hits the end of a truncated file, which would
    lose up to a whole read's worth of good messages. Here read() returns
    the data decoded so far and the error is raised by the following call.
    Each decompressor checks its member's or stream's checksum itself.

    bzip2 checks a block only once it has given all of it, and a damaged
    block can decode to other text before it fails: what a bzip2 stream
    gives is held until its block is whole and checked (the decompressor
    then asks for input), at most a block's text (900 kB of mail, more for
    long runs of one byte).

    Damage where a member starts (bytes after the last member that are no
    member, as gzip(1) reads with "trailing garbage ignored", or a member
    cut or corrupt from its first byte) ends the data there instead, for
    what came before is whole, its last message too: the error is kept in
    ``damage_after_end``, to be raised once that data is read.
    """

    # Compressed bytes fed to a decompressor at a time: this bounds what a
    # corrupt block can take down with it.
    _INPUT = 1 << 17

    def __init__(self, path, new_decompressor):
        self._fh = open(path, "rb", buffering=0)
        self._new_decompressor = new_decompressor
        self._checked_by_block = new_decompressor is bz2.BZ2Decompressor
        self._unchecked = []  # what the current bzip2 block gave so far
        self._decompressor = None  # None between members
        self._pending = b""  # compressed bytes not yet given to the decompressor
        self._error = None
        # Damage found within an input whose good part was given first.
        self._damage = None
        self._eof = False
        self._member_output = 0  # bytes the current member has given so far (checked, for bzip2)
        self._members_done = 0
        self.damage_after_end = None
        # Whether the members before that damage ended inside a message:
        # mbox writers end each message with a blank line.
        self.cut_inside_message = False
        self._last_bytes = b""

    def __enter__(self):
        return self

    def __exit__(self, *exc_info):
        self._fh.close()

    def read(self, size):
        """Return at least size bytes, fewer only at the end of the data."""
        if self._error is not None:
            raise self._error
        parts = []
        got = 0
        try:
            while got < size and not self._eof:
                if self._damage is not None:
                    raise self._damage
                decompressor = self._decompressor
                if decompressor is None:
                    if not self._pending:
                        self._pending = self._fh.read(self._INPUT)
                        if not self._pending:
                            self._eof = True
                            break
                    # Padding with NUL bytes after the last member is legal.
                    self._pending = self._pending.lstrip(b"\0")
                    if not self._pending:
                        continue
                    decompressor = self._decompressor = self._new_decompressor()
                    self._member_output = 0
                elif not self._pending and getattr(decompressor, "needs_input", True):
                    self._pending = self._fh.read(self._INPUT)
                    if not self._pending:
                        raise EOFError("compressed data ends early")
                data = self._decompress(decompressor, size - got)
                if decompressor.eof:
                    self._pending = decompressor.unused_data
                    self._decompressor = None
                    self._members_done += 1
                else:
                    self._pending = b""
                if data:
                    self._unchecked.append(data)
                if not self._checked_by_block or decompressor.eof or decompressor.needs_input:
                    given = sum(map(len, self._unchecked))
                    parts.extend(self._unchecked)
                    got += given
                    self._member_output += given
                    self._unchecked = []
        except (EOFError, _CorruptData) as exc:
            self._unchecked = []
            # Damage in the first member is damage, whatever it gave.
            if self._member_output == 0 and self._members_done:
                self.damage_after_end = exc
                self._eof = True
                given = b"".join(parts)
                tail = (self._last_bytes + given[-4:])[-4:].replace(b"\r", b"")
                self.cut_inside_message = bool(tail) and not tail.endswith(b"\n\n")
                return given
            self._error = exc
            if not parts:
                raise
        given = b"".join(parts)
        # The last few bytes only: not a copy of all that was read.
        self._last_bytes = (self._last_bytes + given[-4:])[-4:]
        return given

    def _decompress(self, decompressor, most):
        # bzip2 and xz can make gigabytes of a few kilobytes: no more than
        # was asked for at a time; they keep the rest of their input. gzip
        # makes at most about a thousand times its input.
        if not hasattr(decompressor, "copy"):
            return _decompressed(decompressor, self._pending, most)
        before = decompressor.copy()
        try:
            return _decompressed(decompressor, self._pending, most)
        except _CorruptData as exc:
            # gzip: what this input held before its damage, read again a
            # little at a time (the messages before it are whole); the
            # damage is raised at the next read.
            good = []
            try:
                for at in range(0, len(self._pending), _SNIFF_STEP):
                    good.append(_decompressed(before, self._pending[at:at + _SNIFF_STEP]))
            except _CorruptData:
                pass
            if not any(good):
                raise
            self._damage = exc
            return b"".join(good)


def _decompressed(decompressor, data, most=-1):
    """What ``decompressor`` makes of ``data`` (at most ``most`` bytes of it for bzip2 and xz); _CorruptData if nothing."""
    try:
        if hasattr(decompressor, "needs_input"):
            return decompressor.decompress(data, most)
        return decompressor.decompress(data)
    except (zlib.error, OSError, lzma.LZMAError) as exc:  # bz2 says OSError
        raise _CorruptData(str(exc) or type(exc).__name__) from exc


def _compression_of(head):
    """``(name, new decompressor)`` of the compression ``head`` starts with, or None."""
    for name, magic, new_decompressor in _COMPRESSIONS:
        if magic.match(head):
            return name, new_decompressor
    return None


def _open(path, compression):
    if compression is not None:
        return _Decompressing(path, compression[1])
    return open(path, "rb", buffering=0)


# What reading a damaged compressed file raises, beside OSError.
DECOMPRESSION_ERRORS = (EOFError, _CorruptData)


def open_content(path):
    """``path`` opened to read its content (``read(size)``), decompressed if it is gzip, bzip2 or xz."""
    with open(path, "rb") as fh:
        head = fh.read(8)
    return _open(path, _compression_of(head))


def _sample(path):
    """Return (start of the content, its compression: None or ``(name, new decompressor)``).

    The content is decompressed if need be. A truncated or partly corrupt
    compressed file still gives what could be decompressed, so that it is
    recognised for what it is and its good part read; only a file that does
    not decompress at all fails here.
    """
    with open(path, "rb") as fh:
        head = fh.read(_SNIFF_BYTES)
        compression = _compression_of(head)
        if compression is None:
            return head, None
        head += fh.read(_SNIFF_BYTES * 3)
    name, new_decompressor = compression
    decompressor = new_decompressor()
    content = bytearray()
    # A little at a time: damage within these first bytes keeps what came
    # before it, which the reader then reads up to the damage.
    try:
        for at in range(0, len(head), _SNIFF_STEP):
            content += decompressor.decompress(head[at:at + _SNIFF_STEP])
            if len(content) >= _SNIFF_BYTES or getattr(decompressor, "eof", False):
                break
    except (zlib.error, OSError, lzma.LZMAError) as exc:
        if not content:
            raise MailSourceError(path, f"not a readable {name} file ({exc})") from exc
    return bytes(content[:_SNIFF_BYTES]), compression


# What some editors put first in a UTF-8 file: no part of its first message.
_BYTE_ORDER_MARK = b"\xef\xbb\xbf"

_HEADER_LINE = re.compile(rb"^([\x21-\x39\x3b-\x7e]+)[ \t]*:")
_CONTINUATION = re.compile(rb"^[ \t]")

# A lone "Name: value" line is common in plain text; a message has at least
# one of these.
_MESSAGE_FIELDS = frozenset(
    (
        b"from", b"to", b"cc", b"date", b"subject", b"message-id",
        b"received", b"return-path", b"delivered-to", b"mime-version",
        b"sender", b"reply-to", b"content-type", b"in-reply-to",
        b"references", b"newsgroups", b"list-id", b"x-original-to",
        b"envelope-to", b"dkim-signature", b"authentication-results",
    )
)


def _skip_blank(data):
    """Offset of the first line in data that is not whitespace-only."""
    pos = 0
    length = len(data)
    while pos < length:
        nl = data.find(b"\n", pos)
        end = length if nl < 0 else nl + 1
        if data[pos:end].strip():
            return pos
        pos = end
    return length


def _looks_like_header_block(lines):
    seen_field = False
    in_field = False
    for line in lines:
        if not line.strip():
            break
        match = _HEADER_LINE.match(line)
        if match:
            in_field = True
            if match.group(1).lower() in _MESSAGE_FIELDS:
                seen_field = True
        elif not (in_field and _CONTINUATION.match(line)):
            return False
    return seen_field


def _packed_files(data):
    """How to unpack ``data`` if it starts an archive of files (tar, zip), else None."""
    if len(data) >= 262 and data[257:262] == b"ustar":  # POSIX and GNU tar both say so there
        return "tar xf"
    if data[:4] in (b"PK\x03\x04", b"PK\x05\x06"):
        return "unzip"
    return None


def _classify(path, data, name):
    """Return 'empty', 'mbox', 'pipermail', 'eml' or 'inside' for the start of a file.

    'inside': the file starts inside a message (the second part of an mbox
    cut with ``split -b``), and an envelope line that starts a message
    follows within the sample.
    """
    unpack = _packed_files(data)
    if unpack is not None:
        # Read as an mbox, its file headers and pages would be stored as
        # the text of the messages around them.
        raise MailSourceError(path, f"an archive of files, not mail: unpack it ({unpack} "
                                    f"{name}) and import the files or folder it holds")
    if data.startswith(_BYTE_ORDER_MARK):
        data = data[len(_BYTE_ORDER_MARK):]
    start = _skip_blank(data)
    if start >= len(data):
        return "pipermail" if pipermail_volume_of_file(name) else "empty"
    lines = data[start:].splitlines()
    if len(data) >= _SNIFF_BYTES and len(lines) > 1:
        lines.pop()  # cut off by the sample size
    first = lines[0]
    if first.startswith(b"From ") and (_is_envelope(first) or (len(lines) > 1 and _HEADER_LINE.match(lines[1]))):
        if pipermail_volume_of_file(name) or _PIPERMAIL_ENVELOPE.match(first):
            return "pipermail"
        return "mbox"
    if _HEADER_LINE.match(first) and _looks_like_header_block(lines):
        return "eml"
    if _first_envelope(data, start, len(data) < _SNIFF_BYTES) >= 0:
        return "inside"
    if first.startswith(b"From "):
        raise MailSourceError(
            path, "not mail: starts with 'From ' but not with an mbox envelope line"
        )
    if b"\x00" in data[:4096] or re.search(rb"[\x00-\x08\x0e-\x1a\x1c-\x1f]", first):
        raise MailSourceError(path, "not mail: binary data")
    raise MailSourceError(
        path, "not mail: neither an mbox nor a message (no 'From ' line or headers)"
    )


def _is_maildir(path):
    return os.path.isdir(os.path.join(path, "cur")) or os.path.isdir(
        os.path.join(path, "new")
    )


def _check_regular_file(path):
    """Raise MailSourceError unless ``path`` is a regular file (or a link to one).

    The import reads a file more than once (a first look at what it is,
    then the messages, in each parser process): a pipe (``<(zcat ...)``)
    or a device would give each reading what the one before left, so
    messages would be missing without a word, and a FIFO nobody writes to
    would be waited on forever.
    """
    try:
        mode = os.stat(path).st_mode
    except OSError as exc:
        raise MailSourceError(path, _describe(exc)) from exc
    if not stat.S_ISREG(mode):
        raise MailSourceError(
            path, "not a regular file (a pipe or a device?): the import reads each file more than once;"
            " save it to a file and import that"
        )


def _sniff(path):
    """Return (kind, compression, lone_returns) for a file; raise MailSourceError if not mail.

    kind is one of 'mbox', 'pipermail', 'eml', 'inside' or 'empty';
    compression is None or ``(name, new decompressor)``; lone_returns says
    that its lines end with a carriage return alone, as classic Mac OS
    wrote them.
    """
    _check_regular_file(path)
    try:
        data, compression = _sample(path)
    except OSError as exc:
        raise MailSourceError(path, _describe(exc)) from exc
    lone_returns = _first_line_ends_with_a_lone_return(data)
    if lone_returns:
        data = _LONE_RETURN.sub(b"\n", data)
    return _classify(path, data, os.path.basename(path)), compression, lone_returns


_LONE_RETURN = re.compile(rb"\r(?!\n)")


_LINE_END = re.compile(rb"\r\n?|\n")


def _first_line_ends_with_a_lone_return(data):
    """Whether the first line of ``data`` ends with a carriage return alone, as classic Mac OS wrote them.

    The first line, the envelope line, says how its writer ended lines: a
    message of LF lines that holds more lone returns than lines (a
    progress meter pasted whole) is no Mac OS mail; mail of lone returns
    joined after LF mail is read so by ``_ReturnRegions``.
    """
    end = _LINE_END.search(data)
    return end is not None and end.group() == b"\r" and end.end() < len(data)


class _LineFeeds:
    """A stream whose lines end with a carriage return alone, read with line feeds instead.

    Otherwise the whole file would be one line: its first envelope line,
    and no message. Only a return alone is turned: a file of such lines
    joined with mail of another system keeps that mail's own line ends
    (a single line feed in it made all the lines before it one, and their
    messages were lost).
    """

    def __init__(self, stream):
        self._stream = stream
        self._held = b""

    def read(self, size):
        chunk = self._stream.read(size)
        data, self._held = self._held + chunk, b""
        if chunk and data.endswith(b"\r"):
            # The line feed that may follow it is in the next read.
            data, self._held = data[:-1], b"\r"
            if not data:
                return self.read(size)
        return _LONE_RETURN.sub(b"\n", data)


# How much of a line is looked at to tell whether it starts mail whose lines
# end with a return alone: an envelope line and the header line after it.
_RETURN_REGION_LOOK = 2048


def _starts_return_region(line):
    """Whether ``line`` (its first bytes, up to any line feed) is an envelope line a return alone ends, a header
    line after it."""
    first = line.find(b"\r")
    if first < 0 or first + 1 == len(line):
        return False
    if not (_ENVELOPE_LIKE.match(line, 0, first) or _FULL_ENVELOPE.match(line, 0, first)):
        return False
    second = line.find(b"\r", first + 1)
    return bool(_HEADER_LINE.match(line[first + 1:] if second < 0 else line[first + 1:second]))


class _ReturnRegions:
    """A stream of line-feed mail in which mail whose lines end with a return alone is read with line feeds.

    Classic Mac OS mail joined after line-feed mail is, to a reader of
    lines, one line from its first envelope line to the file's end: that
    envelope line, and its messages lost. A line that starts with an
    envelope line ended by a return alone, with a header line after it,
    has its returns alone turned into line feeds up to its own line feed
    (the next part of the file, if any). A return alone anywhere else stays
    as it is (a progress meter pasted in a body).
    """

    def __init__(self, stream):
        self._stream = stream
        self._held = b""
        self._at_line_start = True
        self._turning = False
        self._eof = False

    def read(self, size):
        while not self._eof:
            chunk = self._stream.read(size)
            self._eof = not chunk
            data, self._held = self._held + chunk, b""
            if not self._eof:
                data = self._holding_last_line_start(data)
            if data:
                return self._turned(data)
        data, self._held = self._held, b""
        return self._turned(data) if data else b""

    def _holding_last_line_start(self, data):
        """``data`` without a last line that starts, or may start, with "From " and is too short to judge yet."""
        last = data.rfind(b"\n") + 1
        if last or self._at_line_start:
            start = data[last:last + 5]
            if start and b"From ".startswith(start) and len(data) - last < _RETURN_REGION_LOOK:
                self._held = data[last:]
                return data[:last]
        return data

    def _turned(self, data):
        if not self._turning and not _LONE_RETURN.search(data):
            self._at_line_start = data.endswith(b"\n")
            return data
        pieces = []
        pos, size = 0, len(data)
        while pos < size:
            if self._turning:
                end = data.find(b"\n", pos)
                line_end = size if end < 0 else end + 1
                piece = data[pos:line_end]
                if end < 0 and piece.endswith(b"\r") and not self._eof:
                    # The line feed that may follow it is in the next read.
                    piece, self._held = piece[:-1], b"\r" + self._held
                pieces.append(_LONE_RETURN.sub(b"\n", piece))
                self._at_line_start = end >= 0
                self._turning = end < 0
                pos = line_end
                continue
            if self._at_line_start and data.startswith(b"From ", pos):
                start = pos
            else:
                found = data.find(b"\nFrom ", pos)
                start = size if found < 0 else found + 1
            pieces.append(data[pos:start])
            if start == size:
                self._at_line_start = data.endswith(b"\n")
                break
            line = data[start:start + _RETURN_REGION_LOOK]
            self._turning = _starts_return_region(line.split(b"\n", 1)[0])
            self._at_line_start = self._turning
            pos = start if self._turning else start + 1
            if not self._turning:
                pieces.append(data[start:pos])
        return b"".join(pieces)


# The comment kittypyr's mbox exports carry in their first gzip member's
# header (RFC 1952's FCOMMENT), which gzip and zcat pass over.
EXPORT_COMMENT = b"kittypyr mboxrd export"
_GZIP_FLAGS = {"FEXTRA": 0x04, "FNAME": 0x08, "FCOMMENT": 0x10}


def is_kittypyr_export(path):
    """Whether ``path`` is a gzip file whose first member says it is an mbox export of kittypyr."""
    with open(path, "rb") as fh:
        head = fh.read(1024)
    if head[:3] != b"\x1f\x8b\x08" or len(head) < 10 or not head[3] & _GZIP_FLAGS["FCOMMENT"]:
        return False
    at = 10
    if head[3] & _GZIP_FLAGS["FEXTRA"]:
        at += 2 + int.from_bytes(head[at:at + 2], "little")
    if head[3] & _GZIP_FLAGS["FNAME"]:
        at = head.find(b"\x00", at) + 1
        if not at:
            return False
    end = head.find(b"\x00", at)
    return end >= 0 and head[at:end] == EXPORT_COMMENT


def detect_format(path) -> str:
    """Return 'mbox', 'pipermail' or 'maildir' for a mail source.

    Single-message (.eml) files and empty files count as 'mbox' (an empty
    file named like a Pipermail month as 'pipermail'). Raises
    MailSourceError for a path that is missing, unreadable, or not mail.
    """
    path = os.fsdecode(path)
    if os.path.isdir(path):
        if _is_maildir(path):
            return "maildir"
        raise MailSourceError(path, "directory is not a Maildir (no cur/ or new/)")
    kind, _, _ = _sniff(path)
    return "pipermail" if kind == "pipermail" else "mbox"


# --- reading ------------------------------------------------------------


def read_mail(path) -> Iterator[RawMail]:
    """Yield every message of a mail source, in file order.

    If the source breaks part-way (truncated or corrupt compression, an I/O
    error) or is not mail at all, every complete message before the damage
    is yielded first and then MailSourceError is raised; reading never stops
    silently. An empty file yields nothing.
    """
    path = os.fsdecode(path)
    if os.path.isdir(path):
        if not _is_maildir(path):
            raise MailSourceError(path, "directory is not a Maildir (no cur/ or new/)")
        yield from _read_maildir(path)
        return
    kind, compression, lone_returns = _sniff(path)
    strict = compression is not None and is_kittypyr_export(path)
    count = 0
    try:
        with _open(path, compression) as stream:
            # Empty-looking files are streamed too: a compressed file can look
            # empty in the sample only because it is broken. A file that
            # starts as a single message does is split too: an mbox whose
            # first envelope line was lost looks just like one.
            if strict:
                messages = (replace(message, exported=True)
                            for message in _split_mbox(stream, path, False, strict=True))
            else:
                messages = _split_mbox(_LineFeeds(stream) if lone_returns else _ReturnRegions(stream), path,
                                       kind == "pipermail", headless=kind == "eml", starts_inside=kind == "inside")
            # Each message is given once the next is found: the last one
            # may end where a damaged compressed member starts, cut short.
            held = None
            try:
                for message in messages:
                    if held is not None:
                        count += 1
                        yield held
                    held = message
            except (OSError, EOFError, zlib.error, _CorruptData):
                # Found before the damage, it ended where the next began.
                if held is not None:
                    count += 1
                    yield held
                raise
            damage = getattr(stream, "damage_after_end", None)
            if damage is not None and held is not None and stream.cut_inside_message:
                raise MailSourceError(path, f"{_describe(damage)} where a new compressed member starts, inside a"
                                            f" message, which is left out (after {count} complete messages)")
            if held is not None:
                count += 1
                yield held
            if damage is not None:
                raise MailSourceError(path, f"{_describe(damage)} where a new compressed member starts"
                                            f" (after {count} complete messages, all read)")
    except (OSError, EOFError, zlib.error, _CorruptData) as exc:
        raise MailSourceError(
            path, f"{_describe(exc)} (after {count} complete messages)"
        ) from exc


# What is looked at after a candidate envelope line to see whether a header
# block follows: a few lines, within a few KB (a long Received: line may be
# cut off; the start of it tells enough).
_LOOKAHEAD_LINES = 6
_LOOKAHEAD_BYTES = 4096

# "From " and an address, and a time somewhere after it: a line that may
# be an envelope line whatever form its date has.
_ENVELOPE_LIKE = re.compile(rb"From (?:[^\s@]+@[^\s@]+|MAILER-DAEMON) .*(?<!\d)\d{1,2}:\d{2}(?!\d)")
_HEADERS, _NOTHING, _TEXT = "headers", "nothing", "text"
# A blank line, then text that is no header: a body's paragraph.
_BLANK_THEN_TEXT = "blank, then text"


def _first_envelope(buf, start, eof):
    """Offset in buf of the first envelope line after ``start`` that surely
    starts a message (after a blank line, a whole date, a header block
    after it), or -1."""
    i = buf.find(b"\nFrom ", start)
    while i >= 0:
        line_end = buf.find(b"\n", i + 1)
        if line_end < 0:
            return -1
        blank_before = i > start and (
            buf[i - 1] == 0x0A or (buf[i - 1] == 0x0D and i - 1 > start and buf[i - 2] == 0x0A))
        if (blank_before and _envelope_form(buf[i + 1:line_end + 1]) == _FULL
                and _what_follows(buf, line_end + 1, eof) == _HEADERS):
            return i + 1
        i = buf.find(b"\nFrom ", i + 1)
    return -1


def _what_follows(buf, start, eof, after_blank=False):
    """What buf holds from start, the line after an envelope line: _HEADERS,
    _NOTHING (end of data, a blank line or the next envelope: an empty
    message), _TEXT, or _BLANK_THEN_TEXT (a blank line, then text that is
    not a header block: a paragraph of a body); None when buf does not
    hold enough yet and more data is to come.

    Up to _LOOKAHEAD_LINES lines within _LOOKAHEAD_BYTES are looked at.
    Real header blocks are often broken further down (a folded Subject
    without its indent), so only their start is asked for: a run of header
    lines with one of a message's usual fields in it, or with nothing but
    header lines as far as is looked.
    """
    limit = start + _LOOKAHEAD_BYTES
    lines = []
    pos = start
    while len(lines) < _LOOKAHEAD_LINES:
        nl = buf.find(b"\n", pos, limit)
        if nl < 0:
            if not eof and len(buf) < limit:
                return None
            if pos < min(len(buf), limit):
                lines.append(buf[pos:limit])
            break
        line = buf[pos:nl + 1]
        if not lines:
            # Nearly always the answer is on the first line.
            match = _HEADER_LINE.match(line)
            if match and match.group(1).lower() in _MESSAGE_FIELDS:
                return _HEADERS
        lines.append(line)
        if not line.strip():
            break
        pos = nl + 1
    if not lines:
        return _NOTHING
    if not lines[0].strip():
        if after_blank:
            return _NOTHING
        following = _what_follows(buf, start + len(lines[0]), eof, after_blank=True)
        if following is None:
            return None
        return _BLANK_THEN_TEXT if following == _TEXT else _NOTHING
    if lines[0].startswith(b"From ") and _envelope_form(lines[0]) is not None:
        return _NOTHING
    run = 0
    usual = False
    for line in lines:
        if not line.strip():
            break
        match = _HEADER_LINE.match(line)
        if match:
            usual = usual or match.group(1).lower() in _MESSAGE_FIELDS
        elif not (run and _CONTINUATION.match(line)):
            break
        run += 1
    if run and (usual or run == len(lines) or not lines[run].strip()):
        return _HEADERS
    return _TEXT


# A message's own Content-Length (mboxcl2 leaves a body's "From " lines
# unquoted and says where each message ends) is believed only when the
# message ends there: the file ends, or a line end and an envelope line
# follow. Past this many bytes it is not waited for.
_CONTENT_LENGTH = re.compile(rb"^content-length:[ \t]*(\d{1,12})[ \t]*\r?$", re.I | re.M)
_CONTENT_LENGTH_MAX = 1 << 26
_UNREAD = object()


def _content_length_end(buf, base, eof):
    """Where the message at ``base`` ends by its Content-Length, None if it does not say or is not believed.

    ``_UNREAD`` when buf does not hold enough yet and more is to come.
    """
    ends = [(buf.find(separator, base), separator) for separator in (b"\n\n", b"\r\n\r\n")]
    ends = [(at, separator) for at, separator in ends if at >= 0]
    if not ends:
        return None if eof else _UNREAD
    at, separator = min(ends)
    lengths = _CONTENT_LENGTH.findall(buf, base, at + 1)
    if len(lengths) != 1 or int(lengths[0]) > _CONTENT_LENGTH_MAX:
        return None
    end = at + len(separator) + int(lengths[0])
    following = buf[end:end + 8]
    if len(following) < 8 and not eof:
        return _UNREAD
    if end > len(buf):  # past the file's end
        return None
    if following.startswith((b"\nFrom ", b"\r\nFrom ")) or (eof and not following.strip(b"\r\n")):
        return end
    return None


# How far back from a "From " the start of its line is looked for.
_GLUED_LOOK_BACK = 1024


def _glued_from(buf, start):
    """Offset in buf of the byte before the first "From " that follows text on its line, that byte at ``start``
    or after it; -1 if there is none.

    Only text a body's last line may hold counts: no quoting (">From "),
    no header line (one that names the envelope line it replaced,
    "X-Mailbox-Line: From ...").
    """
    at = buf.find(b"From ", start + 1)
    while at >= 0:
        if buf[at - 1] not in b"\n\x00":
            before = buf[buf.rfind(b"\n", max(0, at - _GLUED_LOOK_BACK), at) + 1:at]
            if before.strip(b"> \t") and not _HEADER_LINE.match(before):
                return at - 1
        at = buf.find(b"From ", at + 1)
    return -1


def _judge_envelope(line, form, blank_before, follows):
    """Whether a ``From `` line starts a new message, and what is doubtful about that.

    Returns (split, doubt); doubt is None or a sentence for the import's
    report. An envelope line after a blank line is the mbox rule; one with
    no blank line before it needs the full date form and a header block
    after it, and is only usual in the form Pipermail writes so.
    """
    if blank_before:
        if form == _FULL:
            if follows == _TEXT:
                # A message has a header: text right after the line is a
                # body's own "From " line, which mboxo leaves unquoted.
                return False, "an envelope line with text, not a header, after it, kept in the message"
            if follows == _BLANK_THEN_TEXT:
                # So is a paragraph after a blank line: a forwarded mail
                # pasted with its envelope line.
                return False, ("an envelope line with a blank line and text, not a header, after it,"
                               " kept in the message")
            return True, None
        # Prose such as "From 10:30 to 11:00 in 2007." has a time and a year
        # too: only a header block after it makes this a separator. Prose
        # with neither ("From the start...") is no news.
        if follows != _HEADERS:
            return False, None if form == _UNDATED else (
                "a 'From ' line with a time and a year but no header after it, kept in the message")
        if form == _UNDATED:
            return True, "a new message starts at a 'From ' line with no date in a known form"
        return True, "a new message starts at a 'From ' line whose date is not in a known form"
    if form != _FULL:
        return False, None
    if follows != _HEADERS:
        return False, ("an envelope line with no blank line before it and no header after it,"
                       " kept in the message")
    if _WRITER_ENVELOPE.match(line.rstrip(b"\r\n")):
        return True, None
    return True, "a new message starts at an envelope line with no blank line before it"


def _split_mbox(stream, path, pipermail, headless=False, starts_inside=False, strict=False):
    """Split an mbox stream into RawMail objects.

    ``starts_inside``: the stream starts inside a message (see
    ``_classify``); what comes before its first envelope line that surely
    starts a message is yielded as a failure, for it is no whole message.

    ``strict``: the stream is an export of kittypyr (see ``is_kittypyr_export``):
    a message starts at every envelope line after a blank line, and nowhere
    else; no guess is made.

    ``headless``: the stream starts with a message's header, not with an
    envelope line (a single message, or an mbox that lost its first
    line). That first message is kept as it is, unquoted nothing, and the
    first envelope line that splits the stream after it is doubtful.

    Every line that starts with b"From " and has a date is judged on its own
    (``_judge_envelope``): after an empty line (or at the start of a
    message) it separates messages, as in any mbox; right after another
    line only with a full date and a header block after it, as Pipermail
    writes them. The empty separator line is not part of the message. Each
    doubtful decision goes into the ``doubts`` of the message it concerns,
    with its line and byte in the (decompressed) file, so that no message
    can be merged into another, or cut in two, without a word.

    The buffer is only re-sliced when more data is read, never per message,
    and each read is at least as large as the pending data, so that neither
    many small messages nor one huge message cause quadratic copying.
    """
    read = stream.read
    buf = read(_CHUNK)
    eof = not buf
    # Bytes and newlines of the file before buf, and a cursor that counts
    # newlines in buf only up to where a doubt needs its line number.
    dropped = 0
    if buf.startswith(_BYTE_ORDER_MARK):
        buf = buf[len(_BYTE_ORDER_MARK):]
        dropped = len(_BYTE_ORDER_MARK)
    counted_to = 0
    newlines = 0

    def where(i):
        nonlocal counted_to, newlines
        newlines += buf.count(b"\n", counted_to, i)
        counted_to = i
        return f"line {newlines + 1} (byte {dropped + i})"

    # Locate the first envelope line, skipping blank lines before it.
    while True:
        start = _skip_blank(buf)
        if start < len(buf):
            nl = buf.find(b"\n", start)
            if nl >= 0 or eof:
                break
        elif eof:
            return
        chunk = read(_CHUNK)
        if chunk:
            newlines += buf.count(b"\n", 0, start)
            dropped += start
            buf = buf[start:] + chunk
        else:
            eof = True
    fragment = None
    if starts_inside:
        first_envelope = _first_envelope(buf, start, eof)
        if first_envelope < 0:
            raise MailSourceError(path, "not mail: neither an mbox nor a message (no 'From ' line or headers)")
        fragment = RawMail(b"", path, 1, None, failure=(
            "the file starts inside a message: what comes before its first envelope line,"
            f" at {where(first_envelope)}, is not imported"))
        start = first_envelope
        nl = buf.find(b"\n", start)
    if headless:
        base = start
        envelope = None
    elif not buf.startswith(b"From ", start):
        raise MailSourceError(path, "not mail: no mbox 'From ' line where a message should start")
    else:
        base = len(buf) if nl < 0 else nl + 1
        envelope = buf[start:base]
    doubts = []
    # A Pipermail file writes every envelope line in its own form (but for
    # mail with no sender it could read) and quotes no line of a body: a
    # line in another form may be a body's, pasted whole.
    pipermail_envelopes = pipermail and envelope is not None and bool(_PIPERMAIL_ENVELOPE.match(envelope))
    # Whether Pipermail wrote any of the file (months joined with cat): it
    # leaves each month's last line without a line end.
    written_by_pipermail = pipermail or (envelope is not None and bool(_PIPERMAIL_ENVELOPE.match(envelope)))

    position = 0
    if fragment is not None:
        position = 1
        yield fragment
    scan = base
    find = buf.find
    # Where the current message ends by its Content-Length (see _content_length_end).
    length_end = _UNREAD
    # Whether the current message holds a "From " line its Content-Length
    # passes over: mboxcl2's, which quotes no line of a body.
    unquoted = False
    # Where the next "From " right after a NUL byte is (-1: none in buf; None:
    # not looked for since buf changed). A crash leaves a run of NULs where
    # a message was being appended, and the next envelope line right after.
    nul_from = None
    # Where the next "From " is that text comes right before on its line
    # (-1, None: as nul_from): a file that did not end with a line end,
    # joined to the next, has the next envelope line glued to its last line.
    glued_from = None
    while True:
        i = find(b"\nFrom ", scan)
        if strict:
            nul_from = glued_from = -1
        if nul_from is None or 0 <= nul_from < scan:
            nul_from = find(b"\x00From ", scan)
        if glued_from is None or 0 <= glued_from < scan:
            glued_from = _glued_from(buf, max(scan, base))
        nul_start = None
        glued = 0 <= glued_from < i or (i < 0 and glued_from >= 0)
        if glued:
            i = glued_from
        if nul_from >= 0 and (i < 0 or nul_from < i):
            i = nul_start = nul_from
            glued = False
            while nul_start > base and buf[nul_start - 1] == 0:
                nul_start -= 1
        if glued and buf.find(b"\n\n", base, i) < 0 and buf.find(b"\n\r\n", base, i) < 0:
            scan = i + 1  # in the message's header, not after a body's last line
            continue
        if i >= 0:
            if length_end is _UNREAD:
                length_end = None if strict else _content_length_end(buf, base, eof)
            if length_end is not _UNREAD and length_end is not None and i < length_end:
                # Text before it on its line: no line of an mbox's.
                unquoted = unquoted or not glued
                scan = i + 1
                continue
            line_end = find(b"\n", i + 1)
            if length_end is not _UNREAD and (line_end >= 0 or eof):
                if line_end < 0:
                    line_end = len(buf) - 1
                line = buf[i + 1:line_end + 1]
                form = _envelope_form(line)
                # buf[i] ends the line before the candidate; that line is
                # empty if buf[i] starts the message or follows a line end.
                # After NULs, the line before is the one they start on.
                before = i if nul_start is None else nul_start
                blank_before = not glued and (
                    before == base
                    or buf[before - 1] == 0x0A
                    or (buf[before - 1] == 0x0D and (before - 1 == base or buf[before - 2] == 0x0A))
                )
                if form is None and blank_before:
                    form = _UNDATED
                if strict and not blank_before:
                    scan = i + 1  # its writer puts a blank line before every envelope line
                    continue
                if not strict and (form is None or (form != _FULL and not blank_before)):
                    if not glued and _ENVELOPE_LIKE.match(line) and _what_follows(buf, line_end + 1, eof) == _HEADERS:
                        # Kept, as a body's line may be anything; but a header
                        # after it says it may have been another message's start.
                        doubts.append(f"{where(i + 1)}: a 'From ' line with a time and a header after it, but no"
                                      " blank line before it and no date in a known form, kept in the message")
                    scan = i + 1
                    continue
                follows = True if strict else _what_follows(buf, line_end + 1, eof)
                if follows is not None:
                    # kittypyr's export quotes every line of a body that
                    # reads "From ": each one left is an envelope line.
                    split, doubt = (True, None) if strict else _judge_envelope(line, form, blank_before, follows)
                    if glued:
                        # Text on a line before "From " is no mbox's; only
                        # a whole envelope line and a header after it split.
                        doubt = ("a new message starts at an envelope line that follows text on the line before"
                                 " it, with no line end between them (a file that did not end with one, joined"
                                 " to the next)") if split else None
                    if split and not doubt and pipermail_envelopes and not _PIPERMAIL_ENVELOPE.match(line) \
                            and not line.startswith(_PIPERMAIL_NO_SENDER):
                        doubt = "a new message starts at an envelope line not in the form Pipermail writes"
                    if not split:
                        if doubt:
                            doubts.append(f"{where(i + 1)}: {doubt}")
                        scan = i + 1
                        continue
                    if nul_start is not None:
                        # Up to the NULs, less the blank line before them if any.
                        cut = nul_start
                        if cut - 2 >= base and buf[cut - 2:cut] == b"\n\n":
                            cut -= 1
                        elif cut - 4 >= base and buf[cut - 4:cut] == b"\r\n\r\n":
                            cut -= 2
                    elif blank_before:
                        cut = i - 1 if i > base and buf[i - 1] == 0x0D else i
                    else:
                        cut = i + 1
                    position += 1
                    yield _finish(buf[base:cut], path, position, envelope, pipermail, doubts, unquoted)
                    unquoted = False
                    doubts = [f"{where(i + 1)}: {doubt}"] if doubt else []
                    if nul_start is not None:
                        doubts.append(f"{where(i + 1)}: a new message starts at an envelope line after"
                                      f" {i + 1 - nul_start} NUL bytes, left out (a crash leaves them so)")
                    if envelope is None:
                        doubts.append(f"{where(i + 1)}: the file starts without an envelope line,"
                                      " as a single message does, yet a new message starts here")
                    envelope = line
                    written_by_pipermail = written_by_pipermail or bool(_PIPERMAIL_ENVELOPE.match(line))
                    base = scan = line_end + 1
                    length_end = _UNREAD
                    continue
            scan = i  # the line or what follows it is not all read yet
        elif eof:
            break
        else:
            # Re-search the last few bytes: a separator may straddle reads.
            scan = max(base, len(buf) - 5)
        chunk = read(max(_CHUNK, len(buf) - base))
        if chunk:
            if counted_to < base:
                newlines += buf.count(b"\n", counted_to, base)
                counted_to = base
            counted_to -= base
            dropped += base
            buf = buf[base:] + chunk
            nul_from = glued_from = None
            scan -= base
            if length_end is not _UNREAD and length_end is not None:
                length_end -= base
            base = 0
            find = buf.find
        else:
            eof = True

    raw = buf[base:]
    if envelope is not None and raw and not raw.endswith(b"\n") and not written_by_pipermail:
        # mbox writers end every message with a line end and most with a
        # blank line (Pipermail leaves its last line without one): this
        # file stops inside a line.
        doubts.append(f"{where(len(buf))}: the file ends inside a line of this message, which may be cut short"
                      " (a truncated copy?)")
    if envelope is None:
        pass  # a single message: no separator line to take off its end
    elif raw.endswith(b"\r\n\r\n") or raw == b"\r\n":
        raw = raw[:-2]
    elif raw.endswith(b"\n\n") or raw == b"\n":
        raw = raw[:-1]
    position += 1
    yield _finish(raw, path, position, envelope, pipermail, doubts, unquoted)


def _finish(raw, path, position, envelope, pipermail, doubts, unquoted=False):
    """The RawMail of ``raw``; ``unquoted``: it is mboxcl2's, whose writer quoted none of its lines."""
    if envelope is None:
        # The first message of a file that starts without an envelope
        # line: no mbox writer quoted it.
        return RawMail(raw, path, position, None, tuple(doubts))
    # A file joined from months of one list may hold Pipermail's messages
    # after others: each is known by its own envelope line.
    if pipermail or _PIPERMAIL_ENVELOPE.match(envelope):
        raw = _restore_addresses(raw)
    elif not unquoted:
        raw = _unquote(raw)
    return RawMail(raw, path, position, _envelope_date(envelope), tuple(doubts))


_DOT_FILE = ("not read: its name starts with a dot, which the Maildir rules keep for files that are no"
             " message; if it is one, import it by its path")


def _read_maildir(path):
    """Yield the messages of cur/ and new/, by file name (each decompressed if need be).

    Every entry is a message: one that cannot be read (a dangling link, a
    directory where a message file should be, an I/O error) is yielded as
    a failure in its place and the others are read. A file whose name
    starts with a dot is no message by the Maildir rules: it is not read,
    but one that holds mail is yielded as a failure that says so. A file
    that is an mbox (saved into cur/ by hand) is read as its messages. A
    folder that cannot be listed is raised as MailSourceError after the
    other's messages; so are Maildir++ subfolders (``.2007/``), mail of
    their own (a mail client's Sent or Trash as well), and files left in
    tmp/, which are not read.
    """
    entries = []
    unlisted = None
    for sub in ("cur", "new"):
        folder = os.path.join(path, sub)
        try:
            names = os.listdir(folder)
        except FileNotFoundError:
            continue
        except OSError as exc:
            unlisted = MailSourceError(folder, _describe(exc))
            continue
        entries.extend((name, sub) for name in names)
    entries.sort()
    position = 0
    for name, sub in entries:
        label = f"{sub}/{name}"
        try:
            raw = _uncompressed(read_regular_file(os.path.join(path, sub, name)))
        except (OSError, EOFError, _CorruptData) as exc:
            failure = _describe(exc)
            if name.startswith("."):
                if getattr(exc, "errno", None) in (errno.EISDIR, errno.EINVAL):
                    continue  # no file a message could be in
                # Whether it holds mail cannot be told: said, not skipped.
                failure = f"{failure}; {_DOT_FILE}"
            position += 1
            yield RawMail(b"", path, position, None, failure=failure, name=label)
            continue
        if name.startswith("."):
            if _holds_mail(raw):
                position += 1
                yield RawMail(b"", path, position, None, failure=_DOT_FILE, name=label)
            continue
        if _is_mailbox(raw):
            for number, mail in enumerate(_split_mbox(_Bytes(raw), os.path.join(path, label), False), start=1):
                position += 1
                # A Maildir file is one message: one that quotes another
                # whole, envelope line and all, reads as an mbox just the same.
                doubts = mail.doubts if number == 1 else mail.doubts + (
                    f"a new message starts at an envelope line inside the Maildir file {label}, read as an mbox",)
                yield RawMail(mail.raw, path, position, mail.envelope_date, doubts, mail.failure,
                              f"{label}, message {number}")
            continue
        position += 1
        yield RawMail(raw, path, position, None, name=label)
    if unlisted is not None:
        raise unlisted
    left = []
    subfolders = _maildir_subfolders(path)
    if subfolders:
        left.append(f"its Maildir++ subfolder{'s' if len(subfolders) > 1 else ''} {', '.join(subfolders)}, mail of"
                    f" {'their' if len(subfolders) > 1 else 'its'} own; to archive it, import it by its path"
                    f" ({os.path.join(path, subfolders[0])})")
    in_delivery = _files_in(os.path.join(path, "tmp"))
    if in_delivery:
        left.append(f"{len(in_delivery)} file{'s' if len(in_delivery) > 1 else ''} in tmp/ ({in_delivery[0]}"
                    f"{', ...' if len(in_delivery) > 1 else ''}), mail being delivered when the folder was copied;"
                    " a whole message there is archived once moved to new/")
    if left:
        raise MailSourceError(path, "not read: " + "; ".join(left))


def _is_mailbox(data):
    """Whether ``data`` (a Maildir file) is an mbox of several messages: an envelope line first, and another."""
    if data.startswith(_BYTE_ORDER_MARK):
        data = data[len(_BYTE_ORDER_MARK):]
    start = _skip_blank(data)
    return data.startswith(b"From ", start) and _first_envelope(data, start, True) >= 0


def _holds_mail(data):
    """Whether ``data`` starts as a message or an mbox does (a header block, or an envelope line and one)."""
    lines = data[_skip_blank(data):_SNIFF_BYTES].splitlines(keepends=True)[:_LOOKAHEAD_LINES + 1]
    if lines and lines[0].startswith(b"From "):
        lines = lines[1:]
    return _looks_like_header_block(lines)


class _Bytes:
    """``data`` read as a stream, as ``_split_mbox`` reads files."""

    def __init__(self, data):
        self._data = memoryview(data)
        self._at = 0

    def read(self, size):
        chunk = bytes(self._data[self._at:self._at + size])
        self._at += len(chunk)
        return chunk


def _files_in(folder):
    """The names of the files in ``folder``, in order; [] if it cannot be listed."""
    try:
        return sorted(entry.name for entry in os.scandir(folder) if entry.is_file())
    except OSError:
        return []


def _maildir_subfolders(path):
    """Names of the Maildir++ subfolders of the Maildir ``path`` (``.2007``, ``.Sent``), in order."""
    try:
        names = os.listdir(path)
    except OSError:
        return []
    return sorted(name for name in names
                  if name.startswith(".") and name not in (".", "..") and _is_maildir(os.path.join(path, name)))


def _uncompressed(data):
    """A Maildir file's message, decompressed if it is compressed (as Dovecot's zlib plugin keeps them).

    EOFError if it is cut short, _CorruptData if it does not decompress.
    """
    compression = _compression_of(data)
    if compression is None:
        return data
    decompressor = compression[1]()
    message = _decompressed(decompressor, data)
    if not decompressor.eof:
        raise EOFError("compressed data ends early")
    return message


def read_regular_file(full):
    """The bytes of one file (a Maildir's message, a scrubbed attachment); OSError if it is not a readable file."""
    # Non-blocking, so that a FIFO left in cur/ fails here instead of
    # waiting for a writer forever; regular files read as usual.
    fd = os.open(full, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0))
    try:
        mode = os.fstat(fd).st_mode
        if stat.S_ISDIR(mode):
            raise OSError(errno.EISDIR, "a directory, not a message file")
        if not stat.S_ISREG(mode):
            raise OSError(errno.EINVAL, "not a regular file")
    except OSError:
        os.close(fd)
        raise
    with open(fd, "rb") as fh:
        return fh.read()


_MONTH_ORDER = {
    name: number
    for number, name in enumerate(
        ("January", "February", "March", "April", "May", "June", "July",
         "August", "September", "October", "November", "December"), 1)
}


def pipermail_volume(name):
    """``(first day, day after the last)`` (``datetime.date``) of a Pipermail volume name, else None.

    ``2007``, ``2007q1``, ``2007-March``, ``Week-of-Mon-20070305`` and
    ``20070305``: the volumes of a yearly, quarterly, monthly, weekly or
    daily archive (Pipermail names them by the server's local date).
    """
    match = _PIPERMAIL_VOLUME.match(name)
    if match is None:
        return None
    try:
        if match["monday"]:
            first = datetime.strptime(match["monday"], "%Y%m%d").date()
            return first, first + timedelta(days=7)
        year = int(match["year"])
        if match["day"]:
            first = date(year, int(match["day"][:2]), int(match["day"][2:]))
            return first, first + timedelta(days=1)
        if match["month"] or match["quarter"]:
            month = _MONTH_ORDER[match["month"]] if match["month"] else 3 * int(match["quarter"]) - 2
            months = 1 if match["month"] else 3
            after = (year + (month + months - 1) // 12, (month + months - 1) % 12 + 1)
            return date(year, month, 1), date(*after, 1)
        return date(year, 1, 1), date(year + 1, 1, 1)
    except ValueError:  # 20071345: digits, not a day
        return None


def pipermail_volume_of_file(name):
    """The volume a Pipermail volume file (``2007-March.txt``, ``2007q1.txt.gz``...) holds, else None."""
    match = _PIPERMAIL_NAME.match(name)
    if match is None:
        return None
    volume = match["volume"]
    month = _ANY_CASE_MONTH.match(volume)
    if month:
        volume = month[1] + month[2].capitalize()
    return volume if pipermail_volume(volume) is not None else None


def pipermail_months(folder):
    """The volume files of a Pipermail archive folder (months, or its other periods), oldest first.

    Pipermail keeps each volume as ``<volume>.txt`` and often also as
    ``<volume>.txt.gz``; the same volume is listed once (the plain file).
    Returns [] when ``folder`` holds no volume file.
    """
    volumes = {}
    for name in sorted(os.listdir(folder)):
        volume = pipermail_volume_of_file(name)
        if volume is not None:
            key = pipermail_volume(volume)
            # One file a volume: the plain one, else the first compressed.
            if key not in volumes or (name.endswith(".txt") and not volumes[key].endswith(".txt")):
                volumes[key] = os.path.join(folder, name)
    return [volumes[key] for key in sorted(volumes)]


def expand_sources(paths):
    """Replace each Pipermail archive folder in ``paths`` by its month files."""
    expanded = []
    for path in paths:
        path = os.fspath(path)
        if os.path.isdir(path) and not _is_maildir(path):
            months = pipermail_months(path)
            if months:
                expanded.extend(months)
                continue
        expanded.append(path)
    return expanded
