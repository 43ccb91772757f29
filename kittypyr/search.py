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
import functools
import html
import itertools
import logging
import re
from dataclasses import dataclass, field
from datetime import datetime, timedelta, timezone

import numpy as np
from markupsafe import Markup
from pyramid.traversal import find_resource, find_root
from repoze.catalog.query import And, Any, Contains, Eq, InRange

from kittypyr.catalog import make_text_index, search_page
from kittypyr.fulltext import FullText, Scored, restricted, rounded_estimate, top, verified
from kittypyr.rendering import obfuscate_address
from kittypyr.resources import Message
from kittypyr.resources.thread import month_of
from kittypyr.stats import activity_of
from kittypyr.tags import normalize_tag, tagged_thread_keys
from kittypyr.zones import ADDED, OWN, PATCH, QUOTED, REMOVED, message_zones

FIELDS = ("from", "subject", "list", "tag", "has", "date", "after", "before", "file", "is",
          "quoted", "own", "patch", "added", "removed")
# Fields that search words in one zone of the text (see kittypyr.zones).
ZONE_FIELDS = {"quoted": QUOTED, "own": OWN, "patch": PATCH, "added": ADDED, "removed": REMOVED}
KINDS = ("patch", "reply", "first")
SORTS = ("relevance", "date-desc", "date-asc")
GROUPS = ("message", "thread")

log = logging.getLogger(__name__)

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
    # Up to this many possible matches are counted exactly; above, the
    # count is an estimate ("about 21,000 messages"), so that a page need
    # not look at every match (a phrase in each candidate, say).
    max_exact_count: int = 1000

    @classmethod
    def from_settings(cls, settings):
        values = {}
        for name in ("max_query_chars", "max_terms", "max_phrase_words", "max_or_branches",
                     "max_exact_count"):
            given = settings.get(f"kittypyr.search_{name}")
            if given not in (None, ""):
                values[name] = max(1, int(given))
        return cls(**values)


DEFAULT_LIMITS = SearchLimits()


class Term(str):
    """A word or ``"phrase"`` of a query (as the text index's own parser reads it), in ``zones``.

    ``zones`` 0 is anywhere; otherwise a mask of kittypyr.zones flags.
    """

    words = ()
    zones = 0

    @classmethod
    def of(cls, words, zones=0):
        term = cls(words[0] if len(words) == 1 else '"' + " ".join(words) + '"')
        term.words = tuple(words)
        term.zones = zones
        return term


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
    files: list = field(default_factory=list)  # file: keys
    kinds: list = field(default_factory=list)  # is: values
    start: datetime = None
    end: datetime = None  # exclusive
    problems: list = field(default_factory=list)

    @property
    def highlight_words(self):
        words = []
        for group in self.groups:
            for term in group:
                words.extend(getattr(term, "words", ()) or _WORD_CHARS.findall(term))
        for term in self.subject:
            words.extend(_WORD_CHARS.findall(term))
        return [w.lower() for w in words if len(w) > 1]


def _file_key(value):
    """The ``file`` index key a ``file:`` value asks for: a path, a folder (ending in /) or a name."""
    value = value.strip().lower()
    if value.startswith(("a/", "b/")):
        value = value[2:]
    value = value.lstrip("./")
    return value or None


_AGO = re.compile(r"^(\d{1,4})([dwmy])$")
_NAMED_DAYS = {"today": 0, "yesterday": 1}
_NAMED_SPANS = ("week", "month", "year")


def _day_start(moment):
    return moment.replace(hour=0, minute=0, second=0, microsecond=0)


def _months_back(day, months):
    """The same day ``months`` months before ``day`` (the month's last day when shorter)."""
    total = day.year * 12 + day.month - 1 - months
    year, month = divmod(total, 12)
    month += 1
    return day.replace(year=year, month=month, day=min(day.day, calendar.monthrange(year, month)[1]))


