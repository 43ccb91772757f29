"""Search: the query language, its translation to catalog queries, and snippets.

``run_search`` is the only entry point pages and the JSON API use. Every
query is cut down to the lists the reader may see by one filter on the
``list`` index, applied before anything is counted or shown.

The language: words (all must match), ``"exact phrase"``, ``-word``,
``a OR b``, and the fields ``from:`` (name or address), ``subject:``,
``list:``, ``tag:`` (in threads readers tagged so), ``has:attachment``,
``date:2019-01..2019-06`` (both months included), ``after:2018-03-01``
(from that day on) and ``before:2019`` (until the end of 2018). What cannot be understood is
reported in ``SearchResults.problems`` and left out; the rest still runs.

One anonymous request must not cost seconds, so a query is bounded by
``SearchLimits`` (its length, its words and fields, the words of a phrase,
the alternatives of an OR); what goes past a limit is left out and said so
in the same problem line.
"""

import calendar
import html
import re
from dataclasses import dataclass, field
from datetime import datetime, timezone

from markupsafe import Markup
from pyramid.traversal import find_resource, find_root
from repoze.catalog.query import Any, Contains, DoesNotContain, Eq, InRange
from zope.index.text.parsetree import ParseError

from kittypyr.catalog import make_text_index, search_page
from kittypyr.rendering import obfuscate_address
from kittypyr.resources import Message
from kittypyr.resources.thread import month_of
from kittypyr.stats import activity_of
from kittypyr.tags import normalize_tag, tagged_thread_keys

FIELDS = ("from", "subject", "list", "tag", "has", "date", "after", "before")
SORTS = ("relevance", "date-desc", "date-asc")

_TOKEN = re.compile(r'(-?)(?:(\w+):)?("[^"]*"?|\S+)')
_DATE = re.compile(r"^(\d{4})(?:-(\d{1,2})(?:-(\d{1,2}))?)?$")
_WORD_CHARS = re.compile(r"\w+", re.UNICODE)


def get_subject(obj, default):
    if isinstance(obj, Message) and obj.subject:
        return obj.subject
    return default


@dataclass(frozen=True)
class SearchLimits:
    """The most one query may ask; ``kittypyr.search_max_*`` settings override each.

    Every word of the query is a set to intersect and score in the text
    index and every phrase a check of each candidate's word positions: a
    20,000-word phrase took 14 s of CPU. Within these, a search of a 28,000-
    message archive stays within a few hundred milliseconds
    (``bench/search.py --adversarial``).
    """

    max_query_chars: int = 1000
    max_terms: int = 12  # words, phrases and fields, each OR alternative counted
    max_phrase_words: int = 8
    max_or_branches: int = 8

    @classmethod
    def from_settings(cls, settings):
        values = {}
        for name in ("max_query_chars", "max_terms", "max_phrase_words", "max_or_branches"):
            given = settings.get(f"kittypyr.search_{name}")
            if given not in (None, ""):
                values[name] = max(1, int(given))
        return cls(**values)


DEFAULT_LIMITS = SearchLimits()


@dataclass
class ParsedSearch:
    """The understood parts of a query string."""

    groups: list = field(default_factory=list)  # AND of ORs of words / "phrases"
    excluded: list = field(default_factory=list)  # words / "phrases" that must not match
    subject: list = field(default_factory=list)
    senders: list = field(default_factory=list)
    lists: list = field(default_factory=list)
    tags: list = field(default_factory=list)
    has_attachment: bool = False
    start: datetime = None
    end: datetime = None  # exclusive
    problems: list = field(default_factory=list)

    @property
    def highlight_words(self):
        words = []
        for group in self.groups:
            for term in group:
                words.extend(_WORD_CHARS.findall(term))
        for term in self.subject:
            words.extend(_WORD_CHARS.findall(term))
        return [w.lower() for w in words if len(w) > 1]


def _date_bounds(text):
    """``(first moment, moment after the last)`` of a year, month or day, or None."""
    match = _DATE.match(text)
    if not match:
        return None
    year, month, day = (int(g) if g else None for g in match.groups())
    try:
        if day is not None:
            start = datetime(year, month, day, tzinfo=timezone.utc)
            return start, datetime.fromordinal(start.toordinal() + 1).replace(tzinfo=timezone.utc)
        if month is not None:
            start = datetime(year, month, 1, tzinfo=timezone.utc)
            last = calendar.monthrange(year, month)[1]
            return start, datetime.fromordinal(start.toordinal() + last).replace(tzinfo=timezone.utc)
        return datetime(year, 1, 1, tzinfo=timezone.utc), datetime(year + 1, 1, 1, tzinfo=timezone.utc)
    except ValueError:
        return None


