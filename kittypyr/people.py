"""Senders as people: an id for each, their post counts, and what a profile shows.

The counts per sender and list, and each sender's messages per list newest
first (``People.dated_posts``), are kept up to date by subscribers as mail
is archived or removed (like ``kittypyr.stats``): first and last posts, a
page of posts and recent threads read the front or the end of those, so a
profile costs what it shows, however many messages its sender wrote. A
profile only ever shows the lists the reader may see.
"""

import heapq
import itertools

from pyramid.traversal import find_root, traversal_path

from kittypyr.catalog import catalogued_in
from kittypyr.events import IMessageArchived, IMessageReplaced, IObjectWillBeRemoved
from kittypyr.resources import Message
from kittypyr.resources.community import HIGHEST

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
    people.dated_posts.add(dated_post(person_id, key[1], message.timestamp, message.__name__))


def forget_post(people, message):
    """Take a removed ``message`` out of its sender's count."""
    if not message.sender_address:
        return
    person_id = people.person_id(message.sender_address)
    key = (person_id, message.mailing_list.address)
    count = people.posts.get(key, 0) - 1
    if count > 0:
        people.posts[key] = count
    elif key in people.posts:
        del people.posts[key]
    people.dated_posts.discard(dated_post(*key, message.timestamp, message.__name__))
    if count <= 0 and not _has_posts(people, person_id):
        # Their last message anywhere is gone: so is their address, and the profile it made.
        people.addresses.pop(person_id, None)


def _has_posts(people, person_id):
    """Whether ``person_id`` has a message counted in any list."""
    return any(True for _ in people.posts.keys((person_id, ""), (person_id, HIGHEST)))


def dated_post(person_id, list_address, timestamp, name):
    """The entry of ``People.dated_posts`` for a message: a sender's messages in a list sort newest first."""
    return (person_id, list_address, -int(timestamp), name)


def dated_posts_in(people, person_id, list_address):
    """The entries of ``person_id``'s messages in ``list_address``, newest first."""
    return people.dated_posts.keys(min=(person_id, list_address), max=(person_id, list_address + "\0"),
                                   excludemax=True)


def posts_per_list(people, person_id, mailing_lists):
    """``[(mailing list, messages)]`` for those of ``mailing_lists`` the person wrote to."""
    found = []
    for mailing_list in mailing_lists:
        count = people.posts.get((person_id, mailing_list.address), 0)
        if count:
            found.append((mailing_list, count))
    return found


def _newest_first(archive, address, list_addresses):
    """The messages of ``address`` in those lists, newest first, read one at a time from ``dated_posts``."""
    people = archive.people
    person_id = people.person_id(address)
    # Each list's range sorts newest first (its timestamps negated); merged by them.
    ranges = [dated_posts_in(people, person_id, list_address) for list_address in list_addresses]
    for _, list_address, _, name in heapq.merge(*ranges, key=lambda key: (key[2], key[1], key[3])):
        message = archive.lists[list_address].messages.get(name)
        if message is not None:
            yield message


def _oldest(archive, address, list_address):
    people = archive.people
    person_id = people.person_id(address)
    try:
        # From the top of the tree down: indexing the range from its end
        # would walk every bucket of it.
        key = people.dated_posts.maxKey((person_id, list_address + "\0"))
    except ValueError:
        return None
    if key[:2] != (person_id, list_address):
        return None
    return archive.lists[list_address].messages.get(key[3])


def first_and_last_post(archive, address, list_addresses):
    """``(first message, last message)`` of ``address`` in those lists, or ``(None, None)``."""
    last = next(_newest_first(archive, address, list_addresses), None)
    firsts = [message for message in (_oldest(archive, address, list_address) for list_address in list_addresses)
              if message is not None]
    return min(firsts, key=lambda message: message.timestamp, default=None), last


def posts_page(archive, address, list_addresses, start, size):
    """``(total, messages)``: a page of ``address``'s messages in those lists, newest first.

    A ``start`` past the end gives the last page.
    """
    people = archive.people
    person_id = people.person_id(address)
    total = sum(people.posts.get((person_id, list_address), 0) for list_address in list_addresses)
    if start >= total:
        start = max(0, (total - 1) // size * size)
    return total, list(itertools.islice(_newest_first(archive, address, list_addresses), start, start + size))


def recent_threads(archive, address, list_addresses, limit=10):
    """``[(thread, their latest message there, whether they started it)]``, most recent first.

    Read from the sender's newest messages, not by walking threads.
    """
    if not list_addresses:
        return []
    messages = itertools.islice(_newest_first(archive, address, list_addresses), RECENT_MESSAGES)
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
    people.addresses.clear()
    people.add_dated_posts()
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


def date_known_posts(archive):
    """Fill ``dated_posts`` of an archive made before it, from the catalog: no message is loaded.

    The sender index gives each sender's documents; a document's path, its
    list and hash; the date index, its date.
    """
    people = archive.people
    people.add_dated_posts()
    catalog = archive.catalog
    if catalog is None:
        rebuild_people(archive)
        return
    date_of = catalog["date"]._rev_index.get
    address_for = archive.document_map.address_for_docid
    for address, docids in catalog["sender"]._fwd_index.items():
        person_id = people.person_id(address)
        for docid in docids:
            path, date = address_for(docid), date_of(docid)
            if path is None or date is None:
                continue
            _, list_address, _, name = traversal_path(path)
            people.dated_posts.add(dated_post(person_id, list_address, date, name))