def _relative_bounds(text, now):
    """Bounds of ``2w``, ``3d``, ``6m``, ``1y`` (that day), ``today``, ``yesterday``,
    ``last-week|month|year`` and ``this-week|month|year``, relative to ``now``; or None."""
    today = _day_start(now)
    one_day = timedelta(days=1)
    if text in _NAMED_DAYS:
        start = today - _NAMED_DAYS[text] * one_day
        return start, start + one_day
    match = _AGO.match(text)
    if match:
        count, unit = int(match.group(1)), match.group(2)
        if unit in "dw":
            start = today - timedelta(days=count * (7 if unit == "w" else 1))
        else:
            start = _months_back(today, count * (12 if unit == "y" else 1))
        return start, start + one_day
    which, _, span = text.partition("-")
    if which not in ("last", "this") or span not in _NAMED_SPANS:
        return None
    if span == "week":
        start = today - timedelta(days=today.weekday())
        if which == "last":
            return start - 7 * one_day, start
        return start, start + 7 * one_day
    if span == "month":
        start = today.replace(day=1)
        if which == "last":
            return _months_back(start, 1), start
        return start, _months_back(start, -1)
    start = today.replace(month=1, day=1)
    if which == "last":
        return start.replace(year=start.year - 1), start
    return start, start.replace(year=start.year + 1)


def _date_bounds(text, now=None):
    """``(first moment, moment after the last)`` of a year, month or day, or None.

    Relative forms (``2w``, ``yesterday``, ``last-month``...) count from ``now``.
    """
    match = _DATE.match(text)
    if not match:
        return _relative_bounds(text.lower(), now or datetime.now(timezone.utc))
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


def _quoted(term, parsed, limits, zones=0):
    """A word or phrase as a ``Term``, cut to the limit; None if it has no word."""
    words = _WORD_CHARS.findall(term)
    if not words:
        return None
    if len(words) > limits.max_phrase_words:
        _tell(parsed, f"A phrase may have up to {limits.max_phrase_words} words: only the first "
                      f"{limits.max_phrase_words} words of “{' '.join(words[:3])} …” were searched.")
        words = words[: limits.max_phrase_words]
    return Term.of(words, zones)


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
        zones = ZONE_FIELDS.get((name or "").lower(), 0)
        joins_or = pending_or and (name is None or zones) and not negative
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
        if name is None or zones:
            term = _quoted(value, parsed, limits, zones)
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
            parsed.problems.append(f"“date:{value}” is not a date range like 2019-01..2019-06 "
                                   "or last-month.")
            return
        parsed.start = start[0] if start else None
        parsed.end = end[1] if end else None
        if not _ and _AGO.match(first.lower()):
            # "date:2w": the last two weeks, up to now.
            parsed.end = None
    elif name == "file":
        key = _file_key(value)
        if key is None:
            parsed.problems.append(f"“file:{value}” is not a file path.")
        else:
            parsed.files.append(key)
    elif name == "is":
        if value.lower() in KINDS:
            parsed.kinds.append(value.lower())
        else:
            parsed.problems.append(f"“is:{value}” is not known; try is:patch, is:reply or is:first.")
    elif name in ("after", "before"):
        bounds = _date_bounds(value)
        if bounds is None:
            parsed.problems.append(f"“{name}:{value}” is not a date like 2018-03-01, 2018-03, 2018, "
                                   "2w, yesterday or last-month.")
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
        # Two walks of the trees, not a name lookup per sender.
        found.update(sender for sender in activity.participants.keys() if term in sender)
        found.update(sender for sender, name in activity.sender_names.items()
                     if term in name.lower() and sender in activity.participants)
    return sorted(found)


@dataclass
class SearchHit:
    message: object
    snippet: Markup
    score: float = 0.0
    thread_matches: int = 1  # with group="thread": the thread's matching messages


@dataclass
class SearchResults:
    query: str
    total: int = 0  # messages matched; rounded when ``total_estimated``
    total_estimated: bool = False
    hits: list = field(default_factory=list)
    problems: list = field(default_factory=list)
    sort: str = "relevance"
    group: str = "message"
    threads: int = None  # with group="thread": threads matched
    threads_estimated: bool = False


