"""A conversation: a tree of messages kept as hashes, not as children."""

import collections

from BTrees.OOBTree import OOBTree, OOTreeSet
from persistent import Persistent

# The key under which a thread keeps its top-level messages in ``children``.
ROOTS = ""

# Up to this many messages a thread keeps its members and its tree of
# replies in its own record, as a set and a dict: the thread's record is
# rewritten with every new message anyway, and as BTrees of their own
# they were two more records a thread, written with it every time (most
# threads are a few messages). A larger thread's are BTrees, in which a
# new message rewrites a bucket, not the whole. (30 is what an OOBTree
# holds in one bucket, the size from which a tree spreads over records.)
SMALL_THREAD = 30

# Up to this many replies a message keeps them as a sorted tuple in the
# map of children; more are an OOTreeSet of their own. A tuple is rewritten
# whole with each new reply: an announcement answered a thousand times
# wrote its thousand replies again with every one, the storage growing with
# the square of the thread. In a tree set a new reply rewrites one bucket.
SMALL_REPLIES = 30


def _entries(sorted_entries):
    """One message's ``(timestamp, hash)`` replies, already sorted, in the form their number keeps."""
    if len(sorted_entries) > SMALL_REPLIES:
        return OOTreeSet(sorted_entries)
    return tuple(sorted_entries)


def _with_entry(entries, entry):
    """``entries`` (a tuple or a tree set) with ``entry`` added: a new tuple, or the tree set changed in place."""
    if isinstance(entries, tuple):
        if len(entries) < SMALL_REPLIES:
            return tuple(sorted(entries + (entry,)))
        entries = OOTreeSet(entries)
    entries.add(entry)
    return entries


def _without_name(entries, name, timestamp=None):
    """``entries`` without the one of ``name`` (at ``timestamp`` when known): a new tuple, or the tree set changed.

    Empty entries come back as an empty tuple, for the caller to drop.
    """
    if isinstance(entries, tuple):
        return tuple(entry for entry in entries if entry[1] != name)
    if timestamp is not None and (timestamp, name) in entries:
        entries.remove((timestamp, name))
    else:
        for entry in [entry for entry in entries if entry[1] == name]:
            entries.remove(entry)
    return entries if entries else ()


def _first(entries):
    """The earliest of ``entries`` (a tuple or a tree set, not empty)."""
    return entries[0] if isinstance(entries, tuple) else entries.minKey()


def _members_and_children(members, children):
    """``members`` (names) and ``children`` (parent -> sorted entries) in the form a thread of their size keeps."""
    children = {parent: _entries(entries) for parent, entries in children.items()}
    if len(members) > SMALL_THREAD:
        return OOTreeSet(members), OOBTree(children)
    return set(members), children


def month_of(date):
    return f"{date.year:04d}-{date.month:02d}"


def _bumped(counts, key, delta):
    """A copy of the dict ``counts`` with ``key`` moved by ``delta`` (dropped at 0).

    Copied, not mutated, so that assigning it marks the thread changed.
    """
    counts = dict(counts)
    count = counts.get(key, 0) + delta
    if count > 0:
        counts[key] = count
    else:
        counts.pop(key, None)
    return counts


