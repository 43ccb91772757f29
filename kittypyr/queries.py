"""The questions about a list's threads that pages ask, answered without walking containers."""

import heapq
from dataclasses import dataclass

from pyramid.traversal import find_root

from kittypyr.catalog import resources_of
from kittypyr.stats import activity_of


def recent_threads(mailing_list, limit=10):
    """Threads with the newest activity first, read from the front of the list's order of activity."""
    return mailing_list.threads.named(activity_of(mailing_list).active_thread_keys(0, limit))


def neighbour_threads(thread):
    """``(older, newer)``: the threads started just before and just after ``thread``.

    Read from the list's chronology of thread starts: a date-range query on
    the catalog would load a set for every distinct date in the archive.
    """
    mailing_list = thread.mailing_list
    threads = mailing_list.threads.data
    older, newer = activity_of(mailing_list).neighbours(thread)
    return threads.get(older) if older else None, threads.get(newer) if newer else None


def newest_messages(mailing_list, limit):
    """``mailing_list``'s ``limit`` newest messages, newest first, at a cost that does not grow with the list.

    See ``newest_passing``: a catalog query sorted by date would take every
    message of the list first.
    """
    archive = find_root(mailing_list)
    walk = newest_passing(archive, [mailing_list], limit)
    return list(resources_of(archive, walk.docids))


@dataclass
class DateWalk:
    """What ``newest_passing`` or ``oldest_passing`` found, and whether it looked at everything."""

    docids: list  # the first that passed, in the walk's order
    passed: int  # messages looked at that passed
    ended: bool  # whether every message dated in the span was looked at


def newest_passing(archive, mailing_lists, wanted, passes=None, span=None, most=None):
    """The ``wanted`` newest messages of ``mailing_lists`` that ``passes`` (docid -> bool), as a ``DateWalk``.

    Read from the lists' threads in order of latest activity: a thread last
    active before the ``wanted``-th newest message found so far holds none
    newer, and one last active before ``span`` (seconds ``[first, end)``)
    none in it. Each thread's messages are dated by the catalog (the thread
    index, then the date index), not loaded. So the cost follows how many
    messages are looked at before ``wanted`` pass, not the lists' sizes.

    ``most``: give up, returning None, once more messages than that were
    looked at (in the span or not) and the walk has not ended: the messages
    that pass are few, and their set is the cheaper way to them.
    """
    catalog = archive.catalog
    members = catalog["thread"].documents_with
    list_of, kind_of = catalog["list"]._rev_index.get, catalog["kind"]._rev_index.get
    date_of = catalog["date"]._rev_index.get
    first, end = span or (None, None)
    newest = []  # a heap of the (date, docid) found so far, at most ``wanted``
    seen = passed = 0
    orders = [_by_activity(mailing_list) for mailing_list in mailing_lists]
    for negated_last, key, address in heapq.merge(*orders):
        last = -negated_last
        if first is not None and last < first:
            break
        if len(newest) >= wanted and (not newest or last < newest[0][0]):
            return DateWalk(_newest_first(newest), passed, ended=False)
        if most is not None and seen > most:
            return None
        for docid in members(key):
            if list_of(docid) != address or kind_of(docid) != "message":
                continue
            seen += 1
            date = date_of(docid)
            if first is not None and not first <= date < end:
                continue
            if passes is not None and not passes(docid):
                continue
            passed += 1
            entry = (date, docid)
            if len(newest) < wanted:
                heapq.heappush(newest, entry)
            elif newest and entry > newest[0]:
                heapq.heapreplace(newest, entry)
    return DateWalk(_newest_first(newest), passed, ended=True)


def oldest_passing(archive, mailing_lists, wanted, passes=None, span=None, most=None):
    """The ``wanted`` oldest messages of ``mailing_lists`` that ``passes`` (docid -> bool), as a ``DateWalk`` (oldest first).

    Read from the date index from the first second of ``span`` (seconds
    ``[first, end)``) on, which is cheap forwards: a thread's start says
    little of its oldest message, a reply dated before it. Messages of one
    second come in docid order. ``most``: as ``newest_passing``, counting
    every document looked at, of other lists too.
    """
    catalog = archive.catalog
    addresses = {mailing_list.address for mailing_list in mailing_lists}
    list_of, kind_of = catalog["list"]._rev_index.get, catalog["kind"]._rev_index.get
    first, end = span or (None, None)
    oldest, seen, passed = [], 0, 0
    for date, held in catalog["date"]._fwd_index.items(min=first):
        if end is not None and date >= end:
            break
        if len(oldest) >= wanted:
            return DateWalk(oldest[:wanted], passed, ended=False)
        if most is not None and seen > most:
            return None
        # A second's docids are kept in order (a sorted tuple, a set).
        for docid in ((held,) if type(held) is int else held):
            seen += 1
            if kind_of(docid) != "message" or list_of(docid) not in addresses:
                continue
            if passes is not None and not passes(docid):
                continue
            passed += 1
            oldest.append(docid)
    return DateWalk(oldest[:wanted], passed, ended=True)


def _by_activity(mailing_list):
    """``(-last active, thread key, list address)`` of each of the list's threads, last active first."""
    address = mailing_list.address
    for negated_last, key in activity_of(mailing_list).by_activity.keys():
        yield negated_last, key, address


def _newest_first(heap):
    return [docid for _, docid in sorted(heap, reverse=True)]