@dataclass
class MessageQuery:
    """What a query string asks of the catalog: ``catalog_query`` None when nothing can match.

    ``has_text``: whether words are searched (results then have a relevance).
    """

    catalog_query: object = None
    problems: list = field(default_factory=list)
    has_text: bool = False
    highlight_words: list = field(default_factory=list)
    # The same query in two parts, for the ranking: every condition but the
    # words, and the words (a FullText, or None).
    filters: object = None
    text: object = None
    scope: list = field(default_factory=list)
    conditions: list = field(default_factory=list)  # the filters but the lists in scope


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
    base = Eq("kind", "message") & Any("list", scope)
    conditions = []  # beyond the lists in scope

    if parsed.subject:
        conditions.append(Contains("subject", " AND ".join(parsed.subject)))
    if parsed.senders:
        for term in parsed.senders:
            addresses = _sender_addresses(archive, scope, term)
            if not addresses:
                found.problems.append(f"Nobody matching “from:{term}” wrote to these lists.")
                return found
            conditions.append(Any("sender", addresses))
    if parsed.tags:
        in_tagged = _in_tagged_threads(archive, scope, parsed.tags)
        if in_tagged is None:
            tags = " ".join(f"tag:{tag}" for tag in parsed.tags)
            found.problems.append(f"No thread in these lists is tagged {tags}.")
            return found
        conditions.append(in_tagged)
    if parsed.has_attachment:
        conditions.append(Eq("has_attachment", True))
    if parsed.start or parsed.end:
        oldest = datetime(1970, 1, 1, tzinfo=timezone.utc)
        newest = datetime(9999, 1, 1, tzinfo=timezone.utc)
        dates = date_query(parsed.start, parsed.end, oldest, newest)
        if dates is None:
            return found
        conditions.append(dates)

    if parsed.files:
        for key in parsed.files:
            # "arch/mips" is a folder as well as a file name.
            keys = [key] if key.endswith("/") or "/" not in key else [key, key + "/"]
            conditions.append(Any("file", keys))
    for kind in parsed.kinds:
        conditions.append(Eq("is", kind))

    found.scope = scope
    found.conditions = conditions
    catalog_query = found.filters = And(base, *conditions) if conditions else base
    if parsed.groups or parsed.excluded:
        found.text = FullText([[(t.words, t.zones) for t in group] for group in parsed.groups],
                              [(t.words, t.zones) for t in parsed.excluded])
        catalog_query &= found.text
    found.catalog_query = catalog_query
    found.has_text = bool(parsed.groups)
    return found


def run_search(archive, query, visible_lists, mlist=None, sort="relevance", start=0, size=20,
               limits=DEFAULT_LIMITS, group="message"):
    """Search the messages of ``visible_lists`` (addresses); return SearchResults.

    ``mlist`` narrows to one list (ignored unless visible). Results are the
    messages ``start`` to ``start + size`` in the chosen order; a ``start``
    past the last result gives the last ``size``-page. The query is read
    within ``limits``. ``group="thread"`` gives one result per thread (its
    best message, with how many of the thread's messages matched), paged
    by threads.
    """
    asked = message_query(archive, query, visible_lists, mlist, limits)
    results = SearchResults(query=query, problems=asked.problems)
    if sort not in SORTS:
        results.problems.append(f"Unknown order “{sort}”; showing the best matches first.")
        sort = "relevance"
    if group not in GROUPS:
        results.problems.append(f"Unknown grouping “{group}”; showing every message.")
        group = "message"
    results.group = group
    if asked.catalog_query is None:
        return results
    if not asked.has_text and sort == "relevance":
        sort = "date-desc"
    results.sort = sort
    best_only = None
    if asked.text is None:
        scored = _as_scored(_filtered(archive, asked))
        if group != "thread":
            if len(scored) > DATE_LOOKUP_MAX:
                # Most of the archive: the date index's own walk is quicker.
                total, found = search_page(archive, asked.filters, start, size, "date",
                                           reverse=sort == "date-desc")
                results.total, results.total_estimated = _counted(total, limits)
                results.hits = [SearchHit(m, _snippet_of(m, asked.highlight_words)) for m in found]
                return results
    else:
        # Only pages by relevance can leave out the matches that cannot reach them.
        best = (start + size if group == "message" else _THREADS_FIRST_LOOKED * (start + size)) \
            if sort == "relevance" else None
        scored, best_only = _matching(archive, asked, best, limits.max_exact_count)
        if scored.check is not None and len(scored) <= limits.max_exact_count:
            scored = verified(scored)
    if group == "thread":
        widen = None
        if best_only is not None:
            def widen(looked):
                return _matching(archive, asked, looked, limits.max_exact_count)
        docids, counts, total, results.threads, results.threads_estimated, scored, estimated = _by_thread(
            archive, (scored, best_only), sort, start, size, widen)
    elif best_only is not None:
        total, estimated = best_only
        start = _last_page_start(start, size, total)
        docids = _ordered_page(archive, scored, sort, start, size)
        counts = None
    else:
        docids, total, estimated = _page_of_matches(archive, scored, sort, start, size)
        counts = None
    results.total, results.total_estimated = _counted(total, limits, estimated)
    hits = []
    scores = scored.scores[np.searchsorted(scored.docids, np.array(docids, dtype=np.int64))] if docids else []
    for at, docid in enumerate(docids):
        message = _resource(archive, docid)
        if message is None:
            continue
        hit = SearchHit(message, _snippet_of(message, asked.highlight_words), float(scores[at]))
        if counts is not None:
            hit.thread_matches = counts[at]
        hits.append(hit)
    results.hits = hits
    return results


