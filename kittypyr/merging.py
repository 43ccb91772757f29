"""BTrees whose buckets merge what concurrent writers do to the same key.

BTrees' own conflict resolution merges two transactions that touched
*different* keys of a bucket, and fails on the same key changed twice. Two
messages archived at the same moment by two processes change the same keys
all the time: this month's and this day's counts, a sender's post count, the
postings of every word they share. Each tree here knows what its values
mean, and so how to merge them:

- ``Counts`` / ``KeyedCounts``: values are counts, a missing key is 0; two
  changes of one count add up (+1 and +1 from a 5 make 7).
- ``AppendedBytes`` (the text index's postings): values are packed records
  that writers append to; two appends to one value keep both.
- ``AgeingCounts``: ``KeyedCounts`` of recent events (wrong passwords),
  forgotten a generation at a time once they are old.
- ``Entries``: any values, each key changed by one writer only, as BTrees
  merge them; but a value whose type changes (a tuple of docids that
  becomes a set of its own) is compared by record, where BTrees' own
  merge compares it with ``<`` and fails.

Whatever else both changed (the same key set to two different values, a
bucket split, a removal beside an append) is still a ConflictError, and
the request is run again. Values that are references to other records are
compared by record, never by ``==`` (which refuses to compare references
during conflict resolution).
"""

from BTrees.IOBTree import IOBTree, IOBucket
from BTrees.OIBTree import OIBTree, OIBucket
from BTrees.OOBTree import OOBTree, OOBucket
from persistent import Persistent
from ZODB.POSException import ConflictError

MISSING = object()


def _items_and_next(state):
    """``({key: value}, next bucket or None)`` of a bucket's pickled state."""
    if state is None:
        return {}, None
    items = state[0]
    return dict(zip(items[::2], items[1::2])), (state[1] if len(state) > 1 else None)


def same_value(this, that):
    """Whether two values (or MISSING) met in conflict resolution are the same."""
    if this is that:
        return True
    if this is MISSING or that is MISSING:
        return False
    try:
        return type(this) is type(that) and this == that
    except ValueError:  # two references to different records
        return False


def merge_bucket_states(old, committed, new, merge_value):
    """The merged state of a bucket that two writers changed from ``old``.

    ``merge_value(base, theirs, ours)`` (each possibly MISSING) decides a
    key both changed: it returns the merged value or MISSING, or raises
    ConflictError.
    """
    old_items, old_next = _items_and_next(old)
    committed_items, committed_next = _items_and_next(committed)
    new_items, new_next = _items_and_next(new)
    if not (same_value(old_next, committed_next) and same_value(old_next, new_next)):
        raise ConflictError("bucket split by concurrent writers")
    merged = {}
    for key in old_items.keys() | committed_items.keys() | new_items.keys():
        base = old_items.get(key, MISSING)
        theirs = committed_items.get(key, MISSING)
        ours = new_items.get(key, MISSING)
        if same_value(theirs, base):
            value = ours
        elif same_value(ours, base):
            value = theirs
        else:
            value = merge_value(base, theirs, ours)
        if value is not MISSING:
            merged[key] = value
    if not merged and old_next is not None:
        # An emptied bucket is unlinked from its tree: a change of structure.
        raise ConflictError("bucket emptied by concurrent writers")
    items = tuple(part for key in sorted(merged) for part in (key, merged[key]))
    return (items,) if old_next is None else (items, old_next)


def _single_bucket(state):
    """A small tree keeps its one bucket inside its own record: that bucket's state."""
    if state is None:
        return None
    if len(state) != 1:
        # A tree with buckets of their own changed its structure: no merge.
        raise ConflictError("tree structure changed by concurrent writers")
    return state[0][0]


def merge_tree_states(old, committed, new, merge_value):
    merged = merge_bucket_states(*map(_single_bucket, (old, committed, new)), merge_value)
    return ((merged,),) if merged[0] else None


def add_counts(base, theirs, ours):
    """Two changes of one count: both deltas, from ``base``."""
    counts = [0 if value is MISSING else value for value in (base, theirs, ours)]
    if not all(isinstance(count, int) for count in counts):
        raise ConflictError("a count changed to something else by concurrent writers")
    total = counts[1] + counts[2] - counts[0]
    if total < 0:
        raise ConflictError("a count below zero after concurrent changes")
    # Counts are removed at 0 (see kittypyr.stats._add).
    return total if total else MISSING


