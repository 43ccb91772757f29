"""The questions about a list's threads that pages ask, answered without walking containers."""

import heapq

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

    Read from its threads in order of latest activity: a thread last active
    before the ``limit``-th newest message found so far holds none newer.
    Each thread's messages are dated by the catalog (the thread index, then
    the date index), not loaded; a catalog query sorted by date would take
    every message of the list first.
    """
    archive = find_root(mailing_list)
    catalog = archive.catalog
    members = catalog["thread"].documents_with
    list_of, kind_of = catalog["list"]._rev_index.get, catalog["kind"]._rev_index.get
    date_of = catalog["date"]._rev_index.get
    address = mailing_list.address
    newest = []  # a heap of the (date, docid) found so far, at most ``limit``
    for negated_last, key in activity_of(mailing_list).by_activity.keys():
        if len(newest) == limit and -negated_last < newest[0][0]:
            break
        for docid in members(key):
            if list_of(docid) != address or kind_of(docid) != "message":
                continue
            entry = (date_of(docid), docid)
            if len(newest) < limit:
                heapq.heappush(newest, entry)
            elif entry > newest[0]:
                heapq.heapreplace(newest, entry)
    return list(resources_of(archive, [docid for _, docid in sorted(newest, reverse=True)]))