class Thread(Persistent):
    """A tree of messages of one mailing list.

    Messages stay in the list's ``message`` folder (their URLs never move);
    the thread holds their hashes, the parent-to-children map and the
    aggregates a listing needs (count, dates, months, participants), all
    updated incrementally.
    """

    __name__ = None
    __parent__ = None
    # (month started, last active timestamp, messages) as its list's thread
    # orders last filed the thread (kittypyr.stats), None while unfiled. It
    # is kept here, in the record each new message of the thread rewrites
    # anyway, where a tree of the list keyed by thread hash cost every
    # message a bucket read and written from anywhere in a tree that grows
    # with the list.
    filed_rank = None

    def __init__(self):
        self.starter = None
        self.catalog_docid = None  # set by kittypyr.catalog when catalogued
        self.subject = ""
        self.date_started = None
        self.last_date = None
        # A set and a dict while the thread is small, then BTrees (see
        # SMALL_THREAD). Changing the set or the dict in place does not mark
        # the thread changed by itself: every method that does so also
        # assigns another attribute (the count, the months) in the same
        # transaction, which does.
        self.members = set()
        self._count = 0
        # parent hash (ROOTS for top-level messages) -> sorted tuple of (timestamp, hash)
        self.children = {}
        # Small plain dicts: the thread record is rewritten on every new
        # message anyway, and separate BTrees would triple its object count.
        self.months = {}
        self.participants = {}

    @property
    def key(self):
        return self.__name__

    @property
    def mailing_list(self):
        return self.__parent__.__parent__

    def __len__(self):
        return self._count

    @property
    def message_count(self):
        return self._count

    def _messages(self):
        return self.mailing_list.messages

    def add_message(self, message):
        """Record ``message`` (whose ``parent`` is set) as a member."""
        self.members.add(message.__name__)
        self._count += 1
        parent = message.parent if message.parent in self.members else ROOTS
        entries = self.children.get(parent, ())
        updated = _with_entry(entries, (message.timestamp, message.__name__))
        if updated is not entries:
            self.children[parent] = updated
        self.months = _bumped(self.months, month_of(message.date), 1)
        if message.sender_address:
            self.participants = _bumped(self.participants, message.sender_address, 1)
        if self.last_date is None or message.date > self.last_date:
            self.last_date = message.date
        if parent == ROOTS:
            self._refresh_starter()
        if self._count > SMALL_THREAD and not isinstance(self.members, OOTreeSet):
            self.members, self.children = _members_and_children(self.members, self.children)

    def remove_message(self, message):
        """Forget ``message`` alone; its children become children of its parent."""
        name = message.__name__
        self.members.remove(name)
        self._count -= 1
        parent = message.parent if message.parent in self.members else ROOTS
        siblings = _without_name(self.children.get(parent, ()), name, message.timestamp)
        for orphan in self.children.pop(name, ()):
            siblings = _with_entry(siblings, orphan)
        if siblings:
            self.children[parent] = siblings
        elif parent in self.children:
            del self.children[parent]
        self.months = _bumped(self.months, month_of(message.date), -1)
        if message.sender_address:
            self.participants = _bumped(self.participants, message.sender_address, -1)
        if self.last_date is None or message.date >= self.last_date:
            # Only the latest message's leaving moves the date (finding the
            # next one loads every member).
            self._refresh_dates()
        self._refresh_starter()

    def refile(self, message, before):
        """File ``message`` again by its date and sender, which were ``before.date`` and ``before.sender_address``.

        Returns whether anything changed (the original of a rebuilt message
        took its place with another date or sender).
        """
        if (before.date, before.sender_address) == (message.date, message.sender_address):
            return False
        name = message.__name__
        parent = message.parent if message.parent in self.members else ROOTS
        siblings = _without_name(self.children.get(parent, ()), name)
        self.children[parent] = _with_entry(siblings, (message.timestamp, name))
        self.months = _bumped(_bumped(self.months, month_of(before.date), -1), month_of(message.date), 1)
        if before.sender_address:
            self.participants = _bumped(self.participants, before.sender_address, -1)
        if message.sender_address:
            self.participants = _bumped(self.participants, message.sender_address, 1)
        if self.last_date is None or message.date > self.last_date:
            self.last_date = message.date
        elif before.date >= self.last_date:
            self._refresh_dates()
        self._refresh_starter()
        return True

    def take_subtree(self, root_hash):
        """Remove the messages from ``root_hash`` down; return them, root first.

        Iterative on purpose: threads can be thousands of messages deep.
        """
        messages = self._messages()
        root = messages[root_hash]
        parent = root.parent if root.parent in self.members else ROOTS
        remaining = _without_name(self.children.get(parent, ()), root_hash, root.timestamp)
        if remaining:
            self.children[parent] = remaining
        elif parent in self.children:
            del self.children[parent]
        taken = []
        pending = [root_hash]
        months = collections.Counter(self.months)
        participants = collections.Counter(self.participants)
        while pending:
            name = pending.pop()
            message = messages[name]
            taken.append(message)
            for _, child in self.children.pop(name, ()):
                pending.append(child)
            self.members.remove(name)
            self._count -= 1
            months[month_of(message.date)] -= 1
            if message.sender_address:
                participants[message.sender_address] -= 1
        self.months = {k: v for k, v in months.items() if v > 0}
        self.participants = {k: v for k, v in participants.items() if v > 0}
        self._refresh_dates()
        self._refresh_starter()
        return taken

    def recount(self, messages):
        """Make ``messages`` (each with its ``parent`` set) the members, and recount every aggregate.

        For ``kittypyr check --repair``: what ``add_message`` keeps up one
        message at a time, derived again from the messages themselves. A
        message whose parent is not among them is a first message.
        """
        names = {message.__name__ for message in messages}
        self._count = len(names)
        children = collections.defaultdict(list)
        months = collections.Counter()
        participants = collections.Counter()
        for message in messages:
            parent = message.parent if message.parent in names else ROOTS
            children[parent].append((message.timestamp, message.__name__))
            months[month_of(message.date)] += 1
            if message.sender_address:
                participants[message.sender_address] += 1
        self.members, self.children = _members_and_children(
            names, {parent: sorted(entries) for parent, entries in children.items()})
        self.months = dict(months)
        self.participants = dict(participants)
        self.last_date = max((message.date for message in messages), default=None)
        self._refresh_starter()

    def _refresh_starter(self):
        roots = self.children.get(ROOTS, ())
        if not roots:
            self.starter = None
            self.date_started = None
            self.subject = ""
            return
        starter = self._messages()[_first(roots)[1]]
        self.starter = starter.__name__
        self.date_started = starter.date
        self.subject = starter.subject

    def _refresh_dates(self):
        messages = self._messages()
        latest = None
        for name in self.members:
            date = messages[name].date
            if latest is None or date > latest:
                latest = date
        self.last_date = latest

    def walk(self):
        """Yield ``(message_hash, depth)`` in reading order, depth-first by date."""
        for name, depth, _ in self.reading_order():
            yield name, depth

    def reading_order(self, by_date=False):
        """``(hash, depth, timestamp)`` of every message in reading order: as replies hang, or ``by_date``.

        From the tree of replies: no message is loaded.
        """
        if by_date:
            return [(name, 0, stamp) for stamp, name in self.by_date()]
        order = []
        stack = [(entry, 0) for entry in reversed(self.replies_to(ROOTS))]
        while stack:
            (stamp, name), depth = stack.pop()
            order.append((name, depth, stamp))
            stack.extend((entry, depth + 1) for entry in reversed(self.replies_to(name)))
        return order

    def by_date(self):
        """``(timestamp, hash)`` of every message, oldest first (the ``By date`` reading order).

        From the tree of replies: no message is loaded.
        """
        return sorted(entry for entries in self.children.values() for entry in entries)

    def replies_to(self, name):
        """The ``(timestamp, hash)`` of the direct replies to message ``name``, oldest first.

        ``ROOTS`` for the thread's first messages.
        """
        entries = self.children.get(name, ())
        return entries if isinstance(entries, tuple) else tuple(entries)

    def messages(self):
        """The member messages in reading order."""
        messages = self._messages()
        return [messages[name] for name, _ in self.walk()]
