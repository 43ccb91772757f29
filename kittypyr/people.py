"""Senders as people: an id for each, their post counts, and what a profile shows.

The counts per sender and list are kept up to date by subscribers as mail is
archived or removed (like ``kittypyr.stats``); first and last posts and
recent threads are answered by the catalog's ``sender`` index. A profile
only ever shows the lists the reader may see.
"""

from pyramid.traversal import find_root
from repoze.catalog.query import Any, Eq

from kittypyr.catalog import Narrowed, catalogued_in, search, search_page
from kittypyr.events import IMessageArchived, IMessageReplaced, IObjectWillBeRemoved
from kittypyr.resources import Message

RECENT_MESSAGES = 100


def people_of(resource):
    """The archive's ``People``, or None outside an archive."""
    return getattr(find_root(resource), "people", None)


def person_id_of(resource, address):
    people = people_of(resource)
    return people.person_id(address) if people is not None and address else ""


def record_post(people, message):
    """Count ``message`` for its sender; make the sender known when new."""
    address = message.sender_address
    if not address:
        return
    person_id = people.person_id(address)
    if person_id not in people.addresses:
        people.addresses[person_id] = address.strip().lower()
    key = (person_id, message.mailing_list.address)
    people.posts[key] = people.posts.get(key, 0) + 1


def forget_post(people, message):
    """Take a removed ``message`` out of its sender's count."""
    if not message.sender_address:
        return
    key = (people.person_id(message.sender_address), message.mailing_list.address)
    count = people.posts.get(key, 0) - 1
    if count > 0:
        people.posts[key] = count
    elif key in people.posts:
        del people.posts[key]


def posts_per_list(people, person_id, mailing_lists):
    """``[(mailing list, messages)]`` for those of ``mailing_lists`` the person wrote to."""
    found = []
    for mailing_list in mailing_lists:
        count = people.posts.get((person_id, mailing_list.address), 0)
        if count:
            found.append((mailing_list, count))
    return found


def _messages_of(address, list_addresses):
    # The sender index holds messages alone.
    return Narrowed(Eq("sender", address), list=list_addresses)


def first_and_last_post(archive, address, list_addresses):
    """``(first message, last message)`` of ``address`` in those lists, or ``(None, None)``."""
    if not list_addresses:
        return None, None
    query = _messages_of(address, list_addresses)
    _, first = search(archive, query, sort_index="date", limit=1)
    _, last = search(archive, query, sort_index="date", limit=1, reverse=True)
    return next(first, None), next(last, None)


def posts_page(archive, address, list_addresses, start, size):
    """``(total, messages)``: a page of ``address``'s messages in those lists, newest first.

    A ``start`` past the end gives the last page.
    """
    if not list_addresses:
        return 0, []
    return search_page(archive, _messages_of(address, list_addresses), start, size, "date", reverse=True)


def recent_threads(archive, address, list_addresses, limit=10):
    """``[(thread, their latest message there, whether they started it)]``, most recent first.

    Read from the sender's newest messages in the catalog, not by walking
    threads.
    """
    if not list_addresses:
        return []
    _, messages = search(archive, _messages_of(address, list_addresses), sort_index="date",
                         limit=RECENT_MESSAGES, reverse=True)
    found = []
    seen = set()
    for message in messages:
        threads = message.mailing_list.threads
        thread = threads.live(message.thread)
        if thread is None or (message.mailing_list.address, thread.__name__) in seen:
            continue
        seen.add((message.mailing_list.address, thread.__name__))
        starter = message.mailing_list.messages.get(thread.starter) if thread.starter else None
        started = starter is not None and (starter.sender_address or "").strip().lower() == address
        found.append((thread, message, started))
        if len(found) == limit:
            break
    return found


def rebuild_people(archive):
    """Recount every sender's posts from the messages (for ``kittypyr reindex``)."""
    people = archive.people
    people.posts.clear()
    for mailing_list in archive.lists.values():
        for message in mailing_list.messages.values():
            record_post(people, message)


def count_known_senders(archive):
    """Fill the counts of an archive made before profiles, from its list aggregates.

    Reads each list's ``ListActivity`` (one entry per sender), not its messages.
    """
    people = archive.people
    for mailing_list in archive.lists.values():
        activity = getattr(mailing_list, "activity", None)
        if activity is None:
            continue
        for address, count in activity.participants.items():
            person_id = people.person_id(address)
            if person_id not in people.addresses:
                people.addresses[person_id] = address.strip().lower()
            key = (person_id, mailing_list.address)
            people.posts[key] = people.posts.get(key, 0) + count


def on_message_archived(event):
    people = people_of(event.mailing_list)
    if people is not None:
        record_post(people, event.message)


def on_message_replaced(event):
    """A rebuilt message's original took its place: counted for its own sender."""
    people = people_of(event.message)
    if people is not None:
        forget_post(people, event.before)
        record_post(people, event.message)


def on_will_be_removed(event):
    people = people_of(event.object)
    if people is None:
        return
    for resource in catalogued_in(event.object):
        if isinstance(resource, Message):
            forget_post(people, resource)


def includeme(config):
    config.add_subscriber(on_message_archived, IMessageArchived)
    config.add_subscriber(on_message_replaced, IMessageReplaced)
    config.add_subscriber(on_will_be_removed, IObjectWillBeRemoved)
