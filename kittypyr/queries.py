"""The questions about a list's threads that pages ask, answered without walking containers."""

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
