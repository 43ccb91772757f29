"""What a Pipermail folder says about each of its per-message pages.

Pipermail (Mailman 2's archiver) numbers every message of a list once,
across all its volumes, and writes it to ``<volume>/<NNNNNN>.html``. The
page shows the subject (without its leading ``Re:``), the author, the
date in the server's local time and, since Mailman 2.1, the message's own
Message-ID in the reply link (``In-Reply-To=`` of its ``mailto:``). Its
``database/<volume>-article`` files, where they were kept, hold the same
article records pickled by Python 2, with the date as a number.

Everything here is pure: a folder in, ``Page`` records out. Nothing is
guessed: a field the page does not show is left empty.
"""

import html
import marshal
import os
import pickle
import re
from dataclasses import dataclass, field
from datetime import datetime, timedelta, timezone
from email.errors import HeaderParseError
from email.header import decode_header, make_header
from email.utils import parsedate_tz
from urllib.parse import unquote_to_bytes

from kittypyr.mail import message_id_of_header
from kittypyr.mailboxes import pipermail_volume, read_regular_file

__all__ = ["Page", "read_folder", "scrubbed_links"]


_PAGE_NAME = re.compile(r"^(\d{6,})\.html$")
_CHARSET = re.compile(rb"<META[^>]*charset=(?:3D)?[\"']?([A-Za-z0-9_.:-]+)", re.IGNORECASE)


class _Element:
    """A start tag and the text up to its end tag (``group(1)``, after the
    start tag's own groups), as ``re.search`` of ``<H1>(.*?)</H1>`` would
    find them, in time linear in the page.

    That search tries each start tag in turn, each to the page's end when
    no end tag follows: a damaged page of thousands of unclosed tags took
    minutes. If the first start tag has no end tag after it, no later one
    has, so only the first is tried.
    """

    def __init__(self, start, end, flags=re.IGNORECASE):
        self.start = re.compile(start, flags)
        self.end = re.compile(end, flags)

    def search(self, text, pos=0):
        opening = self.start.search(text, pos)
        if opening is None:
            return None
        closing = self.end.search(text, opening.end())
        if closing is None:
            return None
        return _Found(opening.groups() + (text[opening.end():closing.start()],), closing.end())


class _Found:
    def __init__(self, groups, end):
        self._groups = groups
        self._end = end

    def group(self, number):
        return self._groups[number - 1]

    def end(self):
        return self._end


_H1 = _Element(r"<H1>", r"</H1>")
_TITLE = _Element(r"<TITLE>", r"</TITLE>")
# The author, the address link and the date follow the H1 in this order in
# every Pipermail template; the body comes only after them.
_AUTHOR = _Element(r"<B>", r"</B>")
_ADDRESS = _Element(r"<A\s+HREF=\"mailto:([^\"]*)\"[^>]*>", r"</A>")
_DATE = _Element(r"<I>", r"</I>")
_REPLY_ID = re.compile(r"[?&]In-Reply-To=([^&\"]*)", re.IGNORECASE)
_BODY = _Element(r"<!--beginarticle-->", r"<!--endarticle-->", flags=0)
# Scrubbed parts are linked from the body as .../<list>/attachments/<day>/<id>/<name>.
_ATTACHMENT_LINK = re.compile(r"/attachments/(\d{8}/[0-9a-f]+/[^\s\"<>&]+)", re.IGNORECASE)
# The scrubber's notice: its URL line, and the type line of a non-text part.
_NOTICE_URL = re.compile(r"^\s*ur[li]\s*:", re.IGNORECASE)
_NOTICE_TYPE = re.compile(r"^\s*Type:\s*([\w.+-]+/[\w.+-]+)", re.IGNORECASE)
_NOTICE_START = "-------------- next part --------------"
_HTML_NOTICE = "An HTML attachment was scrubbed"
_TAG = re.compile(r"<[^>]*>")
_SPACE = re.compile(r"\s+")
# Zones whose offset a date's abbreviation says for sure; any other word
# (CET, BST, IST ...) names different offsets in different places.
_KNOWN_ZONES = {"UT": 0, "UTC": 0, "GMT": 0, "Z": 0, "EST": -300, "EDT": -240, "CST": -360,
                "CDT": -300, "MST": -420, "MDT": -360, "PST": -480, "PDT": -420}
_ZONE = re.compile(r"(?<![\w:])([+-]\d{4}|[A-Z]{1,5})(?![\w:])")
_CLOCK = re.compile(r"(?<!\d)(\d{1,2}) .*?(\d{1,2}):(\d{2}):(\d{2}).*?(\d{4})")


