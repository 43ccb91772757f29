"""Ingestion: turning raw mail into archived, threaded messages.

``archive_message`` is the single way mail enters the archive, used by the
command-line import and by the Mailman archiver API alike.

Threading does not depend on arrival order. A message's parent is the
In-Reply-To message if archived, else the nearest archived ancestor named in
References (last to first). When a message names an ancestor that is not
archived yet, it waits for it in ``mailing_list.waiting_for_parent``; when
that ancestor arrives the waiting messages (and their sub-threads) move
below it, and a thread emptied that way leaves its key behind as an alias.

A message deleted by an administrator stays deleted: mail arriving again
under its Message-ID hash (Mailman resending it, a re-import) is skipped,
and a reply to it hangs below its nearest surviving ancestor.
"""

import logging
import uuid
from types import SimpleNamespace

from BTrees.OOBTree import OOTreeSet

from kittypyr.events import (
    MessageArchived,
    MessageMoved,
    MessageReplaced,
    ObjectAdded,
    ObjectModified,
    ThreadMerged,
    ThreadRestarted,
    notify,
)
from kittypyr.mail import parse_message
from kittypyr.msgid import message_id_hash, writing_of
from kittypyr.resources import MailingList, Message, Thread
from kittypyr.resources.deleted import Tombstone
from kittypyr.subjects import without_list_prefix

log = logging.getLogger(__name__)

# What a reply changes in its thread's catalog entry.
THREAD_GROWTH_INDEXES = ("last_active", "size")

ARCHIVED = "archived"
DUPLICATE = "duplicate"
SKIPPED = "skipped"


DELETED_REASON = "deleted from the archive by its administrators"


class StoreResult:
    """What ``store_parsed`` did: ``outcome`` and the message concerned.

    ``gone`` is the hash of the deleted message that the mail would have
    been stored as (then ``outcome`` is SKIPPED).
    """

    def __init__(self, outcome, message=None, reason="", gone=None):
        self.outcome = outcome
        self.message = message
        self.reason = reason
        self.gone = gone

    def __repr__(self):
        return f"<StoreResult {self.outcome} {self.reason}>"


def archive_message(mailing_list, raw_bytes, envelope_date=None, registry=None):
    """Archive ``raw_bytes`` in ``mailing_list``.

    Returns the stored ``Message``, or the one already archived under the
    same Message-ID with the same content; returns None when the message
    asks not to be archived (``X-No-Archive: yes``) or was deleted from the
    archive. Raises
    ``kittypyr.mail.UnparseableMessage`` for bytes that are not mail.
    """
    parsed = parse_message(raw_bytes, envelope_date=envelope_date)
    return store_parsed(mailing_list, parsed, registry=registry).message


def _hasher(parsed):
    """``message_id_hash``, using the hashes a parser process computed."""
    known = getattr(parsed, "id_hashes", None)
    if not known:
        return message_id_hash

    def hash_of(message_id):
        name = known.get(message_id)
        return message_id_hash(message_id) if name is None else name

    return hash_of


