"""Which archived message each Pipermail page number stands for, and where that is kept.

A page is matched to a message by its Message-ID where the page or its
article record shows one; a page without one (or whose Message-ID no
archived message has) by its date, author and subject, and only when
exactly one message of the list has all three. Nothing else is tried: a
page that matches no message, or several, stays unmapped and keeps its
subject, so that its old URL can offer a search instead of a wrong
message.

The matching runs inside ``kittypyr import``: a page is mapped in the
transaction of the batch that stores its message (``PageMatcher.stored``),
and the pages left are matched against the whole archive once every batch
is in (``PageMatcher.finish``).
"""

import re
import unicodedata
from collections import Counter
from dataclasses import dataclass
from datetime import timezone

from BTrees.IOBTree import IOBTree
from BTrees.OOBTree import OOBTree
from persistent import Persistent
from repoze.catalog.query import Eq, InRange

from kittypyr.catalog import search
from kittypyr.msgid import message_id_hash

__all__ = ["PageMatcher", "PipermailArchive", "pipermail_archive"]

# Pipermail shows a subject without its leading "Re:" (and kittypyr keeps
# what the month file says, which has lost it too); replies in other
# languages start with these.
_REPLY_PREFIX = re.compile(r"^\s*(?:re|aw|sv|vs|antw|fwd?)\s*(?:\[\d+\])?\s*:\s*", re.IGNORECASE)
_SPACE = re.compile(r"\s+")
_PUNCTUATION = re.compile(r"[\"'()<>]")
_NO_SENDER = "bogus at does.not.exist.com"
# How far a local time shown without a certain zone may be from UTC.
_WIDEST_OFFSET = 14 * 3600
_OFFSET_STEP = 15 * 60


class PipermailArchive(Persistent):
    """What a list brought along from its Pipermail folder (``mailing_list.pipermail``).

    ``numbers``: page number -> the Message-ID hash it stands for;
    ``unmapped``: page number -> the subject its page showed, for a page
    matched to no message; ``attachments``: a path below ``attachments/``
    (``20070305/1a2b3c4d/attachment.bin``) -> the number of the first page
    that linked it; ``files``: such a path -> ``(message hash, attachment
    index)`` of the file kept with its message (``kittypyr.pipermail.attachments``).
    """

    # Made by the first import that keeps a folder's files.
    files = None

    def __init__(self):
        self.numbers = IOBTree()
        self.unmapped = IOBTree()
        self.attachments = OOBTree()

    def map(self, number, message_hash):
        if self.numbers.get(number) != message_hash:
            self.numbers[number] = message_hash
        if number in self.unmapped:
            del self.unmapped[number]


def pipermail_archive(mailing_list, create=False):
    """The list's ``PipermailArchive``; None if it has none and ``create`` is false.

    Only lists imported from a Pipermail folder have one: it is made by the
    import that brings the folder, not by start-up.
    """
    record = getattr(mailing_list, "pipermail", None)
    if record is None and create:
        record = mailing_list.pipermail = PipermailArchive()
    return record


# --- what "the same date, author and subject" means ----------------------------


def subject_key(subject):
    """A subject as Pipermail shows it: no leading "Re:", addresses written "x at y"."""
    text = unicodedata.normalize("NFKC", subject or "").replace("@", " at ")
    while True:
        stripped = _REPLY_PREFIX.sub("", text, count=1)
        if stripped == text:
            break
        text = stripped
    return _SPACE.sub(" ", text).strip().casefold()


def person_key(text):
    """A name or address as Pipermail may show it: "@" written " at ".

    Quotes and parentheses are dropped: Pipermail shows a name in a
    comment as written (``Jo (Dev Team)``), where kittypyr reads the
    comment's parentheses as syntax.
    """
    text = unicodedata.normalize("NFKC", text or "").replace("@", " at ")
    return _SPACE.sub(" ", _PUNCTUATION.sub(" ", text)).strip().casefold()


@dataclass(frozen=True)
class Shown:
    """What a message shows, as keys to compare with a page.

    ``timestamp``: its date (UTC seconds); ``envelope``: the time of the
    ``From `` line it came with, as written (Pipermail writes the same
    local time there as on the page), or None.
    """

    timestamp: int
    envelope: object
    subject: str
    people: frozenset

    @classmethod
    def of(cls, date, subject, sender_name, sender_address, envelope_date=None):
        people = {person_key(sender_name), person_key(sender_address)}
        people.discard("")
        if not people or _NO_SENDER in people:
            # Pipermail shows no author for mail without a From, and writes
            # this placeholder in its month file.
            people.add("")
        envelope = None if envelope_date is None else int(envelope_date.timestamp())
        return cls(int(date.timestamp()), envelope, subject_key(subject), frozenset(people))


