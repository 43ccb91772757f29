"""The catalog questions that pages ask, answered without walking containers."""

import itertools

from pyramid.traversal import find_root
from repoze.catalog.query import Any, Eq

from kittypyr.catalog import search, search_page
from kittypyr.stats import activity_of


def _threads_of(mailing_list):
    return Eq("kind", "thread") & Eq("list", mailing_list.address)


def recent_threads(mailing_list, limit=10):
    """Threads with the newest activity first."""
    _, threads = search(find_root(mailing_list), _threads_of(mailing_list),
                        sort_index="last_active", reverse=True, limit=limit)
    return list(threads)


def largest_threads(mailing_list, limit=10):
    """The threads with the most messages, most first: the list's busiest of all time."""
    _, threads = search(find_root(mailing_list), _threads_of(mailing_list), sort_index="size",
                        reverse=True, limit=limit)
    return list(threads)


def threads_by_activity(mailing_list, start, size, skip=()):
    """A page of the list's threads, latest activity first, leaving out the keys in ``skip``.

    Without ``skip``, a ``start`` past the end gives the last page.
    """
    if not skip:
        return search_page(find_root(mailing_list), _threads_of(mailing_list), start, size, "last_active",
                           reverse=True)[1]
    _, threads = search(find_root(mailing_list), _threads_of(mailing_list), sort_index="last_active",
                        reverse=True, limit=start + size + len(skip))
    wanted = (thread for thread in threads if thread.__name__ not in skip)
    return list(itertools.islice(wanted, start, start + size))


def month_threads(month, start, size, by_start=False):
    """``(total, threads)``: one page of the threads started in ``month``.

    Latest activity first, or with ``by_start`` the first started first.
    A ``start`` past the end gives the last page.
    """
    mailing_list = month.mailing_list
    query = _threads_of(mailing_list) & Eq("month", month.key)
    if by_start:
        return search_page(find_root(mailing_list), query, start, size, "date")
    return search_page(find_root(mailing_list), query, start, size, "last_active", reverse=True)


def threads_with_attachments(mailing_list, threads):
    """The keys of those of ``threads`` with an attachment in any message.

    One catalog query for all of them; each thread's own docids are then
    looked up in its entry of the ``thread`` index.
    """
    if not threads:
        return set()
    archive = find_root(mailing_list)
    keys = [thread.__name__ for thread in threads]
    _, with_files = archive.catalog.query(
        Eq("list", mailing_list.address) & Eq("has_attachment", True) & Any("thread", keys))
    with_files = set(with_files)
    if not with_files:
        return set()
    found = set()
    for key in keys:
        _, members = archive.catalog.query(Eq("thread", key))
        if with_files.intersection(members):
            found.add(key)
    return found


def neighbour_threads(thread):
    """``(older, newer)``: the threads started just before and just after ``thread``.

    Read from the list's chronology of thread starts: a date-range query on
    the catalog would load a set for every distinct date in the archive.
    """
    mailing_list = thread.mailing_list
    threads = mailing_list.threads.data
    older, newer = activity_of(mailing_list).neighbours(thread)
    return threads.get(older) if older else None, threads.get(newer) if newer else None