def _as_scored(docids):
    values = np.fromiter(docids, dtype=np.int64)
    values.sort()
    return Scored(values, np.zeros(len(values)))


def _all_lists_in(archive, scope):
    return set(scope) >= set(archive.lists.keys())


# Indexes that hold messages only (not threads).
MESSAGE_INDEXES = frozenset({"sender", "has_attachment", "file", "is", "subject", "text"})


def _filtered(archive, asked):
    """The docids of the messages ``asked`` finds by its fields alone (no words).

    The ``kind`` and ``list`` sets hold (nearly) the whole archive: asked
    only when a field does not already leave messages of the lists in
    scope alone.
    """
    conditions = list(asked.conditions)
    if not any(getattr(condition, "index_name", None) in MESSAGE_INDEXES for condition in conditions):
        return archive.catalog.query(asked.filters)[1]
    if not _all_lists_in(archive, asked.scope):
        conditions.append(Any("list", asked.scope))
    return archive.catalog.query(conditions[0] if len(conditions) == 1 else And(*conditions))[1]


def _matching(archive, asked, best=None, exact_up_to=DEFAULT_LIMITS.max_exact_count):
    """``(scored, best_only)``: the messages ``asked`` finds, scored by the text index.

    The other conditions are asked of the catalog once, as a set of docids
    that the words' matches are cut to; when there are none (every list in
    scope, no field) the words alone answer, since only messages are in the
    text index.

    With ``best`` given and one word asked, ``scored`` holds only what can
    be among the ``best`` first by relevance, the conditions applied before
    scoring (see ``FullTextIndex.best_word_scores`` and
    ``best_allowed_scores``: counted exactly up to ``exact_up_to``), and
    ``best_only`` is ``(total, estimated)``; otherwise ``scored`` is every
    match and ``best_only`` None.
    """
    catalog = archive.catalog
    word = _lone_word(catalog, asked) if best is not None else None
    scored = None
    if word is None:
        scored = asked.text.scored(catalog, verify=False)
        if not len(scored):
            return scored, None
    conditions = list(asked.conditions)
    if not _all_lists_in(archive, asked.scope):
        conditions.append(Any("list", asked.scope))
    allowed = None
    if conditions:
        query = conditions[0] if len(conditions) == 1 else And(*conditions)
        allowed = catalog.query(query)[1]
    if word is not None:
        index = catalog["text"].index
        if allowed is None:
            scored, total, exact = index.best_word_scores(word, best)
        else:
            scored, total, exact = index.best_allowed_scores(word, best, allowed, exact_up_to)

        def matching(docids):
            return index.holding(word, [docid for docid in docids if allowed is None or docid in allowed])

        return scored, BestOnly(total, not exact, matching)
    return (scored if allowed is None else restricted(scored, _as_scored(allowed).docids)), None


@dataclass
class BestOnly:
    """What ``_matching`` says of a ``scored`` that holds only the best matches."""

    total: int  # matches in all
    estimated: bool  # whether ``total`` is an estimate
    matching: object  # docids -> those of them that match

    def __iter__(self):
        return iter((self.total, self.estimated))


