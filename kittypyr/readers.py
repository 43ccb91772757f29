"""What a logged-in reader keeps for themselves: favourites and what they have read.

Each reader has a ``Reader`` record of their own, so marking a thread read
while opening it writes nothing another reader could conflict with, however
busy the thread. Anonymous readers get the same marks from their browser's
local storage (kittypyr.js); nothing about them is stored here.

"Read" is measured in message dates: a thread is unread when its newest
message is newer than the newest one the reader saw there, or, for a
thread they never opened, newer than the list's newest message at the time
they first came to the list (or last marked it all read).
"""

from datetime import datetime, timezone

from kittypyr.queries import recent_threads
from kittypyr.resources.community import HIGHEST, Reader


def reader_for(archive, address, create=False):
    """The ``Reader`` of ``address``; made when ``create``, else None if there is none yet."""
    address = address.strip().lower()
    reader = archive.readers.get(address)
    if reader is None and create:
        reader = archive.readers[address] = Reader(address)
    return reader


def _thread_key(thread):
    return (thread.mailing_list.address, thread.__name__)


def _stamp(moment):
    return moment.timestamp() if moment is not None else 0.0


def list_watermark(mailing_list):
    """The date of the list's newest message, as a timestamp (0 for an empty list)."""
    key = _watermark_key(mailing_list)
    known = _watermarks.get(key)
    if known is None:
        newest = recent_threads(mailing_list, limit=1)
        known = _watermarks[key] = _stamp(newest[0].last_date) if newest else 0.0
        if len(_watermarks) > 10_000:
            _watermarks.clear()
    return known


# Every list page asks; the answer changes only when the list gains or loses
# messages, so it is kept per process, keyed by the message count.
_watermarks = {}


def _watermark_key(mailing_list):
    jar = mailing_list._p_jar
    storage = jar.db().storage.getName() if jar is not None else None
    return storage, mailing_list._p_oid or id(mailing_list), mailing_list.address, mailing_list.message_count


# Favourites


def is_favourite(reader, thread):
    return reader is not None and _thread_key(thread) in reader.favourites


def set_favourite(reader, thread, wanted, now=None):
    """Add ``thread`` to the reader's favourites, or take it out; return whether it is one."""
    key = _thread_key(thread)
    if wanted:
        if key not in reader.favourites:
            reader.favourites[key] = now or datetime.now(timezone.utc)
    else:
        reader.favourites.pop(key, None)
    return wanted


def favourite_threads(archive, reader, list_addresses):
    """``[(thread, added)]``: the reader's favourites in those lists, newest first.

    A favourite whose thread was absorbed into another leads to that one.
    """
    visible = set(list_addresses)
    found = []
    for (list_address, key), added in reader.favourites.items():
        mailing_list = archive.lists.get(list_address)
        if list_address not in visible or mailing_list is None:
            continue
        threads = mailing_list.threads
        thread = threads.live(key)
        if thread is not None:
            found.append((thread, added))
    found.sort(key=lambda item: item[1], reverse=True)
    return found


# Read and unread


def last_seen(reader, thread):
    """The timestamp up to which the reader has read ``thread``, or None if unknown."""
    if reader is None:
        return None
    seen = reader.seen.get(_thread_key(thread))
    if seen is not None:
        return seen
    return reader.since.get(thread.mailing_list.address)


def is_unread(reader, thread):
    seen = last_seen(reader, thread)
    return seen is not None and _stamp(thread.last_date) > seen


def start_tracking(reader, mailing_list):
    """On the reader's first visit to a list, count everything in it as read. Writes once."""
    if mailing_list.address not in reader.since:
        reader.since[mailing_list.address] = list_watermark(mailing_list)


def mark_read(reader, thread):
    """Remember that the reader saw every message of ``thread``; writes only when it changed."""
    key = _thread_key(thread)
    newest = _stamp(thread.last_date)
    if reader.seen.get(key) != newest:
        reader.seen[key] = newest


def mark_list_read(reader, mailing_list):
    """Count everything in the list as read, now."""
    address = mailing_list.address
    reader.since[address] = list_watermark(mailing_list)
    for key in list(reader.seen.keys((address, ""), (address, HIGHEST))):
        del reader.seen[key]


def new_messages(reader, thread, messages):
    """The hashes of ``messages`` newer than what the reader had seen of ``thread``."""
    seen = last_seen(reader, thread)
    if seen is None:
        return set()
    return {message.__name__ for message in messages if message.timestamp > seen}
