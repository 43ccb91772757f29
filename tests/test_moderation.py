"""Deleting and re-threading, model level: the tree, catalog, statistics and log follow."""

from datetime import date, datetime, timedelta, timezone

import pytest
import transaction
from repoze.catalog.query import Contains, Eq

from kittypyr import moderation
from kittypyr.archiving import SKIPPED, archive_message, ensure_mailing_list, store_parsed
from kittypyr.bootstrap import EVOLVE_STEPS, ROOT_KEY, bootstrap_archive
from kittypyr.catalog import search
from kittypyr.mail import parse_message
from kittypyr.msgid import message_id_hash
from kittypyr.resources.browsing import ThreadAlias
from kittypyr.resources.deleted import DeletedMessage, DeletedThread
from kittypyr.security import User
from kittypyr.stats import activity_of
from tests.mailbuilder import attachment, make_message, multipart, text_part

LIST = "dev@example.org"
OTHER = "users@example.org"
START = datetime(2021, 3, 1, 9, 0, tzinfo=timezone.utc)
DAY = date(2021, 3, 1)
ADMIN = User("admin@example.org", "Ada Admin")
ADA = ("Ada", "ada@example.org")
BOB = ("Bob Builder", "bob@example.org")


def h(n):
    return message_id_hash(f"<mod{n}@example.org>")


def mail(n, reply_to=None, sender=ADA, body=None, minutes=None):
    return make_message(
        message_id=f"<mod{n}@example.org>",
        subject=f"Re: topic {reply_to}" if reply_to is not None else f"topic {n}",
        sender=sender,
        date=START + timedelta(minutes=n if minutes is None else minutes),
        in_reply_to=f"<mod{reply_to}@example.org>" if reply_to is not None else None,
        references=[f"<mod{reply_to}@example.org>"] if reply_to is not None else None,
        body=body or f"plain words of message {n}\n",
    )


# Thread 0: 0 <- 1 <- 2, 1 <- 3, 0 <- 4 (Bob wrote 1 and 4, 1 carries an attachment
# and a word nobody else uses). Thread 10: 10 <- 11. Thread 20 alone.
def corpus():
    return [
        mail(0),
        mail(1, 0, sender=BOB, body=multipart(
            "mixed", text_part("my password is hunter2xyzzy\n"),
            attachment(b"secret,figures\n", "text/csv", "figures.csv"))),
        mail(2, 1),
        mail(3, 1),
        mail(4, 0, sender=BOB),
        mail(10),
        mail(11, 10),
        mail(20),
    ]


@pytest.fixture
def dev(archive, config):
    config.include("kittypyr.stats")
    config.commit()
    mailing_list = ensure_mailing_list(archive, LIST)
    for raw in corpus():
        archive_message(mailing_list, raw)
    transaction.commit()
    return mailing_list


def count(archive, query):
    return search(archive, query)[0]


def tree(thread):
    return [(name, depth) for name, depth in thread.walk()]


def test_a_deleted_reply_leaves_a_tombstone_and_its_replies_move_up(archive, dev):
    thread = dev.threads[h(0)]
    entry = moderation.delete_messages(dev, [h(1)], ADMIN, reason="leaked password")

    assert h(1) not in dev.messages and dev.messages.get(h(1)) is None
    gone = dev.messages[h(1)]
    assert isinstance(gone, DeletedMessage)
    assert gone.tombstone.thread == h(0) and gone.tombstone.parent == h(0)
    assert gone.thread() is thread
    assert not hasattr(gone.tombstone, "subject") and not hasattr(gone.tombstone, "body_text")
    # 2 and 3 replied to 1: they now hang from 0, and say so.
    assert tree(thread) == [(h(0), 0), (h(2), 1), (h(3), 1), (h(4), 1)]
    assert dev.messages[h(2)].parent == h(0) and dev.messages[h(3)].parent == h(0)
    assert len(thread) == 4 and dev.message_count == 7
    assert dev.attachment_count() == 0
    assert thread.participants == {"ada@example.org": 3, "bob@example.org": 1}

    assert count(archive, Contains("text", "hunter2xyzzy")) == 0
    assert archive.catalog["text"].index._lexicon.get_wid("hunter2xyzzy") == 0
    assert count(archive, Eq("kind", "message") & Eq("list", LIST)) == 7
    assert count(archive, Eq("sender", "bob@example.org")) == 1

    assert entry.action == "delete-messages" and entry.actor == ADMIN.address
    assert entry.reason == "leaked password" and entry.summary == "Deleted 1 message"
    assert entry.messages == ((LIST, h(1), h(0), (START + timedelta(minutes=1)).isoformat()),)
    assert archive.audit_log.newest() == [entry]
    assert archive.audit_log.newest(list_address=LIST) == [entry]
    assert archive.audit_log.newest(list_address=OTHER) == []


