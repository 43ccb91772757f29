"""Per-list aggregates kept up to date as mail arrives, for pages and charts.

Pages never count by loading messages: they read these small BTrees, which
a subscriber to ``MessageArchived`` updates incrementally. Keys are chosen
so that concurrent writers touch different entries (BTree conflict
resolution merges those).
"""

import heapq
import itertools
from datetime import date, datetime, timedelta, timezone

from BTrees.Length import Length
from BTrees.OOBTree import OOBTree
from persistent import Persistent
from pyramid.traversal import find_root
from repoze.catalog.query import Eq

from kittypyr.events import (
    IMessageArchived,
    IMessageMoved,
    IMessageReplaced,
    IObjectAdded,
    IObjectModified,
    IObjectWillBeRemoved,
    IThreadRestarted,
)
from kittypyr.merging import Counts, KeyedCounts, converted
from kittypyr.resources import Message, Thread
from kittypyr.resources.thread import month_of


def day_of(moment):
    return moment.date().isoformat()


class ListActivity(Persistent):
    """Counts of one list's messages by day, month, sender and thread."""

    def __init__(self):
        # Counts merge what two writers add at once (kittypyr.merging):
        # messages archived together share their day, month and senders.
        self.per_day = Counts()  # 'YYYY-MM-DD' -> messages
        self.per_month = Counts()  # 'YYYY-MM' -> messages
        self.sender_days = KeyedCounts()  # ('YYYY-MM-DD', address) -> messages
        self.sender_names = OOBTree()  # address -> latest display name
        self.thread_days = KeyedCounts()  # ('YYYY-MM-DD', thread key) -> messages
        self.participants = Counts()  # address -> messages, all time
        self.thread_starts = OOBTree()  # (start timestamp, thread key) -> None
        self.add_orders()

    def add_orders(self):
        """The orders pages list threads and senders in, each read from its front (see ``file_thread``)."""
        # A BTree is cheap to read from its first key onwards and costly
        # backwards (each step back walks its buckets from the first), so
        # what a page shows first sorts first: newest and largest negated.
        # Each thread keeps the rank these orders filed it under (Thread.filed_rank).
        self.by_activity = OOBTree()  # (-last active, thread key) -> None
        self.by_size = OOBTree()  # (-messages, -last active, thread key) -> None
        self.month_by_activity = OOBTree()  # (month started, -last active, thread key) -> None
        self.month_threads = Counts()  # 'YYYY-MM' -> threads started that month
        self.thread_attachments = Counts()  # thread key -> its messages with attachments
        # (-band, address) -> None for senders of SENDER_BAND_FLOOR messages or
        # more, band the bit length of their count: it changes at a power of
        # two only, so that two writers counting one sender's messages at once
        # (which ``participants`` merges) seldom both move the sender.
        self.sender_bands = OOBTree()

    def thread_started(self, thread):
        self.thread_starts[_start_key(thread)] = None

    def thread_gone(self, thread, start=None):
        """Forget ``thread``'s start (``start``, if it is not its present one)."""
        self.thread_starts.pop(_start_key(thread, start), None)

    def file_thread(self, thread):
        """Rank ``thread`` by its present start, last activity and size; write nothing if they are unchanged."""
        rank = rank_of(thread)
        filed = thread.filed_rank
        if filed == rank:
            return
        if filed is not None:
            self._take_out(thread.__name__, filed)
        thread.filed_rank = rank
        if rank is not None:
            self.add_to_orders(thread.__name__, rank)

    def unfile_thread(self, thread):
        """Take ``thread`` out of the thread orders."""
        filed = thread.filed_rank
        if filed is not None:
            thread.filed_rank = None
            self._take_out(thread.__name__, filed)

    def add_to_orders(self, key, rank):
        """File the thread named ``key`` under ``rank`` (from ``rank_of``), which none of the orders holds it under."""
        month, last, size = rank
        self.by_activity[(-last, key)] = None
        self.by_size[(-size, -last, key)] = None
        self.month_by_activity[(month, -last, key)] = None
        _add(self.month_threads, month, 1)

    def _take_out(self, key, rank):
        month, last, size = rank
        self.by_activity.pop((-last, key), None)
        self.by_size.pop((-size, -last, key), None)
        self.month_by_activity.pop((month, -last, key), None)
        _add(self.month_threads, month, -1)

    def active_thread_keys(self, start=0, size=10, skip=()):
        """Keys of the threads from the ``start``-th, latest activity first, leaving out the keys in ``skip``."""
        keys = (key for _, key in self.by_activity.keys() if key not in skip)
        return list(itertools.islice(keys, start, start + size))

    def largest_thread_keys(self, limit=10):
        """Keys of the threads with the most messages, most first (of two, the latest active)."""
        return [entry[-1] for entry in itertools.islice(self.by_size.keys(), limit)]

    def month_thread_count(self, month):
        """How many threads started in ``month`` ('YYYY-MM')."""
        return self.month_threads.get(month, 0)

    def month_thread_keys(self, month, start, size, by_start=False):
        """Keys of the threads started in ``month`` from the ``start``-th: latest activity first,
        or with ``by_start`` the first started first."""
        if by_start:
            first = datetime(int(month[:4]), int(month[5:]), 1, tzinfo=timezone.utc)
            following = (first + timedelta(days=31)).replace(day=1)
            keys = self.thread_starts.keys(min=(int(first.timestamp()), ""),
                                           max=(int(following.timestamp()), ""), excludemax=True)
        else:
            keys = self.month_by_activity.keys(min=(month,), max=(month + HIGHEST,))
        return [entry[-1] for entry in itertools.islice(keys, start, start + size)]

    def has_attachment(self, thread_key):
        return thread_key in self.thread_attachments

    def newest_thread_keys(self, limit=10):
        """Keys of the threads started last, newest first."""
        found = []
        entry = _last_key(self.thread_starts)
        while entry is not None and len(found) < limit:
            found.append(entry[1])
            entry = _key_before(self.thread_starts, entry)
        return found

    def neighbours(self, thread):
        """``(older key, newer key)``: the threads started just before and after ``thread``."""
        key = _start_key(thread)
        before = _key_before(self.thread_starts, key)
        after = next(iter(self.thread_starts.keys(min=key, excludemin=True)), None)
        return (before[1] if before else None), (after[1] if after else None)

    def record(self, message):
        day = day_of(message.date)
        month = month_of(message.date)
        _add(self.per_day, day, 1)
        _add(self.per_month, month, 1)
        address = message.sender_address
        if address:
            _add(self.sender_days, (day, address), 1)
            self._count_sender(address, 1)
            if message.sender_name and self.sender_names.get(address) != message.sender_name:
                self.sender_names[address] = message.sender_name
                self._senders_changed()
        _add(self.thread_days, (day, message.thread), 1)
        if message.attachments:
            _add(self.thread_attachments, message.thread, 1)

    def gained_attachments(self, message):
        """``message``, archived without attachments, now has some (files kept apart, added since)."""
        _add(self.thread_attachments, message.thread, 1)

    def forget(self, message, thread_key=None):
        """Take a deleted message out of every count (it was recorded under ``thread_key``)."""
        day = day_of(message.date)
        _add(self.per_day, day, -1)
        _add(self.per_month, month_of(message.date), -1)
        address = message.sender_address
        if address:
            _add(self.sender_days, (day, address), -1)
            self._count_sender(address, -1)
            if address not in self.participants:
                # Their last message here is gone: so is their name.
                self.sender_names.pop(address, None)
        _add(self.thread_days, (day, thread_key or message.thread), -1)
        if message.attachments:
            _add(self.thread_attachments, thread_key or message.thread, -1)

    def rename_sender(self, address, name):
        """Name ``address`` ``name`` (nothing, when empty)."""
        if self.sender_names.get(address, "") == name:
            return
        if name:
            self.sender_names[address] = name
        else:
            self.sender_names.pop(address, None)
        self._senders_changed()

    def _count_sender(self, address, delta):
        before = self.participants.get(address, 0)
        _add(self.participants, address, delta)
        if not before or not before + delta:
            self._senders_changed()
        band, new_band = _band(before), _band(before + delta)
        if band != new_band:
            if band:
                self.sender_bands.pop((-band, address), None)
            if new_band:
                self.sender_bands[(-new_band, address)] = None

    def _senders_changed(self):
        # A Length merges two writers' increments, and a sender comes or goes,
        # or changes name, seldom enough that the record costs nothing.
        changes = getattr(self, "senders_changes", None)
        if changes is None:
            changes = self.senders_changes = Length()
        changes.change(1)

    @property
    def senders_version(self):
        """A number that moves whenever a sender comes, goes or changes name (0 in archives older than it)."""
        changes = getattr(self, "senders_changes", None)
        return changes() if changes is not None else 0

    def moved(self, message, old_thread_key):
        """Count ``message`` for its new thread, no longer for ``old_thread_key``."""
        day = day_of(message.date)
        _add(self.thread_days, (day, old_thread_key), -1)
        _add(self.thread_days, (day, message.thread), 1)
        if message.attachments:
            _add(self.thread_attachments, old_thread_key, -1)
            _add(self.thread_attachments, message.thread, 1)

    def daily_counts(self, end, days):
        """[(date, count)] for the ``days`` days up to and including ``end``."""
        start = end - timedelta(days=days - 1)
        counts = dict(self.per_day.items(start.isoformat(), end.isoformat()))
        return [
            (start + timedelta(days=n), counts.get((start + timedelta(days=n)).isoformat(), 0))
            for n in range(days)
        ]

    def _window(self, tree, end, days):
        start = (end - timedelta(days=days - 1)).isoformat()
        totals = {}
        for (day, key), count in tree.items((start, ""), (end.isoformat(), "\uffff")):
            totals[key] = totals.get(key, 0) + count
        return totals

    def top_senders(self, end, days=30, limit=10):
        """[(address, display name, messages)] most active first, over the window."""
        totals = self._window(self.sender_days, end, days)
        ranked = sorted(totals.items(), key=lambda item: (-item[1], item[0]))[:limit]
        return [(address, self.sender_names.get(address, ""), count) for address, count in ranked]

    def participant_count(self, end, days=30):
        return len(self._window(self.sender_days, end, days))

    def busiest_threads(self, end, days=30, limit=10):
        """[(thread key, messages in the window)] busiest first."""
        totals = self._window(self.thread_days, end, days)
        return sorted(totals.items(), key=lambda item: (-item[1], item[0]))[:limit]

    def newest_day(self):
        """The date of the list's newest message, or None for an empty list."""
        if not self.per_day:
            return None
        return date.fromisoformat(self.per_day.maxKey())

    def top_senders_ever(self, limit=10):
        """[(address, display name, messages)] most messages first, over the whole archive.

        Read from the front of ``sender_bands`` down to the band that holds
        the ``limit``-th sender: neither the list's messages nor all of its
        senders. A list with fewer such senders ranks all of ``participants``.
        """
        candidates, last_band = [], None
        for band, address in self.sender_bands.keys():
            if len(candidates) >= limit and band != last_band:
                break
            candidates.append(address)
            last_band = band
        counts = self.participants
        if len(candidates) < limit:
            ranked = heapq.nsmallest(limit, counts.items(), key=lambda item: (-item[1], item[0]))
        else:
            ranked = sorted(((address, counts[address]) for address in candidates),
                            key=lambda item: (-item[1], item[0]))[:limit]
        return [(address, self.sender_names.get(address, ""), count) for address, count in ranked]

    def months(self):
        """[(year, month, messages)] oldest first."""
        return [(int(m[:4]), int(m[5:]), count) for m, count in self.per_month.items()]

    def message_count_between(self, start, end):
        """How many messages are dated from the day ``start`` to the day before ``end`` (dates).

        Whole months are read from ``per_month``, the days of a month the
        span cuts from ``per_day``: at most two months of days, whatever
        the span.
        """
        if start >= end:
            return 0
        whole_from = start if start.day == 1 else _month_after(start)
        whole_to = end.replace(day=1)
        if whole_from >= whole_to:
            return _sum(self.per_day, start.isoformat(), end.isoformat())
        return (_sum(self.per_day, start.isoformat(), whole_from.isoformat())
                + _sum(self.per_month, month_of(whole_from), month_of(whole_to))
                + _sum(self.per_day, whole_to.isoformat(), end.isoformat()))


