"""Threading: parents, merges and the independence from arrival order."""

import random
from datetime import datetime, timedelta, timezone

import pytest
import transaction

from kittypyr.archiving import archive_message, ensure_mailing_list
from kittypyr.msgid import message_id_hash
from tests.mailbuilder import make_message

LIST = "dev@lists.example.org"
START = datetime(2020, 5, 1, 12, 0, tzinfo=timezone.utc)


def post(n, reply_to=None, references=(), subject=None):
    """Message n, replying to message ``reply_to``, naming ``references``."""
    return make_message(
        message_id=f"<m{n}@example.org>",
        subject=subject or (f"Re: topic {reply_to}" if reply_to is not None else f"topic {n}"),
        sender=(f"Poster {n % 3}", f"poster{n % 3}@example.org"),
        date=START + timedelta(minutes=n),
        in_reply_to=f"<m{reply_to}@example.org>" if reply_to is not None else None,
        references=[f"<m{r}@example.org>" for r in references],
        body=f"message number {n}\n",
    )


def h(n):
    return message_id_hash(f"<m{n}@example.org>")


# A forest: 0 <- 1 <- 2 <- 3, 1 <- 4, 0 <- 5; 10 <- 11 <- 12; 20 alone;
# 30 is never archived but 31 and 32 both reply to it.
CORPUS = [
    post(0),
    post(1, 0, [0]),
    post(2, 1, [0, 1]),
    post(3, 2, [0, 1, 2]),
    post(4, 1, [0, 1]),
    post(5, 0, [0]),
    post(10),
    post(11, 10, [10]),
    post(12, 11, [10, 11]),
    post(20),
    post(31, 30, [30]),
    post(32, 30, [30]),
    # References only, no In-Reply-To, skipping a generation we have.
    make_message(message_id="<m40@example.org>", subject="refs only", sender=("A", "a@example.org"),
                 date=START + timedelta(hours=2), references=["<m10@example.org>", "<m12@example.org>"],
                 body="refs\n"),
]


def shape(mailing_list):
    """Every message's (parent, thread) and every thread's ordered members."""
    messages = {
        name: (m.parent, m.thread) for name, m in mailing_list.messages.items()
    }
    threads = {
        key: [name for name, _ in thread.walk()] for key, thread in mailing_list.threads.items()
    }
    return messages, threads


def archive_all(archive, raws, list_address=LIST):
    mailing_list = ensure_mailing_list(archive, list_address)
    for raw in raws:
        archive_message(mailing_list, raw)
    transaction.commit()
    return mailing_list


def test_parents_and_threads(archive):
    mailing_list = archive_all(archive, CORPUS)
    messages = mailing_list.messages
    assert messages[h(3)].parent == h(2)
    assert messages[h(4)].parent == h(1)
    assert messages[h(0)].parent is None
    assert messages[h(3)].thread == h(0)
    assert [name for name, _ in mailing_list.threads[h(0)].walk()] == [h(0), h(1), h(2), h(3), h(4), h(5)]
    assert [depth for _, depth in mailing_list.threads[h(0)].walk()] == [0, 1, 2, 3, 2, 1]
    # The nearest archived ancestor from References, last to first.
    assert messages[message_id_hash("m40@example.org")].parent == h(12)
    # Two replies to a message we never got are two threads, waiting for it.
    assert messages[h(31)].thread == h(31) and messages[h(32)].thread == h(32)
    assert set(mailing_list.threads.keys()) == {h(0), h(10), h(20), h(31), h(32)}
    assert mailing_list.thread_count == 5 and mailing_list.message_count == len(CORPUS)
    thread = mailing_list.threads[h(0)]
    assert thread.subject == "topic 0"
    assert len(thread) == 6
    assert set(thread.participants.keys()) == {"poster0@example.org", "poster1@example.org", "poster2@example.org"}


def test_forwards_equals_backwards(config, zodb):
    shapes = []
    for order in (CORPUS, list(reversed(CORPUS))):
        connection = zodb.open()
        from kittypyr.bootstrap import bootstrap_archive

        archive = bootstrap_archive(connection.root(), config.registry)
        address = f"order{len(shapes)}@example.org"
        shapes.append(shape(archive_all(archive, order, address)))
        connection.close()
    assert shapes[0] == shapes[1]