@dataclass
class Page:
    """One per-message page (or archived article) of a Pipermail folder.

    ``number`` is Pipermail's sequence number, ``volume`` the folder the
    page is in (``2007-March``). ``message_id`` is the message's own
    Message-ID as its article record keeps it; ``link_id`` the one in the
    page's reply link, which is the message's own since Mailman 2.1.something
    but its parent's in older pages, so it has to be confirmed (both are read
    as kittypyr reads a Message-ID header; '' when not shown). The date is
    ``local_time``, the naive time shown (the server's), and ``timestamp``
    (UTC seconds) when its zone is certain. ``attachments``: the paths
    below ``attachments/`` that the body's scrubber notices link, each with
    the type its notice says (see ``scrubbed_links``).
    """

    number: int
    volume: str
    subject: str = ""
    author: str = ""
    email: str = ""
    message_id: str = ""
    link_id: str = ""
    timestamp: float = None
    local_time: datetime = None
    attachments: dict = field(default_factory=dict)
    problems: list = field(default_factory=list)


def scrubbed_links(text):
    """``{path below attachments/: content type or None}`` of the scrubber's notices in ``text``.

    Only a notice's own URL line counts: a reply that quotes the notice
    (``> URL: ...``) or mentions the link in a sentence does not hold the
    file. The type is the notice's ``Type:`` line, ``text/html`` for an
    HTML part's notice (which has none), else None.
    """
    links = {}
    content_type = None
    for line in (text or "").splitlines():
        if line.startswith(_NOTICE_START):
            content_type = None
        elif line.startswith(_HTML_NOTICE):
            content_type = "text/html"
        elif (typed := _NOTICE_TYPE.match(line)) is not None:
            content_type = typed.group(1).lower()
        elif _NOTICE_URL.match(line):
            for link in _ATTACHMENT_LINK.findall(line):
                path = unquote_to_bytes(link).decode("utf-8", "replace")
                # <day>/<folder>/<name>, the name without a leading dot (the
                # scrubber strips them): a body is untrusted, and the import
                # reads the file the path names.
                if path.count("/") == 2 and not path.rsplit("/", 1)[1].startswith("."):
                    links.setdefault(path, content_type)
    return links


def _decoded_words(text):
    """``text`` with its RFC 2047 encoded words decoded: some Pipermail pages show them as they came."""
    if "=?" not in text:
        return text
    try:
        return _SPACE.sub(" ", str(make_header(decode_header(text)))).strip()
    except (LookupError, UnicodeError, ValueError, HeaderParseError):
        return text


def _text(fragment):
    """An HTML fragment as the text a reader sees, on one line."""
    return _SPACE.sub(" ", html.unescape(_TAG.sub("", fragment))).strip()


def _decode(data):
    match = _CHARSET.search(data[:4096])
    if match:
        try:
            return data.decode(match.group(1).decode("ascii"), "replace")
        except LookupError:
            pass
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        return data.decode("latin-1")


def _message_id_of_link(href):
    match = _REPLY_ID.search(html.unescape(href))
    if match is None:
        return ""
    raw = unquote_to_bytes(match.group(1)).decode("utf-8", "replace")
    return message_id_of_header(raw)


def _read_date(text, volume, page):
    """Set ``page``'s date from the text Pipermail printed (ctime with a zone, or RFC 5322)."""
    fields = parsedate_tz(text)
    zone = None
    for token in _ZONE.findall(text):
        if token[0] in "+-":
            zone = (1 if token[0] == "+" else -1) * (int(token[1:3]) * 60 + int(token[3:5]))
        elif token in _KNOWN_ZONES:
            zone = _KNOWN_ZONES[token]
    if fields is not None:
        year, month, day, hour, minute, second = fields[:6]
    else:
        # Day and month names in the list's language: the numbers are
        # still there, and the month is the volume's where it has one
        # (Pipermail files a message under its own date).
        match = _CLOCK.search(text)
        span = pipermail_volume(volume)
        last = span[1] - timedelta(days=1) if span is not None else None
        if match is None or span is None or span[0].month != last.month:
            page.problems.append(f"date not understood: {text!r}")
            return
        day, hour, minute, second, year = (int(g) for g in match.groups())
        month = span[0].month
    try:
        local = datetime(year, month, day, hour, minute, min(second, 59))
    except ValueError:
        page.problems.append(f"date not understood: {text!r}")
        return
    page.local_time = local
    if zone is not None:
        page.timestamp = (local - timedelta(minutes=zone)).replace(tzinfo=timezone.utc).timestamp()


def read_page(data, number, volume):
    """The ``Page`` a per-message page's bytes describe."""
    page = Page(number, volume)
    text = _decode(data)
    heading = _H1.search(text) or _TITLE.search(text)
    start = 0
    if heading is not None:
        page.subject = _decoded_words(_text(heading.group(1)))
        start = heading.end()
    author = _AUTHOR.search(text, start)
    if author is not None:
        page.author = _decoded_words(_text(author.group(1)))
        start = author.end()
    address = _ADDRESS.search(text, start)
    if address is not None:
        page.email = _text(address.group(2))
        page.link_id = _message_id_of_link(address.group(1))
        start = address.end()
    date = _DATE.search(text, start)
    if date is not None:
        _read_date(_text(date.group(1)), volume, page)
    else:
        page.problems.append("no date")
    body = _BODY.search(text, start)
    if body is not None:
        page.attachments = scrubbed_links(html.unescape(_TAG.sub("", body.group(1))))
    return page