def _month_after(day):
    return date(day.year + (day.month == 12), day.month % 12 + 1, 1)


def _sum(counts, first, end):
    """The sum of ``counts`` from the key ``first`` to the key before ``end``."""
    return sum(counts.values(first, end, excludemax=True)) if first < end else 0


def _start_key(thread, start=None):
    return (int((start or thread.date_started).timestamp()), thread.__name__)


# Above any thread key (Message-ID hashes are ASCII): the end of a range of keys.
HIGHEST = "\uffff"


def rank_of(thread):
    """``(month started, last active timestamp, messages)`` of ``thread``, or None while it has no date."""
    if thread.date_started is None or thread.last_date is None:
        return None
    return (month_of(thread.date_started), int(thread.last_date.timestamp()), len(thread))


# Senders with fewer messages are ranked by ``participants`` alone.
SENDER_BAND_FLOOR = 16


def _band(count):
    """The band of a sender's message count: its bit length, 0 below SENDER_BAND_FLOOR."""
    return count.bit_length() if count >= SENDER_BAND_FLOOR else 0


def _last_key(tree):
    return tree.maxKey() if tree else None


def _key_before(tree, key):
    """The largest ``(timestamp, thread key)`` of ``tree`` below ``key``, or None.

    Found from the top of the tree down (``maxKey``), never by stepping
    back through its buckets, which loads every bucket before ``key``.
    """
    seconds, _ = key
    same_second = None
    for same_second in tree.keys(min=(seconds, ""), max=key, excludemax=True):
        pass
    if same_second is not None:
        return same_second
    try:
        return tree.maxKey((seconds - 1, HIGHEST))
    except ValueError:
        return None


