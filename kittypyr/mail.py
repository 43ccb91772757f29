"""Parse one raw email into a plain, picklable record.

Everything here is pure: bytes in, a :class:`ParsedMail` out.  Nothing
imports ZODB or Pyramid, so the importer, the live archiver endpoint and
the tests all share one parser.

Real list archives are full of mail that violates every standard at once,
so the parser never gives up on a message that has at least one header
line: whatever it has to repair is written to ``ParsedMail.defects``.  The
only exception it raises is :class:`UnparseableMessage`.
"""

import binascii
import codecs
import email
import email.errors
import email.parser
import email.utils
import functools
import hashlib
import io
import re
from dataclasses import dataclass, field
from datetime import datetime, timedelta, timezone
from email.errors import InvalidBase64LengthDefect
from email.generator import BytesGenerator
from email.message import Message
from email.policy import compat32

from kittypyr.msgid import message_id_of_header_value, normalize_message_id
from kittypyr.patches import PATCH_HEADERS, PATCH_START

__all__ = [
    "ParsedAttachment",
    "ParsedMail",
    "UnparseableMessage",
    "decode_bytes",
    "message_id_of_header",
    "parse_message",
    "permalink_id_of_header",
    "permalink_id_of_stripped",
    "searchable_text",
]

UTC = timezone.utc
_EARLIEST = datetime(1980, 1, 1, tzinfo=UTC)
_FUTURE_SLACK = timedelta(days=1)
# A message with thousands of broken parts must not carry an unbounded list.
_MAX_DEFECTS = 100
# A subject or a sender's name longer than this is shortened, as
# HyperKitty's columns shorten them: every page that lists a thread shows
# its subject, so one post with a subject of a megabyte (a header folded
# over thousands of lines passes any mail server) would make each of them
# that much larger. The original keeps them whole.
SUBJECT_MAX = 512
NAME_MAX = 255
# RFC 5321: a path is at most 256 characters, its angle brackets included.
ADDRESS_MAX = 254
# The attachments kept of one message, each a blob file; the rest stay in
# its original. Real mail has a handful; a post of a hundred thousand empty
# parts (five megabytes) made as many files, 786 MB, in 100 s of archiving.
MAX_ATTACHMENTS = 250
# charset_normalizer looks at this much; the rest is decoded with its verdict.
_GUESS_SAMPLE = 64 * 1024


class UnparseableMessage(ValueError):
    """The input is not an email at all (empty, or no header line found)."""


@dataclass
class ParsedAttachment:
    """One stored MIME part.

    ``index`` is the part's position in ``Message.walk()`` order of the
    message parsed with the compat32 policy (0 is the message itself), so
    the part can be found again from the raw bytes.
    """

    index: int
    filename: str
    content_type: str
    data: bytes
    charset: str = ""  # as the part declares it, for a text part

    @property
    def size(self):
        return len(self.data)


@dataclass
class ParsedMail:
    """Everything the archive needs from one message; plain data only."""

    raw: bytes
    message_id: str
    message_id_derived: bool
    fingerprint: str
    subject: str
    sender_name: str
    sender_address: str
    date: datetime
    date_offset: int
    in_reply_to: str
    references: tuple
    body_text: str
    index_text: str
    attachments: list = field(default_factory=list)
    no_archive: bool = False
    defects: list = field(default_factory=list)
    # Whether ``date`` is the message's own Date header, not a fallback.
    dated_by_header: bool = False
    # Attachments beyond MAX_ATTACHMENTS, kept in the original only.
    attachments_left_out: int = 0
    # The id whose permalink Mailman writes into Archived-At, when it is
    # not ``message_id`` (see ``permalink_id_of_header``); "" when it is.
    permalink_id: str = ""


class _Notes(list):
    """The defect list, capped so a pathological message stays small."""

    def add(self, text):
        if len(self) < _MAX_DEFECTS:
            self.append(text)
        elif len(self) == _MAX_DEFECTS:
            self.append("further defects not recorded")


# ---------------------------------------------------------------------------
# Charsets
# ---------------------------------------------------------------------------

# Names that promise nothing: decode as if no charset had been given.
_MEANINGLESS_CHARSETS = frozenset(
    {
        "default",
        "unknown",
        "x-unknown",
        "unknown-8bit",
        "x-user-defined",
        "8bit",
        "none",
        "charset",
        "us-ascii",
        "ascii",
        "ansi_x3.4-1968",
        "ansi_x3.4-1986",
        "iso646-us",
        "us",
        "iso-ir-6",
        "cp367",
        "ibm367",
        "7bit",
    }
)

# Misspellings seen in the wild: worth a defect note.
_MISSPELLED_CHARSETS = {
    "uft-8": "utf-8",
    "x-utf-8": "utf-8",
    "cp-1252": "cp1252",
    "cp-1251": "cp1251",
    "cp-1250": "cp1250",
}

# Labels Python does not know, and legacy names mapped to the superset that
# mail clients really use (the mapping browsers apply too).
_CHARSET_ALIASES = {
    "utf8": "utf-8",
    "utf_8": "utf-8",
    "unicode-1-1-utf-8": "utf-8",
    "iso-8859-8-i": "iso-8859-8",
    "iso-8859-8-e": "iso-8859-8",
    "iso-8859-6-i": "iso-8859-6",
    "iso-8859-6-e": "iso-8859-6",
    "x-mac-roman": "mac-roman",
    "x-sjis": "cp932",
    "shift_jis": "cp932",
    "shift-jis": "cp932",
    "sjis": "cp932",
    "ms_kanji": "cp932",
    "gb2312": "gb18030",
    "gbk": "gb18030",
    "x-gbk": "gb18030",
    "euc-cn": "gb18030",
    "cp936": "gb18030",
    "euc-kr": "cp949",
    "ks_c_5601-1987": "cp949",
    "ks_c_5601": "cp949",
    "big5": "big5hkscs",
    "x-x-big5": "big5hkscs",
    "tis-620": "cp874",
    "iso-8859-11": "cp874",
    "iso-8859-9": "cp1254",
}

# Single-byte Western labels; iso-8859-1 is read as windows-1252, the
# charset actually behind almost every message labelled so.
_LATIN_CODECS = frozenset({"cp1252", "iso8859-1", "iso8859-15"})

# Codecs that decode anything without failing, which would hide a wrong label.
_REFUSED_CODECS = frozenset(
    {"undefined", "unicode-escape", "raw-unicode-escape", "idna", "punycode", "mbcs", "oem"}
)

# Candidates for charset_normalizer: the legacy charsets found in list mail.
_GUESS_CANDIDATES = [
    "cp1252",
    "iso8859_2",
    "cp1250",
    "koi8_r",
    "koi8_u",
    "cp1251",
    "iso8859_5",
    "iso8859_7",
    "cp1253",
    "iso8859_8",
    "cp1255",
    "cp1256",
    "cp1254",
    "cp874",
    "gb18030",
    "big5",
    "shift_jis",
    "euc_jp",
    "euc_kr",
    "iso2022_jp",
]

_HIGH_RUN = re.compile(rb"[\x80-\xff]{3}")

# Codecs with code units wider than a byte, which decode nearly any byte
# string of the right length without an error, into CJK characters.
_WIDE_CODECS = frozenset({"utf-16", "utf-16-be", "utf-16-le", "utf-32", "utf-32-be", "utf-32-le"})
_ASCII_LABELS = frozenset({"us-ascii", "ascii"})


def _normalize_charset_name(charset):
    return charset.strip().strip("\"' \t;").strip().lower()


@functools.lru_cache(maxsize=512)
def _resolve_charset(name):
    """Map a normalized charset label to (python codec name or None, misspelled).

    None means "no usable declaration": the caller falls back to guessing.
    """
    if not name or name in _MEANINGLESS_CHARSETS:
        return None, False
    if name in _MISSPELLED_CHARSETS:
        candidates, misspelled = [_MISSPELLED_CHARSETS[name]], True
    elif name in _CHARSET_ALIASES:
        candidates, misspelled = [_CHARSET_ALIASES[name]], False
    else:
        candidates = [name, name.replace("_", "-"), re.sub(r"[-_ ]", "", name)]
        misspelled = False
    for position, candidate in enumerate(candidates):
        try:
            info = codecs.lookup(candidate)
        except (LookupError, ValueError, TypeError):
            continue
        if not getattr(info, "_is_text_encoding", True) or info.name in _REFUSED_CODECS:
            return None, False
        return info.name, misspelled or position > 0
    return None, False