def test_statistics_forget_deleted_messages(archive, dev):
    activity = activity_of(dev)
    assert activity.top_senders(DAY) == [("ada@example.org", "Ada", 6), ("bob@example.org", "Bob Builder", 2)]
    moderation.delete_messages(dev, [h(1)], ADMIN)
    assert activity.top_senders(DAY) == [("ada@example.org", "Ada", 6), ("bob@example.org", "Bob Builder", 1)]
    assert activity.per_month["2021-03"] == 7
    moderation.delete_messages(dev, [h(4)], ADMIN)
    assert activity.top_senders(DAY) == [("ada@example.org", "Ada", 6)]
    # Nothing of Bob is left in the aggregates, not even his name.
    assert "bob@example.org" not in activity.sender_names
    assert "bob@example.org" not in activity.participants
    assert dict(activity.busiest_threads(DAY))[h(0)] == 3


def test_the_first_message_goes_and_the_thread_keeps_its_key(archive, dev):
    thread = dev.threads[h(0)]
    moderation.delete_messages(dev, [h(0)], ADMIN)
    assert dev.threads[h(0)] is thread
    # The replies to 0 are the thread's first messages now, oldest first.
    assert tree(thread) == [(h(1), 0), (h(2), 1), (h(3), 1), (h(4), 0)]
    assert thread.starter == h(1) and thread.subject == "Re: topic 0"
    assert thread.date_started == START + timedelta(minutes=1)
    assert dev.messages[h(1)].parent is None and dev.messages[h(4)].parent is None
    assert dev.messages[h(0)].tombstone.parent is None
    found = search(archive, Eq("kind", "thread") & Eq("date", int(thread.date_started.timestamp())))[1]
    assert list(found) == [thread]
    # The chronology of thread starts knows the new start, and only it.
    starts = activity_of(dev).thread_starts
    assert (int(thread.date_started.timestamp()), h(0)) in starts
    assert (int(START.timestamp()), h(0)) not in starts
    assert len(starts) == 3


def test_a_thread_deleted_whole_answers_gone(archive, dev):
    entry = moderation.delete_thread(dev.threads[h(10)], ADMIN, reason="spam")
    assert entry.action == "delete-thread"
    assert entry.summary == f"Deleted the thread {h(10)} (2 messages)"
    assert isinstance(dev.threads[h(10)], DeletedThread)
    assert h(10) not in dev.threads and dev.thread_count == 2
    assert isinstance(dev.messages[h(11)], DeletedMessage)
    assert dev.messages[h(11)].thread() is None
    assert count(archive, Eq("thread", h(10))) == 0
    assert [key for _, key in activity_of(dev).thread_starts] == [h(0), h(20)]


def test_deleting_nothing_is_refused(archive, dev):
    moderation.delete_messages(dev, [h(20)], ADMIN)
    with pytest.raises(moderation.ModerationRefused):
        moderation.delete_messages(dev, [h(20), "NOSUCHHASH"], ADMIN)
    assert len(archive.audit_log) == 1