@pytest.mark.parametrize("seed", range(8))
def test_any_order_gives_the_same_threads(config, zodb, seed):
    from kittypyr.bootstrap import bootstrap_archive

    connection = zodb.open()
    archive = bootstrap_archive(connection.root(), config.registry)
    expected = shape(archive_all(archive, CORPUS, "forward@example.org"))
    shuffled = list(CORPUS)
    random.Random(seed).shuffle(shuffled)
    assert shape(archive_all(archive, shuffled, f"shuffled{seed}@example.org")) == expected
    connection.close()


def test_late_parent_absorbs_thread_and_leaves_alias(archive):
    mailing_list = archive_all(archive, [post(2, 1, [0, 1]), post(3, 2, [0, 1, 2])])
    assert set(mailing_list.threads.keys()) == {h(2)}
    archive_message(mailing_list, post(0))
    # 2 now hangs below 0 (nearest known reference), its thread absorbed.
    assert set(mailing_list.threads.keys()) == {h(0)}
    assert mailing_list.threads.resolve_alias(h(2)).__name__ == h(0)
    archive_message(mailing_list, post(1, 0, [0]))
    assert mailing_list.messages[h(2)].parent == h(1)
    assert [n for n, _ in mailing_list.threads[h(0)].walk()] == [h(0), h(1), h(2), h(3)]
    transaction.commit()


def test_cyclic_references_do_not_loop(archive):
    a = make_message(message_id="<a@x>", subject="a", sender=("A", "a@x"), date=START,
                     in_reply_to="<b@x>", references=["<b@x>"], body="a\n")
    b = make_message(message_id="<b@x>", subject="b", sender=("B", "b@x"), date=START + timedelta(1),
                     in_reply_to="<a@x>", references=["<a@x>"], body="b\n")
    mailing_list = archive_all(archive, [a, b])
    assert mailing_list.message_count == 2
    walked = [n for thread in mailing_list.threads.values() for n, _ in thread.walk()]
    assert sorted(walked) == sorted(mailing_list.messages.keys())


@pytest.mark.parametrize("depth, backwards", [(3000, False), (400, True)])
def test_deep_thread_is_not_recursive(archive, depth, backwards):
    raws = [post(0)] + [post(n, n - 1, [n - 1]) for n in range(1, depth)]
    mailing_list = archive_all(archive, reversed(raws) if backwards else raws)
    thread = mailing_list.threads[h(0)]
    walked = list(thread.walk())
    assert len(walked) == depth
    assert walked[-1] == (h(depth - 1), depth - 1)


def _written_by(archive, raw):
    """Bytes the storage grows by when ``raw`` is archived and committed."""
    storage = archive._p_jar.db().storage
    before = storage.getSize()
    archive_message(archive.lists[LIST], raw)
    transaction.commit()
    return storage.getSize() - before


def test_replies_waiting_for_one_missing_message_each_write_as_much(archive):
    """A long thread whose first message never reached the archive: each reply waits for it, and
    the 400th reply writes no more than the 40th (it once rewrote every earlier waiter's name).

    Measured against a message starting a thread of its own, archived after each reply: what the
    archive writes for any message grows as its first buckets fill."""
    archive_all(archive, [post(0)])
    waiting_costs = []
    for n in range(1, 401):
        reply = _written_by(archive, post(n, 99999, [99999]))
        alone = _written_by(archive, post(100000 + n))
        waiting_costs.append(reply - alone)
    # Means over 40 messages: a bucket's split makes one message's figure jump either way.
    early, late = sum(waiting_costs[20:60]) / 40, sum(waiting_costs[360:400]) / 40
    assert late < early + 4096, (early, late)
    mailing_list = archive.lists[LIST]
    archive_message(mailing_list, post(99999))
    transaction.commit()
    assert {mailing_list.messages[h(n)].parent for n in range(1, 401)} == {h(99999)}