def _storage_id(messages, parsed, hash_of=message_id_hash, by_mailman=False, distinct=False, undeclared=None):
    """The Message-ID to store ``parsed`` under, or None if it is a duplicate.

    ``undeclared``: ``_undeclared_key`` of ``parsed``, for mail without a Message-ID.

    A different message that reuses an archived Message-ID (or the one an
    archived message's Archived-At names) is kept under an id derived from
    its content (``_reuse_ids``), so neither is lost and a re-import of
    either stays idempotent. Returns ``(message_id, existing
    message)``.
    """
    message_id = parsed.message_id
    name = hash_of(message_id)
    existing = messages.get(name)
    tombstones = messages.tombstones
    if existing is None:
        # Another copy of a post that came without a Message-ID.
        copied = messages.undeclared_name(undeclared)
        existing = messages.get(copied) if copied is not None else None
        if existing is not None and _same_mail(existing, parsed, by_mailman, distinct):
            return None, existing
        existing = None
    if existing is None:
        # A hash Mailman's Archived-At gave a message stored otherwise (an
        # odd Message-ID header) stays that message's, and a deleted one's
        # stays deleted: another post under that id is kept as a reuse of it.
        held_for = messages.permalink_target(name)
        if held_for is None and name not in tombstones:
            return message_id, None
        existing = messages.get(held_for) if held_for is not None else None
        if existing is not None and _same_mail(existing, parsed, by_mailman, distinct):
            return None, existing
    elif _same_mail(existing, parsed, by_mailman, distinct):
        return None, existing
    # Another post already kept under a derived id, come again in another
    # form (its derived id is made of its bytes, which differ). The empty
    # id names no post: none of the many kept under it is another's copy.
    for kept in messages.reusing(name) if parsed.message_id else ():
        existing = messages.get(kept)
        if existing is not None and _same_mail(existing, parsed, by_mailman, distinct):
            return None, existing
    for derived in _reuse_ids(parsed):
        derived_name = message_id_hash(derived)
        if derived_name in tombstones:
            continue  # another post's, deleted (``_deleted_hash`` tells it was not this one)
        existing = messages.get(derived_name)
        if existing is None:
            return derived, None
        if _same_mail(existing, parsed, by_mailman, distinct):
            return None, existing
    # Every id it could be kept under is another mail's (ids made to look
    # like derived ones): kept under one of its own, never dropped.
    return f"{parsed.message_id}#{uuid.uuid4().hex}", None


def _same_mail(stored, parsed, by_mailman=False, distinct=False):
    """Whether ``parsed`` is ``stored`` again (resent, imported again, another archive's copy), not another
    mail under its id. ``by_mailman``: ``parsed`` comes from Mailman's archiver. ``distinct``: from an export
    of kittypyr, which holds no copy of a post but the one archived."""
    if stored.fingerprint != parsed.fingerprint:
        if distinct or (by_mailman and stored.by_mailman):
            # Mailman hands each post over as it is: another body is another
            # post (a mailer that makes its ids from the time, two in a second).
            return False
        prefix = stored.mailing_list.subject_prefix
        return _written_alike(parsed, written_as(stored, prefix), prefix)
    # One short body ("+1", "Thanks!") posted twice under one Message-ID
    # is told apart by the Date each was written with: a resent or
    # re-imported copy keeps its Date header.
    if parsed.dated_by_header and stored.dated_by_header:
        return stored.date == parsed.date
    return True


def written_as(stored, subject_prefix=""):
    """``writing_of`` a stored message, or what a tombstone kept of it.

    A stored subject is kept without the prefix its list had then: the
    one it has now comes off too (a prefix Mailman told since).
    """
    if isinstance(stored, Tombstone):
        return stored.writing
    return writing_of(stored.date if stored.dated_by_header else None, stored.sender_address,
                      without_list_prefix(stored.subject, subject_prefix))


def _undeclared_key(parsed, subject_prefix=""):
    """How mail that came without a Message-ID was written, as ``Messages.undeclared`` keys it; None for other mail.

    Only mail with a Date header: without one, two posts of one sender
    under one subject ("test") would be taken for copies of each other.
    """
    if not getattr(parsed, "message_id_derived", False) or not parsed.dated_by_header or not parsed.sender_address:
        return None
    date, sender, subject = writing_of(parsed.date, parsed.sender_address,
                                       without_list_prefix(parsed.subject, subject_prefix))
    return f"{date.isoformat()} {sender} {subject}"


def _written_alike(parsed, writing, subject_prefix=""):
    """Whether ``parsed`` was written as ``writing`` (``writing_of``) says: when, by whom, about what.

    Another archive's copy of the same post: Mailman 2's month files hold
    it decoded and its attachments scrubbed, so its body differs; its Date,
    sender and subject do not. A mail reusing an id is written at another
    moment, or by another sender, or about another subject (a robot that
    makes its ids from the second it reports in). Mail without a Date
    header is told by its sender and subject alone. The empty id names no
    post: two a sender wrote in one second without one are two.
    """
    if writing is None or not parsed.message_id:
        return False
    date, sender, subject = writing
    date_said = parsed.date if parsed.dated_by_header else None
    # Stored subjects are kept without the list's prefix (``subject_prefix``).
    subject_said = None if subject is None else without_list_prefix(parsed.subject, subject_prefix)
    _, parsed_sender, parsed_subject = writing_of(None, parsed.sender_address, subject_said)
    return sender is not None and sender == parsed_sender and subject == parsed_subject and date == date_said