def test_deleted_mail_is_not_archived_again(archive, dev):
    moderation.delete_messages(dev, [h(1)], ADMIN)
    again = store_parsed(dev, parse_message(corpus()[1]))
    assert again.outcome == SKIPPED and again.gone == h(1)
    assert "deleted" in again.reason
    assert archive_message(dev, corpus()[1]) is None
    # Not even when Mailman's copy differs a little.
    altered = mail(1, 0, sender=BOB, body="my password is hunter2xyzzy, resent\n")
    assert archive_message(dev, altered) is None
    assert h(1) not in dev.messages and count(archive, Contains("text", "hunter2xyzzy")) == 0


def test_a_deleted_post_without_a_message_id_leaves_the_others_without_one_archivable(archive, dev):
    # "Message-ID: <>" names no post: once one such post was deleted, an
    # import skipped every other one as "deleted by its administrators".
    def without_id(n, body):
        raw = make_message(message_id="<x>", subject=f"no id {n}", sender=BOB, date=START, body=body)
        return raw.replace(b"Message-ID: <x>", b"Message-ID: <>")

    first = store_parsed(dev, parse_message(without_id(1, "the first post without an id\n")))
    moderation.delete_messages(dev, [first.message.__name__], ADMIN)
    again = store_parsed(dev, parse_message(without_id(1, "the first post without an id\n")), originals=True)
    assert again.outcome == SKIPPED and "deleted" in again.reason
    other = store_parsed(dev, parse_message(without_id(2, "another post, other words\n")), originals=True)
    assert other.outcome != SKIPPED, other.reason
    assert count(archive, Contains("text", "other words")) == 1


def test_a_late_reply_to_a_deleted_message_joins_its_thread(archive, dev):
    moderation.delete_messages(dev, [h(2)], ADMIN)
    late = archive_message(dev, mail(5, 2))
    assert late.parent == h(1) and late.thread == h(0)
    assert h(2) not in dev.waiting_for_parent


def test_a_late_reply_to_a_deleted_first_message_joins_its_thread_as_an_earlier_one_stays(archive, dev):
    # Threading does not depend on arrival order: a reply to the first
    # message that came before its deletion stays in the thread; one that
    # came after started a thread of its own.
    early = archive_message(dev, mail(5, 0))
    moderation.delete_messages(dev, [h(0)], ADMIN)
    late = archive_message(dev, mail(6, 0))
    assert early.thread == late.thread == h(0)
    assert early.parent is None and late.parent is None
    assert h(6) not in dev.threads.data and dev.thread_count == 3
    assert set(dev.threads[h(0)].members) == {h(1), h(2), h(3), h(4), h(5), h(6)}


def test_a_sender_leaves_one_list_or_every_list(archive, dev):
    users = ensure_mailing_list(archive, OTHER)
    archive_message(users, make_message(message_id="<elsewhere@example.org>", subject="hi", sender=BOB,
                                        date=START, body="bob elsewhere\n"))
    assert [m.__name__ for m in moderation.messages_from(archive, "Bob@Example.org", dev)] == [h(1), h(4)]
    assert len(moderation.messages_from(archive, "bob@example.org")) == 3

    entries = moderation.delete_sender(archive, "bob@example.org", ADMIN, "asked to be forgotten", dev)
    assert [e.summary for e in entries] == ["Deleted all 2 messages from bob@example.org"]
    assert count(archive, Eq("sender", "bob@example.org")) == 1
    assert len(users.messages) == 1

    entries = moderation.delete_sender(archive, "bob@example.org", ADMIN, "asked to be forgotten")
    assert [(e.lists, e.site_wide) for e in entries] == [((OTHER,), True)]
    assert count(archive, Eq("sender", "bob@example.org")) == 0
    with pytest.raises(moderation.ModerationRefused):
        moderation.delete_sender(archive, "bob@example.org", ADMIN)
    assert [e.lists for e in archive.audit_log.newest()] == [(OTHER,), (LIST,)]