# --- database/<volume>-article -------------------------------------------------


class _Record:
    """Whatever a pickle names: it keeps the state it is given and runs nothing.

    The article files are data from elsewhere; no class or function they
    name is ever looked up, let alone called.
    """

    def __init__(self, *args, **kwargs):
        self.state = {}

    def __setstate__(self, state):
        self.state = state if isinstance(state, dict) else {}


class _ArticleUnpickler(pickle.Unpickler):
    def find_class(self, module, name):
        return _Record

    def persistent_load(self, pid):
        return None


def _string(value):
    if isinstance(value, bytes):
        try:
            return value.decode("utf-8")
        except UnicodeDecodeError:
            return value.decode("latin-1")
    return value if isinstance(value, str) else ""


def _article(data, volume):
    """The ``Page`` a pickled Article stands for, or None."""
    import io

    try:
        record = _ArticleUnpickler(io.BytesIO(data), encoding="bytes").load()
    except Exception:  # a damaged pickle costs its article, not the folder
        return None
    if not isinstance(record, _Record):
        return None
    state = {_string(key): value for key, value in record.state.items()}
    try:
        number = int(state.get("sequence"))
    except (TypeError, ValueError):
        return None
    page = Page(number, volume)
    page.subject = _decoded_words(_SPACE.sub(" ", _string(state.get("subject"))).strip())
    page.author = _decoded_words(_SPACE.sub(" ", _string(state.get("author"))).strip())
    page.email = _string(state.get("email")).strip()
    header = _string(state.get("_message_id"))
    stripped = _string(state.get("msgid"))
    if not header and stripped != str(number):
        # Articles from before Mailman 2.1 keep only the Message-ID without
        # its brackets; one that had none was given its sequence number.
        header = stripped
    page.message_id = message_id_of_header(header)
    try:
        page.timestamp = float(state.get("date"))
    except (TypeError, ValueError):
        pass
    decoded = state.get("decoded")
    if isinstance(decoded, dict):
        decoded = {_string(key): _string(value) for key, value in decoded.items()}
        page.subject = _SPACE.sub(" ", decoded.get("subject") or page.subject).strip()
        page.author = _SPACE.sub(" ", decoded.get("author") or page.author).strip()
    return page


def read_articles(path, volume):
    """The ``Page`` of every article pickled in a ``database/<volume>-article`` file.

    OSError if the file cannot be read; a damaged one gives what it can.
    """
    data = read_regular_file(path)
    try:
        table = marshal.loads(data)
    except (EOFError, ValueError, TypeError):
        return []
    if not isinstance(table, dict):
        return []
    pages = []
    for data in table.values():
        if isinstance(data, bytes):
            page = _article(data, volume)
            if page is not None:
                pages.append(page)
    return pages


def _merge(page, article):
    """A page completed by its article record: its own Message-ID, and its date, which is exact."""
    page.message_id = article.message_id
    if article.timestamp is not None:
        page.timestamp = article.timestamp
    page.subject = page.subject or article.subject
    page.author = page.author or article.author
    return page


def read_folder(folder, errors=None):
    """Every page of a Pipermail folder: ``{number: Page}``.

    Per-message pages are read from each volume folder; articles of
    ``database/`` complete them (the message's own Message-ID, the exact
    date) and stand for pages that are missing. A page or article file
    that cannot be read (a dangling link, a FIFO, no permission) is
    skipped, and named in ``errors``, a list, if one is given.
    """
    errors = [] if errors is None else errors
    pages = {}
    for volume in sorted(os.listdir(folder)):
        path = os.path.join(folder, volume)
        if volume in ("attachments", "database") or not os.path.isdir(path):
            continue
        for name in os.listdir(path):
            match = _PAGE_NAME.match(name)
            if match is None:
                continue
            try:
                data = read_regular_file(os.path.join(path, name))
            except OSError as exc:
                errors.append(f"page not read: {os.path.join(path, name)}: {exc.strerror or exc}")
                continue
            number = int(match.group(1))
            pages[number] = read_page(data, number, volume)
    database = os.path.join(folder, "database")
    if os.path.isdir(database):
        for name in sorted(os.listdir(database)):
            if not name.endswith("-article"):
                continue
            volume = name[: -len("-article")]
            try:
                articles = read_articles(os.path.join(database, name), volume)
            except OSError as exc:
                errors.append(f"page not read: {os.path.join(database, name)}: {exc.strerror or exc}")
                continue
            for article in articles:
                known = pages.get(article.number)
                pages[article.number] = article if known is None else _merge(known, article)
    return pages