def _add(tree, key, delta):
    count = tree.get(key, 0) + delta
    if count > 0:
        tree[key] = count
    elif key in tree:
        del tree[key]


COUNT_TREES = {"per_day": Counts, "per_month": Counts, "sender_days": KeyedCounts,
               "thread_days": KeyedCounts, "participants": Counts}


def add_orders(mailing_list, messages_with_attachments):
    """Give an older list's activity its orders of threads and senders, filled from its threads and counts.

    Each thread is read once; of the messages, only
    ``messages_with_attachments`` (the list's, found by the caller).
    """
    activity = getattr(mailing_list, "activity", None)
    if activity is None or getattr(activity, "by_activity", None) is not None:
        return
    activity.add_orders()
    for thread in mailing_list.threads.values():
        file_anew(activity, thread)
    for address, count in activity.participants.items():
        if _band(count):
            activity.sender_bands[(-_band(count), address)] = None
    for message in messages_with_attachments:
        _add(activity.thread_attachments, message.thread, 1)


def merge_concurrent_counts(mailing_list):
    """Move an older list's counts into trees that merge concurrent changes."""
    activity = getattr(mailing_list, "activity", None)
    if activity is None:
        return
    for name, kind in COUNT_TREES.items():
        setattr(activity, name, converted(getattr(activity, name), kind))