def test_a_message_naming_thousands_of_missing_ancestors_waits_for_the_nearest_few(archive):
    """References are for threading: 3,000 missing ancestors are not 3,000 waiting lists to rewrite."""
    mailing_list = archive_all(archive, [post(0)])
    written = _written_by(archive, post(1, 2999, range(3000)))
    assert len(mailing_list.waiting_for_parent) <= 64
    assert written < 256 * 1024, written
    archive_message(mailing_list, post(2998, 0, [0]))  # the nearest but one arrives
    transaction.commit()
    assert mailing_list.messages[h(1)].parent == h(2998)


def _reloaded(thread):
    """``thread`` read again from the storage, as another process would find it."""
    thread._p_deactivate()
    return thread


def _records_written(archive, raw):
    """The records a commit writes when ``raw`` is archived."""
    storage = archive._p_jar.db().storage
    archive_message(archive.lists[LIST], raw)
    transaction.commit()
    serial = storage.lastTransaction()
    return sum(len(list(record)) for record in storage.iterator(serial, serial))


def test_a_small_thread_is_one_record_and_a_large_one_spreads_over_trees(archive):
    from persistent import Persistent

    from kittypyr.resources.thread import SMALL_THREAD

    mailing_list = archive_all(archive, [post(0), post(1, 0, [0]), post(2, 1, [0, 1])])
    thread = mailing_list.threads[h(0)]
    # Its members and replies were two BTrees of their own, written with
    # the thread for every reply.
    assert not isinstance(thread.members, Persistent) and not isinstance(thread.children, Persistent)
    with_reply = _records_written(archive, post(3, 0, [0]))
    alone = _records_written(archive, post(1000))
    assert with_reply < alone, (with_reply, alone)
    assert [n for n, _ in _reloaded(thread).walk()] == [h(0), h(1), h(2), h(3)]
    assert set(thread.members) == {h(0), h(1), h(2), h(3)} and len(thread) == 4
    later = list(range(4, SMALL_THREAD + 10))
    archive_all(archive, [post(n, n - 1, [n - 1]) for n in reversed(later)])
    _reloaded(thread)
    assert isinstance(thread.members, Persistent) and isinstance(thread.children, Persistent)
    assert [n for n, _ in thread.walk()] == [h(n) for n in range(SMALL_THREAD + 10)]
    assert len(thread.members) == len(thread) == SMALL_THREAD + 10


def test_a_thread_stored_as_trees_by_an_older_kittypyr_takes_replies_and_loses_messages(archive):
    from BTrees.OOBTree import OOBTree, OOTreeSet

    from kittypyr import moderation
    from kittypyr.security import User

    mailing_list = archive_all(archive, [post(0), post(1, 0, [0])])
    thread = mailing_list.threads[h(0)]
    thread.members, thread.children = OOTreeSet(thread.members), OOBTree(thread.children)
    transaction.commit()
    archive_all(archive, [post(2, 1, [0, 1])])
    assert [n for n, _ in _reloaded(thread).walk()] == [h(0), h(1), h(2)]
    moderation.delete_messages(mailing_list, [h(1)], User("mod@example.org", "Mod"))
    transaction.commit()
    assert [n for n, _ in _reloaded(thread).walk()] == [h(0), h(2)]
    assert set(thread.members) == {h(0), h(2)}


def _largest_record_written(archive, raw):
    """The size of the largest record a commit writes when ``raw`` is archived."""
    storage = archive._p_jar.db().storage
    archive_message(archive.lists[LIST], raw)
    transaction.commit()
    serial = storage.lastTransaction()
    return max(len(record.data or b"") for record in next(storage.iterator(serial, serial)))


def test_a_reply_to_a_message_with_many_replies_rewrites_no_record_of_them_all(archive):
    # An announcement answered a thousand times: every reply rewrote the
    # whole list of the first message's replies, so each cost bytes growing
    # with the thread and the storage grew with the square of its length
    # (4,000 replies wrote 581 MB).
    mailing_list = archive_all(archive, [post(0)])
    for first in range(1, 401, 50):
        archive_all(archive, [post(n, 0, [0]) for n in range(first, first + 50)])
    early = _largest_record_written(archive, post(401, 0, [0]))
    archive_all(archive, [post(n, 0, [0]) for n in range(402, 1202)])
    late = _largest_record_written(archive, post(1202, 0, [0]))
    assert late < early + 512, (early, late)

    thread = _reloaded(mailing_list.threads[h(0)])
    expected = [h(0)] + [h(n) for n in range(1, 1203)]
    assert [n for n, _ in thread.walk()] == expected
    assert [m.__name__ for m in thread.messages()] == expected
    assert len(thread) == 1203 and thread.starter == h(0)


