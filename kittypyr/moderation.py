"""Administration of the archive: deleting messages and threads, re-threading.

Every operation here is one function that changes the tree, notifies what
changed (the catalog and the statistics follow through their subscribers)
and writes an entry to the audit log. Views only ask and confirm.

Links stay stable:

- a deleted message leaves a tombstone under its hash (its URL answers 410
  Gone); its replies hang from its parent instead, or become first
  messages of the thread;
- a thread keeps its key (and URL) when its first message goes; a thread
  deleted whole leaves a tombstone under its key;
- moved messages keep their URLs (they never depend on the thread); a
  thread moved under another message leaves its key as an alias (301).

Deletion is real: the message's record, original bytes and attachment
blobs are no longer reachable, its words leave the text index and the
lexicon, its counts leave the statistics. ``kittypyr pack`` then removes
the bytes from the storage files.
"""

import re
from datetime import datetime, timezone

from pyramid.traversal import find_root
from repoze.catalog.query import Eq

from kittypyr.archiving import move_subtree, note_restart, notify_added, stop_waiting
from kittypyr.catalog import Narrowed, search
from kittypyr.events import MessageMoved, ObjectModified, notify
from kittypyr.resources import Thread
from kittypyr.resources.admin import AuditEntry
from kittypyr.resources.deleted import Tombstone
from kittypyr.resources.thread import ROOTS
from kittypyr.wording import counted

DELETE_MESSAGES = "delete-messages"
DELETE_THREAD = "delete-thread"
DELETE_SENDER = "delete-sender"
REATTACH_THREAD = "reattach-thread"
SPLIT_THREAD = "split-thread"

_HASH = re.compile(r"^[A-Z2-7]{32}$")
_IN_URL = re.compile(r"/list/([^/]+)/(message|thread)/([A-Za-z2-7]{32})(?:/|$)")


class ModerationRefused(ValueError):
    """The operation makes no sense as asked; the message says why, to the administrator."""


# --- deleting ---------------------------------------------------------------


def delete_messages(mailing_list, hashes, actor, reason="", registry=None, action=DELETE_MESSAGES,
                    summary=None, sender=None, site_wide=False):
    """Delete the messages of ``mailing_list`` named by ``hashes``; return the AuditEntry.

    Unknown or already deleted hashes are ignored; ModerationRefused if
    none is left. ``actor`` has ``address`` and ``name`` (a
    ``kittypyr.security.User``).
    """
    messages = mailing_list.messages
    chosen = [messages.data[name] for name in dict.fromkeys(hashes) if name in messages.data]
    if not chosen:
        raise ModerationRefused("None of these messages is in the archive any more.")
    now = datetime.now(timezone.utc)
    threads = mailing_list.threads
    starts = {}  # thread -> its start before the first deletion
    records = []
    for message in chosen:
        thread = threads.data[message.thread]
        starts.setdefault(thread, thread.date_started)
        records.append((mailing_list.address, message.__name__, thread.__name__, message.date.isoformat()))
        _delete_one(mailing_list, message, thread, now, registry)
    gone_threads = []
    for thread, start in starts.items():
        note_restart(thread, start, registry)
        if len(thread) == 0:
            key = thread.__name__
            threads.remove(key)
            threads.tombstones[key] = Tombstone(now)
            gone_threads.append(key)
        else:
            notify(ObjectModified(thread), registry)
    if summary is None:
        summary = f"Deleted {counted(len(chosen), 'message')}"
        if gone_threads:
            summary += f", and with the last of them {counted(len(gone_threads), 'thread')}"
    entry = AuditEntry(action, actor.address, actor.name, (mailing_list.address,), summary, reason,
                       messages=records, threads=tuple(t.__name__ for t in starts), sender=sender,
                       site_wide=site_wide, when=now)
    find_root(mailing_list).audit_log.add(entry)
    return entry


def _delete_one(mailing_list, message, thread, now, registry=None):
    """Take ``message`` out of ``thread`` and the list, leaving a tombstone."""
    messages = mailing_list.messages
    name = message.__name__
    parent = message.parent if message.parent in thread.members else None
    orphans = [child for _, child in thread.replies_to(name)]
    # Its replies hang from its parent now (or become first messages).
    thread.remove_message(message)
    for child in orphans:
        messages.data[child].parent = parent
        if parent is None:
            # A first message of its thread now: ``is:first`` finds it.
            notify(ObjectModified(messages.data[child], indexes=("is",)), registry)
    stop_waiting(mailing_list, message)
    # Unindexed and uncounted by the subscribers to ObjectWillBeRemoved.
    messages.remove(name)
    messages.tombstones[name] = Tombstone(now, thread.__name__, parent, message)
    if message.attachments:
        mailing_list.attachment_count.change(-len(message.attachments))


def delete_thread(thread, actor, reason="", registry=None):
    """Delete every message of ``thread``; its URL answers 410 from then on."""
    key = thread.__name__
    names = [name for name, _ in thread.walk()]
    summary = f"Deleted the thread {key} ({counted(len(names), 'message')})"
    return delete_messages(thread.mailing_list, names, actor, reason, registry, action=DELETE_THREAD,
                           summary=summary)


def messages_from(archive, sender, mailing_list=None):
    """Every message ``sender`` (an address) posted, to ``mailing_list`` or to any list, oldest first."""
    # The sender index holds messages alone.
    query = Eq("sender", sender.strip().lower())
    if mailing_list is not None:
        query = Narrowed(query, list=mailing_list.address)
    _, found = search(archive, query, sort_index="date")
    return list(found)