def _quoted(term, parsed, limits):
    """A word or phrase as the text index's own parser reads it literally, cut to the limit."""
    words = _WORD_CHARS.findall(term)
    if not words:
        return None
    if len(words) > limits.max_phrase_words:
        _tell(parsed, f"A phrase may have up to {limits.max_phrase_words} words: only the first "
                      f"{limits.max_phrase_words} words of “{' '.join(words[:3])} …” were searched.")
        words = words[: limits.max_phrase_words]
    return words[0] if len(words) == 1 else '"' + " ".join(words) + '"'


def _tell(parsed, problem):
    if problem not in parsed.problems:
        parsed.problems.append(problem)


def parse_search(query, limits=DEFAULT_LIMITS):
    """Split ``query`` into its understood parts, within ``limits``; never raises."""
    parsed = ParsedSearch()
    query = query or ""
    if len(query) > limits.max_query_chars:
        parsed.problems.append(f"The query is longer than {limits.max_query_chars} characters: "
                               "only its beginning was searched.")
        query = query[: limits.max_query_chars]
    pending_or = False
    terms = 0
    for match in _TOKEN.finditer(query):
        negative, name, value = match.group(1) == "-", match.group(2), match.group(3)
        if value.startswith('"'):
            if len(value) == 1 or not value.endswith('"'):
                parsed.problems.append("A quote was not closed; the rest was read as a phrase.")
                value = value.strip('"')
            else:
                value = value[1:-1]
        if name is None and value == "OR" and not negative:
            pending_or = bool(parsed.groups)
            continue
        joins_or = pending_or and name is None and not negative
        if joins_or and len(parsed.groups[-1]) >= limits.max_or_branches:
            # A long OR is cut, not the words after it: they still narrow.
            _tell(parsed, f"Only the first {limits.max_or_branches} alternatives of an OR were searched.")
            pending_or = False
            continue
        terms += 1
        if terms > limits.max_terms:
            parsed.problems.append(f"Only the first {limits.max_terms} words, phrases and fields of "
                                   "the query were searched.")
            break
        if name is not None:
            name = name.lower()
            if name not in FIELDS:
                parsed.problems.append(f"Unknown field “{name}:” — searched as words.")
                value, name = f"{name} {value}", None
        if name is None:
            term = _quoted(value, parsed, limits)
            if term is None:
                continue
            if negative:
                parsed.excluded.append(term)
            elif pending_or:
                parsed.groups[-1].append(term)
            else:
                parsed.groups.append([term])
            pending_or = False
            continue
        pending_or = False
        _parse_field(parsed, name, value, limits)
    return parsed


def _parse_field(parsed, name, value, limits):
    if name == "from":
        parsed.senders.append(value.lower())
    elif name == "subject":
        term = _quoted(value, parsed, limits)
        if term:
            parsed.subject.append(term)
    elif name == "list":
        parsed.lists.append(value.lower())
    elif name == "tag":
        tag = normalize_tag(value)
        if tag is None:
            parsed.problems.append(f"“tag:{value}” is not a tag.")
        else:
            parsed.tags.append(tag)
    elif name == "has":
        if value.lower() in ("attachment", "attachments"):
            parsed.has_attachment = True
        else:
            parsed.problems.append(f"“has:{value}” is not known; try has:attachment.")
    elif name == "date":
        first, _, last = value.partition("..")
        start = _date_bounds(first) if first else None
        end = _date_bounds(last or first) if (last or not _) else None
        if (first and start is None) or (last and end is None) or not (start or end):
            parsed.problems.append(f"“date:{value}” is not a date range like 2019-01..2019-06.")
            return
        parsed.start = start[0] if start else None
        parsed.end = end[1] if end else None
    elif name in ("after", "before"):
        bounds = _date_bounds(value)
        if bounds is None:
            parsed.problems.append(f"“{name}:{value}” is not a date like 2018-03-01, 2018-03 or 2018.")
        elif name == "after":
            parsed.start = bounds[0]
        else:
            parsed.end = bounds[0]


def _month_starts(start, end):
    """The first moments of the whole months inside [start, end)."""
    year, month = start.year, start.month
    if start.day != 1 or start.time() != datetime.min.time():
        month += 1
    while True:
        if month > 12:
            year, month = year + 1, 1
        first = datetime(year, month, 1, tzinfo=timezone.utc)
        following = datetime(year + (month == 12), month % 12 + 1, 1, tzinfo=timezone.utc)
        if following > end:
            return
        yield first
        month += 1