def test_a_message_with_many_replies_is_deleted_split_and_checked_like_any_other(archive, config):
    from kittypyr import moderation
    from kittypyr.health import check_archive
    from kittypyr.security import User

    moderator = User("mod@example.org", "Mod")
    mailing_list = archive_all(archive, [post(0)] + [post(n, 0, [0]) for n in range(1, 81)]
                               + [post(100 + n, 5, [0, 5]) for n in range(40)])
    moderation.delete_messages(mailing_list, [h(7)], moderator)
    transaction.commit()
    thread = _reloaded(mailing_list.threads[h(0)])
    replies = [h(n) for n in range(1, 81) if n != 7]
    assert [name for _, name in thread.replies_to(h(0))] == replies

    # The first message's replies become first messages, with those of 5.
    moderation.delete_messages(mailing_list, [h(0)], moderator)
    transaction.commit()
    thread = _reloaded(mailing_list.threads[h(0)])
    assert thread.starter == h(1) and len(thread) == 119
    assert [name for _, name in thread.replies_to("")] == replies
    assert [name for name, _ in thread.walk()][:6] == [h(1), h(2), h(3), h(4), h(5), h(100)]

    moderation.split_thread(mailing_list.messages[h(5)], moderator)
    transaction.commit()
    assert len(_reloaded(mailing_list.threads[h(0)])) == 78
    assert [name for name, _ in mailing_list.threads[h(5)].walk()] == [h(5)] + [h(100 + n) for n in range(40)]
    assert [f for f in check_archive(archive, config.registry)[0] if f.part == "threads"] == []

    # Recounted by ``kittypyr check --repair``, the tree is the same.
    thread = mailing_list.threads[h(0)]
    walked = list(thread.walk())
    thread.children = {}
    transaction.commit()
    assert [f.part for f in check_archive(archive, config.registry, repair=True)[0]].count("threads") == 1
    transaction.commit()
    assert list(_reloaded(thread).walk()) == walked


def _loads_archiving(zodb, raw):
    """The records a connection of its own, cold, loads to archive ``raw``."""
    connection = zodb.open()
    try:
        connection.cacheMinimize()
        mailing_list = connection.root()["kittypyr"].lists[LIST]
        connection.getTransferCounts(clear=True)
        message = archive_message(mailing_list, raw)
        loads, _ = connection.getTransferCounts()
        return loads, message.parent
    finally:
        transaction.abort()
        connection.close()


def test_a_reply_at_the_end_of_a_long_chain_reads_no_message_above_it(archive, zodb):
    # A long argument, each message answering the one before: every new
    # message read every message above it, checking that it was not their
    # ancestor (which a message that was never archived cannot be). The
    # thousandth reply read a thousand messages, cold from the storage.
    archive_all(archive, [post(0)] + [post(n, n - 1, [n - 1]) for n in range(1, 400)] + [post(1000)])
    short, parent = _loads_archiving(zodb, post(1001, 1000, [1000]))
    assert parent == h(1000)
    long, parent = _loads_archiving(zodb, post(400, 399, [398, 399]))
    assert parent == h(399)
    assert long < short + 30, (short, long)


def test_references_that_would_make_a_cycle_are_still_skipped(archive):
    # 1 answers 0; 0 arrives later naming 1 as its own parent (a broken
    # mailer): 0 adopts 1, never the other way round.
    mailing_list = archive_all(archive, [post(1, 0, [0]), post(0, 1, [1])])
    messages = mailing_list.messages
    assert {messages[h(0)].parent, messages[h(1)].parent} <= {None, h(0), h(1)}
    assert not (messages[h(0)].parent == h(1) and messages[h(1)].parent == h(0))
    assert sorted(name for name, _ in mailing_list.threads[messages[h(0)].thread].walk()) == sorted([h(0), h(1)])