def _naive_seconds(local_time):
    """The naive time as if it were UTC, in seconds."""
    return int(local_time.replace(tzinfo=timezone.utc).timestamp())


def _within_a_zone(difference):
    return abs(difference) <= _WIDEST_OFFSET and difference % _OFFSET_STEP == 0


EXACT, SHIFTED = 2, 1


def date_agreement(page, shown):
    """How well a message is of the page's date: EXACT, SHIFTED or 0.

    EXACT: the same instant, or the same local time as its ``From `` line
    (both are Pipermail's own date of the message, where the Date header
    may say another). SHIFTED: a time that differs by a zone's offset from
    the ``From `` line (an archive rebuilt under another zone, or summer
    time) or, where the page's zone is unknown, from the Date header. Two
    messages of a thread often lie a whole number of quarter hours apart
    to the second, so a shifted date only counts where no exact one does.
    """
    if page.timestamp is not None and int(page.timestamp) == shown.timestamp:
        return EXACT
    if page.local_time is None:
        return 0
    local = _naive_seconds(page.local_time)
    if local == shown.envelope:
        return EXACT
    if shown.envelope is not None and _within_a_zone(local - shown.envelope):
        return SHIFTED
    if page.timestamp is None and _within_a_zone(local - shown.timestamp):
        return SHIFTED
    return 0


def agreement(page, shown):
    """How well a message shows the page's date, author and subject: EXACT, SHIFTED or 0."""
    if subject_key(page.subject) != shown.subject:
        return 0
    if (person_key(page.author) or person_key(page.email)) not in shown.people:
        return 0
    return date_agreement(page, shown)


def best_of(agreements):
    """The one name of the best agreement in ``{name: agreement}``; None if none or several."""
    best = max(agreements.values(), default=0)
    if not best:
        return None
    names = [name for name, level in agreements.items() if level == best]
    return names[0] if len(names) == 1 else None


# --- the matcher the import runs ------------------------------------------------

BY_ID, BY_FIELDS = "by Message-ID", "by date, author and subject"