def _lone_word(catalog, asked):
    """The word id when ``asked`` is one word in any zone (and fields), else None."""
    groups = asked.text.groups
    if asked.text.excluded or len(groups) != 1 or len(groups[0]) != 1:
        return None
    words, zones = groups[0][0]
    if zones or len(words) != 1:
        return None
    wids = catalog["text"].index.word_ids(words)
    return wids[0] if len(wids) == 1 and wids[0] is not None else None


# Up to this many matches are put in date order by looking each one's date up.
DATE_LOOKUP_MAX = 50_000


def _date_of(archive):
    return archive.catalog["date"]._rev_index.get


def _ordered_page(archive, scored, sort, start, size):
    """The docids of the page asked for, in the order asked."""
    start = _last_page_start(start, size, len(scored))
    if not len(scored):
        return []
    if sort == "relevance":
        best = top(scored, start + size, _date_of(archive))
        return [int(scored.docids[at]) for at in best[start:]]
    if len(scored) <= DATE_LOOKUP_MAX:
        # The dates of the matches that can reach the page looked up and
        # sorted at once: the date index's sort of a few thousand docids
        # walked far more of the index.
        candidates = _by_months(archive, scored, sort == "date-desc", start + size)
        date_of = _date_of(archive)
        dates = np.fromiter((date_of(docid, 0) for docid in candidates.tolist()), dtype=np.int64,
                            count=len(candidates))
        order = np.lexsort((candidates, dates))
        if sort == "date-desc":
            order = order[::-1]
        return [int(docid) for docid in candidates[order[start:start + size]]]
    docids = archive.catalog["date"].family.IF.TreeSet(scored.docids.tolist())
    ordered = archive.catalog["date"].sort(docids, reverse=sort == "date-desc", limit=start + size)
    return list(itertools.islice(ordered, start, start + size))


def _by_months(archive, scored, newest_first, wanted):
    """The docids of ``scored`` that can be among its ``wanted`` first in date order.

    When the matches are many among the archive's messages, they are
    taken month by month from the newest (or the oldest) until ``wanted``
    are in, and one month more: a message's month is its sender's, hours
    off its place in time. Looking up every match's date would cost as
    many look-ups as matches; this, about ``wanted`` months' worth of
    messages divided by the share that matches. Otherwise every match.
    """
    months = archive.catalog["month"]
    messages = months._num_docs()
    if len(scored) ** 2 <= 4 * wanted * messages:
        return scored.docids
    keys = list(months._fwd_index.keys())
    if newest_first:
        keys.reverse()
    found, count, more = [], 0, None
    for key in keys:
        members = np.fromiter(months._fwd_index[key], dtype=np.int64)
        at = np.searchsorted(scored.docids, members)
        inside = members[scored.docids[np.minimum(at, len(scored) - 1)] == members]
        found.append(inside)
        count += len(inside)
        if more is not None:
            break
        if count >= wanted:
            more = key
    return np.concatenate(found) if found else scored.docids[:0]


def _counted(total, limits, estimated=False):
    """``(count shown, whether it is an estimate)``: rounded above ``limits.max_exact_count``."""
    if estimated or total > limits.max_exact_count:
        return rounded_estimate(total), True
    return total, False


def _matches_in_order(archive, scored, sort, looked):
    """The real matches among the first ``looked`` candidates of ``scored``, in the order asked."""
    ordered = _ordered_page(archive, scored, sort, 0, looked)
    if scored.check is None:
        return ordered
    return [docid for docid in ordered if scored.check(docid)]


# Candidates looked at, spread over all of them, to estimate how many match.
ESTIMATE_SAMPLE = 200


def _estimated_total(scored, looked, kept):
    """How many of ``scored`` match: ``kept`` of the first ``looked``, the rest from a sample.

    The first candidates in rank order match more often than the others
    (they hold the words more), so the rest is estimated from candidates
    spread evenly over the docids.
    """
    rest = len(scored) - looked
    if rest <= 0 or scored.check is None:
        return kept + max(rest, 0)
    sample = np.unique(np.linspace(0, len(scored) - 1, min(ESTIMATE_SAMPLE, len(scored))).astype(np.int64))
    found = sum(1 for docid in scored.docids[sample].tolist() if scored.check(docid))
    return kept + round(rest * found / len(sample))