# How many ids a mail reusing an archived Message-ID is tried under
# before one of its own is made (they are other mail's only when made so).
REUSE_IDS_MAX = 16


def _reuse_ids(parsed):
    """The ids a different mail reusing ``parsed``'s Message-ID is kept under, tried in turn.

    The body's fingerprint tells most apart; the date, those of the same body.
    """
    by_body = f"{parsed.message_id}#{parsed.fingerprint[:16]}"
    by_date = f"{by_body}.{int(parsed.date.timestamp()):x}"
    return (by_body, by_date, *(f"{by_date}.{n}" for n in range(2, REUSE_IDS_MAX)))


def _deleted_hash(messages, parsed, hash_of=message_id_hash, by_mailman=False, distinct=False, undeclared=None):
    """The hash ``parsed`` was deleted under, or None.

    Once an administrator deleted a Message-ID, mail under it (a resent
    copy, an edited copy, a re-import) is not archived, whatever the
    content, but for another post Mailman hands over: one whose body is not
    the deleted one's (a mailer reusing its ids), nor another archive's
    copy of it (``_written_alike``), is kept under a derived id. Under the
    empty id, which names no post, only the deleted body is.
    """
    tombstones = messages.tombstones
    name = hash_of(parsed.message_id)
    prefix = getattr(messages.__parent__, "subject_prefix", "")
    copied = messages.undeclared_name(undeclared)
    if copied is not None and copied in tombstones and _copy_of_deleted(tombstones[copied], parsed, prefix,
                                                                       by_mailman, distinct):
        return copied  # a copy of a post without a Message-ID, deleted

    def deleted(tombstone):
        # As _same_mail tells a live message's copies from another post.
        if tombstone.fingerprint in (None, parsed.fingerprint):
            return True
        if not parsed.message_id:
            return False  # the empty id names no post: another body is another
        if not by_mailman:
            return True
        if tombstone.by_mailman:
            return False  # Mailman handed both over: another body is another post
        return _written_alike(parsed, tombstone.writing, prefix)

    if name in tombstones and deleted(tombstones[name]):
        return name
    if name in messages or name in tombstones or messages.permalink_target(name) is not None:
        # That id is taken by a live message (or names one in Mailman's
        # Archived-At); a different one reusing it would be kept under a
        # derived id, which may have been deleted.
        for derived in map(message_id_hash, _reuse_ids(parsed)):
            if derived in tombstones and deleted(tombstones[derived]):
                return derived
        # Or it was, in another form: deleted if it is that post again.
        for kept in messages.reusing(name) if parsed.message_id else ():
            tombstone = tombstones.get(kept)
            if tombstone is not None and _copy_of_deleted(tombstone, parsed, prefix, by_mailman, distinct):
                return kept
    return None


def _copy_of_deleted(tombstone, parsed, prefix, by_mailman=False, distinct=False):
    """Whether ``parsed`` is the post a tombstone left of (not merely under the same id or written alike).

    As ``_same_mail`` tells a live message's copies: the same body, or
    another archive's copy of it; never another post of an export, nor
    another body Mailman handed over as it did the deleted one.
    """
    if tombstone.fingerprint == parsed.fingerprint:
        return True
    if distinct or (by_mailman and tombstone.by_mailman):
        return False
    return _written_alike(parsed, tombstone.writing, prefix)