def activity_of(mailing_list):
    """The list's ListActivity, created on first use by a writer."""
    activity = getattr(mailing_list, "activity", None)
    if activity is None:
        activity = mailing_list.activity = ListActivity()
    return activity


def on_message_archived(event):
    activity_of(event.mailing_list).record(event.message)


def on_message_replaced(event):
    """A rebuilt message's original took its place: counted by its own date and sender, not the copy's."""
    activity = activity_of(event.message.mailing_list)
    activity.forget(event.before, event.before.thread)
    activity.record(event.message)


def on_thread_added(event):
    if isinstance(event.object, Thread):
        activity = activity_of(event.object.mailing_list)
        if event.object.date_started is not None:
            activity.thread_started(event.object)
        activity.file_thread(event.object)


def on_thread_modified(event):
    """A thread that grew, shrank or changed its dates moves in the thread orders."""
    if isinstance(event.object, Thread) and event.object.__parent__ is not None:
        activity_of(event.object.mailing_list).file_thread(event.object)


def on_thread_removed(event):
    if isinstance(event.object, Thread):
        activity = activity_of(event.object.mailing_list)
        if event.object.date_started is not None:
            activity.thread_gone(event.object)
        activity.unfile_thread(event.object)


def on_message_removed(event):
    """A deleted message leaves every count, and its sender's name unless another message bears it."""
    message = event.object
    if not isinstance(message, Message):
        return
    activity = activity_of(message.mailing_list)
    activity.forget(message)
    address = message.sender_address
    if address in activity.participants and activity.sender_names.get(address) == message.sender_name:
        activity.rename_sender(address, _name_left(message))