class PageMatcher:
    """Maps the pages of one Pipermail folder while its month files are imported.

    ``stored`` is called for every message a batch stores (or finds
    stored already), in that batch's transaction; ``finish`` once all are
    in. A page is decided again each time a message concerns it, from all
    that is known so far, so a batch replayed after a conflict maps the
    same pages again and a later message that makes a match ambiguous
    undoes it.

    A page is matched to:

    - the message stored under its article record's Message-ID;
    - else the one stored under the Message-ID of its reply link that is
      of the page's date (the link may name the message's parent);
    - else the one message of the list that shows its date, author and
      subject.
    """

    def __init__(self, folder, pages, errors=()):
        """``errors``: the folder's pages that could not be read, lines that fail the import."""
        self.folder = folder
        self.pages = pages
        self.errors = list(errors)
        self.by_id = {}
        self.by_subject = {}
        for number, page in sorted(pages.items()):
            for message_id in {page.message_id, page.link_id} - {""}:
                self.by_id.setdefault(message_id, []).append(number)
            self.by_subject.setdefault(subject_key(page.subject), []).append(number)
        # Compared with every message of the same subject: worked out once.
        self.authors = {number: person_key(page.author) or person_key(page.email)
                        for number, page in pages.items()}
        # Message-ID -> {hash: Shown} of the messages stored under it (more
        # than one when different mail reused a Message-ID).
        self.stored_under = {}
        # Page number -> {hash: Shown} of the messages that show its date,
        # author and subject.
        self.look_alike = {}
        self.how = {}
        self.failures = Counter()

    def stored(self, mailing_list, parsed, result):
        mail = parsed.mail
        message = result.message
        name = message.__name__ if message is not None else result.gone
        if name is None:
            return
        shown = Shown.of(mail.date, mail.subject, mail.sender_name, mail.sender_address,
                         getattr(parsed, "envelope_date", None))
        concerned = set()
        if not mail.message_id_derived and mail.message_id in self.by_id:
            self.stored_under.setdefault(mail.message_id, {})[name] = shown
            concerned.update(self.by_id[mail.message_id])
        for number in self.by_subject.get(shown.subject, ()):
            if self.authors[number] not in shown.people:
                continue
            level = date_agreement(self.pages[number], shown)
            if level:
                self.look_alike.setdefault(number, {})[name] = level
                concerned.add(number)
        if concerned:
            record = pipermail_archive(mailing_list, create=True)
            for number in concerned:
                self._decide(record, number)

    def _choice(self, page):
        """``(hash, how)`` for the page from the messages seen so far, or ``(None, why not)``."""
        if page.message_id:
            candidates = self.stored_under.get(page.message_id, {})
            if len(candidates) == 1:
                return next(iter(candidates)), BY_ID
            # Different mail under one Message-ID: the one of the page's date.
            chosen = best_of({name: agreement(page, shown) for name, shown in candidates.items()})
            if chosen is not None:
                return chosen, BY_ID
        if page.link_id:
            dated = [name for name, shown in self.stored_under.get(page.link_id, {}).items()
                     if date_agreement(page, shown) == EXACT]
            if len(dated) == 1:
                return dated[0], BY_ID
        look_alike = self.look_alike.get(page.number, {})
        chosen = best_of(look_alike)
        if chosen is not None:
            return chosen, BY_FIELDS
        if look_alike:
            return None, "several messages show its date, author and subject"
        return None, None

    def _decide(self, record, number):
        name, how = self._choice(self.pages[number])
        if name is not None:
            record.map(number, name)
            self.how[number] = how
        elif number in record.numbers:
            del record.numbers[number]
            self.how.pop(number, None)
        return how

    def finish(self, archive, mailing_list):
        """Decide every page; match those left against the whole archive; keep the subjects of the
        pages still unmapped, and the attachments the pages link."""
        record = pipermail_archive(mailing_list, create=True)
        self.failures.clear()
        for number, page in sorted(self.pages.items()):
            for path in page.attachments:
                # A later page linking the same file quotes or resends it.
                if path not in record.attachments:
                    record.attachments[path] = number
            why_not = self._decide(record, number)
            if number in self.how:
                continue
            name, how = self._match_in_archive(archive, mailing_list, page)
            if name is not None:
                record.map(number, name)
                self.how[number] = how
                continue
            self.failures[why_not or how] += 1
            if record.unmapped.get(number) != page.subject:
                record.unmapped[number] = page.subject

    def _match_in_archive(self, archive, mailing_list, page):
        """A match among messages stored before this import (the list's original mail, say)."""
        messages = mailing_list.messages
        if page.message_id and page.message_id not in self.stored_under:
            name = message_id_hash(page.message_id)
            if name in messages or name in messages.tombstones:
                return name, BY_ID
        if page.link_id and page.link_id not in self.stored_under:
            message = messages.get(message_id_hash(page.link_id))
            if message is not None and date_agreement(page, _shown(message)) == EXACT:
                return message.__name__, BY_ID
        if page.timestamp is not None:
            low = high = int(page.timestamp)
        elif page.local_time is not None:
            naive = _naive_seconds(page.local_time)
            low, high = naive - _WIDEST_OFFSET, naive + _WIDEST_OFFSET
        else:
            return None, "the page shows no date"
        query = Eq("kind", "message") & Eq("list", mailing_list.address) & InRange("date", low, high)
        total, found = search(archive, query)
        agreeing = {m.__name__: agreement(page, _shown(m)) for m in found if m is not None}
        chosen = best_of(agreeing)
        if chosen is not None:
            return chosen, BY_FIELDS
        if any(agreeing.values()):
            return None, "several messages show its date, author and subject"
        if not total:
            return None, "no message of its date"
        return None, "no message of its date has its author and subject"

    def summary(self):
        """Lines for the import's report."""
        counts = Counter(self.how.values())
        unmapped = len(self.pages) - len(self.how)
        lines = [f"pipermail {self.folder}: {len(self.pages)} pages, {counts[BY_ID]} mapped {BY_ID}, "
                 f"{counts[BY_FIELDS]} {BY_FIELDS}, {unmapped} unmapped"]
        lines += [f"unmapped {count}: {reason}" for reason, count in self.failures.most_common()]
        return lines


def _shown(message):
    return Shown.of(message.date, message.subject, message.sender_name, message.sender_address)