def store_parsed(mailing_list, parsed, registry=None, originals=False, by_mailman=False, distinct=False):
    """Store a ``kittypyr.mail.ParsedMail``; return a ``StoreResult``.

    ``originals``: whether ``parsed`` may be the original of a message
    rebuilt from another archive (``kittypyr import`` of a list's own
    mbox): it takes that message's place when its sender or its date is
    the rebuilt one's. Mail from Mailman never does: a post reusing an old
    message's Message-ID is another post, and must not replace it.
    ``by_mailman``: ``parsed`` comes from Mailman's archiver; ``distinct``:
    from an export of kittypyr (see ``_same_mail``).
    """
    if parsed.no_archive:
        return StoreResult(SKIPPED, reason="the message asks not to be archived")
    messages = mailing_list.messages
    hash_of = _hasher(parsed)
    undeclared = _undeclared_key(parsed, mailing_list.subject_prefix)
    gone = _deleted_hash(messages, parsed, hash_of, by_mailman, distinct, undeclared)
    if gone is not None:
        return StoreResult(SKIPPED, reason=DELETED_REASON, gone=gone)
    held = messages.get(hash_of(parsed.message_id))
    if held is not None and held.rebuilt and not getattr(parsed, "rebuilt", False) and originals \
            and _may_be_original(held, parsed):
        return _replace_rebuilt(mailing_list, held, parsed, registry)
    message_id, existing = _storage_id(messages, parsed, hash_of, by_mailman, distinct, undeclared)
    if message_id is None:
        return StoreResult(DUPLICATE, existing)

    message = Message(parsed, message_id, jar=mailing_list._p_jar, subject_prefix=mailing_list.subject_prefix)
    if by_mailman:
        message.by_mailman = True
    name = hash_of(message_id)
    # Placed before it is added, so the catalog sees its thread at once.
    parent = _choose_parent(mailing_list, message, name, hash_of)
    # A reply to a deleted first message, with nothing left above it, joins
    # the thread it was in, as the replies that came before its deletion stay.
    left = _thread_left_by_deleted_parent(mailing_list, message, hash_of) if parent is None else None
    if parent is not None:
        message.parent = parent.__name__
        thread = mailing_list.threads[parent.thread]
        message.thread = thread.__name__
    elif left is not None:
        thread = left
        message.thread = thread.__name__
    else:
        thread = Thread()
        message.thread = name
    messages.add(name, message)
    if message_id != parsed.message_id:
        messages.note_reuse(hash_of(parsed.message_id), name)
    if undeclared is not None:
        messages.note_undeclared(undeclared, name)
    if parsed.permalink_id and message_id == parsed.message_id:
        # Mailman's Archived-At names this hash (an odd Message-ID header).
        messages.note_permalink(message_id_hash(parsed.permalink_id), name)
    if parent is None and left is None:
        # Added after its first message, so its aggregates are complete
        # when the catalog indexes it.
        mailing_list.threads.add(name, thread, send_events=False)
        thread.add_message(message)
        notify_added(thread, registry)
    else:
        thread.add_message(message)
        notify(ObjectModified(thread, indexes=THREAD_GROWTH_INDEXES), registry)
    if message.attachments:
        mailing_list.attachment_count.change(len(message.attachments))

    # Counted where it arrived first: mail waiting for it may carry it
    # along to another thread as it moves below it, and that move is
    # counted as a move (MessageMoved) of what is counted already.
    notify(MessageArchived(message, mailing_list), registry)
    _adopt_waiting(mailing_list, message, registry)
    if parsed.permalink_id and messages.permalink_target(message_id_hash(parsed.permalink_id)) == name:
        # And what waits for it by the id Mailman's permalink names.
        _adopt_waiting(mailing_list, message, registry, message_id_hash(parsed.permalink_id))
    return StoreResult(ARCHIVED, message)


def _may_be_original(rebuilt, parsed):
    """Whether ``parsed`` may be what ``rebuilt`` was rebuilt from: the same sender, or the same Date.

    The other archive kept both, if not always as sent (a sender's address
    in another case, a date it read otherwise): one of them, at least.
    """
    same_sender = bool(rebuilt.sender_address) and \
        rebuilt.sender_address.lower() == (parsed.sender_address or "").lower()
    return same_sender or bool(parsed.dated_by_header and rebuilt.date == parsed.date)


def _replace_rebuilt(mailing_list, message, parsed, registry):
    """The original of a rebuilt message takes its place: same name and thread, so
    the votes, tags and links made on the rebuilt one hold."""
    before = SimpleNamespace(date=message.date, timestamp=message.timestamp, sender_address=message.sender_address,
                             sender_name=message.sender_name, thread=message.thread,
                             attachments=message.attachments, mailing_list=mailing_list,
                             __name__=message.__name__)
    thread = mailing_list.threads.data.get(message.thread)
    old_start = thread.date_started if thread is not None else None
    message.replace_content(parsed, mailing_list._p_jar, mailing_list.subject_prefix)
    if len(message.attachments) != len(before.attachments):
        mailing_list.attachment_count.change(len(message.attachments) - len(before.attachments))
    notify(ObjectModified(message), registry)
    # Its original may be dated, or signed, otherwise than the copy was.
    if thread is not None and thread.refile(message, before):
        note_restart(thread, old_start, registry)
        notify(ObjectModified(thread), registry)
    notify(MessageReplaced(message, before), registry)
    return StoreResult(ARCHIVED, message, reason="replaced the message rebuilt from another archive")


