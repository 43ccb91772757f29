"""Per-list aggregates kept up to date as mail arrives, for pages and charts.

Pages never count by loading messages: they read these small BTrees, which
a subscriber to ``MessageArchived`` updates incrementally. Keys are chosen
so that concurrent writers touch different entries (BTree conflict
resolution merges those).
"""

from datetime import datetime, timedelta, timezone

from BTrees.OIBTree import OIBTree
from BTrees.OOBTree import OOBTree
from persistent import Persistent

from kittypyr.events import IMessageArchived
from kittypyr.resources.thread import month_of


def day_of(moment):
    return moment.date().isoformat()


class ListActivity(Persistent):
    """Counts of one list's messages by day, month, sender and thread."""

    def __init__(self):
        self.per_day = OIBTree()  # 'YYYY-MM-DD' -> messages
        self.per_month = OIBTree()  # 'YYYY-MM' -> messages
        self.sender_days = OOBTree()  # ('YYYY-MM-DD', address) -> messages
        self.sender_names = OOBTree()  # address -> latest display name
        self.thread_days = OOBTree()  # ('YYYY-MM-DD', thread key) -> messages
        self.participants = OIBTree()  # address -> messages, all time

    def record(self, message):
        day = day_of(message.date)
        month = month_of(message.date)
        _add(self.per_day, day, 1)
        _add(self.per_month, month, 1)
        address = message.sender_address
        if address:
            _add(self.sender_days, (day, address), 1)
            _add(self.participants, address, 1)
            if message.sender_name and self.sender_names.get(address) != message.sender_name:
                self.sender_names[address] = message.sender_name
        _add(self.thread_days, (day, message.thread), 1)

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

    def months(self):
        """[(year, month, messages)] oldest first."""
        return [(int(m[:4]), int(m[5:]), count) for m, count in self.per_month.items()]


def _add(tree, key, delta):
    tree[key] = tree.get(key, 0) + delta


def activity_of(mailing_list):
    """The list's ListActivity, created on first use by a writer."""
    activity = getattr(mailing_list, "activity", None)
    if activity is None:
        activity = mailing_list.activity = ListActivity()
    return activity


def on_message_archived(event):
    activity_of(event.mailing_list).record(event.message)


def rebuild_activity(mailing_list):
    """Recount a list's aggregates from its messages (for ``kittypyr reindex``)."""
    mailing_list.activity = ListActivity()
    for message in mailing_list.messages.values():
        mailing_list.activity.record(message)


def today():
    return datetime.now(timezone.utc).date()


def includeme(config):
    config.add_subscriber(on_message_archived, IMessageArchived)

