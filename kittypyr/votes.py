"""Votes on messages, thread totals, reputations and popularity.

A vote changes four records: the voter's own ``Reader`` (nobody else writes
it) and three ``BTrees.Length`` counters — the message's, its thread's and
its sender's reputation in that list. ``Length`` resolves concurrent
changes by adding them up, so readers voting at the same moment on one
busy message all commit without retrying; only the first vote on a
message, a thread or a sender creates its counters.

Archiving does not write here, except when threading moves a message that
has votes to another thread: the subscribers below then carry its score to
that thread's total (through the same merging counters), and take the votes
of a removed message out of the totals.
"""

import collections
from datetime import datetime, timezone

from BTrees.Length import Length
from pyramid.traversal import find_root

from kittypyr.catalog import catalogued_in
from kittypyr.events import IObjectModified, IObjectWillBeRemoved
from kittypyr.people import people_of
from kittypyr.resources import Message
from kittypyr.resources.community import HIGHEST, MessageTally
from kittypyr.stats import activity_of

UP, RETRACT, DOWN = 1, 0, -1
VALUES = (UP, RETRACT, DOWN)


class OwnMessage(ValueError):
    """Nobody votes on what they wrote themselves."""


def _key(message):
    return (message.mailing_list.address, message.__name__)


def _counter(tree, key):
    counter = tree.get(key)
    if counter is None:
        counter = tree[key] = Length()
    return counter


def tally_of(archive, message):
    """The message's ``MessageTally``, or None if nobody voted on it."""
    return archive.votes.tallies.get(_key(message))


def ballot(reader, tally, key):
    """What ``reader`` voted on the message ``key`` counted by ``tally``: 1, -1 or 0."""
    if reader is None or tally is None:
        return RETRACT
    entry = reader.votes.get(key)
    # A ballot for an earlier message of the same name (deleted since) does not count.
    if entry is None or entry[1] != tally.serial:
        return RETRACT
    return entry[0]


def cast_vote(archive, reader, message, value, now=None):
    """Record ``reader``'s ``value`` (1 up, -1 down, 0 to retract) on ``message``.

    Voting again replaces the reader's earlier vote. Returns the message's
    ``MessageTally`` (None when retracting where there was nothing). Raises
    ``OwnMessage`` when the reader wrote the message.
    """
    if value not in VALUES:
        raise ValueError(f"not a vote: {value!r}")
    if message.sender_address and message.sender_address.strip().lower() == reader.address:
        raise OwnMessage(message.__name__)
    votes = archive.votes
    key = _key(message)
    tally = votes.tallies.get(key)
    if tally is None:
        if value == RETRACT:
            reader.votes.pop(key, None)
            return None
        people = people_of(message)
        tally = votes.tallies[key] = MessageTally(people.person_id(message.sender_address), message.thread)
    previous = ballot(reader, tally, key)
    if previous == value:
        return tally
    _count(tally, previous, -1)
    _count(tally, value, 1)
    _move(votes, key[0], tally, value - previous)
    if value == RETRACT:
        reader.votes.pop(key, None)
    else:
        reader.votes[key] = (value, tally.serial, now or datetime.now(timezone.utc))
    return tally


def _count(tally, value, change):
    if value == UP:
        tally.up.change(change)
    elif value == DOWN:
        tally.down.change(change)


def _move(votes, list_address, tally, delta):
    """Add ``delta`` to the totals of the tally's thread and of its sender."""
    if not delta:
        return
    _counter(votes.threads, (list_address, tally.thread)).change(delta)
    if tally.sender:
        _counter(votes.senders, (tally.sender, list_address)).change(delta)


def scores(archive, messages):
    """``{message hash: (up, down)}`` for the given messages that have votes."""
    tallies = archive.votes.tallies
    found = {}
    for message in messages:
        tally = tallies.get(_key(message))
        if tally is not None:
            found[message.__name__] = (tally.up(), tally.down())
    return found


def thread_score(archive, thread):
    """The sum of the scores of ``thread``'s messages."""
    counter = archive.votes.threads.get((thread.mailing_list.address, thread.__name__))
    return counter() if counter is not None else 0


def reputation(archive, person_id, list_addresses):
    """The sum of the votes on the person's messages in those lists."""
    senders = archive.votes.senders
    total = 0
    for address in list_addresses:
        counter = senders.get((person_id, address))
        if counter is not None:
            total += counter()
    return total


def thread_scores(mailing_list):
    """``{thread key: total}`` of the list's live threads whose total is not 0.

    One small counter per voted thread: far fewer than the list's threads.
    """
    archive = find_root(mailing_list)
    address = mailing_list.address
    live = mailing_list.threads.data
    found = {}
    for (_, key), counter in archive.votes.threads.items((address, ""), (address, HIGHEST)):
        total = counter()
        if total and key in live:
            found[key] = total
    return found