def _strict(data, codec):
    try:
        text = data.decode(codec)
    except Exception:
        # Besides UnicodeError, a few codecs raise LookupError or even
        # TypeError on odd input; any failure means "not this charset".
        return None
    if codec == "utf-7" and _SURROGATE.search(text):
        # Half of a UTF-16 pair ("+2AA-"), which no page can write out.
        return None
    return text


_SURROGATE = re.compile("[\ud800-\udfff]")


def _guess(data):
    """Best-effort (text, codec) for undeclared non-ASCII, non-UTF-8 bytes."""
    # Text in a Western language has its few accented letters scattered
    # among ASCII ones; Cyrillic, Greek or CJK produce long runs of high
    # bytes.  charset_normalizer misreads short Western text (as cp1250 or
    # even UTF-16), so it only gets the other kind.
    if not _HIGH_RUN.search(data):
        text = _strict(data, "cp1252")
        if text is not None:
            return text, "windows-1252"
        return data.decode("latin-1"), "latin-1"
    try:
        import charset_normalizer

        best = charset_normalizer.from_bytes(
            data[:_GUESS_SAMPLE], cp_isolation=_GUESS_CANDIDATES
        ).best()
    except Exception:
        best = None
    if best is not None and best.encoding:
        try:
            return data.decode(best.encoding, "replace"), best.encoding
        except Exception:
            pass
    return data.decode("latin-1"), "latin-1"


def _mislabelled_wide(data, codec):
    """True when bytes declared UTF-16 or UTF-32 are plainly ASCII or UTF-8 text.

    Real UTF-16 and UTF-32 text holds NUL bytes: the high byte of every
    space, line break and ASCII letter.  Bytes without a single one that are
    valid UTF-8 were never encoded in a wide charset.
    """
    return codec in _WIDE_CODECS and b"\x00" not in data and _strict(data, "utf-8") is not None


def _decode(data, charset):
    """Decode bytes robustly; return (text, defect note or None). Never raises."""
    if not data:
        return "", None
    data = bytes(data)
    label = _normalize_charset_name(charset) if isinstance(charset, str) else ""
    codec, misspelled = _resolve_charset(label) if label else (None, False)
    if codec is not None:
        if codec in _LATIN_CODECS and not data.isascii():
            # UTF-8 mislabelled as Latin-1 is common, and valid multi-byte
            # UTF-8 sequences practically never occur in real Latin-1 text.
            text = _strict(data, "utf-8")
            if text is not None:
                return text, "charset %r declared but the text is utf-8" % label
            text = _mostly_utf8_text(data)
            if text is not None:
                return text[0], "charset %r declared but the text is utf-8%s" % (label, _stray_note(text[1]))
            text = _strict(data, "cp1252" if codec == "iso8859-1" else codec)
            if text is None:
                text = data.decode("latin-1")
        elif _mislabelled_wide(data, codec):
            text = None
        else:
            text = _strict(data, codec)
        if text is not None:
            return text, ("unknown charset %r read as %s" % (label, codec)) if misspelled else None
        reason = "text is not valid %s" % label
    elif not label:
        reason = "no charset declared for 8-bit text"
    elif label in _ASCII_LABELS:
        reason = "8-bit text declared us-ascii"
    else:
        reason = "unknown charset %r" % label
    if data.isascii():
        return data.decode("ascii"), (reason + "; read as ascii") if codec is not None else None
    text = _strict(data, "utf-8")
    if text is not None:
        return text, reason + "; read as utf-8"
    # A byte of another charset in UTF-8 text (a curly quote pasted from
    # elsewhere) would otherwise have the whole text guessed as another
    # charset: mojibake from end to end, and its words not found.
    text = _mostly_utf8_text(data)
    if text is not None:
        return text[0], reason + "; read as utf-8" + _stray_note(text[1])
    text, used = _guess(data)
    return text, reason + "; guessed " + used


def _stray_note(stray):
    return ", %d byte%s of another charset read as windows-1252" % (stray, "" if stray == 1 else "s")


def _mostly_utf8_text(data):
    """``(text, bytes that are not UTF-8)`` of a text that ``_mostly_utf8`` finds UTF-8, else None.

    Such a byte is read as Windows-1252: mail mixing the two (a curly quote
    or a no-break space pasted from a Windows program into UTF-8 text) is
    common, and the byte then shows as it was meant.
    """
    replaced = data.decode("utf-8", "replace")
    if not _is_mostly_utf8(replaced):
        return None
    return data.decode("utf-8", _AS_WINDOWS_1252), replaced.count("\ufffd")


def _read_as_windows_1252(error):
    return error.object[error.start:error.end].decode("cp1252", "replace"), error.end


_AS_WINDOWS_1252 = "kittypyr-as-windows-1252"
codecs.register_error(_AS_WINDOWS_1252, _read_as_windows_1252)


_WIDE_BYTE_ORDER_MARKS = ((codecs.BOM_UTF32_LE, "utf-32"), (codecs.BOM_UTF32_BE, "utf-32"),
                          (codecs.BOM_UTF16_LE, "utf-16"), (codecs.BOM_UTF16_BE, "utf-16"))


def wide_text_charset(data, charset):
    """The UTF-16 or UTF-32 codec ``data`` is text in, declared (``charset``) or told by its byte order mark; else None.

    Text in these holds NUL bytes, which elsewhere mean a binary file.
    """
    codec = None
    if charset:
        codec = _resolve_charset(_normalize_charset_name(charset))[0]
    if codec not in _WIDE_CODECS:
        # UTF-32's little-endian mark begins with UTF-16's: looked at first.
        codec = next((name for mark, name in _WIDE_BYTE_ORDER_MARKS if data.startswith(mark)), None)
    if codec is None or _strict(data, codec) is None:
        return None
    return codec


def is_utf8(data):
    """Whether the bytes ``data`` are UTF-8 (ASCII is)."""
    return _strict(data, "utf-8") is not None


def known_charset(label):
    """``label`` when it names a charset a browser reads too, else None.

    Never UTF-7, which browsers no longer read and which once let text
    labelled so smuggle markup past filters, nor a label browsers read as
    nothing at all.
    """
    label = _normalize_charset_name(label or "")
    if not _CHARSET_LABEL.match(label):
        # The codec lookup reads any run of punctuation as "_" ("utf\r\n8"):
        # the label goes into a header, so it is a token or nothing.
        return None
    codec, misspelled = _resolve_charset(label)
    if codec is None or codec == "utf-7" or misspelled or label in _READ_AS_NOTHING:
        return None
    return label


_CHARSET_LABEL = re.compile(r"^[a-z0-9][a-z0-9._:-]{0,39}\Z")
# Labels browsers read as the "replacement" encoding: the whole text one U+FFFD.
_READ_AS_NOTHING = frozenset({"csiso2022kr", "hz-gb-2312", "iso-2022-cn", "iso-2022-cn-ext", "iso-2022-kr",
                              "replacement"})


def decode_bytes(data, charset):
    """Decode ``data`` declared as ``charset`` (may be None or bogus); never raises.

    The declared charset is tried strictly (bogus names such as "uft-8" are
    mapped to what they mean, legacy names to the superset that clients
    really use, and iso-8859-1 is read as windows-1252); then strict UTF-8;
    then a guess for non-ASCII bytes; Latin-1 is the last resort, which
    cannot fail.
    """
    return _decode(data, charset)[0]


# ---------------------------------------------------------------------------
# Headers
# ---------------------------------------------------------------------------

_UNFOLD = re.compile(r"\r?\n(?=[ \t])")
_NEWLINES = re.compile(r"[\r\n]+")
_ENCODED_WORD = re.compile(r"=\?([^?\s]*)\?([bBqQ])\?(.*?)\?=")
_NOT_BASE64 = re.compile(rb"[^A-Za-z0-9+/]")


def _b64decode(data):
    data = _NOT_BASE64.sub(b"", data)
    extra = len(data) % 4
    if extra == 1:
        data = data[:-1]
    elif extra:
        data += b"=" * (4 - extra)
    try:
        return binascii.a2b_base64(data)
    except (binascii.Error, ValueError):
        return b""