def test_reattaching_a_thread_keeps_message_urls_and_leaves_an_alias(archive, dev):
    entry = moderation.reattach_thread(dev.threads[h(10)], dev.messages[h(3)], ADMIN, "same topic")
    assert entry.summary == f"Moved the thread {h(10)} (2 messages) below message {h(3)} of the thread {h(0)}"
    thread = dev.threads[h(0)]
    assert tree(thread)[-4:] == [(h(3), 2), (h(10), 3), (h(11), 4), (h(4), 1)]
    assert dev.messages[h(10)].parent == h(3) and dev.messages[h(11)].thread == h(0)
    alias = dev.threads[h(10)]
    assert isinstance(alias, ThreadAlias) and alias.target is thread
    assert count(archive, Eq("thread", h(0))) == 8  # 7 messages and the thread
    assert dict(activity_of(dev).busiest_threads(DAY)) == {h(0): 7, h(20): 1}
    assert [key for _, key in activity_of(dev).thread_starts] == [h(0), h(20)]

    with pytest.raises(moderation.ModerationRefused):
        moderation.reattach_thread(thread, dev.messages[h(2)], ADMIN)
    # A thread that is gone after its merge is gone for its alias too.
    moderation.delete_thread(thread, ADMIN)
    assert isinstance(dev.threads[h(10)], DeletedThread)


def test_splitting_makes_a_new_thread_of_a_subtree(archive, dev):
    entry = moderation.split_thread(dev.messages[h(1)], ADMIN, "another topic")
    assert entry.threads == (h(0), h(1))
    new = dev.threads[h(1)]
    assert tree(new) == [(h(1), 0), (h(2), 1), (h(3), 1)]
    assert new.subject == "Re: topic 0" and dev.messages[h(1)].parent is None
    assert tree(dev.threads[h(0)]) == [(h(0), 0), (h(4), 1)]
    assert count(archive, Eq("thread", h(1))) == 4
    assert count(archive, Eq("kind", "thread") & Eq("list", LIST)) == 4
    assert dict(activity_of(dev).busiest_threads(DAY))[h(1)] == 3
    assert (int(new.date_started.timestamp()), h(1)) in activity_of(dev).thread_starts

    with pytest.raises(moderation.ModerationRefused):
        moderation.split_thread(dev.messages[h(20)], ADMIN)  # already alone


def test_split_off_messages_stay_where_an_administrator_put_them(archive, dev):
    # 31 waits for 30, which has not arrived; an administrator splits it off 20.
    reply = archive_message(dev, make_message(
        message_id="<mod31@example.org>", subject="late", sender=ADA, date=START + timedelta(hours=1),
        in_reply_to="<mod30@example.org>", references=["<mod20@example.org>", "<mod30@example.org>"],
        body="waiting\n"))
    assert reply.thread == h(20)
    moderation.split_thread(reply, ADMIN)
    archive_message(dev, mail(30, 20, minutes=50))
    assert dev.messages[h(31)].thread == h(31) and dev.messages[h(31)].parent is None


def test_find_message_understands_hashes_and_urls(dev):
    find = moderation.find_message
    assert find(dev, h(2)).__name__ == h(2)
    assert find(dev, h(2).lower()).__name__ == h(2)
    assert find(dev, f"https://lists.example.org/list/{LIST}/message/{h(3)}/").__name__ == h(3)
    assert find(dev, f"/list/{LIST}/thread/{h(10)}/?view=flat").__name__ == h(10)
    assert find(dev, f"/list/{OTHER}/message/{h(3)}/") is None
    assert find(dev, "nonsense") is None and find(dev, "") is None


def test_an_older_archive_gains_the_deletion_records(zodb, config):
    connection = zodb.open()
    archive = bootstrap_archive(connection.root(), config.registry)
    ensure_mailing_list(archive, LIST)
    # As version 1 left them.
    del archive.audit_log
    del archive.lists[LIST].messages.tombstones
    del archive.lists[LIST].threads.tombstones
    archive.schema_version = 1
    transaction.commit()
    archive = bootstrap_archive(connection.root(), config.registry)
    assert archive.schema_version == len(EVOLVE_STEPS) and len(archive.audit_log) == 0
    assert len(archive.lists[LIST].messages.tombstones) == 0
    assert connection.root()[ROOT_KEY] is archive
    transaction.abort()
    connection.close()