def popular_threads(mailing_list, start, size):
    """``(total, threads)``: a page of the list's threads, highest total first.

    Threads with a positive total come first (ties by latest activity), then
    every thread without votes by latest activity, then those voted down.
    """
    totals = thread_scores(mailing_list)
    threads = mailing_list.threads.data
    top = _ranked(threads, totals, (k for k, total in totals.items() if total > 0))
    bottom = _ranked(threads, totals, (k for k, total in totals.items() if total < 0))
    count = mailing_list.thread_count
    middle_size = count - len(top) - len(bottom)
    page = []
    end = start + size
    if start < len(top):
        page += [threads[k] for k in top[start:end]]
    middle_start = max(0, start - len(top))
    middle_end = max(0, min(end - len(top), middle_size))
    if middle_end > middle_start:
        page += mailing_list.threads.named(activity_of(mailing_list).active_thread_keys(
            middle_start, middle_end - middle_start, skip=set(totals)))
    bottom_start = max(0, start - len(top) - middle_size)
    bottom_end = max(0, end - len(top) - middle_size)
    if bottom_end > bottom_start:
        page += [threads[k] for k in bottom[bottom_start:bottom_end]]
    return count, page


def _ranked(threads, totals, keys):
    return sorted(keys, key=lambda k: (-totals[k], -threads[k].last_date.timestamp(), k))


def top_threads(mailing_list, limit=10):
    """The list's threads with the highest positive totals, best first."""
    totals = thread_scores(mailing_list)
    threads = mailing_list.threads.data
    best = _ranked(threads, totals, (k for k, total in totals.items() if total > 0))
    return [threads[k] for k in best[:limit]]


def forget_message(archive, message):
    """Take the votes on a removed ``message`` out of its thread's total and its sender's reputation.

    The ballots readers keep for it no longer count: a later message of
    the same name gets a new tally with another serial.
    """
    votes = archive.votes
    key = _key(message)
    tally = votes.tallies.get(key)
    if tally is None:
        return
    _move(votes, key[0], tally, -tally.score)
    del votes.tallies[key]


def message_moved(archive, message):
    """Carry a voted message's score along when threading moved it to another thread."""
    tally = archive.votes.tallies.get(_key(message))
    if tally is None or tally.thread == message.thread:
        return
    list_address = message.mailing_list.address
    score = tally.score
    if score:
        _counter(archive.votes.threads, (list_address, tally.thread)).change(-score)
        _counter(archive.votes.threads, (list_address, message.thread)).change(score)
    tally.thread = message.thread


def tallies_and_messages(archive):
    """``(key, tally, message)`` of every tally kept, ``message`` None when it is not in the archive."""
    for key, tally in list(archive.votes.tallies.items()):
        list_address, name = key
        mailing_list = archive.lists.get(list_address)
        yield key, tally, mailing_list.messages.get(name) if mailing_list is not None else None


def totals_due(archive):
    """``(thread totals, sender totals)`` the live messages' tallies add up to, keyed as ``Votes`` keys them.

    Each score counts in the thread its message is in now.
    """
    threads, senders = collections.Counter(), collections.Counter()
    for (list_address, _), tally, message in tallies_and_messages(archive):
        score = tally.score if message is not None else 0
        if score:
            threads[(list_address, message.thread)] += score
            if tally.sender:
                senders[(tally.sender, list_address)] += score
    return threads, senders


def rebuild_totals(archive):
    """Recount every thread's total and sender's reputation from the messages' tallies.

    For ``kittypyr reindex``: tallies of messages that are gone are dropped,
    and each score is counted in the thread its message is in now.
    """
    votes = archive.votes
    votes.threads.clear()
    votes.senders.clear()
    for key, tally, message in tallies_and_messages(archive):
        if message is None:
            del votes.tallies[key]
            continue
        if tally.thread != message.thread:
            tally.thread = message.thread
        _move(votes, key[0], tally, tally.score)


def _votes_of(resource):
    return getattr(find_root(resource), "votes", None)


def on_will_be_removed(event):
    """Deleting a message (or a list) removes its votes from reputations."""
    if _votes_of(event.object) is None:
        return
    archive = find_root(event.object)
    for resource in catalogued_in(event.object):
        if isinstance(resource, Message):
            forget_message(archive, resource)


def on_modified(event):
    message = event.object
    if not isinstance(message, Message) or message.__parent__ is None:
        return
    if event.indexes is not None and "thread" not in event.indexes:
        return
    if _votes_of(message) is not None:
        message_moved(find_root(message), message)


def voted_messages(archive, reader, list_addresses, limit=50):
    """``[(message, value, when)]``: the reader's live votes in those lists, newest first."""
    visible = set(list_addresses)
    entries = []
    for key, (value, serial, when) in reader.votes.items():
        if key[0] not in visible:
            continue
        tally = archive.votes.tallies.get(key)
        if tally is None or tally.serial != serial:
            continue
        entries.append((when, key, value))
    entries.sort(reverse=True)
    found = []
    for when, (list_address, name), value in entries[:limit]:
        mailing_list = archive.lists.get(list_address)
        message = mailing_list.messages.get(name) if mailing_list is not None else None
        if message is not None:
            found.append((message, value, when))
    return found


def includeme(config):
    config.add_subscriber(on_will_be_removed, IObjectWillBeRemoved)
    config.add_subscriber(on_modified, IObjectModified)