def notify_added(resource, registry):
    notify(ObjectAdded(resource, resource.__parent__, resource.__name__), registry)


# The nearest ancestors a message may hang below, and wait for: a thread
# whose nearer ancestors are all missing this far up is none to rebuild,
# and a References of thousands of ids (a broken or hostile mailer) would
# otherwise be thousands of waiting lists written with each such message.
MAX_CANDIDATE_PARENTS = 50
# Names a waiting list keeps as a tuple; a longer one becomes a set, of
# which an addition writes one bucket (a thread whose first message never
# reached the archive gathers every reply here).
WAITERS_IN_A_TUPLE = 16


def _candidate_parents(message):
    """Message-IDs that could be the parent, most preferred first."""
    seen = set()
    candidates = []
    for message_id in (message.in_reply_to, *reversed(message.references)):
        if message_id and message_id not in seen and message_id != message.message_id:
            seen.add(message_id)
            candidates.append(message_id)
            if len(candidates) == MAX_CANDIDATE_PARENTS:
                break
    return candidates


def _wait_for(waiting, candidate_name, name):
    """Put ``name`` on the waiting list of the message ``candidate_name`` (not archived)."""
    waiters = waiting.get(candidate_name, ())
    if isinstance(waiters, tuple):
        if name in waiters:
            return
        if len(waiters) < WAITERS_IN_A_TUPLE:
            waiting[candidate_name] = waiters + (name,)
            return
        waiters = waiting[candidate_name] = OOTreeSet(waiters)
    waiters.add(name)


def _is_ancestor(messages, maybe_ancestor_name, name):
    """True if ``maybe_ancestor_name`` is ``name`` or lies above it."""
    seen = set()
    while name is not None and name not in seen:
        if name == maybe_ancestor_name:
            return True
        seen.add(name)
        node = messages.get(name)
        name = node.parent if node is not None else None
    return False


def _choose_parent(mailing_list, message, name, hash_of=message_id_hash):
    """Return the archived parent message of ``message`` or None.

    Each more preferred candidate that is not archived yet gets ``name``
    put on its waiting list, so it can adopt the message when it arrives.
    """
    messages = mailing_list.messages
    waiting = mailing_list.waiting_for_parent
    # Only an archived message can be above another: a new one is below
    # none, and is not looked for up the candidate's ancestors, a walk as
    # long as the thread is deep.
    archived = name in messages
    for candidate_id in _candidate_parents(message):
        candidate_name = _held_as(messages, candidate_id, hash_of)
        candidate = messages.get(candidate_name)
        if candidate is None and candidate_name in messages.tombstones:
            # Deleted: it will never arrive. Its replies hang below what is left above it.
            candidate = surviving_ancestor(messages, candidate_name)
            if candidate is None:
                continue
            candidate_name = candidate.__name__
        if candidate is None:
            _wait_for(waiting, candidate_name, name)
            continue
        if candidate_name == name or (archived and _is_ancestor(messages, name, candidate_name)):
            # Broken References that would make a cycle: skip that candidate.
            continue
        return candidate
    return None


def _held_as(messages, candidate_id, hash_of=message_id_hash):
    """The name the message of ``candidate_id`` is kept (or was deleted) under.

    Its hash; or the message whose odd Message-ID header Mailman's
    permalink names so: the message a reader of a copy replied to.
    """
    name = hash_of(candidate_id)
    if name in messages:
        return name
    return messages.permalink_target(name) or name


def _thread_left_by_deleted_parent(mailing_list, message, hash_of=message_id_hash):
    """The live thread the first deleted message ``message`` answers was in, or None."""
    messages = mailing_list.messages
    for candidate_id in _candidate_parents(message):
        tombstone = messages.tombstones.get(_held_as(messages, candidate_id, hash_of))
        thread = mailing_list.threads.live(tombstone.thread) if tombstone is not None and tombstone.thread else None
        if thread is not None:
            return thread
    return None