def append_bytes(base, theirs, ours):
    """Two appends to one packed value: the common start, then what each added."""
    prefix = b"" if base is MISSING else base
    if not (type(prefix) is bytes and type(theirs) is bytes and type(ours) is bytes
            and theirs.startswith(prefix) and ours.startswith(prefix)):
        raise ConflictError("a value changed otherwise than by appending, by concurrent writers")
    return theirs + ours[len(prefix):]


class CountsBucket(OIBucket):
    def _p_resolveConflict(self, old, committed, new):
        return merge_bucket_states(old, committed, new, add_counts)


class Counts(OIBTree):
    """String key -> count, merging concurrent changes of one count."""

    _bucket_type = CountsBucket

    def _p_resolveConflict(self, old, committed, new):
        return merge_tree_states(old, committed, new, add_counts)


class KeyedCountsBucket(OOBucket):
    def _p_resolveConflict(self, old, committed, new):
        return merge_bucket_states(old, committed, new, add_counts)


class KeyedCounts(OOBTree):
    """Any key (tuples too) -> count, merging concurrent changes of one count."""

    _bucket_type = KeyedCountsBucket

    def _p_resolveConflict(self, old, committed, new):
        return merge_tree_states(old, committed, new, add_counts)


class AppendedBytesBucket(IOBucket):
    def _p_resolveConflict(self, old, committed, new):
        return merge_bucket_states(old, committed, new, append_bytes)


class AppendedBytes(IOBTree):
    """Integer key -> packed bytes (or a record of its own), merging concurrent appends."""

    _bucket_type = AppendedBytesBucket

    def _p_resolveConflict(self, old, committed, new):
        return merge_tree_states(old, committed, new, append_bytes)


def changed_by_both(base, theirs, ours):
    """One key changed by both writers: nothing says how to merge it."""
    raise ConflictError("one entry changed by concurrent writers")


class EntriesBucket(OOBucket):
    def _p_resolveConflict(self, old, committed, new):
        return merge_bucket_states(old, committed, new, changed_by_both)


class Entries(OOBTree):
    """Any key -> any value, merging writers of different keys whatever their values' types.

    The catalog's sparse field indexes keep a docid tuple in the bucket
    while few documents share a value, and a set of their own past that:
    BTrees' merge compares an entry before and after with ``<``, which a
    tuple and a reference to a record refuse (an error logged with its
    traceback, and the request run again).
    """

    _bucket_type = EntriesBucket

    def _p_resolveConflict(self, old, committed, new):
        return merge_tree_states(old, committed, new, changed_by_both)


class AgeingCounts(Persistent):
    """Counts of recent events, shared by every process, that forget old ones by themselves.

    Keys are tuples whose callers put the event's time in them; counts go
    into the current generation, a ``KeyedCounts``, so two processes
    counting at once merge. The first count made once the current
    generation is ``lifetime`` seconds old starts a new one and drops the
    one before it whole: an event is kept at least ``lifetime`` and at most
    twice that, and forgetting walks over nothing. Two processes starting a
    generation at once conflict, and one of them runs again.
    """

    def __init__(self):
        self.current = KeyedCounts()
        self.previous = KeyedCounts()
        self.started = None

    def add(self, key, now, lifetime):
        """Count one more ``key`` at ``now`` (seconds, the same clock in every process)."""
        if self.started is None or now - self.started >= lifetime:
            recent = self.started is not None and now - self.started < 2 * lifetime
            self.previous = self.current if recent else KeyedCounts()
            self.current = KeyedCounts()
            self.started = now
        self.current[key] = self.current.get(key, 0) + 1

    def items(self, low, high):
        """``(key, count)`` pairs of both generations with ``low <= key <= high``, in key order."""
        found = {}
        for generation in (self.previous, self.current):
            for key, count in generation.items(low, high):
                found[key] = found.get(key, 0) + count
        return sorted(found.items())

    def remove(self, low, high):
        """Forget the keys from ``low`` to ``high``; write nothing when there are none."""
        for generation in (self.previous, self.current):
            for key in list(generation.keys(low, high)):
                del generation[key]

    def clear(self):
        self.__init__()

    def __len__(self):
        return len(self.previous) + len(self.current)


def converted(tree, kind):
    """``tree``'s entries in a new tree of type ``kind`` (for schema upgrades)."""
    if type(tree) is kind:
        return tree
    replacement = kind()
    replacement.update(tree)
    return replacement
