"""What is left of deleted messages and threads: a date and where they were.

A tombstone holds no word of what was deleted. It is a plain record kept
inside its container's BTree (not an object of its own, not a ``Message``),
so nothing counts, indexes or renders it; it only lets the old URL answer
410 Gone with a link to the conversation, and keeps the Message-ID hash
from being archived again. A message's keeps the digest of its body (its
``fingerprint``, never shown), and the moment its Date header said with
digests of its sender's address and subject, so that another post under
that Message-ID is told from the deleted one coming back in another form.
"""

from datetime import datetime, timezone

from kittypyr.msgid import writing_of


class Tombstone:
    """When a message (or a whole thread) was deleted, and where it sat.

    ``thread``: the key of the thread it was in; ``parent``: the hash of
    its parent message, or None. A thread's tombstone has neither.
    Immutable once made: it is pickled inside a BTree bucket.
    """

    # None in a tombstone made before it was kept, or a thread's.
    fingerprint = None
    # How the message came, so that another copy of its post is told from
    # another post reusing its id as it was while it lived
    # (kittypyr.archiving._same_mail): from Mailman's archiver or not, and
    # ``kittypyr.msgid.writing_of`` it (its Date, digests of its sender and
    # subject). None in a tombstone made before they were kept.
    by_mailman = None
    _writing = None
    # Kept in the clear by tombstones made before the digests were
    # (``kittypyr check --repair`` keeps digests instead: ``digested``).
    date = None
    sender_address = None

    def __init__(self, deleted_at=None, thread=None, parent=None, message=None):
        self.deleted_at = deleted_at or datetime.now(timezone.utc)
        self.thread = thread
        self.parent = parent
        if message is not None:
            self.fingerprint = message.fingerprint
            self.by_mailman = bool(message.by_mailman)
            self._writing = writing_of(message.date if message.dated_by_header else None, message.sender_address,
                                       message.subject)

    def digested(self):
        """This tombstone, keeping digests where it kept its sender's address and Date in the clear."""
        if "sender_address" not in vars(self):
            return self
        kept = Tombstone(self.deleted_at, self.thread, self.parent)
        kept.fingerprint, kept.by_mailman, kept._writing = self.fingerprint, self.by_mailman, self.writing
        return kept

    @property
    def writing(self):
        """``writing_of`` the deleted message, None if it is not known (a subject of None: not kept)."""
        if self._writing is None and self.sender_address is not None:
            return writing_of(self.date, self.sender_address, None)
        return self._writing

    def __repr__(self):
        return f"<Tombstone {self.deleted_at.isoformat()} thread={self.thread} parent={self.parent}>"


class _Gone:
    """What traversal finds where something was deleted: its tombstone, placed."""

    def __init__(self, name, container, tombstone):
        self.__name__ = name
        self.__parent__ = container
        self.tombstone = tombstone

    @property
    def mailing_list(self):
        return self.__parent__.__parent__

    @property
    def deleted_at(self):
        return self.tombstone.deleted_at


class DeletedMessage(_Gone):
    """``/list/<address>/message/<hash>/`` of a deleted message (made by traversal)."""

    def thread(self):
        """The live thread the message was in (followed through merges), or None."""
        key = self.tombstone.thread
        if key is None:
            return None
        threads = self.mailing_list.threads
        return threads.live(key)


class DeletedThread(_Gone):
    """``/list/<address>/thread/<key>/`` of a thread deleted whole (made by traversal)."""