def _name_left(message):
    """The name on the newest other message of ``message``'s sender in its list ("" if none)."""
    from kittypyr.catalog import Narrowed, search

    query = Narrowed(Eq("sender", message.sender_address.lower()), list=message.mailing_list.address)
    # The message being deleted may still be catalogued: a second is looked at then.
    _, newest = search(find_root(message), query, sort_index="date", reverse=True, limit=2)
    for other in newest:
        if other is not message:
            return other.sender_name
    return ""


def on_message_moved(event):
    activity_of(event.message.mailing_list).moved(event.message, event.old_thread)


def on_thread_restarted(event):
    """Keep the chronology of thread starts in step with a thread's new first message."""
    thread = event.thread
    activity = activity_of(thread.mailing_list)
    if event.old_start is not None:
        activity.thread_gone(thread, event.old_start)
    if thread.date_started is not None:
        activity.thread_started(thread)
    activity.file_thread(thread)


def file_anew(activity, thread):
    """File ``thread`` in ``activity``'s orders, new and holding none of its threads, whatever rank it kept."""
    rank = rank_of(thread)
    if thread.filed_rank != rank:  # a thread whose rank stands is not written again
        thread.filed_rank = rank
    if rank is not None:
        activity.add_to_orders(thread.__name__, rank)


def rebuild_activity(mailing_list):
    """Recount a list's aggregates from its messages (for ``kittypyr reindex``)."""
    activity = mailing_list.activity = ListActivity()
    for message in mailing_list.messages.values():
        activity.record(message)
    for thread in mailing_list.threads.values():
        if thread.date_started is not None:
            activity.thread_started(thread)
        file_anew(activity, thread)


# Threads given their rank between two savepoints of the upgrade.
RANKED_BETWEEN_SAVEPOINTS = 5000


def rank_threads_on_themselves(mailing_list):
    """Move the ranks an older list's ``activity.thread_ranks`` filed its threads under onto the threads.

    A thread the tree does not hold (it had no date) keeps none. Every
    RANKED_BETWEEN_SAVEPOINTS threads the changes go to a savepoint and the
    connection's cache is trimmed, so that a list of a million threads is
    not held in memory whole until the commit.
    """
    activity = getattr(mailing_list, "activity", None)
    ranks = getattr(activity, "thread_ranks", None) if activity is not None else None
    if ranks is None:
        return
    threads = mailing_list.threads
    connection = mailing_list._p_jar
    for done, (key, rank) in enumerate(ranks.items(), 1):
        thread = threads.get(key)
        if thread is not None:
            thread.filed_rank = rank
        if connection is not None and done % RANKED_BETWEEN_SAVEPOINTS == 0:
            connection.transaction_manager.get().savepoint(optimistic=True)
            connection.cacheGC()
    del activity.thread_ranks


def today():
    return datetime.now(timezone.utc).date()


# The window of a list's figures: top posters, busiest threads, charts.
WINDOW_DAYS = 30


class Window:
    """The ``days`` days a list's figures count, ending ``end``.

    They end today, unless the list's newest message is older than the
    window: then they end on that message's day, so that an imported
    archive or a quiet list still shows its last month of life.
    """

    def __init__(self, end, days, is_recent):
        self.end = end
        self.days = days
        self.is_recent = is_recent

    @property
    def caption(self):
        """'the last 30 days', or 'the 30 days up to 2019-11-28'."""
        if self.is_recent:
            return f"the last {self.days} days"
        return f"the {self.days} days up to {self.end.isoformat()}"


def window_of(activity, day, days=WINDOW_DAYS):
    """The ``Window`` of ``activity``'s figures, seen on ``day``."""
    newest = activity.newest_day()
    if newest is not None and newest < day - timedelta(days=days - 1):
        return Window(newest, days, False)
    return Window(day, days, True)


def includeme(config):
    config.add_subscriber(on_message_archived, IMessageArchived)
    config.add_subscriber(on_message_replaced, IMessageReplaced)
    config.add_subscriber(on_thread_added, IObjectAdded)
    config.add_subscriber(on_thread_modified, IObjectModified)
    config.add_subscriber(on_thread_removed, IObjectWillBeRemoved)
    config.add_subscriber(on_message_removed, IObjectWillBeRemoved)
    config.add_subscriber(on_message_moved, IMessageMoved)
    config.add_subscriber(on_thread_restarted, IThreadRestarted)