def _mostly_utf8(data):
    """``data`` read as UTF-8 when most of its 8-bit characters are UTF-8, a stray byte replaced; else None.

    Read as Latin-1 instead, a name in Cyrillic with one broken byte would
    be mojibake from end to end. Latin-1 text seldom holds UTF-8 sequences
    at all, let alone twice as many as bytes that are not.
    """
    text = data.decode("utf-8", "replace")
    return text if _is_mostly_utf8(text) else None


def _is_mostly_utf8(replaced):
    """Whether text read as UTF-8, its bytes that are not replaced, holds twice as many 8-bit characters as those."""
    broken = replaced.count("\ufffd")
    whole = sum(1 for character in replaced if character > "\x7f") - broken
    return whole >= 2 and whole >= 2 * broken


def _raw_header_text(value, hint, notes):
    """Text of a header value that may hold raw 8-bit bytes."""
    if value.isascii():
        return value
    # The parser keeps undecodable bytes as surrogate escapes.
    data = value.encode("utf-8", "surrogateescape")
    text = _strict(data, "utf-8")
    if text is not None:
        return text
    text = _mostly_utf8(data)
    if text is not None:
        notes.add("raw 8-bit header bytes read as UTF-8, with bytes that are not")
        return text
    if hint:
        text = _strict(data, hint)
        if text is not None:
            notes.add("raw 8-bit header bytes read as %s" % hint)
            return text
    text, used = _strict(data, "cp1252"), "windows-1252"
    if text is None:
        text, used = data.decode("latin-1"), "latin-1"
    notes.add("raw 8-bit header bytes read as %s" % used)
    return text


def header_text(value):
    """A header's value as text, read as the sender and subject are: RFC 2047 words decoded, raw bytes read as
    UTF-8 or their likeliest charset. ``value`` as a compat32 parser gives it (raw bytes as surrogate escapes)."""
    return _decode_header(value, None, _Notes())


def _decode_header(value, hint, notes):
    """RFC 2047-decode a raw header value; tolerant of the usual breakage."""
    if not value:
        return ""
    value = _UNFOLD.sub("", value)
    if "=?" not in value:
        return _raw_header_text(value, hint, notes)
    # Adjacent encoded words in one charset are joined as bytes before
    # decoding, because mailers split multi-byte characters across them.
    pieces = []
    pos = 0
    for match in _ENCODED_WORD.finditer(value):
        literal = value[pos : match.start()]
        pos = match.end()
        if literal and not (literal.isspace() and pieces and pieces[-1][0] is not None):
            pieces.append([None, literal])
        charset = match.group(1).split("*", 1)[0].lower()
        encoded = match.group(3).encode("utf-8", "surrogateescape")
        if match.group(2) in "bB":
            data = _b64decode(encoded)
        else:
            data = binascii.a2b_qp(encoded, header=True)
        if pieces and pieces[-1][0] == charset:
            pieces[-1][1] += data
        else:
            pieces.append([charset, data])
    if pos < len(value):
        pieces.append([None, value[pos:]])
    out = []
    for charset, chunk in pieces:
        if charset is None:
            out.append(_raw_header_text(chunk, hint, notes))
        else:
            text, note = _decode(chunk, charset)
            if note:
                notes.add("encoded header word: " + note)
            out.append(text)
    return "".join(out)


def _one_line(text):
    return " ".join(text.split())


def _bounded_address(address, notes):
    """``address``, or "" if it is longer than any address can be (it would be carried on every page naming it)."""
    if len(address) <= ADDRESS_MAX:
        return address
    notes.add("sender's address of %d characters, longer than any address can be, left out" % len(address))
    return ""


def _shortened(text, limit, what, notes):
    if len(text) <= limit:
        return text
    notes.add("%s of %d characters shortened to %d" % (what, len(text), limit))
    return text[:limit - 1].rstrip() + "…"


class _Headers:
    """Raw header values by lower-cased name, in header order."""

    def __init__(self, msg):
        self._values = {}
        try:
            items = msg.raw_items()
        except Exception:
            items = ()
        for name, value in items:
            if not isinstance(value, str):
                value = str(value)
            self._values.setdefault(name.strip().lower(), []).append(value)

    def first(self, name):
        values = self._values.get(name)
        return values[0] if values else None

    def all(self, name):
        return self._values.get(name, [])


_ANGLE_ID = re.compile(r"<([^<>]+)>")


def message_id_of_header(value):
    """The Message-ID a Message-ID header names, read as HyperKitty reads it."""
    return message_id_of_header_value(value)


def permalink_id_of_header(text):
    """The Message-ID whose permalink Mailman's archiver plugin asks for, given the Message-ID header's text.

    The plugin strips every < and > off both ends of the header and asks
    for that id's permalink (``api/mailman/urls``), which reads it back
    inside one pair. For most headers that is the id the archive reads;
    for odd ones (``a@b>``, ``(comment) <a@b>``, two bare ids, an encoded
    word) it is another, and Archived-At names it.
    """
    return permalink_id_of_stripped(text.strip().strip("<>"))


def permalink_id_of_stripped(stripped):
    """The Message-ID ``api/mailman/urls`` answers the permalink of, given what the plugin sends (the header
    stripped of every < and > at its ends): read back inside one pair, as a header is."""
    return message_id_of_header(f"<{stripped}>")


def _referenced_id(text):
    # Each id is read as its own Message-ID header would be, so that a reply
    # names an odd id (``<a@b,>``, ``<a b@c``) as the message stored it.
    return message_id_of_header_value(f"<{text}>")


def _reference_of_header(value):
    """The Message-ID an In-Reply-To header names: its first <...>, else the whole value."""
    match = _ANGLE_ID.search(value)
    if match:
        return _referenced_id(match.group(1))
    return message_id_of_header_value(value)


def _id_list(value):
    ids = [_referenced_id(m) for m in _ANGLE_ID.findall(value)]
    if not ids and "<" not in value:
        ids = [normalize_message_id(v) for v in value.split()]
    return [i for i in ids if i]


def _strip_quotes(name):
    if len(name) >= 2 and name[0] == name[-1] and name[0] in "\"'":
        return name[1:-1].strip()
    return name


# The two forms nearly all mail uses; getaddresses handles the rest, slowly.
# Matched against a stripped value. No two patterns that both take spaces
# stand side by side: a sender's run of spaces would be tried every way of
# sharing it out between them, in time growing with its square. A bare
# name keeps its spaces before "<" (they are dropped with the others).
_BACKSLASH = re.compile(r"\\(.)")
_NAME_ADDR = re.compile(
    r'(?:"((?:[^"\\]|\\.)*)"\s*|([^"<>@,;:\\()]*))<\s*([^<>\s@",;:()\\]+@[^<>\s",;:()\\]+)\s*>\Z'
)
_ADDR_COMMENT = re.compile(r'([^<>\s@",;:()\\]+@[^<>\s",;:()\\]+)(?:\s*\(([^()\\]*)\))?\Z')


def _simple_address(value):
    """[(name, address)] for a plain "Name <addr>" or "addr (Name)", else None."""
    match = _NAME_ADDR.match(value)
    if match:
        quoted, bare, address = match.groups()
        name = _BACKSLASH.sub(r"\1", quoted) if quoted is not None else bare
        return [(" ".join(name.split()), address)]
    match = _ADDR_COMMENT.match(value)
    if match:
        return [(" ".join((match.group(2) or "").split()), match.group(1))]
    return None


# "jdoe at example.com", "jdoe at example.com (John Doe)": an address Pipermail hid.
_ADDRESS_WITH_AT = re.compile(r"^([^\s@()<>\"]+) at ([A-Za-z0-9-]+(?:\.[A-Za-z0-9-]+)*\.[A-Za-z]{2,})(?:\s+\((.*)\))?$")