def delete_sender(archive, sender, actor, reason="", mailing_list=None, registry=None, found=None):
    """Delete every message of ``sender`` in ``mailing_list`` (None: in every list).

    ``found``: those messages, when the caller has asked ``messages_from``
    already. Returns the audit entries, one per list concerned: each
    list's administrators see their own list's part in their log.
    """
    sender = sender.strip().lower()
    by_list = {}
    for message in messages_from(archive, sender, mailing_list) if found is None else found:
        by_list.setdefault(message.mailing_list, []).append(message.__name__)
    if not by_list:
        raise ModerationRefused(f"There is no message from {sender} to delete.")
    entries = []
    for target, names in by_list.items():
        summary = f"Deleted all {counted(len(names), 'message')} from {sender}"
        if mailing_list is None:
            summary += " (a deletion in every list)"
        entries.append(delete_messages(target, names, actor, reason, registry, action=DELETE_SENDER,
                                       summary=summary, sender=sender, site_wide=mailing_list is None))
    return entries


# --- re-threading -----------------------------------------------------------


def reattach_refusal(thread, target):
    """Why ``thread`` cannot be attached below ``target`` (a Message or None), or None if it can."""
    if target is None:
        return "No message of this list has that address or hash."
    if target.mailing_list is not thread.mailing_list:
        return "A thread can only be attached to a message of the same list."
    if target.thread == thread.__name__:
        return "That message is in this very thread."
    return None


def reattach_thread(thread, target, actor, reason="", registry=None):
    """Hang every first message of ``thread`` (with its replies) below ``target``.

    ``target`` is a message of the same list in another thread. The emptied
    thread's key becomes an alias of ``target``'s thread (its URL answers
    301 there). Returns the AuditEntry.
    """
    refusal = reattach_refusal(thread, target)
    if refusal is not None:
        raise ModerationRefused(refusal)
    mailing_list = thread.mailing_list
    key = thread.__name__
    target_thread = mailing_list.threads.data[target.thread]
    messages = mailing_list.messages
    roots = [name for _, name in thread.replies_to(ROOTS)]
    moved = []
    for name in roots:
        root = messages.data[name]
        stop_waiting(mailing_list, root)
        moved += move_subtree(mailing_list, root, target.__name__, target_thread, registry)
    summary = (f"Moved the thread {key} ({counted(len(moved), 'message')}) below message "
               f"{target.__name__} of the thread {target_thread.__name__}")
    return _log(mailing_list, REATTACH_THREAD, actor, summary, reason, moved, (key, target_thread.__name__))


def split_refusal(message):
    """Why the thread cannot be split at ``message``, or None if it can."""
    threads = message.mailing_list.threads
    thread = threads.data[message.thread]
    is_root = message.parent not in thread.members
    if is_root and len(thread.replies_to(ROOTS)) == 1:
        return "This message starts its thread already: there is nothing to split off."
    if message.__name__ in threads.data:
        return "A thread is already named after this message; split at another one."
    return None


def split_thread(message, actor, reason="", registry=None):
    """Make ``message`` and its replies a thread of their own, keyed by its hash.

    Returns the AuditEntry; ``entry.threads[1]`` is the new thread's key.
    """
    refusal = split_refusal(message)
    if refusal is not None:
        raise ModerationRefused(refusal)
    mailing_list = message.mailing_list
    threads = mailing_list.threads
    name = message.__name__
    thread = threads.data[message.thread]
    old_key = thread.__name__
    old_start = thread.date_started
    moved = thread.take_subtree(name)
    message.parent = None
    stop_waiting(mailing_list, message)
    # The key may have been an alias (its thread was attached elsewhere
    # since) or a deleted thread's: it is a live thread again.
    threads.aliases.pop(name, None)
    threads.tombstones.pop(name, None)
    new_thread = threads.add(name, Thread(), send_events=False)
    for node in moved:
        node.thread = name
        new_thread.add_message(node)
        notify(ObjectModified(node, indexes=("thread",)), registry)
        notify(MessageMoved(node, old_key), registry)
    # Announced once complete, as a thread made by archiving is.
    notify_added(new_thread, registry)
    note_restart(thread, old_start, registry)
    notify(ObjectModified(thread), registry)
    summary = f"Split {counted(len(moved), 'message')} off the thread {old_key} into the new thread {name}"
    return _log(mailing_list, SPLIT_THREAD, actor, summary, reason, moved, (old_key, name))


def find_message(mailing_list, reference):
    """The live message of ``mailing_list`` that ``reference`` names, or None.

    ``reference``: a message hash, or the URL of a message or of a thread
    (meaning its first message), as an administrator would paste it.
    """
    reference = (reference or "").strip()
    messages = mailing_list.messages
    if _HASH.match(reference.upper()):
        return messages.data.get(reference.upper())
    found = _IN_URL.search(reference)
    if found is None:
        return None
    address, kind, name = found.group(1).lower(), found.group(2), found.group(3).upper()
    if address.replace("%40", "@") != mailing_list.address:
        return None
    if kind == "message":
        return messages.data.get(name)
    threads = mailing_list.threads
    thread = threads.live(name)
    if thread is None or thread.starter is None:
        return None
    return messages.data.get(thread.starter)


def _log(mailing_list, action, actor, summary, reason, moved, threads):
    records = [(mailing_list.address, m.__name__, m.thread, m.date.isoformat()) for m in moved]
    entry = AuditEntry(action, actor.address, actor.name, (mailing_list.address,), summary, reason,
                       messages=records, threads=threads)
    find_root(mailing_list).audit_log.add(entry)
    return entry