def _page_of_matches(archive, scored, sort, start, size):
    """``(docids, total, estimated)``: the page asked for and how many match.

    Candidates that still need their ``check`` (phrases) are checked in
    the order asked only until the page is full; the total is then
    estimated. A ``start`` past the last match gives the last page.
    """
    if scored.check is None:
        return _ordered_page(archive, scored, sort, start, size), len(scored), False
    wanted = start + size
    looked = min(len(scored), max(2 * wanted, 100))
    while True:
        kept = _matches_in_order(archive, scored, sort, looked)
        if len(kept) >= wanted or looked >= len(scored):
            break
        looked = min(len(scored), looked * 4)
    if looked >= len(scored):
        start = _last_page_start(start, size, len(kept))
        return kept[start:start + size], len(kept), False
    return kept[start:wanted], _estimated_total(scored, looked, len(kept)), True


# Messages first looked at for each thread wanted: all of them scored, a
# few hundred cost nothing more; read from the best of a word's postings,
# the fewer the better (four times more are read when they are too few).
_THREADS_FIRST_LOOKED = 2


def _threads_looked_at(wanted, best_only):
    """How many messages are first looked at for ``wanted`` threads."""
    return _THREADS_FIRST_LOOKED * wanted if best_only is not None else max(4 * wanted, 200)


def _by_thread(archive, found, sort, start, size, widen=None):
    """The best message of each thread on the page:
    ``(docids, matches, total, threads, threads estimated, scored, total estimated)``.

    ``found`` is ``(scored, best_only)`` from ``_matching``; ``widen(n)``,
    when given, gives it again holding the ``n`` best. Messages are taken
    in the order asked and the first of each thread kept, until the page
    is full; ``matches`` counts each kept thread's matching messages,
    ``total`` the messages matched. ``threads`` is the number of threads
    matched: counted when all matches were looked at, else estimated from
    the share of new threads among those that were.
    """
    catalog = archive.catalog
    thread_of = catalog["thread"]._rev_index.get
    list_of = catalog["list"]._rev_index.get
    wanted = start + size
    scored, best_only = found
    looked = _threads_looked_at(wanted, best_only)
    while True:
        if best_only is None:
            candidates = len(scored)
        else:
            # Fewer than asked for only when every match was read.
            candidates = best_only.total if len(scored) >= looked else len(scored)
        looked = min(candidates, looked)
        ordered = _matches_in_order(archive, scored, sort, looked)
        firsts = {}
        for docid in ordered:
            key = (list_of(docid), thread_of(docid))
            if key not in firsts:
                firsts[key] = docid
        if len(firsts) >= wanted or looked >= candidates:
            break
        looked *= 4
        if widen is not None:
            scored, best_only = widen(looked)
    exhausted = looked >= candidates
    if best_only is not None:
        total, estimated = best_only.total, best_only.estimated
    else:
        total = len(ordered) if exhausted else _estimated_total(scored, looked, len(ordered))
        estimated = not exhausted and scored.check is not None
    threads = len(firsts)
    if not exhausted:
        threads = max(threads, round(threads * total / max(1, len(ordered))))
    shown = list(firsts.items())
    start = _last_page_start(start, size, len(shown)) if exhausted else start
    page = shown[start:wanted]
    matches = []
    for (address, key), _ in page:
        members = catalog["thread"]._fwd_index.get(key, ())
        members = sorted(docid for docid in members if list_of(docid) == address)
        if best_only is not None:
            matches.append(len(best_only.matching(members)))
            continue
        in_thread = restricted(scored, np.array(members, dtype=np.int64))
        matches.append(len(verified(in_thread)) if scored.check is not None else len(in_thread))
    return [docid for _, docid in page], matches, total, threads, not exhausted, scored, estimated


def _resource(archive, docid):
    path = archive.document_map.address_for_docid(docid)
    if path is None:
        return None
    try:
        return find_resource(archive, path)
    except KeyError:
        log.warning("catalog docid %s points at missing %s", docid, path)
        return None


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