def _parse_sender(headers, hint, notes):
    """(display name, lower-cased address) from From, Sender or Reply-To."""
    fallback_name = ""
    for header in ("from", "sender", "reply-to"):
        value = headers.first(header)
        if value is None:
            continue
        value = _NEWLINES.sub(" ", _UNFOLD.sub("", value)).strip()
        if not value:
            continue
        pairs = _simple_address(value)
        if pairs is None:
            try:
                pairs = email.utils.getaddresses([value])
            except Exception:
                pairs = []
        name, address = "", ""
        for pair_name, pair_address in pairs:
            if "@" in pair_address:
                name, address = pair_name, pair_address
                break
        hidden = None if address else _ADDRESS_WITH_AT.match(value)
        if hidden is not None:
            # Pipermail's "jdoe at example.com (John Doe)", come back to a list.
            name, address = hidden.group(3) or "", f"{hidden.group(1)}@{hidden.group(2)}"
            notes.add("%s address written with \"at\" read as an address" % header.title())
        if not address and pairs and pairs[0][1] and "<" in value:
            # A local address written explicitly as <user> is still one.
            name, address = pairs[0]
        if not address and not fallback_name:
            # No address at all: the whole value is at best a name.
            fallback_name = _strip_quotes(_one_line(_decode_header(value, hint, notes)))
        if address:
            name = _strip_quotes(_one_line(_decode_header(name, hint, notes)))
            address = _raw_header_text(address, hint, notes).strip().strip("<>").lower()
            if header != "from":
                notes.add("no usable From address; used %s" % header.title())
            return name or fallback_name, address
    return fallback_name, ""


# ---------------------------------------------------------------------------
# Dates
# ---------------------------------------------------------------------------


# The year after "day month" written with three or four digits below 1000
# ("0001"): the standard library would take it for a two-digit year (2001).
_EARLY_YEAR = re.compile(r"\b\d{1,2}\s+[A-Za-z]{3,}\s+0\d{2,3}\b")