def date_query(start, end, oldest, newest):
    """Messages dated in [start, end), by whole months where it can.

    A month is one set in the ``month`` index; a date range over the
    ``date`` index would load a set for every distinct second in it.
    """
    start = max(start, oldest) if start else oldest
    end = min(end, newest) if end else newest
    if start >= end:
        return None
    months = [month_of(m) for m in _month_starts(start, end)]
    if not months:
        return InRange("date", int(start.timestamp()), int(end.timestamp()) - 1)
    first_month = datetime(int(months[0][:4]), int(months[0][5:]), 1, tzinfo=timezone.utc)
    last_year, last_month = int(months[-1][:4]), int(months[-1][5:])
    after_months = datetime(last_year + (last_month == 12), last_month % 12 + 1, 1, tzinfo=timezone.utc)
    query = Any("month", months)
    if start < first_month:
        query = query | InRange("date", int(start.timestamp()), int(first_month.timestamp()) - 1)
    if after_months < end:
        query = query | InRange("date", int(after_months.timestamp()), int(end.timestamp()) - 1)
    return query


def _sender_addresses(archive, list_addresses, term):
    """Addresses whose address or display name contains ``term``."""
    if "@" in term:
        return [term]
    found = set()
    for address in list_addresses:
        mailing_list = archive.lists.get(address)
        if mailing_list is None:
            continue
        activity = activity_of(mailing_list)
        for sender in activity.participants.keys():
            if term in sender or term in activity.sender_names.get(sender, "").lower():
                found.add(sender)
    return sorted(found)


@dataclass
class SearchHit:
    message: object
    snippet: Markup
    score: float = 0.0


@dataclass
class SearchResults:
    query: str
    total: int = 0
    hits: list = field(default_factory=list)
    problems: list = field(default_factory=list)
    sort: str = "relevance"


@dataclass
class MessageQuery:
    """What a query string asks of the catalog: ``catalog_query`` None when nothing can match.

    ``has_text``: whether words are searched (results then have a relevance).
    """

    catalog_query: object = None
    problems: list = field(default_factory=list)
    has_text: bool = False
    highlight_words: list = field(default_factory=list)


def message_query(archive, query, visible_lists, mlist=None, limits=DEFAULT_LIMITS):
    """The catalog query for the messages of ``visible_lists`` (addresses) that ``query`` finds.

    ``mlist`` narrows to one list (ignored unless visible). Pages, the JSON
    API, exports and feeds of a search all ask through here, so they find
    the same messages.
    """
    parsed = parse_search(query, limits)
    found = MessageQuery(problems=list(parsed.problems), highlight_words=parsed.highlight_words)
    scope = [a for a in visible_lists if mlist is None or a == mlist.lower()]
    if parsed.lists:
        scope = [a for a in scope if any(a == w or a.split("@")[0] == w for w in parsed.lists)]
    if not scope:
        return found
    catalog_query = Eq("kind", "message") & Any("list", scope)

    text = " AND ".join(
        "(" + " OR ".join(group) + ")" if len(group) > 1 else group[0] for group in parsed.groups
    )
    if parsed.excluded:
        text = (text + " " if text else "") + " ".join("NOT " + t for t in parsed.excluded)
    if parsed.subject:
        catalog_query &= Contains("subject", " AND ".join(parsed.subject))
    if parsed.senders:
        for term in parsed.senders:
            addresses = _sender_addresses(archive, scope, term)
            if not addresses:
                found.problems.append(f"Nobody matching “from:{term}” wrote to these lists.")
                return found
            catalog_query &= Any("sender", addresses)
    if parsed.tags:
        in_tagged = _in_tagged_threads(archive, scope, parsed.tags)
        if in_tagged is None:
            tags = " ".join(f"tag:{tag}" for tag in parsed.tags)
            found.problems.append(f"No thread in these lists is tagged {tags}.")
            return found
        catalog_query &= in_tagged
    if parsed.has_attachment:
        catalog_query &= Eq("has_attachment", True)
    if parsed.start or parsed.end:
        oldest = datetime(1970, 1, 1, tzinfo=timezone.utc)
        newest = datetime(9999, 1, 1, tzinfo=timezone.utc)
        dates = date_query(parsed.start, parsed.end, oldest, newest)
        if dates is None:
            return found
        catalog_query &= dates

    if text and text.startswith("NOT "):
        # The text index cannot start from a negation: exclude after the fact.
        catalog_query &= _excluding(parsed.excluded)
        text = ""
    if text:
        catalog_query &= Contains("text", text)
    found.catalog_query = catalog_query
    found.has_text = bool(text)
    return found