def _last_page_start(start, size, total):
    """``start``, or the first item of the last page when ``start`` is past the end."""
    if start < total:
        return start
    return max(0, (total - 1) // size * size)


SNIPPET_CHARS = 240
# Words are looked for in this much of a body: twenty hits of a multi-MB
# log would otherwise be lower-cased and scanned whole for one page.
SNIPPET_SCAN_CHARS = 64 * 1024


# "Cc: x", "Signed-off-by: x", "Reported-by: x": lines that name people,
# shown in a snippet only when nothing else matched.
_HEADER_LIKE = re.compile(r"^\s*[A-Za-z][\w-]{0,30}:(\s|$)")


def _matching_line(text, pattern):
    """``(line, position of the match in it)`` of the best line of ``text`` that ``pattern`` matches.

    Best is the author's own words, then quotes and patches, then
    header-like lines; the first such line in reading order.
    """
    # Zones are worked out only as far as the first few matches reach: a
    # word matched deep in a long patch must not cost walking all of it.
    matches = list(itertools.islice(pattern.finditer(text), 3))
    if not matches:
        return None
    cut = text.find("\n", matches[-1].end())
    best = None
    for zone, _, pieces in message_zones("", "", text if cut < 0 else text[:cut]).parts:
        for line in itertools.chain.from_iterable(piece.split("\n") for piece in pieces):
            found = pattern.search(line)
            if found is None:
                continue
            rank = 2 if _HEADER_LIKE.match(line) else (0 if zone & OWN else 1)
            if best is None or rank < best[0]:
                best = (rank, line, found.start())
                if rank == 0:
                    return best[1:]
    return best[1:] if best else None


@functools.lru_cache(maxsize=256)
def _words_pattern(words):
    """The regular expression finding any of ``words`` (a tuple) at a word's start, cached."""
    if not words:
        return None
    alternatives = "|".join(re.escape(w) for w in sorted(set(words), key=len, reverse=True))
    return re.compile(r"(?<!\w)(?:" + alternatives + ")", re.IGNORECASE)


@functools.lru_cache(maxsize=256)
def _marks_pattern(words):
    """The regular expression marking ``words`` in escaped text, cached."""
    return re.compile("|".join(re.escape(html.escape(w)) for w in sorted(set(words), key=len, reverse=True)),
                      re.IGNORECASE)


def snippet(text, words):
    """A short piece of ``text`` where ``words`` matched, the words in <mark>.

    The piece comes from the author's own words when they hold a match,
    else from quotes or patches, and from a header-like line (``Cc:``,
    ``Signed-off-by:``) only when nothing else matched; without a match,
    the text's beginning. Only the first ``SNIPPET_SCAN_CHARS`` of
    ``text`` are looked at.
    """
    text = text[:SNIPPET_SCAN_CHARS]
    pattern = _words_pattern(tuple(words))
    found = _matching_line(text, pattern) if pattern is not None else None
    if found is None:
        piece, prefix = text, ""
    else:
        line, position = found
        at = text.find(line)
        begin = max(at, at + position - SNIPPET_CHARS // 3) if at >= 0 else 0
        if at < 0:
            piece = line
        else:
            # Start at a word's beginning, not in the middle of one.
            while begin > at and not text[begin - 1].isspace():
                begin -= 1
            piece = text[begin:]
        prefix = "… " if begin > 0 else ""
    words_of_piece = " ".join(piece[: SNIPPET_CHARS * 2].split())
    shown = words_of_piece[:SNIPPET_CHARS]
    suffix = " …" if len(words_of_piece) > SNIPPET_CHARS or len(piece) > SNIPPET_CHARS * 2 else ""
    escaped = html.escape(obfuscate_address(shown))
    if words:
        escaped = _marks_pattern(tuple(words)).sub(lambda m: f"<mark>{m.group(0)}</mark>", escaped)
    return Markup(prefix + escaped + suffix)


def _snippet_of(message, words):
    return snippet(message.body_text, words)


def visible_list_addresses(request):
    """The lists this reader may search: public ones and the private ones they may see."""
    return [mailing_list.address for mailing_list in request.visible_lists]


def includeme(config):
    config.add_catalog_index("subject", lambda: make_text_index(get_subject))
