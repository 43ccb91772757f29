"""Search: the query language and its translation to catalog queries.

The order of a page of results and its count are ``kittypyr.ranking``'s,
the snippets ``kittypyr.snippets``'.

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
import logging
import re
import weakref
from dataclasses import dataclass, field
from datetime import datetime, timedelta, timezone
from itertools import compress

import numpy as np
from markupsafe import Markup
from pyramid.traversal import find_resource
from repoze.catalog.indexes.field import CatalogFieldIndex
from repoze.catalog.query import And, Any, Contains, Eq, InRange, Query
from zope.index.text.parsetree import ParseError
from zope.index.text.queryparser import QueryParser

from kittypyr.catalog import Narrowed, docid_of, make_text_index, resources_of, search_page
from kittypyr.fulltext import FullText, Unseen, ranked_without
from kittypyr.lexicon import has_cjk_letters, split_words, words_form
from kittypyr.msgid import message_id_hash, message_id_of_header_value
from kittypyr.queries import newest_passing, oldest_passing
from kittypyr.ranking import (DATE_LOOKUP_MAX, THREADS_FIRST_LOOKED, counted_total, last_page_start,
                              ordered_page, page_of_matches, page_of_threads)
from kittypyr.resources import Message
from kittypyr.resources.thread import month_of
from kittypyr.scored import Scored, all_of, restricted, verified
from kittypyr.snippets import SNIPPET_SCAN_CHARS, snippet
from kittypyr.stats import activity_of
from kittypyr.tags import normalize_tag, tagged_thread_keys
from kittypyr.zones import ADDED, OWN, PATCH, QUOTED, REMOVED

FIELDS = ("from", "subject", "list", "tag", "has", "date", "after", "before", "file", "is", "id",
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
# A Message-ID as mail clients, logs and bounces show it: a query of that
# alone finds its message, if there is one, else is searched as words (an
# address written so, "<torvalds@linux-foundation.org>").
_BRACKETED_ID = re.compile(r"^<[^<>\s]+@[^<>\s]+>$")
# The hash a message's URL ends with.
_ID_HASH = re.compile(r"^[A-Za-z2-7]{32}$")


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
    message_ids: list = field(default_factory=list)  # id: values, without their <>
    pasted_id: tuple = None  # (Message-ID, its Term): a query of one bare "<id@host>"
    start: datetime = None
    end: datetime = None  # exclusive
    problems: list = field(default_factory=list)
    asked_words: bool = False  # the query had words or phrases to search, indexed or not
    without: list = field(default_factory=list)  # a ParsedSearch of each field after a minus (-from:bob)

    @property
    def has_fields(self):
        return bool(self.subject or self.senders or self.lists or self.tags or self.has_attachment
                    or self.files or self.kinds or self.message_ids or self.pasted_id or self.start
                    or self.end or self.without)

    @property
    def unsearchable(self):
        """Words were asked, none of them one the index has, and nothing else: nothing is found."""
        return self.asked_words and not (self.groups or self.excluded or self.has_fields)

    @property
    def highlight_words(self):
        words = []
        for group in self.groups:
            for term in group:
                words.extend(getattr(term, "words", ()) or _WORD_CHARS.findall(term))
        for group in self.subject:
            for term in group:
                words.extend(_WORD_CHARS.findall(term))
        # One Chinese, Japanese or Korean character is a word (kittypyr.lexicon.split_cjk_runs).
        return [w.lower() for w in words if len(w) > 1 or has_cjk_letters(w)]


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
    """The same day ``months`` months before ``day`` (the month's last day when shorter); None before year 1."""
    total = day.year * 12 + day.month - 1 - months
    year, month = divmod(total, 12)
    month += 1
    if year < 1:
        return None
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
            if start is None:
                return None  # before the calendar begins
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
    words = _WORD_CHARS.findall(words_form(term))
    if not words:
        return None
    most = limits.max_phrase_words
    kept = _first_phrase_words(words, most)
    if kept != words:
        counted = " (a Chinese, Japanese or Korean letter counts as one)" if any(map(has_cjk_letters, words)) else ""
        _tell(parsed, f"A phrase may have up to {most} words{counted}: only the first {most} words of "
                      f"“{' '.join(kept[:3])} …” were searched.")
        words = kept
    return Term.of(words, zones)


def _first_phrase_words(words, most):
    """``words`` cut after the ``most``-th word of the phrase they make.

    A run of CJK letters is one word here and a phrase of its letters and
    their pairs to the index (``kittypyr.lexicon.split_cjk_runs``): each of
    its letters counts as a word, and the run is cut between two letters.
    """
    kept = []
    count = 0
    for word in words:
        end = len(word)
        after_cjk = True
        for at, letter in enumerate(word):
            cjk = has_cjk_letters(letter) is not None
            if cjk or after_cjk:  # a letter that starts a word of the phrase
                count += 1
                if count > most:
                    end = at
                    break
            after_cjk = cjk
        if end:
            kept.append(word[:end])
        if count > most:
            break
    return kept


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
    pending_or = None  # after an OR: what came before it ("words" or a field's name)
    previous = None  # the kind of the last term read
    terms = 0
    pasted = None  # the last bare "<id@host>" of the query
    for match in _TOKEN.finditer(query):
        negative, name, value = match.group(1) == "-", match.group(2), match.group(3)
        bare_id = name is None and not negative and _BRACKETED_ID.match(value) is not None
        if value.startswith('"'):
            if len(value) == 1 or not value.endswith('"'):
                parsed.problems.append("A quote was not closed; the rest was read as a phrase.")
                value = value.strip('"')
            else:
                value = value[1:-1]
        if name is None and value == "OR" and not negative:
            pending_or = previous
            continue
        zones = ZONE_FIELDS.get((name or "").lower(), 0)
        kind = "words" if name is None or zones else name.lower()
        joins_or = pending_or is not None and pending_or == kind and not negative
        if pending_or is not None and not joins_or:
            _tell(parsed, "“OR” joins words and phrases, or two of one field (from:a OR from:b); "
                          f"between “{_shown_kind(pending_or)}” and “{_shown_kind(kind, negative)}” "
                          "it was read as AND: both are required.")
        groups = _or_groups(parsed, kind) if joins_or else None
        if groups and len(groups[-1]) >= limits.max_or_branches:
            # A long OR is cut, not the words after it: they still narrow.
            _tell(parsed, f"Only the first {limits.max_or_branches} alternatives of an OR were searched.")
            pending_or = None
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
                value, name, kind = f"{name} {value}", None, "words"
                joins_or = pending_or == "words" and not negative
        if name is None or zones:
            parsed.asked_words = True
            if "*" in value:
                _tell(parsed, f"A * does not search by a word's beginning: “{value}” was searched as whole words.")
            term = _quoted(value, parsed, limits, zones)
            pending_or = None
            if term is None:
                continue
            if negative:
                parsed.excluded.append(term)
            else:
                _add_condition(parsed.groups, term, joins_or)
            previous = None if negative else "words"
            if bare_id:
                pasted = (value[1:-1], term)
            continue
        pending_or = None
        if negative:
            # What the field finds is left out (read as the field itself,
            # "-from:bob" found Bob's mail alone).
            left_out = ParsedSearch(problems=parsed.problems)
            if _parse_field(left_out, name, value, limits):
                parsed.without.append(left_out)
            previous = None
            continue
        added = _parse_field(parsed, name, value, limits, alternative=joins_or and name in _OR_FIELDS)
        previous = name if added else None
    _settle_words(parsed, query)
    if pasted is not None and parsed.groups == [[pasted[1]]] and not parsed.excluded:
        parsed.pasted_id, parsed.groups = pasted, []
    return parsed


def _settle_words(parsed, query):
    """What of ``parsed``'s words is searched, once the whole query is read.

    A word left out with nothing else to search (a pasted flag, "-O2")
    would find every other message: it is searched instead. Words the index
    does not keep (the commonest, such as "the"; signs that are no letter
    or digit) are dropped; a query of nothing else finds nothing, rather
    than everything, and says why.
    """
    if parsed.excluded and not parsed.groups and not parsed.has_fields:
        named = ", ".join(f"“-{term}”" for term in parsed.excluded)
        _tell(parsed, f"A minus sign leaves a word out only beside something to search: {named} "
                      "searched as words.")
        parsed.groups = [[term] for term in parsed.excluded]
        parsed.excluded = []
    kept = [[term for term in group if split_words(" ".join(term.words))] for group in parsed.groups]
    parsed.groups = [group for group in kept if group]
    parsed.excluded = [term for term in parsed.excluded if split_words(" ".join(term.words))]
    if parsed.asked_words and not parsed.groups and not parsed.excluded:
        _tell(parsed, f"“{query.strip()}” holds no word to search: the commonest words (the, a, to…) and "
                      "signs other than letters and digits are not indexed.")


# Fields an OR joins: each of these is a list of groups of alternatives.
_OR_FIELDS = ("from", "subject", "tag")


def _or_groups(parsed, kind):
    """The groups of alternatives an OR of ``kind`` ("words" or a field of _OR_FIELDS) joins; None for others."""
    return {"words": parsed.groups, "from": parsed.senders, "subject": parsed.subject, "tag": parsed.tags}.get(kind)


def _shown_kind(kind, negative=False):
    if kind == "words":
        return "-word" if negative else "words"
    return f"-{kind}:" if negative else f"{kind}:"


def _add_condition(groups, value, alternative):
    if alternative and groups:
        groups[-1].append(value)
    else:
        groups.append([value])


def _parse_field(parsed, name, value, limits, alternative=False):
    """Add the condition of ``name:value``; whether it added one. ``alternative``: joined by OR to the one before."""
    if name == "from":
        _add_condition(parsed.senders, value.lower(), alternative)
    elif name == "subject":
        term = _quoted(value, parsed, limits)
        if not term:
            return False
        _add_condition(parsed.subject, term, alternative)
    elif name == "list":
        parsed.lists.append(value.lower())
    elif name == "tag":
        tag = normalize_tag(value)
        if tag is None:
            parsed.problems.append(f"“tag:{value}” is not a tag.")
            return False
        _add_condition(parsed.tags, tag, alternative)
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
    elif name == "id":
        # An empty one finds nothing, as an unknown one does.
        parsed.message_ids.append(value.strip().removeprefix("<").removesuffix(">"))
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
    return True


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


def _days_dated(archive):
    """``(oldest, newest)``: the first moment of the day of the oldest message, and of the day after the newest.

    Whole days, so that a date range cut to them still counts whole days
    (``ListActivity.message_count_between``). An archive of no message
    spans 1970 to 9999.
    """
    dates = archive.catalog["date"]._fwd_index
    if not dates:
        return datetime(1970, 1, 1, tzinfo=timezone.utc), datetime(9999, 1, 1, tzinfo=timezone.utc)
    oldest = _day_start(datetime.fromtimestamp(max(dates.minKey(), 0), timezone.utc))
    newest = _day_start(datetime.fromtimestamp(dates.maxKey(), timezone.utc)) + timedelta(days=1)
    return oldest, newest


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
        return _spanning(InRange("date", int(start.timestamp()), int(end.timestamp()) - 1), start, end)
    first_month = datetime(int(months[0][:4]), int(months[0][5:]), 1, tzinfo=timezone.utc)
    last_year, last_month = int(months[-1][:4]), int(months[-1][5:])
    after_months = datetime(last_year + (last_month == 12), last_month % 12 + 1, 1, tzinfo=timezone.utc)
    query = Any("month", months)
    if start < first_month:
        query = query | InRange("date", int(start.timestamp()), int(first_month.timestamp()) - 1)
    if after_months < end:
        query = query | InRange("date", int(after_months.timestamp()), int(end.timestamp()) - 1)
    return _spanning(query, start, end)


def _spanning(query, start, end):
    """``query``, noting the seconds it spans, ``[first, end)``: a word's postings keep their dates' spans."""
    query.date_span = (int(start.timestamp()), int(end.timestamp()))
    return query


# Per process and database, each list's senders as one lowercase text
# ("address<TAB>name" a line), so that ``from:`` finds a part of any address
# or name at the speed of a string search instead of a Python loop over every
# sender; made again when the list's senders version moves (a sender came,
# went or changed name) or its count of messages or senders does (archives
# older than the version).
_sender_texts = weakref.WeakKeyDictionary()  # ZODB database -> {list oid: (version, text)}


def _senders_text(mailing_list):
    activity = activity_of(mailing_list)
    version = (activity.senders_version, mailing_list.message_count, len(activity.participants))
    jar = getattr(mailing_list, "_p_jar", None)
    texts = _sender_texts.setdefault(jar.db(), {}) if jar is not None else {}
    known = texts.get(mailing_list._p_oid)
    if known is None or known[0] != version:
        names = activity.sender_names
        lines = "\n".join(f"{sender}\t{names.get(sender, '').lower()}" for sender in activity.participants.keys())
        if len(texts) > 1_000:
            texts.clear()
        known = texts[mailing_list._p_oid] = (version, "\n" + lines + "\n")
    return known[1]


def _sender_addresses(archive, list_addresses, term):
    """Addresses whose address or display name contains ``term``."""
    if "@" in term:
        return [term]
    found = set()
    for address in list_addresses:
        mailing_list = archive.lists.get(address)
        if mailing_list is None:
            continue
        text = _senders_text(mailing_list)
        at = text.find(term)
        while at >= 0:
            line_start = text.rfind("\n", 0, at) + 1
            line_end = text.find("\n", at)
            found.add(text[line_start:text.index("\t", line_start)])
            at = text.find(term, line_end + 1)
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
    matched: int = None  # messages matched, when counted exactly (pages are numbered by it)
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


def _subject_query(archive, groups):
    """The subject index's query for ``groups`` (an AND of ORs of terms), or None if it holds no word it keeps.

    Each word is quoted: its parser reads a bare "not", "and" or "or" as
    an operator, and a query of only common words ("the") as an error.
    """
    text = " AND ".join(
        "(" + " OR ".join(_as_phrase(term) for term in group) + ")" if len(group) > 1 else _as_phrase(group[0])
        for group in groups)
    try:
        QueryParser(archive.catalog["subject"].lexicon).parseQuery(text)
    except ParseError:
        return None
    return text


def _as_phrase(term):
    return term if term.startswith('"') else f'"{term}"'


def _field_conditions(archive, scope, parsed, found, left_out=False):
    """The catalog conditions of ``parsed``'s fields in the lists ``scope``; None when they can find nothing.

    ``left_out``: the fields came after a minus; one that finds nothing
    leaves nothing out, and is not said to find nothing.
    """
    problems = [] if left_out else found.problems
    conditions = []

    if parsed.subject:
        subject = _subject_query(archive, parsed.subject)
        if subject is None:
            problems.append("“subject:” held only words too common to search (such as “the”), or none:"
                            " nothing was searched.")
            return None
        conditions.append(Contains("subject", subject))
    for group in parsed.senders:
        addresses = set()
        for term in group:
            addresses.update(_sender_addresses(archive, scope, term))
        if not addresses:
            asked = " or ".join(f"“from:{term}”" for term in group)
            problems.append(f"Nobody matching {asked} wrote to these lists.")
            return None
        conditions.append(Any("sender", sorted(addresses)))
    if parsed.tags:
        in_tagged = _in_tagged_threads(archive, scope, parsed.tags)
        if in_tagged is None:
            tags = " ".join(" OR ".join(f"tag:{tag}" for tag in group) for group in parsed.tags)
            problems.append(f"No thread in these lists is tagged {tags}.")
            return None
        conditions.append(in_tagged)
    if parsed.has_attachment:
        conditions.append(Eq("has_attachment", True))
    if parsed.start or parsed.end:
        oldest, newest = _days_dated(archive)
        if left_out or (parsed.start or oldest) > oldest or (parsed.end or newest) < newest:
            dates = date_query(parsed.start, parsed.end, oldest, newest)
            if dates is None:
                return None
            conditions.append(dates)
        # Else every message is dated in it: it asks nothing.

    if parsed.files:
        for key in parsed.files:
            # "arch/mips" is a folder as well as a file name.
            keys = [key] if key.endswith("/") or "/" not in key else [key, key + "/"]
            conditions.append(Any("file", keys))
    for kind in parsed.kinds:
        conditions.append(Eq("is", kind))
    if parsed.pasted_id is not None:
        message_id, term = parsed.pasted_id
        docids, said, deleted = _messages_by_id(archive, scope, [message_id])
        if docids:
            conditions.append(InDocuments(docids, archive.catalog.family))
        elif deleted:
            problems.extend(said)
            return None
        else:
            parsed.groups = [[term]]
            found.highlight_words = parsed.highlight_words
    if parsed.message_ids:
        docids, said, _ = _messages_by_id(archive, scope, parsed.message_ids)
        problems.extend(said)
        if not docids:
            return None
        conditions.append(InDocuments(docids, archive.catalog.family))

    return conditions


def message_query(archive, query, visible_lists, mlist=None, limits=DEFAULT_LIMITS):
    """The catalog query for the messages of ``visible_lists`` (addresses) that ``query`` finds.

    ``mlist`` narrows to one list (ignored unless visible). Pages, the JSON
    API, exports and feeds of a search all ask through here, so they find
    the same messages.
    """
    parsed = parse_search(query, limits)
    found = MessageQuery(problems=list(parsed.problems), highlight_words=parsed.highlight_words)
    if parsed.unsearchable:
        return found
    scope = [a for a in visible_lists if mlist is None or a == mlist.lower()]
    if parsed.lists:
        scope = [a for a in scope if _named(a, parsed.lists)]
    if not scope:
        return found
    for without in parsed.without:
        scope = [a for a in scope if not _named(a, without.lists)]
    if not scope:
        return found
    base = Eq("kind", "message") & Any("list", scope)
    # Beyond the lists in scope; None: nothing can be found.
    conditions = _field_conditions(archive, scope, parsed, found)
    if conditions is None:
        return found
    for without in parsed.without:
        # Each left out on its own: one that finds nothing leaves nothing out.
        conditions.extend(Without(condition)
                          for condition in _field_conditions(archive, scope, without, found, left_out=True) or ())
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


def _named(address, names):
    """Whether ``list:`` ``names`` name the list ``address``, whole or by its part before the @."""
    return any(address == name or address.split("@")[0] == name for name in names)


class Without(Query):
    """A condition that holds for every message ``query`` does not find (a field after a minus: ``-from:bob``)."""

    def __init__(self, query):
        self.query = query

    def __str__(self):
        return f"Without({self.query})"

    def _apply(self, catalog, names):
        messages = Eq("kind", "message")._apply(catalog, names)
        return catalog.family.IF.difference(messages, self.query._apply(catalog, names))


class InDocuments(Query):
    """A condition of the catalog that holds for ``docids`` alone (what ``id:`` found)."""

    # Messages only: a search of nothing else need not ask the whole list's set.
    index_name = "message_id"

    def __init__(self, docids, family):
        self.docids = family.IF.Set(docids)

    def __str__(self):
        return f"InDocuments({list(self.docids)})"

    def _apply(self, catalog, names):
        return self.docids


def _messages_by_id(archive, scope, message_ids):
    """``(docids, problems, deleted)``: the messages of the lists in ``scope`` stored under any of ``message_ids``,
    what is said of those not found, and whether one of those was deleted.

    Each is a Message-ID or the hash a message's URL ends with. A message
    deleted by its list's administrators is told as such; one of a list out
    of scope is not told apart from one never archived.
    """
    docids, problems, any_deleted = [], [], False
    for message_id in message_ids:
        # Cut as the one stored was, when it is longer than a Message-ID may be.
        names = {message_id_hash(message_id_of_header_value(f"<{message_id}>"))}
        if _ID_HASH.match(message_id):
            names.add(message_id.upper())
        held = deleted = False
        for address in scope:
            messages = archive.lists[address].messages
            for name in names:
                if name not in messages and name in messages.tombstones:
                    deleted = True
                # Other mail sent with that Message-ID is kept under ids of its own.
                for message in filter(None, map(messages.get, (name, *messages.reusing(name)))):
                    docid = docid_of(archive, message)
                    if docid is not None:
                        docids.append(docid)
                        held = True
        if not held:
            any_deleted = any_deleted or deleted
            problems.append(f"The message <{message_id}> was deleted from the archive." if deleted
                            else f"No message with the Message-ID <{message_id}> is in these lists.")
    return docids, problems, any_deleted


def unseen_by(archive, visible_lists):
    """The ``Unseen`` of a reader who sees ``visible_lists`` (addresses): the other lists' messages; None for none."""
    hidden = set(archive.lists.keys()) - set(visible_lists)
    if not hidden:
        return None
    count = sum(len(archive.lists[address].messages) for address in hidden)
    list_of = archive.catalog["list"]._rev_index.get

    def among(docids):
        return sum(1 for docid in docids if list_of(docid) in hidden)

    return Unseen(count, among)


def run_search(archive, query, visible_lists, mlist=None, sort="relevance", start=0, size=20,
               limits=DEFAULT_LIMITS, group="message", snippets=True):
    """Search the messages of ``visible_lists`` (addresses); return SearchResults.

    ``mlist`` narrows to one list (ignored unless visible). Results are the
    messages ``start`` to ``start + size`` in the chosen order; a ``start``
    past the last result gives the last ``size``-page. The query is read
    within ``limits``. ``group="thread"`` gives one result per thread (its
    best message, with how many of the thread's messages matched), paged
    by threads. Scores count none of the lists the reader may not see
    (``kittypyr.fulltext.ranked_without``). ``snippets=False`` leaves the
    hits' snippets empty, for who shows the messages whole (a feed).
    """
    with ranked_without(unseen_by(archive, visible_lists)):
        return _search(archive, query, visible_lists, mlist, sort, start, size, limits, group, snippets)


def _search(archive, query, visible_lists, mlist, sort, start, size, limits, group, snippets):
    asked = message_query(archive, query, visible_lists, mlist, limits)
    if not snippets:
        asked.highlight_words = None
    results = SearchResults(query=query, problems=asked.problems)
    if sort not in SORTS:
        results.problems.append(f"Unknown order “{sort}”; showing the best matches first.")
        sort = "relevance"
    if group not in GROUPS:
        results.problems.append(f"Unknown grouping “{group}”; showing every message.")
        group = "message"
    results.group = group
    if asked.catalog_query is None:
        if group == "thread":
            results.threads = 0
        return results
    if not asked.has_text and sort == "relevance":
        sort = "date-desc"
    results.sort = sort
    best_only = None
    if asked.text is None:
        walked = _by_fields_in_date_order(archive, asked, start, size, sort == "date-desc") \
            if group == "message" else None
        if walked is not None:
            total, docids = walked
            start = last_page_start(start, size, total)
            results.total, results.total_estimated = counted_total(total, limits)
            results.matched = total
            results.hits = [SearchHit(m, _snippet_of(m, asked.highlight_words))
                            for m in resources_of(archive, docids[start:start + size])]
            return results
        scored = _as_scored(_filtered(archive, asked))
        if group != "thread":
            if len(scored) > DATE_LOOKUP_MAX:
                # Most of the archive: the date index's own walk is quicker.
                total, found = search_page(archive, asked.filters, start, size, "date",
                                           reverse=sort == "date-desc")
                results.total, results.total_estimated = counted_total(total, limits)
                results.matched = total
                results.hits = [SearchHit(m, _snippet_of(m, asked.highlight_words)) for m in found]
                return results
    else:
        # Only pages by relevance can leave out the matches that cannot reach them.
        best = (start + size if group == "message" else THREADS_FIRST_LOOKED * (start + size)) \
            if sort == "relevance" else None
        scored, best_only = _matching(archive, asked, best, limits.max_exact_count)
        if scored.check is not None and len(scored) <= limits.max_exact_count:
            scored = verified(scored)
    if group == "thread":
        def widen(looked):
            return _matching(archive, asked, looked, limits.max_exact_count)

        docids, counts, total, results.threads, results.threads_estimated, scored, estimated = \
            page_of_threads(archive, (scored, best_only), sort, start, size,
                            widen if best_only is not None else None, asked.scope)
    elif best_only is not None:
        total, estimated = best_only
        start = last_page_start(start, size, total)
        docids = ordered_page(archive, scored, sort, start, size)
        counts = None
    else:
        docids, total, estimated = page_of_matches(archive, scored, sort, start, size)
        counts = None
    results.total, results.total_estimated = counted_total(total, limits, estimated)
    results.matched = None if estimated else total
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
MESSAGE_INDEXES = frozenset({"sender", "has_attachment", "file", "is", "subject", "text",
                             InDocuments.index_name})


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
    return archive.catalog.query(_all_of(conditions))[1]


# A search by fields alone in date order is answered from the lists'
# threads newest first (``kittypyr.queries.newest_passing``), from the date
# index oldest first (``oldest_passing``), for pages up to this many matches
# deep; deeper ones are sorted by the catalog.
DATE_WALK_DEEPEST = 1_000
# Messages the walk looks at, beyond this many for each match the page
# needs, before it gives way to the set of the matches, which are few.
WALK_LOOKS, WALK_LOOKS_PER_MATCH = 2_000, 20
DAY = 24 * 60 * 60


def _by_fields_in_date_order(archive, asked, start, size, newest_first):
    """``(total, docids)`` of a search by fields alone in date order; None to ask the catalog.

    When the lists' counts tell how many messages match
    (``_counted_from_activity``), the page is taken from the newest threads
    of the lists in scope, or from the oldest dates, so that a query that
    finds most of a list (``list:dev``, ``-from:bot``, ``after:2019``)
    costs a page, not the list.
    """
    wanted = start + size
    if wanted > DATE_WALK_DEEPEST:
        return None
    lists = _lists_in(archive, asked.scope)
    span = _date_span(asked.conditions)
    others = [condition for condition in asked.conditions if not getattr(condition, "date_span", None)]
    counted = _counted_from_activity(lists, span, others)
    if counted is None:
        return None
    passes = AllowedDocuments(archive.catalog, others).test if others else None
    walk = (newest_passing if newest_first else oldest_passing)(
        archive, lists, wanted, passes, span, most=WALK_LOOKS + WALK_LOOKS_PER_MATCH * wanted)
    if walk is None:
        return None
    # Never fewer than were seen, should the counts be behind.
    return (walk.passed if walk.ended else max(counted, walk.passed)), walk.docids


def _counted_from_activity(lists, span, conditions):
    """How many messages of ``lists`` dated in ``span`` pass ``conditions``, from the lists' counts; None when they cannot tell.

    They tell the messages of whole days (``ListActivity.message_count_between``),
    and those of some senders, or of all but some (a message has one
    sender): over all time from ``participants``, in a span from each of
    its days that has mail, up to SENDER_DAYS_MOST of them.
    """
    wanted, left_out = None, set()  # addresses
    for condition in conditions:
        leaves_out = isinstance(condition, Without)
        asked = condition.query if leaves_out else condition
        addresses = _field_values(asked)
        if addresses is None or getattr(asked, "index_name", None) != "sender":
            return None
        if leaves_out:
            left_out |= addresses
        else:
            wanted = addresses if wanted is None else wanted & addresses
    counted = left_out if wanted is None else wanted - left_out
    if span is not None:
        if span[0] % DAY or span[1] % DAY:
            return None
        first, end = (datetime.fromtimestamp(moment, timezone.utc).date() for moment in span)
    total = 0
    for mailing_list in lists:
        activity = activity_of(mailing_list)
        written = 0  # by the senders counted
        if counted:
            by_sender = (functools.partial(_count_of, activity.participants) if span is None
                         else _written_between(activity, first, end, len(counted)))
            if by_sender is None:
                return None
            written = sum(map(by_sender, counted))
        if wanted is not None:
            total += written
        else:
            in_span = mailing_list.message_count if span is None else activity.message_count_between(first, end)
            total += in_span - written
    return total


# Days with mail times senders looked up to count senders' mail in a span.
SENDER_DAYS_MOST = 20_000


def _count_of(counts, key):
    return counts.get(key, 0)


def _written_between(activity, first, end, senders):
    """``written(address)``: the messages ``address`` wrote on the days ``[first, end)``; None past SENDER_DAYS_MOST."""
    days = []
    for day in activity.per_day.keys(first.isoformat(), end.isoformat(), excludemax=True):
        days.append(day)
        if len(days) * senders > SENDER_DAYS_MOST:
            return None
    by_day = activity.sender_days.get

    def written(address):
        return sum(by_day((day, address), 0) for day in days)
    return written


def _all_of(conditions):
    """One catalog query for ``conditions`` (at least one), all to hold."""
    return conditions[0] if len(conditions) == 1 else And(*conditions)


def _matching(archive, asked, best=None, exact_up_to=DEFAULT_LIMITS.max_exact_count):
    """``(scored, best_only)``: the messages ``asked`` finds, scored by the text index.

    The other conditions are asked of the catalog once, as a set of docids
    that the words' matches are cut to; when there are none (every list in
    scope, no field) the words alone answer, since only messages are in the
    text index.

    With ``best`` given and one word asked (or several words and phrases,
    each in any zone, with many postings: ``_best_of_words``), ``scored``
    holds only what can be among the ``best`` first by relevance, the
    conditions applied before scoring (see ``FullTextIndex.best_word_scores``
    and ``best_allowed_scores``: counted exactly up to ``exact_up_to``), and
    ``best_only`` is ``(total, estimated)``; otherwise ``scored`` is every
    match and ``best_only`` None.
    """
    catalog = archive.catalog
    plain = _plain_terms(catalog, asked) if best is not None else None
    word = plain.words[0] if plain is not None and len(plain.words) == 1 and not plain.phrases else None
    # Several words, none repeated (the usual path counts a repeated word twice).
    if plain is not None and len(plain.words) > 1 and len(set(plain.words)) == len(plain.words):
        found = _best_of_words(archive, asked, plain, best, exact_up_to)
        if found is not None:
            return found
    scored = None
    index, conditions = _text_index_of(archive, asked)
    if word is None:
        scored = asked.text.scored(catalog, verify=False, index=index)
        if scored is None:
            # Nothing but excluded words: every message of the list, as the whole index has them.
            index, conditions = catalog["text"].index, _conditions_of(archive, asked)
            scored = asked.text.scored(catalog, verify=False)
        if not len(scored):
            return scored, None
    if word is not None:
        if not conditions:
            scored, total, exact = index.best_word_scores(word, best)
            return scored, BestOnly(total, not exact, lambda docids: index.holding(word, docids))
        allowed = AllowedDocuments(catalog, conditions, dates_by_value=_keeps_most(archive, asked))
        scored, total, exact = index.best_allowed_scores(word, best, allowed, exact_up_to)

        def matching(docids):
            return index.holding(word, [docid for docid in docids if allowed.test(docid)])

        return scored, BestOnly(total, not exact, matching)
    if not conditions:
        return scored, None
    return restricted(scored, _as_scored(catalog.query(_all_of(conditions))[1]).docids), None


def _text_index_of(archive, asked):
    """``(index, conditions)``: the text index the words of ``asked`` are read from, and what their matches must also pass.

    A search in one list of several reads that list's postings alone
    (``FullTextIndex.within``): what it reads follows the list's size, not
    the archive's. Any other reads the whole index, its lists a condition
    unless it covers all (``_conditions_of``).
    """
    index = archive.catalog["text"].index
    if len(asked.scope) == 1 and not _all_lists_in(archive, asked.scope):
        scoped = index.within(asked.scope[0])
        if scoped is not None:
            return scoped, list(asked.conditions)
    return index, _conditions_of(archive, asked)


def _keeps_most(archive, asked):
    """Whether ``asked``'s one field is dates that hold at least half the mail of its lists, as the lists count it.

    With another field (a sender) the two tests of each posting, cold,
    read more of the indexes than the sets do.
    """
    if not asked.conditions or not all(getattr(condition, "date_span", None) for condition in asked.conditions):
        return False
    lists = _lists_in(archive, asked.scope)
    kept = _counted_from_activity(lists, _date_span(asked.conditions), [])
    return kept is not None and 2 * kept >= sum(mailing_list.message_count for mailing_list in lists)


def _conditions_of(archive, asked):
    """What the matches of ``asked``'s words must also pass: its fields, and its lists unless it covers all."""
    conditions = list(asked.conditions)
    if not _all_lists_in(archive, asked.scope):
        conditions.append(Any("list", asked.scope))
    return conditions


def _best_of_words(archive, asked, plain, best, exact_up_to):
    """``_matching`` for several words and phrases (``PlainTerms``): what can be among the ``best`` first, and ``BestOnly``.

    None when the words are few enough to be scored whole. Phrases are the
    ``check`` of ``FullTextIndex.best_words_scores``: their best are looked
    for among their words' best.
    """
    catalog = archive.catalog
    index, conditions = _text_index_of(archive, asked)
    words = plain.words
    if index.cheap_to_score_whole(words, phrases=bool(plain.phrases)):
        return None
    allowed = AllowedDocuments(catalog, conditions, dates_by_value=_keeps_most(archive, asked)) \
        if conditions else None
    # Each document's answer remembered: asked again when more are read.
    check = all_of([index.phrase_check(phrase) for phrase in plain.phrases])
    scored, total, exact = index.best_words_scores(words, best, allowed, exact_up_to, check)

    def matching(docids):
        kept = [docid for docid in docids if allowed is None or allowed.test(docid)]
        for wid in words:
            kept = index.holding(wid, kept)
        return kept if check is None else [docid for docid in kept if check(docid)]

    return scored, BestOnly(total, not exact, matching)


# A word's postings are kept in the order mail was archived, which is date
# order for the most part: the messages of a few months lie in a few runs of
# its chunks, which a walk by the chunks' best scores reaches last. With
# such a condition the word's postings are scored at once instead.
DATED_INDEXES = frozenset({"month", "date"})


class AllowedDocuments:
    """The messages that ``conditions`` (catalog queries, all to hold) let through, asked one at a time.

    A word's best matches need only a few of them tested: ``test`` reads
    an ``Eq`` or ``Any`` of a field index (a sender, a list) from
    the index's value of that one document, so that ``from:`` with a word
    costs what the page needs, not a union of every message of the senders
    (which grows with the list). Other conditions are asked of the catalog
    once, as a set. ``passing(docids)`` tests many at once, each condition
    on the docids the ones before it let through, without a Python call
    per docid. ``every()`` is the sorted array of every allowed docid, for
    when every match is counted. ``walkable``: whether every test reads a
    value (none is a date: see ``DATED_INDEXES``). ``date_span``: the
    seconds ``[first, end)`` a date condition keeps, or None.
    ``dates_by_value``: a date is tested as a sender is, by each
    document's value, and walked: for a span that keeps most of the mail
    (``_keeps_most``), whose months' sets would hold most of the list.
    """

    def __init__(self, catalog, conditions, dates_by_value=False):
        self.catalog = catalog
        self.conditions = conditions
        tests, sets, fields = [], [], []
        self.walkable = True
        for condition in conditions:
            # A field after a minus is tested as the field is: by the
            # document's value, not by the set of every other message.
            left_out = isinstance(condition, Without)
            asked = condition.query if left_out else condition
            span = getattr(asked, "date_span", None)
            if dates_by_value and span is not None and not left_out:
                date_of, within = catalog["date"]._rev_index.get, _within(span)
                tests.append(lambda docid, date_of=date_of, within=within: within(date_of(docid)))
                fields.append((date_of, within))
                continue
            values = _field_values(asked)
            name = getattr(asked, "index_name", None)
            # A date's months are asked as a set: scored at once, a word
            # tests thousands of its postings, which costs more than the
            # union of a few months' sets.
            index = catalog.get(name) if values is not None and name not in DATED_INDEXES else None
            by_document = getattr(index, "_rev_index", None) if isinstance(index, CatalogFieldIndex) else None
            if by_document is not None:
                tests.append(_value_in(by_document, values, left_out))
                fields.append((by_document.get, (lambda value, values=values: value not in values) if left_out
                               else values.__contains__))
            else:
                held = catalog.query(condition)[1].__contains__
                tests.append(held)
                sets.append(held)
                self.walkable = False
        self._tests = tests
        self.date_span = _date_span(conditions)
        # A set's membership is the cheaper test: asked first.
        self._batch_tests = [(lambda docids, held=held: map(held, docids)) for held in sets] + [
            (lambda docids, value_of=value_of, wanted=wanted: map(wanted, map(value_of, docids)))
            for value_of, wanted in fields]
        self._every = None
        if len(tests) == 1:
            self.test = tests[0]

    def test(self, docid):
        for test in self._tests:
            if not test(docid):
                return False
        return True

    def passing(self, docids):
        """Which of ``docids`` (a list of ints) every condition lets through, as a boolean array."""
        first, *others = self._batch_tests
        keep = np.fromiter(first(docids), dtype=bool, count=len(docids))
        if others:
            positions, docids = np.flatnonzero(keep), list(compress(docids, keep))
            for test in others:
                passed = np.fromiter(test(docids), dtype=bool, count=len(docids))
                positions, docids = positions[passed], list(compress(docids, passed))
            keep[:] = False
            keep[positions] = True
        return keep

    def every(self):
        if self._every is None:
            self._every = _as_scored(self.catalog.query(_all_of(self.conditions))[1]).docids
        return self._every


def _date_span(conditions):
    """The seconds ``[first, end)`` that every date condition of ``conditions`` keeps, or None when none is a date."""
    spans = [condition.date_span for condition in conditions if getattr(condition, "date_span", None)]
    return (max(first for first, _ in spans), min(end for _, end in spans)) if spans else None


def _lists_in(archive, scope):
    """The lists of the addresses ``scope`` that the archive has."""
    return [archive.lists[address] for address in scope if address in archive.lists]


def _field_values(condition):
    """The values an ``Eq`` or ``Any`` condition asks for, as a set; None for any other condition."""
    if type(condition) is Eq:
        return {condition._value}
    if type(condition) is Any:
        return set(condition._value)
    return None


def _within(span):
    first, end = span

    def within(date):
        return date is not None and first <= date < end
    return within


def _value_in(by_document, values, left_out=False):
    value_of = by_document.get

    if left_out:
        def test(docid):
            return value_of(docid) not in values
    else:
        def test(docid):
            return value_of(docid) in values
    return test


@dataclass
class BestOnly:
    """What ``_matching`` says of a ``scored`` that holds only the best matches."""

    total: int  # matches in all
    estimated: bool  # whether ``total`` is an estimate
    matching: object  # docids -> those of them that match

    def __iter__(self):
        return iter((self.total, self.estimated))


@dataclass
class PlainTerms:
    """A query's words when each is plain (see ``_plain_terms``)."""

    words: list  # the distinct word ids of every term
    phrases: list  # of the terms that are phrases, each one's word ids in order


def _plain_terms(catalog, asked):
    """``PlainTerms`` when ``asked``'s terms are all plain words and phrases, else None.

    Plain: no excluded term, and each group one word or phrase in any zone
    (not an OR), of words the index has seen. A word the index never saw
    makes it None too: the usual path answers that nothing matches.
    """
    groups = asked.text.groups
    if asked.text.excluded or not groups:
        return None
    index = catalog["text"].index
    words, phrases = [], []
    for group in groups:
        if len(group) != 1:
            return None
        terms, zones = group[0]
        if zones:
            return None
        wids = index.word_ids(terms)
        if not wids or None in wids:
            return None
        if len(wids) > 1:
            # As ``FullTextIndex.term`` scores a phrase: each distinct word once.
            phrases.append(wids)
            wids = list(dict.fromkeys(wids))
        words += wids
    return PlainTerms(words, phrases)


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
    """Messages of the threads tagged with one of each group of ``tags``, or None if there are none.

    Tags belong to threads: the messages' thread index finds their
    messages, per list (a thread key names one thread in each list).
    """
    query = None
    for address, keys in sorted(tagged_thread_keys(archive, list_addresses, tags).items()):
        part = Narrowed(Any("thread", keys), list=address)
        query = part if query is None else query | part
    return query



def _snippet_of(message, words):
    if words is None:
        return Markup("")
    # The text as its words were indexed (composed, no soft hyphen), so that a
    # word found is a word marked; it reads the same.
    return snippet(words_form(message.body_text[:SNIPPET_SCAN_CHARS]), words)


def visible_list_addresses(request):
    """The lists this reader may search: public ones and the private ones they may see."""
    return [mailing_list.address for mailing_list in request.visible_lists]


def includeme(config):
    config.add_catalog_index("subject", lambda: make_text_index(get_subject))