def _parse_date(value):
    """(aware UTC datetime, offset minutes, note) or None for a date string."""
    value = _one_line(value)
    if not value or _EARLY_YEAR.search(value):
        return None
    note = None
    try:
        parsed = email.utils.parsedate_to_datetime(value)
    except Exception:
        parsed = None
    if parsed is None:
        # parsedate_to_datetime fails on an impossible zone offset even when
        # the date itself is fine; keep the date and drop the offset.
        try:
            fields = email.utils.parsedate_tz(value)
            if fields:
                parsed = datetime(*fields[:6])
                note = "%s in %r ignored" % (_IMPOSSIBLE_ZONE, value)
        except Exception:
            parsed = None
    if parsed is None:
        try:
            parsed = datetime.fromisoformat(value)
            note = "non-RFC 5322 date %r read as ISO 8601" % value
        except Exception:
            return None
    try:
        if parsed.tzinfo is None or parsed.utcoffset() is None:
            return parsed.replace(tzinfo=UTC), 0, note
        offset = int(parsed.utcoffset().total_seconds() // 60)
        return parsed.astimezone(UTC), offset, note
    except Exception:
        return None


def _sane(date, now):
    return _EARLIEST <= date <= now + _FUTURE_SLACK


def _as_utc(value):
    if value.tzinfo is None or value.utcoffset() is None:
        return value.replace(tzinfo=UTC), 0
    return value.astimezone(UTC), int(value.utcoffset().total_seconds() // 60)


# How the note of _choose_date's last fallback ends: the message had no date of its own.
IMPORT_TIME_NOTE = "used the time of import"
# How the notes of _choose_date's fallbacks begin.
_DATE_PROBLEMS = ("no Date header", "unparseable Date ", "implausible Date ")


def dated_by_header_in(defects):
    """Whether a message whose defects are ``defects`` was dated by its own Date header.

    For messages stored before ``ParsedMail.dated_by_header`` was kept.
    """
    return not any(defect.startswith(_DATE_PROBLEMS) for defect in defects)


def _choose_date(headers, envelope_date, now, notes):
    """(UTC datetime, offset minutes, whether it is the Date header's), falling back as documented."""
    problem = None
    value = headers.first("date")
    if value is None:
        problem = "no Date header"
    else:
        result = _parse_date(value)
        if result is None:
            problem = "unparseable Date %r" % _one_line(value)[:80]
        elif not _sane(result[0], now):
            problem = "implausible Date %r" % _one_line(value)[:80]
        else:
            if result[2] and result[2].startswith(_IMPOSSIBLE_ZONE):
                # Its clock read as UTC may be off by a day: a date on the way
                # (a server's stamp, the envelope) close to it tells the day.
                closer = _other_date(headers, envelope_date, now, near=result[0])
                if closer is not None:
                    notes.add("%s; used the %s date" % (result[2], closer[2]))
                    return closer[0], closer[1], False
            if result[2]:
                notes.add(result[2])
            return result[0], result[1], True
    other = _other_date(headers, envelope_date, now)
    if other is not None:
        notes.add("%s; used the %s date" % (problem, other[2]))
        return other[0], other[1], False
    notes.add("%s; %s" % (problem, IMPORT_TIME_NOTE))
    return now, 0, False


# How _parse_date's note of a Date whose zone it dropped begins.
_IMPOSSIBLE_ZONE = "impossible time zone"
# How far from a Date with an impossible zone a Received or envelope date may be to stand for it.
_NEAR = timedelta(days=2)


def _other_date(headers, envelope_date, now, near=None):
    """``(UTC datetime, offset minutes, where from)`` of Resent-Date, Received or the envelope, or None.

    With ``near``, only a date within two days of it.
    """
    candidates = [("Resent-Date", v) for v in headers.all("resent-date")[:1]]
    candidates += [("Received", v.rpartition(";")[2]) for v in headers.all("received") if ";" in v]
    for source, text in candidates:
        result = _parse_date(text)
        if result is not None and _sane(result[0], now) and (near is None or abs(result[0] - near) <= _NEAR):
            return result[0], result[1], source
    if envelope_date is not None:
        try:
            date, offset = _as_utc(envelope_date)
        except Exception:
            return None
        if _sane(date, now) and (near is None or abs(date - near) <= _NEAR):
            return date, offset, "envelope"
    return None


# ---------------------------------------------------------------------------
# Bodies
# ---------------------------------------------------------------------------

_NORMAL, _DISCARDED, _SKIPPED = 0, 1, 2
_SAFE_CONTENT_TYPE = re.compile(r"[a-z0-9][a-z0-9!#$&^_.+-]*/[a-z0-9][a-z0-9!#$&^_.+-]*\Z")
# Control characters, and the marks that change the direction of text:
# with them "invoice\u202egpj.exe" shows as "invoiceexe.jpg".
_UNSAFE_FILENAME = re.compile(r"[\x00-\x1f\x7f\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069]")
_LEADING_BLANK_LINES = re.compile(r"\A(?:[ \t]*\n)+")
_META_CHARSET = re.compile(rb"""<meta[^>]{0,200}?charset\s*=\s*["']?\s*([A-Za-z0-9_.:-]+)""", re.I)

_EXTENSIONS = {
    "text/plain": ".txt",
    "text/html": ".html",
    "text/x-patch": ".patch",
    "text/x-diff": ".patch",
    "text/x-csrc": ".c",
    "text/csv": ".csv",
    "text/calendar": ".ics",
    "text/enriched": ".txt",
    "text/rtf": ".rtf",
    "text/xml": ".xml",
    "image/png": ".png",
    "image/jpeg": ".jpg",
    "image/gif": ".gif",
    "image/svg+xml": ".svg",
    "image/webp": ".webp",
    "application/pdf": ".pdf",
    "application/zip": ".zip",
    "application/gzip": ".gz",
    "application/x-gzip": ".gz",
    "application/x-bzip2": ".bz2",
    "application/x-tar": ".tar",
    "application/json": ".json",
    "application/xml": ".xml",
    "application/pgp-signature": ".asc",
    "application/pgp-encrypted": ".asc",
    "application/pgp-keys": ".asc",
    "application/pkcs7-signature": ".p7s",
    "application/x-pkcs7-signature": ".p7s",
    "application/ms-tnef": ".dat",
    "application/msword": ".doc",
}
_FORWARDED_TYPES = frozenset({"message/rfc822", "message/global", "message/news", "message/partial"})


class _Fields:
    """The structural header fields of one MIME part, read once.

    Matches the stdlib's reading of them (``get_content_type`` and friends)
    but scans the part's headers a single time: on big list mail the
    repeated scans cost as much as parsing the message.
    """

    __slots__ = ("ctype", "maintype", "params", "disposition", "disposition_params")

    def __init__(self, part):
        content_type = disposition = None
        try:
            items = part.raw_items()
        except Exception:
            items = ()
        for name, value in items:
            key = name.lower()
            if key == "content-type":
                if content_type is None:
                    content_type = str(value)
            elif key == "content-disposition":
                if disposition is None:
                    disposition = str(value)
        if content_type is None:
            try:
                ctype = part.get_default_type()
            except Exception:
                ctype = "text/plain"
            self.params = {}
        else:
            ctype, self.params = _structured(part, content_type, "content-type")
            if ctype.count("/") != 1:
                ctype = "text/plain"
        # The parser decided the structure from the unsanitized main type.
        self.maintype = ctype.partition("/")[0].strip()
        if _SAFE_CONTENT_TYPE.match(ctype):
            self.ctype = ctype
        else:
            # RFC 2045: what cannot be read as a type is plain text; a text
            # type with stray characters ("text/plain>") is text all the more.
            self.ctype = "text/plain" if self.maintype == "text" else "application/octet-stream"
        if disposition is None:
            self.disposition, self.disposition_params = None, {}
        else:
            self.disposition, self.disposition_params = _structured(part, disposition, "content-disposition")


_PARAM = re.compile(r';\s*([^\s=;]+)\s*=\s*("(?:[^"\\]|\\.)*"?|[^;]*)')
# Like the stdlib's unquote: Windows clients send raw backslash paths.
_PARAM_ESCAPE = re.compile(r'\\([\\"])')


def _structured(part, value, header):
    """(lower-cased main value, {lower-cased name: str}) of a MIME header."""
    value = _UNFOLD.sub("", value)
    main, sep, rest = value.partition(";")
    params = {}
    if not sep:
        return main.strip().lower(), params
    if "*" in rest:
        # RFC 2231 continuations and charsets: the stdlib assembles them.
        try:
            items = part.get_params(None, header) or []
        except Exception:
            items = []
        for name, param in items[1:]:
            params.setdefault(name.strip().lower(), _param_text(param))
        return main.strip().lower(), params
    for match in _PARAM.finditer(";" + rest):
        param = match.group(2).strip()
        if param.startswith('"'):
            param = param[1:-1] if len(param) > 1 and param.endswith('"') else param[1:]
            if "\\" in param:
                param = _PARAM_ESCAPE.sub(r"\1", param)
        params.setdefault(match.group(1).lower(), param)
    return main.strip().lower(), params


def _param_text(value):
    if isinstance(value, tuple):
        # RFC 2231: (charset, language, text percent-decoded as latin-1).
        charset, _, text = value
        try:
            data = text.encode("latin-1", "surrogateescape")
        except UnicodeError:
            data = text.encode("utf-8", "surrogateescape")
        return _decode(data, charset or "utf-8")[0]
    return value if isinstance(value, str) else ""


def _filename(fields, hint, notes):
    raw = fields.disposition_params.get("filename") or fields.params.get("name")
    if not raw:
        return ""
    # RFC 2047 inside a parameter is illegal but what most clients send.
    name = _one_line(_decode_header(raw, hint, notes))
    name = name.replace("\\", "/").rsplit("/", 1)[-1]
    name = _UNSAFE_FILENAME.sub("", name).strip().strip(".")
    return name[:255]


def _generated_name(index, ctype):
    if ctype in _FORWARDED_TYPES:
        return "forwarded-%d.eml" % index
    ext = _EXTENSIONS.get(ctype)
    if ext is None:
        ext = ".txt" if ctype.startswith(("text/", "message/")) else ".bin"
    return "attachment-%d%s" % (index, ext)


_BASE64_LINES = re.compile(r"[A-Za-z0-9+/\r\n]*={0,2}[\r\n]*")


def _large_base64(part):
    """The decoded payload of a large base64 part the stdlib would decode without a defect; None otherwise.

    The stdlib splits a base64 payload into lines and joins them before
    decoding it: five times the payload's size at its peak. Decoding it
    whole gives the same bytes when every character is of the base64
    alphabet or a line end and the length is whole groups of four.
    """
    if str(part.get("content-transfer-encoding", "")).lower() != "base64":
        return None
    payload = part.get_payload()
    if not isinstance(payload, str) or len(payload) < LARGE_BODY_BYTES:
        return None
    if not _BASE64_LINES.fullmatch(payload) or (len(payload) - payload.count("\n") - payload.count("\r")) % 4:
        return None
    return binascii.a2b_base64(payload)


# The transfer encodings the stdlib decodes, by the only names it knows them by.
_DECODED_ENCODINGS = frozenset({"base64", "quoted-printable", "x-uuencode", "uuencode", "uue", "x-uue"})


def _mend_transfer_encoding(part, index, notes):
    """A Content-Transfer-Encoding naming a known encoding with more around it, as that name alone.

    The stdlib decodes a part only when the whole value is the name:
    ``base64 `` or ``base64; x`` left the part as base64 text, a body shown
    and indexed encoded and an attachment served so.
    """
    value = part.get("content-transfer-encoding")
    if value is None:
        return
    written = str(value)
    words = written.split(";", 1)[0].split()
    name = words[0].lower() if words else ""
    if name in _DECODED_ENCODINGS and name != written.lower():
        part.replace_header("content-transfer-encoding", name)
        notes.add("part %d: Content-Transfer-Encoding %r read as %s" % (index, written, name))


def _payload_bytes(part, index, notes):
    _mend_transfer_encoding(part, index, notes)
    try:
        data = _large_base64(part)
        if data is None:
            data = part.get_payload(decode=True)
    except Exception as exc:
        notes.add("part %d: payload could not be decoded (%s)" % (index, type(exc).__name__))
        data = b""
    if not isinstance(data, bytes):
        return b""
    if _base64_left_encoded(part):
        # A cut-off body: the stdlib gives up on all of it and hands back
        # the base64 text; everything but the last partial group is readable.
        data = _b64decode(data)
    return data


def _base64_left_encoded(part):
    """True when the stdlib returned a base64 payload undecoded.

    It does so only for a length of 1 mod 4, which no padding can repair,
    and records the defect on the part (kept there for the defect notes).
    """
    return any(isinstance(d, InvalidBase64LengthDefect) for d in getattr(part, "defects", None) or ())


def _flatten(message):
    buffer = io.BytesIO()
    BytesGenerator(buffer, mangle_from_=False, maxheaderlen=0).flatten(message)
    return buffer.getvalue()


def _container_bytes(part, ctype, index, notes):
    """The bytes of a message/* part whose payload the parser split up."""
    try:
        blocks = [p for p in part.get_payload() if isinstance(p, Message)]
        data = b"".join(_flatten(p) for p in blocks)
    except Exception as exc:
        notes.add("part %d: embedded message could not be serialized (%s)" % (index, type(exc).__name__))
        return b""
    cte = str(part.get("content-transfer-encoding", "")).strip().lower()
    if cte == "base64":
        data = _b64decode(data)
    elif cte == "quoted-printable":
        data = binascii.a2b_qp(data)
    if ctype in _FORWARDED_TYPES:
        # The generator writes a blank header section when the embedded
        # "message" had none; the caller wants the message itself.
        data = data.lstrip(b"\r\n")
    return data


def _unflow(text, delsp):
    """Undo RFC 3676 format=flowed; quoted lines keep a '> ' prefix."""
    out = []
    depth_open, buffer = None, None
    for line in text.split("\n"):
        stripped = line.lstrip(">")
        depth = len(line) - len(stripped)
        if stripped.startswith(" "):
            stripped = stripped[1:]
        flowed = stripped.endswith(" ") and stripped != "-- "
        if flowed and delsp:
            stripped = stripped[:-1]
        if buffer is not None and depth != depth_open:
            out.append((depth_open, "".join(buffer)))
            buffer = None
        if buffer is None:
            depth_open, buffer = depth, [stripped]
        else:
            buffer.append(stripped)
        if not flowed:
            out.append((depth_open, "".join(buffer)))
            buffer = None
    if buffer is not None:
        out.append((depth_open, "".join(buffer)))
    return "\n".join((">" * d + " " + t) if d and t else (">" * d + t) for d, t in out)


def _html_to_text(html):
    # Reflowed paragraphs, not a layout engine's whitespace.
    from kittypyr.htmltext import text_of_html

    return text_of_html(html)


def _clean_text(text):
    text = text.replace("\r\n", "\n").replace("\r", "\n").replace("\x00", "")
    return _LEADING_BLANK_LINES.sub("", text.rstrip())


def _text_of(fields, data, index, notes, html=False):
    charset = fields.params.get("charset")
    if html and not charset:
        match = _META_CHARSET.search(data[:4096])
        if match:
            charset = match.group(1).decode("ascii")
    text, note = _decode(data, charset)
    if note:
        notes.add("part %d: %s" % (index, note))
    return text


def _alternative_score(part):
    """How well an alternative serves as the plain-text body."""
    stack, seen = [part], 0
    best = 0
    while stack and seen < 200:
        node = stack.pop()
        seen += 1
        fields = _Fields(node)
        ctype = fields.ctype
        if node.is_multipart():
            if fields.maintype != "message":
                stack.extend(p for p in node.get_payload() if isinstance(p, Message))
            continue
        if ctype == "text/plain":
            # An empty plain alternative next to real HTML is not a body.
            if _payload_bytes(node, 0, _Notes()).strip():
                return 3 if node is part else 2
        elif ctype == "text/html":
            best = max(best, 1)
    return best


def _note_defects(part, index, notes):
    for defect in getattr(part, "defects", None) or ():
        doc = (type(defect).__doc__ or "").strip().splitlines()
        notes.add("part %d: %s" % (index, doc[0] if doc else type(defect).__name__))


def _walk_body(msg, top_fields, hint, notes):
    """(plain texts, html texts, attachments) from an iterative walk.

    Parts are numbered in ``Message.walk()`` order, including the parts of
    embedded messages, which are counted but not used.  ``top_fields`` is
    the already-read ``_Fields`` of ``msg``.
    """
    plains, htmls, attachments = [], [], []
    stack = [(msg, _NORMAL)]
    index = -1
    while stack:
        part, mode = stack.pop()
        index += 1
        if mode == _SKIPPED:
            if part.is_multipart():
                stack.extend((p, _SKIPPED) for p in reversed(part.get_payload()) if isinstance(p, Message))
            continue
        fields = top_fields if index == 0 else _Fields(part)
        ctype = fields.ctype
        if part.is_multipart():
            children = [p for p in part.get_payload() if isinstance(p, Message)]
            modes = [mode] * len(children)
            if fields.maintype == "message":
                filename = _filename(fields, hint, notes) or _generated_name(index, ctype)
                data = _container_bytes(part, ctype, index, notes)
                attachments.append(ParsedAttachment(index, filename, ctype, data))
                modes = [_SKIPPED] * len(children)
            elif ctype == "multipart/alternative" and children:
                scores = [_alternative_score(child) for child in children]
                chosen = scores.index(max(scores))
                modes = [mode if i == chosen else _DISCARDED for i in range(len(children))]
            for child, child_mode in reversed(list(zip(children, modes))):
                stack.append((child, child_mode))
            _note_defects(part, index, notes)
            continue
        if ctype.startswith("multipart/"):
            # A multipart without a usable boundary: the parser kept the
            # whole body as one string, which is best read as text.
            ctype = "text/plain"
        filename = _filename(fields, hint, notes)
        # Text said to be shown inline is the body, named or not: quilt mails
        # each patch as its only part, "inline; filename=fix.patch".
        inline = fields.disposition == "inline" or (not filename and fields.disposition != "attachment")
        if inline and mode == _DISCARDED and ctype in ("text/plain", "text/html"):
            continue
        data = _payload_bytes(part, index, notes)
        # Decoding the payload adds its own defects (bad base64 and such).
        _note_defects(part, index, notes)
        if inline and ctype == "text/plain":
            text = _clean_text(_text_of(fields, data, index, notes))
            if fields.params.get("format", "").lower() == "flowed":
                delsp = fields.params.get("delsp", "").lower() == "yes"
                text = _clean_text(_unflow(text, delsp))
            if text:
                plains.append(text)
            continue
        if inline and ctype == "text/html":
            htmls.append(_text_of(fields, data, index, notes, html=True))
        if not data and not filename:
            continue
        attachments.append(ParsedAttachment(index, filename or _generated_name(index, ctype), ctype, data,
                                            _normalize_charset_name(fields.params.get("charset", ""))))
    return plains, htmls, attachments


# ---------------------------------------------------------------------------
# The text that goes to the full-text index
# ---------------------------------------------------------------------------

_PATCH_FIRST = frozenset(start[0] for start in PATCH_START)
_BLANKS = frozenset(" \t\f\v")
# Inside a patch: hunk lines, hunk headers and file headers.
_PATCH_CONTINUE = ("+", "-", " ", "@@", *PATCH_HEADERS)
_ATTRIBUTION = re.compile(
    r"\b(wrote|writes|written|said|says|schrieb|scripsit|escribi[oó]|escreveu|skrev|"
    r"kirjoitti|napisa[lł]|пишет|написал|написала|[ée]crit|ha scritto|heeft geschreven)\b"
    r"|^\s*(On|Am|Le|El|Il|Op|Em|Quoting|Citando|Zitat)\b|@",
    re.I,
)
_ATTRIBUTION_START = re.compile(r"^\s*(On|Am|Le|El|Il|Op|Em)\b")


def _is_attribution(line):
    line = line.rstrip()
    return line.endswith(":") and _ATTRIBUTION.search(line) is not None


def _drop_attribution(out):
    """Remove an attribution line (maybe wrapped over two) ending ``out``."""
    end = len(out)
    while end and not out[end - 1].strip() and len(out) - end < 2:
        end -= 1
    if not end or not _is_attribution(out[end - 1]):
        return
    start = end - 1
    if start and _ATTRIBUTION_START.match(out[start - 1]) and not _ATTRIBUTION_START.match(out[start]):
        start -= 1
    del out[start:]


def searchable_text(body_text):
    """The words of ``body_text`` worth indexing: the author's own text.

    Drops quoted lines and the attribution line introducing them, patch
    hunks, and everything after the ``-- `` signature separator.
    """
    lines = body_text.split("\n")
    try:
        lines = lines[: lines.index("-- ")]
    except ValueError:
        pass
    out = []
    in_patch = in_quote = False
    for line in lines:
        if in_patch:
            if not line or line.startswith(_PATCH_CONTINUE):
                continue
            in_patch = False
        first = line[:1]
        if first in _PATCH_FIRST and line.startswith(PATCH_START):
            in_patch = True
            in_quote = False
            continue
        if first == ">" or (first in _BLANKS and line.lstrip().startswith(">")):
            if not in_quote:
                _drop_attribution(out)
            in_quote = True
            continue
        in_quote = False
        out.append(line)
    return "\n".join(out).strip()


# ---------------------------------------------------------------------------
# Raw input
# ---------------------------------------------------------------------------

_HEADER_LINE = re.compile(rb"[!-9;-~]+:")
_SPACED_HEADER_LINE = re.compile(rb"([!-9;-~]+)[ \t]+:")
_BAD_HEADER_LINE = re.compile(rb"\n(?![ \t]|[!-9;-~]+:)")
_LONE_CR = re.compile(rb"\r(?!\n)")
_BLANK_LINE = re.compile(rb"\n\r?\n")
# The end of the header section whatever the line ending: LF, CRLF or a
# lone CR (the CR pair before an LF is broken CRLF mail, not a blank line).
_ANY_BLANK_LINE = re.compile(rb"\r?\n\r?\n|\r\r(?!\n)")
_CR_BEFORE_HEADER_LINE = re.compile(rb"\r(?:[!-9;-~]+:|[ \t])")


def _repair_header_section(header, notes):
    """Rewrite a header section so that the stdlib parser keeps every header.

    Returns (header bytes, bytes that belong to the body, or None).
    Raises UnparseableMessage when no header line exists at all.
    """
    lines = header.split(b"\n")
    header_rows = [
        i for i, line in enumerate(lines) if _HEADER_LINE.match(line) or _SPACED_HEADER_LINE.match(line)
    ]
    if not header_rows:
        first = lines[0][:60].decode("latin-1")
        raise UnparseableMessage("not an email: no header line found (the first line is %r)" % first)
    last_header = header_rows[-1]
    out, skipped, joined, rest = [], 0, 0, None
    seen_header = False
    for i, line in enumerate(lines):
        if i == 0 and line.startswith(b"From "):
            out.append(line)
            continue
        if _HEADER_LINE.match(line):
            out.append(line)
            seen_header = True
            continue
        match = _SPACED_HEADER_LINE.match(line)
        if match:
            notes.add("space before the colon in header %r removed" % match.group(1).decode("ascii"))
            out.append(match.group(1) + b":" + line[match.end() :])
            seen_header = True
            continue
        if not seen_header:
            skipped += 1
            continue
        if line[:1] in (b" ", b"\t"):
            out.append(line)
        elif i < last_header:
            # Most often a long header folded without leading whitespace.
            out.append(b" " + line)
            joined += 1
        else:
            rest = b"\n".join(lines[i:])
            notes.add("no blank line between headers and body")
            break
    if skipped:
        notes.add("%d line(s) before the first header skipped" % skipped)
    if joined:
        notes.add("%d header line(s) without a name joined to the header before" % joined)
    return b"\n".join(out), rest


def _lines_end_in_bare_cr(data):
    """True when the header section ends its lines with a lone CR (classic Mac OS mail).

    Only the header section decides: the body may hold an LF or two (the
    one an mbox reader appends, or a part pasted from elsewhere), and an LF
    header section makes any CR in it a stray one.
    """
    first_cr = data.find(b"\r")
    if first_cr < 0 or data.find(b"\n", 0, first_cr + 2) >= 0:
        return False  # LF or CRLF mail: the quick answer for nearly all of it
    blank = _ANY_BLANK_LINE.search(data)
    header = data[: blank.start()] if blank else data
    if b"\n" in header:
        return False
    if blank is not None and blank.group() == b"\r\r":
        return True
    # Without a CR blank line, a lone CR is a line ending only if a header
    # line follows it, not when it sits inside a single header's value.
    return _CR_BEFORE_HEADER_LINE.search(header) is not None


_BYTE_ORDER_MARK = b"\xef\xbb\xbf"


def _prepare(raw, notes):
    """Return (data, header_end, body_start, clean, fingerprint body).

    ``data`` is what the stdlib parser gets: ``data[:header_end]`` the
    header section, ``data[body_start:]`` the body.  ``clean`` is true when
    every header line is a ``Name: value`` line or a continuation.
    """
    data = raw.lstrip()
    if data.startswith(_BYTE_ORDER_MARK):
        # An editor's, before the first header: that header would read as
        # a line before the headers, and be skipped.
        notes.add("byte order mark before the headers removed")
        data = data[len(_BYTE_ORDER_MARK):].lstrip()
    if not data:
        raise UnparseableMessage("empty message")
    if _lines_end_in_bare_cr(data):
        notes.add("bare CR line endings converted")
        data = _LONE_CR.sub(b"\n", data)
    blank = _BLANK_LINE.search(data)
    if blank:
        header_end, body = blank.start(), data[blank.end() :]
        if data[header_end - 1 : header_end] == b"\r":
            # CRLF mail: that CR ends the last header line. Left in, it
            # would read as a stray CR inside the value, and a
            # "quoted-printable " is no encoding at all.
            header_end -= 1
    else:
        header_end, body = len(data), b""
    header = data[:header_end]
    if _LONE_CR.search(header):
        notes.add("stray CR characters in the header section replaced")
        header = _LONE_CR.sub(b" ", header)
        data = header + data[header_end:]
    # Fast path: every line is a header, a continuation, or a leading
    # mbox From_ line that is followed by real headers.
    separator = blank.end() - header_end if blank else 0
    if not _BAD_HEADER_LINE.search(header):
        if _HEADER_LINE.match(header):
            return data, header_end, header_end + separator, True, body
        if header.startswith(b"From ") and b"\n" in header:
            return data, header_end, header_end + separator, False, body
    fixed, rest = _repair_header_section(header, notes)
    if rest is not None:
        return fixed + b"\n\n" + rest + data[header_end:], len(fixed), len(fixed) + 2, False, body
    return fixed + data[header_end:], len(fixed), len(fixed) + separator, False, body


def _fingerprint(body):
    """SHA-1 of the body with CRLF, trailing blanks and trailing lines removed."""
    if b"\r" in body:
        body = body.replace(b"\r\n", b"\n")
    # The per-line pass is slow; most bodies have nothing to strip.
    if b" \n" in body or b"\t\n" in body or b"\r\n" in body:
        body = b"\n".join(line.rstrip(b" \t\r") for line in body.split(b"\n"))
    return hashlib.sha1(body.rstrip(b" \t\r\n")).hexdigest()


# The domain of the ids made for mail that came without one.
DERIVED_ID_DOMAIN = "@kittypyr.invalid"


def _derive_message_id(from_value, date_value, subject, fingerprint):
    key = "\n".join((_one_line(from_value).lower(), _one_line(date_value), subject, fingerprint))
    digest = hashlib.sha1(key.encode("utf-8", "surrogateescape")).hexdigest()
    return digest[:32] + DERIVED_ID_DOMAIN


def _is_yes(value, word):
    return bool(value) and (value.strip().lower().split(None, 1) or [""])[0].strip(";,") == word


# ---------------------------------------------------------------------------
# Entry point
# ---------------------------------------------------------------------------


def parse_message(raw, envelope_date=None, now=None):
    """Parse one raw message (bytes) into a :class:`ParsedMail`.

    ``envelope_date`` is the date of the mbox ``From `` line, used when the
    message's own dates are missing or implausible; ``now`` (default: the
    current UTC time) is the last resort and the upper bound of a plausible
    date.  Naive datetimes are taken as UTC.

    Raises :class:`UnparseableMessage` for empty input or input without a
    single header line, and nothing else: every repair is listed in
    ``defects``.
    """
    if isinstance(raw, str):
        raw = raw.encode("utf-8", "surrogateescape")
    elif not isinstance(raw, bytes):
        raw = bytes(raw)
    if now is None:
        now = datetime.now(UTC)
    elif now.tzinfo is None or now.utcoffset() is None:
        now = now.replace(tzinfo=UTC)
    else:
        now = now.astimezone(UTC)
    notes = _Notes()
    data, header_end, body_start, clean, body = _prepare(raw, notes)
    fingerprint = _fingerprint(body)
    try:
        return _parse(raw, (data, header_end, body_start, clean), fingerprint, envelope_date, now, notes)
    except Exception as exc:
        # A bug or a structure nothing anticipated must not lose the post.
        notes.add("message could not be parsed (%s: %s); kept as plain text" % (type(exc).__name__, exc))
    try:
        # Its header, still, if only its body could not be read: the
        # Message-ID that links to it, its thread, sender and subject.
        return _parse(raw, _body_as_plain_text(data, header_end, body_start, clean), fingerprint, envelope_date,
                      now, notes)
    except Exception:
        return _salvage(raw, body, fingerprint, envelope_date, now, notes)


# The fields that say how a body is to be read: without them, it is plain text.
_BODY_FIELDS = re.compile(rb"^content-(?:type|transfer-encoding|disposition)[ \t]*:.*(?:\r?\n[ \t].*)*(?:\r?\n|\Z)",
                          re.IGNORECASE | re.MULTILINE)


def _body_as_plain_text(data, header_end, body_start, clean):
    """``_prepare``'s parts of a message with the fields that say how its body is read taken out of its header."""
    header = _BODY_FIELDS.sub(b"", data[:header_end])
    cut = header_end - len(header)
    return header + data[header_end:], header_end - cut, body_start - cut, clean


_LINES = re.compile(r"[^\n]*\n|[^\n]+")


def _header_message(header):
    """The Message the stdlib parser builds from a clean header section.

    Same calls as the parser (``header_source_parse`` and ``set_raw``),
    without its line-by-line machinery, which dominates on long headers.
    """
    msg = Message()
    lines = None
    for line in _LINES.findall(header.decode("ascii", "surrogateescape")):
        if line[:1] in (" ", "\t"):
            lines.append(line)
            continue
        if lines:
            msg.set_raw(*compat32.header_source_parse(lines))
        lines = [line]
    if lines:
        msg.set_raw(*compat32.header_source_parse(lines))
    return msg


# Above this many bytes of body, a multipart message is cut at its
# boundaries here (``_split_large``) instead of by the stdlib parser, which
# holds each line of a part as a string of its own and then joins them:
# seven times the message's size at its peak, 1.4 GB for an attachment of
# 150 MB, which a small server does not have.
LARGE_BODY_BYTES = 4 * 2**20
# Multiparts nested deeper than this in a large message go to the stdlib parser.
_SPLIT_DEPTH = 8
_PART_HEADER_END = re.compile(rb"\r?\n\r?\n")


def _split_large(msg, data, start, end, depth=0):
    """Give ``msg`` (a multipart ``Message`` with its headers) the parts of ``data[start:end]``; False if not clean.

    Clean is what the stdlib parser would read the same way without a
    defect: a boundary, each part between two delimiter lines, a closing
    delimiter. A leaf part's payload is its body whole, as the parser sets
    it (the line end before a delimiter belongs to the delimiter); a
    multipart part is split the same way; a ``message/*`` part, or anything
    in a digest, is left to the parser. Only one part's text is held at a
    time beside ``data``.
    """
    boundary = msg.get_boundary()
    if not boundary or depth > _SPLIT_DEPTH or msg.get_content_type() == "multipart/digest":
        return False
    try:
        delimiter = re.compile(rb"^--" + re.escape(boundary.encode("ascii")) + rb"(--)?[ \t]*\r?$", re.M)
    except UnicodeEncodeError:
        return False
    if msg.get("content-transfer-encoding", "8bit").lower() not in ("7bit", "8bit", "binary"):
        msg.defects.append(email.errors.InvalidMultipartContentTransferEncodingDefect())
    parts = []
    part_start = None
    closed = None
    for match in delimiter.finditer(data, start, end):
        if part_start is None:
            msg.preamble = _text(data, start, match.start()) if match.start() > start else None
        else:
            part = _split_part(data, part_start, match.start(), depth)
            if part is None:
                return False
            parts.append(part)
        line_end = data.find(b"\n", match.end())
        part_start = end if line_end < 0 or line_end >= end else line_end + 1
        if match.group(1):
            closed = part_start
            break
    if closed is None or not parts:
        return False
    msg.set_payload(parts)
    msg.epilogue = data[closed:end].decode("ascii", "surrogateescape") if closed < end else None
    return True


def _text(data, start, end):
    """``data[start:end]`` as the parser's text, without its last line end, which belongs to the delimiter after it."""
    if data.endswith(b"\n", start, end):
        end -= 2 if data.endswith(b"\r\n", start, end) else 1
    # Through a view: the bytes are copied once, into the text.
    return str(memoryview(data)[start:end], "ascii", "surrogateescape")


def _split_part(data, start, end, depth):
    """The ``Message`` of the part in ``data[start:end]``, whose last line end belongs to the delimiter after it."""
    if data.startswith(b"\n", start) or data.startswith(b"\r\n", start):
        header, body_start = b"", data.index(b"\n", start) + 1
    else:
        found = _PART_HEADER_END.search(data, start, end)
        if found is None:
            return None  # a part of headers only: rare, and the parser's to read
        header, body_start = data[start:found.start()], found.end()
    part = email.parser.BytesParser(policy=compat32).parsebytes(header + b"\n\n", headersonly=True)
    if part.defects or part.get_content_maintype() == "message":
        return None
    if part.get_content_maintype() == "multipart":
        part.set_payload(None)
        return part if _split_large(part, data, body_start, end, depth + 1) else None
    part.set_payload(_text(data, body_start, end))
    return part


def _parse_structure(data, header_end, body_start, clean, notes):
    try:
        if len(data) - body_start >= LARGE_BODY_BYTES:
            msg = _header_message(data[:header_end]) if clean else \
                email.parser.BytesParser(policy=compat32).parsebytes(data[:body_start], headersonly=True)
            # The stdlib parser ends a line at a lone CR too, which may start a delimiter line.
            if msg.get_content_maintype() == "multipart" and not _LONE_CR.search(data, body_start) \
                    and _split_large(msg, data, body_start, len(data)):
                return msg
        if body_start < len(data):
            # The stdlib parser reads a body line by line only to join the
            # lines again unless the part is multipart or message/*; doing
            # that join ourselves halves the cost of parsing typical mail.
            if clean:
                msg = _header_message(data[:header_end])
            else:
                msg = email.message_from_bytes(data[:body_start])
            if not msg.is_multipart() and msg.get_content_maintype() not in ("multipart", "message"):
                msg.set_payload(data[body_start:].decode("ascii", "surrogateescape"))
                return msg
        return email.message_from_bytes(data)
    except RecursionError:
        notes.add("MIME structure nested too deeply; body kept as plain text")
    except Exception as exc:
        notes.add("MIME structure unreadable (%s); body kept as plain text" % type(exc).__name__)
    return email.parser.BytesParser().parsebytes(data, headersonly=True)


def _parse(raw, prepared, fingerprint, envelope_date, now, notes):
    msg = _parse_structure(*prepared, notes)
    headers = _Headers(msg)
    # Raw 8-bit headers are most often in the charset of the body.
    hint = None
    top_fields = _Fields(msg)
    declared = top_fields.params.get("charset")
    if declared:
        codec, _ = _resolve_charset(_normalize_charset_name(declared))
        if codec not in (None, "utf-8", "ascii") and codec not in _LATIN_CODECS:
            hint = codec

    subject = _one_line(_decode_header(headers.first("subject") or "", hint, notes))
    sender_name, sender_address = _parse_sender(headers, hint, notes)
    date, date_offset, dated_by_header = _choose_date(headers, envelope_date, now, notes)

    message_id = ""
    for name in ("message-id", "resent-message-id"):
        value = headers.first(name)
        if value:
            message_id = message_id_of_header(_raw_header_text(value, None, notes))
            if message_id:
                break
    value = headers.first("message-id")
    permalink_id = permalink_id_of_header(_raw_header_text(value, None, notes)) if value else ""
    # A Message-ID header that names nothing (``<>``) is the empty id, as
    # for Mailman (which asks for its permalink with msgid='') and
    # HyperKitty; only mail without any such header gets an id made up.
    derived = not message_id and headers.first("message-id") is None
    if derived:
        notes.add("no Message-ID; derived one from the content")
        message_id = _derive_message_id(
            _decode_header(headers.first("from") or "", hint, notes),
            headers.first("date") or "",
            subject,
            fingerprint,
        )

    in_reply_to = ""
    value = headers.first("in-reply-to")
    if value:
        in_reply_to = _reference_of_header(_raw_header_text(value, None, notes))
    # Kept in order, each once; a dict, so that a References header of
    # thousands of ids (looping mail, a hostile one) costs no more than
    # its length.
    references = {}
    for value in headers.all("references"):
        for ref in _id_list(_raw_header_text(value, None, notes)):
            if ref != message_id:
                references.setdefault(ref)

    plains, htmls, attachments = _walk_body(msg, top_fields, hint, notes)
    left_out = max(0, len(attachments) - MAX_ATTACHMENTS)
    if left_out:
        notes.add("%d attachments beyond the first %d kept in the original only" % (left_out, MAX_ATTACHMENTS))
        del attachments[MAX_ATTACHMENTS:]
    if plains:
        body_text = "\n\n".join(plains)
    else:
        body_text = "\n\n".join(t for t in (_clean_text(_html_to_text(h)) for h in htmls) if t)

    no_archive = any(_is_yes(v, "yes") for v in headers.all("x-no-archive")) or any(
        _is_yes(v, "no") for v in headers.all("x-archive")
    )
    return ParsedMail(
        raw=raw,
        message_id=message_id,
        message_id_derived=derived,
        permalink_id=permalink_id if permalink_id != message_id else "",
        fingerprint=fingerprint,
        # Shortened only now: a Message-ID derived from the subject stays the one older releases derived.
        subject=_shortened(subject, SUBJECT_MAX, "subject", notes),
        sender_name=_shortened(sender_name, NAME_MAX, "sender's name", notes),
        sender_address=_bounded_address(sender_address, notes),
        date=date,
        date_offset=date_offset,
        in_reply_to=in_reply_to,
        references=tuple(references),
        body_text=body_text,
        index_text=searchable_text(body_text),
        attachments=attachments,
        no_archive=no_archive,
        defects=list(notes),
        dated_by_header=dated_by_header,
        attachments_left_out=left_out,
    )


def _salvage(raw, body, fingerprint, envelope_date, now, notes):
    date, offset = now, 0
    if envelope_date is not None:
        try:
            candidate, candidate_offset = _as_utc(envelope_date)
            if _sane(candidate, now):
                date, offset = candidate, candidate_offset
        except Exception:
            pass
    try:
        text = _clean_text(_decode(body, None)[0])
        index_text = searchable_text(text)
    except Exception:
        text = index_text = _clean_text(body.decode("latin-1"))
    return ParsedMail(
        raw=raw,
        message_id=_derive_message_id("", "", "", fingerprint),
        message_id_derived=True,
        fingerprint=fingerprint,
        subject="",
        sender_name="",
        sender_address="",
        date=date,
        date_offset=offset,
        in_reply_to="",
        references=(),
        body_text=text,
        index_text=index_text,
        attachments=[],
        no_archive=False,
        defects=list(notes),
    )
