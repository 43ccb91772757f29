"""Administration: the audit log, and the transient folders of admin pages.

``/admin/`` (site administrators) and ``/list/<address>/admin/`` (the list's
owners and moderators) are made by traversal and hold no state; their
permissions come from the ACLs above them. The audit log is an attribute of
the Archive, out of traversal's reach like the catalog.
"""

from datetime import datetime, timezone

from BTrees.Length import Length
from BTrees.LLBTree import LLTreeSet
from BTrees.LOBTree import LOBTree
from BTrees.OOBTree import OOBTree
from persistent import Persistent


class SiteAdmin:
    """``/admin/``: pages for site administrators."""

    def __init__(self, archive):
        self.__name__ = "admin"
        self.__parent__ = archive
        self.archive = archive


class ListAdmin:
    """``/list/<address>/admin/``: pages for one list's owners and moderators."""

    def __init__(self, mailing_list):
        self.__name__ = "admin"
        self.__parent__ = mailing_list
        self.mailing_list = mailing_list


class AuditEntry:
    """One administrative act: who, when, what, why. Immutable once logged.

    ``messages`` are ``(list address, hash, thread key, ISO date)`` of the
    messages concerned: a log entry names what it touched by place and date,
    never by content, so that the log keeps none of what was deleted.
    """

    def __init__(self, action, actor, actor_name, lists, summary, reason="", messages=(), threads=(),
                 sender=None, site_wide=False, when=None):
        self.key = None
        self.when = when or datetime.now(timezone.utc)
        self.action = action
        self.actor = actor
        self.actor_name = actor_name
        self.lists = tuple(lists)
        self.summary = summary
        self.reason = reason
        self.messages = tuple(messages)
        self.threads = tuple(threads)
        self.sender = sender
        # Part of one act on every list (a sender's removal everywhere).
        self.site_wide = site_wide


class AuditLog(Persistent):
    """Every administrative act, newest last, also findable per list.

    Keyed by the microsecond of the act, so that two administrators acting
    at once write different keys (which BTree conflict resolution merges).
    """

    def __init__(self):
        self.entries = LOBTree()
        self.by_list = OOBTree()  # list address -> LLTreeSet of entry keys
        self._count = Length()

    def __len__(self):
        return self._count()

    def add(self, entry):
        """Log ``entry``; return its key."""
        key = int(entry.when.timestamp() * 1_000_000)
        while key in self.entries:
            key += 1
        entry.key = key
        self.entries[key] = entry
        self._count.change(1)
        for address in entry.lists:
            keys = self.by_list.get(address)
            if keys is None:
                keys = self.by_list[address] = LLTreeSet()
            keys.add(key)
        return key

    def count_for(self, list_address):
        keys = self.by_list.get(list_address)
        return len(keys) if keys is not None else 0

    def newest(self, start=0, size=50, list_address=None):
        """A page of entries, newest first; only ``list_address``'s when given."""
        if list_address is None:
            keys = self.entries.keys()
        else:
            found = self.by_list.get(list_address)
            if found is None:
                return []
            keys = found.keys()
        count = len(keys)
        chosen = [keys[i] for i in range(count - 1 - start, max(count - 1 - start - size, -1), -1)]
        return [self.entries[key] for key in chosen]