def surviving_ancestor(messages, name):
    """The nearest live message above the deleted message ``name``, or None."""
    seen = set()
    tombstones = messages.tombstones
    while name is not None and name not in seen:
        seen.add(name)
        live = messages.get(name)
        if live is not None:
            return live
        tombstone = tombstones.get(name)
        name = tombstone.parent if tombstone is not None else None
    return None


def stop_waiting(mailing_list, message):
    """Take ``message`` off the waiting lists of ancestors not archived yet.

    For a message an administrator placed (or deleted): an ancestor that
    arrives later must not move it again.
    """
    waiting = mailing_list.waiting_for_parent
    for candidate_id in _candidate_parents(message):
        candidate_name = message_id_hash(candidate_id)
        waiters = waiting.get(candidate_name)
        if waiters is None or message.__name__ not in waiters:
            continue
        if isinstance(waiters, tuple):
            waiters = tuple(w for w in waiters if w != message.__name__)
            waiting[candidate_name] = waiters
        else:
            waiters.remove(message.__name__)
        if not waiters:
            del waiting[candidate_name]


def _adopt_waiting(mailing_list, newcomer, registry, waited_as=None):
    """Move the messages that were waiting for ``newcomer`` (by its name, or ``waited_as``) below it."""
    waiters = mailing_list.waiting_for_parent.pop(waited_as or newcomer.__name__, ())
    messages = mailing_list.messages
    for waiter_name in list(waiters):
        waiter = messages.get(waiter_name)
        if waiter is None or waiter.parent == newcomer.__name__:
            continue
        better = _choose_parent(mailing_list, waiter, waiter_name)
        if better is not None and better.__name__ != waiter.parent:
            _reparent(mailing_list, waiter, better, registry)


def _reparent(mailing_list, message, new_parent, registry):
    """Hang ``message`` and its sub-thread below ``new_parent``."""
    threads = mailing_list.threads
    new_thread = threads[new_parent.thread]
    move_subtree(mailing_list, message, new_parent.__name__, new_thread, registry)


def move_subtree(mailing_list, message, new_parent_name, new_thread, registry=None):
    """Hang ``message`` and its sub-thread below ``new_parent_name`` in ``new_thread``.

    ``new_parent_name`` None makes ``message`` a first message of
    ``new_thread``. A thread emptied by the move is removed and its key
    left behind as an alias of ``new_thread``. Notifies what changed.
    """
    threads = mailing_list.threads
    old_thread = threads.data[message.thread]
    old_key = old_thread.__name__
    old_start = old_thread.date_started
    new_start = new_thread.date_started
    moved = old_thread.take_subtree(message.__name__)
    message.parent = new_parent_name
    for node in moved:
        node.thread = new_thread.__name__
        new_thread.add_message(node)
        notify(ObjectModified(node, indexes=("thread",)), registry)
        if old_thread is not new_thread:
            notify(MessageMoved(node, old_key), registry)
    note_restart(new_thread, new_start, registry)
    notify(ObjectModified(new_thread), registry)
    if old_thread is new_thread:
        return moved
    note_restart(old_thread, old_start, registry)
    if len(old_thread) == 0:
        threads.remove(old_key)
        threads.aliases[old_key] = new_thread.__name__
        notify(ThreadMerged(new_thread, old_key), registry)
    else:
        notify(ObjectModified(old_thread), registry)
    return moved


def note_restart(thread, old_start, registry=None):
    """Notify ``ThreadRestarted`` if ``thread`` no longer starts at ``old_start``."""
    if thread.date_started != old_start:
        notify(ThreadRestarted(thread, old_start), registry)


def ensure_mailing_list(archive, address, display_name="", description=""):
    """Return the archive's list for ``address``, creating it when unknown."""
    address = address.strip().lower()
    if "@" not in address:
        raise ValueError(f"a list is named by its posting address, not {address!r}")
    mailing_list = archive.lists.get(address)
    if mailing_list is None:
        mailing_list = archive.lists.add(address, MailingList(address, display_name, description))
    return mailing_list