def run_search(archive, query, visible_lists, mlist=None, sort="relevance", start=0, size=20,
               limits=DEFAULT_LIMITS):
    """Search the messages of ``visible_lists`` (addresses); return SearchResults.

    ``mlist`` narrows to one list (ignored unless visible). Results are the
    messages ``start`` to ``start + size`` in the chosen order; a ``start``
    past the last result gives the last ``size``-page. The query is read
    within ``limits``.
    """
    asked = message_query(archive, query, visible_lists, mlist, limits)
    results = SearchResults(query=query, problems=asked.problems)
    if sort not in SORTS:
        results.problems.append(f"Unknown order “{sort}”; showing the best matches first.")
        sort = "relevance"
    catalog_query = asked.catalog_query
    if catalog_query is None:
        return results
    if not asked.has_text and sort == "relevance":
        sort = "date-desc"
    results.sort = sort
    try:
        if sort == "relevance":
            total, hits = _by_relevance(archive, catalog_query, start, size)
        else:
            total, found = search_page(archive, catalog_query, start, size, "date",
                                       reverse=sort == "date-desc")
            hits = [SearchHit(m, None) for m in found]
    except ParseError as exc:
        results.problems.append(f"The words could not be searched ({exc}); try fewer common words.")
        return results
    words = asked.highlight_words
    for hit in hits:
        hit.snippet = snippet(hit.message.body_text, words)
    results.total = total
    results.hits = hits
    return results


def _in_tagged_threads(archive, list_addresses, tags):
    """Messages of the threads tagged with every one of ``tags``, or None if there are none.

    Tags belong to threads: the messages' thread index finds their
    messages, per list (a thread key names one thread in each list).
    """
    query = None
    for address, keys in sorted(tagged_thread_keys(archive, list_addresses, tags).items()):
        part = Eq("list", address) & Any("thread", keys)
        query = part if query is None else query | part
    return query


def _excluding(terms):
    query = None
    for term in terms:
        part = DoesNotContain("text", term)
        query = part if query is None else query & part
    return query


def _last_page_start(start, size, total):
    """``start``, or the first item of the last page when ``start`` is past the end."""
    if start < total:
        return start
    return max(0, (total - 1) // size * size)


def _by_relevance(archive, catalog_query, start, size):
    """BM25 weight from the text index, newest first among equals."""
    catalog = archive.catalog
    _, weighted = catalog.query(catalog_query)
    if not hasattr(weighted, "items"):
        return 0, []
    by_date = {docid: rank for rank, docid in enumerate(catalog["date"].sort(list(weighted.keys()),
                                                                             reverse=True))}
    ordered = sorted(weighted.items(), key=lambda item: (-item[1], by_date.get(item[0], 0)))
    start = _last_page_start(start, size, len(ordered))
    address_for = archive.document_map.address_for_docid
    hits = []
    for docid, weight in ordered[start : start + size]:
        path = address_for(docid)
        try:
            hits.append(SearchHit(find_resource(archive, path), None, float(weight)))
        except (KeyError, TypeError):
            continue
    return len(ordered), hits


SNIPPET_CHARS = 240
# Words are looked for in this much of a body: twenty hits of a multi-MB
# log would otherwise be lower-cased and scanned whole for one page.
SNIPPET_SCAN_CHARS = 64 * 1024


def snippet(text, words):
    """A short piece of ``text`` around the first matched word, words in <mark>.

    Only the first ``SNIPPET_SCAN_CHARS`` of ``text`` are looked at.
    """
    text = text[:SNIPPET_SCAN_CHARS]
    lowered = text.lower()
    position = -1
    for word in words:
        found = lowered.find(word)
        if found != -1 and (position == -1 or found < position):
            position = found
    begin = max(0, position - SNIPPET_CHARS // 3) if position > 0 else 0
    piece = " ".join(text[begin : begin + SNIPPET_CHARS].split())
    piece = obfuscate_address(piece)
    escaped = html.escape(piece)
    if words:
        pattern = re.compile("|".join(re.escape(html.escape(w)) for w in sorted(set(words), key=len,
                                                                                   reverse=True)),
                             re.IGNORECASE)
        escaped = pattern.sub(lambda m: f"<mark>{m.group(0)}</mark>", escaped)
    prefix = "… " if begin > 0 else ""
    suffix = " …" if begin + SNIPPET_CHARS < len(text) else ""
    return Markup(prefix + escaped + suffix)


def visible_list_addresses(request):
    """The lists this reader may search: public ones and the private ones they may see."""
    return [mailing_list.address for mailing_list in request.visible_lists]


def includeme(config):
    config.add_catalog_index("subject", lambda: make_text_index(get_subject))
