"""The community's records without pages: votes, reputations, tags, read marks and the upgrade step."""

from datetime import datetime, timedelta, timezone

import pytest
import transaction
from pyramid import testing

from kittypyr.archiving import archive_message, ensure_mailing_list
from kittypyr.bootstrap import EVOLVE_STEPS, ROOT_KEY, bootstrap_archive
from kittypyr.catalog import search
from kittypyr.msgid import message_id_hash
from kittypyr.readers import (
    is_unread,
    mark_list_read,
    mark_read,
    new_messages,
    reader_for,
    start_tracking,
)
from kittypyr.tags import add_tag, list_tags, normalize_tag, remove_tag, thread_tags
from kittypyr.votes import OwnMessage, ballot, cast_vote, rebuild_totals, reputation, tally_of, thread_score
from tests.mailbuilder import make_message

LIST = "dev@lists.example.org"
START = datetime(2022, 1, 3, 8, 0, tzinfo=timezone.utc)


@pytest.fixture
def config():
    config = testing.setUp(settings={})
    for part in ("kittypyr.catalog", "kittypyr.stats", "kittypyr.people", "kittypyr.votes", "kittypyr.tags"):
        config.include(part)
    config.commit()
    yield config
    testing.tearDown()


@pytest.fixture
def archive(config, zodb):
    connection = zodb.open()
    archive = bootstrap_archive(connection.root(), config.registry)
    transaction.commit()
    yield archive
    transaction.abort()
    connection.close()


def h(n):
    return message_id_hash(f"<d{n}@example.org>")


def mail(n, reply_to=None, sender=("Ann", "ann@example.org"), minutes=None):
    return make_message(message_id=f"<d{n}@example.org>", subject=f"Subject {n}", sender=sender,
                        date=START + timedelta(minutes=n if minutes is None else minutes),
                        in_reply_to=f"<d{reply_to}@example.org>" if reply_to is not None else None)


def test_one_vote_each_changed_or_taken_back(archive):
    mailing_list = ensure_mailing_list(archive, LIST)
    message = archive_message(mailing_list, mail(1))
    thread = mailing_list.threads[h(1)]
    ann = archive.people.person_id("ann@example.org")
    bob = reader_for(archive, "bob@example.org", create=True)
    cy = reader_for(archive, "cy@example.org", create=True)
    cast_vote(archive, bob, message, 1)
    cast_vote(archive, bob, message, 1)  # the same again changes nothing
    cast_vote(archive, cy, message, -1)
    tally = tally_of(archive, message)
    assert (tally.up(), tally.down(), tally.score) == (1, 1, 0)
    cast_vote(archive, cy, message, 1)
    assert (tally.up(), tally.down()) == (2, 0)
    assert thread_score(archive, thread) == 2 and reputation(archive, ann, [LIST]) == 2
    assert reputation(archive, ann, []) == 0  # only the lists asked about
    cast_vote(archive, bob, message, 0)
    assert tally.score == 1 and ballot(bob, tally, (LIST, h(1))) == 0 and ballot(cy, tally, (LIST, h(1))) == 1
    with pytest.raises(OwnMessage):
        cast_vote(archive, reader_for(archive, "ANN@example.org", create=True), message, 1)
    with pytest.raises(ValueError):
        cast_vote(archive, bob, message, 2)


def test_a_deleted_message_leaves_no_votes_behind(archive):
    mailing_list = ensure_mailing_list(archive, LIST)
    message = archive_message(mailing_list, mail(1))
    reply = archive_message(mailing_list, mail(2, reply_to=1))
    bob = reader_for(archive, "bob@example.org", create=True)
    cast_vote(archive, bob, message, 1)
    cast_vote(archive, bob, reply, 1)
    ann = archive.people.person_id("ann@example.org")
    assert reputation(archive, ann, [LIST]) == 2
    thread = mailing_list.threads[h(1)]
    thread.remove_message(reply)
    mailing_list.messages.remove(h(2))
    assert reputation(archive, ann, [LIST]) == 1 and thread_score(archive, thread) == 1
    assert (LIST, h(2)) not in archive.votes.tallies
    assert archive.people.posts[(ann, LIST)] == 1
    # The same message archived again starts afresh: the old ballot does not count.
    again = archive_message(mailing_list, mail(2, reply_to=1))
    assert ballot(bob, tally_of(archive, again), (LIST, h(2))) == 0
    cast_vote(archive, bob, again, -1)
    assert tally_of(archive, again).score == -1 and reputation(archive, ann, [LIST]) == 0

    # Recounted offline, the totals are the same.
    archive.votes.senders[(ann, LIST)].change(40)
    rebuild_totals(archive)
    assert reputation(archive, ann, [LIST]) == 0 and thread_score(archive, thread) == 0
    assert sorted(archive.votes.tallies.keys()) == sorted([(LIST, h(1)), (LIST, h(2))])


def test_tags_that_look_alike_are_one_tag_and_mixed_scripts_none():
    # "мips" (a Cyrillic м) and a fullwidth "ｍｉｐｓ" were tags of their own,
    # shown beside "mips" and found by nobody who typed it.
    assert normalize_tag("ｍｉｐｓ") == normalize_tag("MIPS") == "mips"
    assert normalize_tag("мips") is None and normalize_tag("pаtch") is None
    assert [normalize_tag(t) for t in ("кернел", "内核", "カーネル补丁", "ΑΒΓ", "naïve")] == [
        "кернел", "内核", "カーネル补丁", "αβγ", "naïve"]


def test_tags_are_normalized_counted_and_indexed(archive):
    assert normalize_tag("  Needs Review ") == "needs-review"
    assert normalize_tag("#2.6.x") == "2.6.x"
    assert normalize_tag("c++") == "c++"
    for bad in ("", "a/b", "-dash-first", "x" * 41, "semi;colon"):
        assert normalize_tag(bad) is None, bad
    mailing_list = ensure_mailing_list(archive, LIST)
    archive_message(mailing_list, mail(1))
    archive_message(mailing_list, mail(2))
    first, second = mailing_list.threads[h(1)], mailing_list.threads[h(2)]
    assert add_tag(first, "mips", "bob@example.org")
    assert not add_tag(first, "mips", "bob@example.org")
    add_tag(first, "mips", "cy@example.org")
    add_tag(second, "mips", "cy@example.org")
    add_tag(second, "cache", "cy@example.org")
    assert thread_tags(first, "bob@example.org") == [{"tag": "mips", "count": 2, "mine": True}]
    assert list_tags(mailing_list) == [("mips", 2), ("cache", 1)]

    def tagged(tag):
        from repoze.catalog.query import Eq

        return sorted(t.__name__ for t in search(archive, Eq("kind", "thread") & Eq("tags", tag))[1])

    assert tagged("mips") == sorted([h(1), h(2)]) and tagged("cache") == [h(2)]
    assert not remove_tag(first, "mips", "dan@example.org")
    remove_tag(first, "mips", "bob@example.org")
    remove_tag(first, "mips", "cy@example.org")
    assert tagged("mips") == [h(2)] and thread_tags(first) == []
    assert list_tags(mailing_list) == [("cache", 1), ("mips", 1)]


def test_unread_since_the_last_visit(archive):
    mailing_list = ensure_mailing_list(archive, LIST)
    archive_message(mailing_list, mail(1))
    thread = mailing_list.threads[h(1)]
    reader = reader_for(archive, "bob@example.org", create=True)
    assert not is_unread(reader, thread)  # never came: nothing is marked
    start_tracking(reader, mailing_list)
    assert not is_unread(reader, thread)
    late = archive_message(mailing_list, mail(2, reply_to=1, minutes=30))
    assert is_unread(reader, thread)
    assert new_messages(reader, thread, thread.messages()) == {late.__name__}
    mark_read(reader, thread)
    assert not is_unread(reader, thread) and new_messages(reader, thread, thread.messages()) == set()
    archive_message(mailing_list, mail(3, minutes=40))
    assert is_unread(reader, mailing_list.threads[h(3)])
    mark_list_read(reader, mailing_list)
    assert not is_unread(reader, mailing_list.threads[h(3)]) and not is_unread(reader, thread)
    assert len(reader.seen) == 0


def test_an_archive_from_before_profiles_is_upgraded(archive, config):
    mailing_list = ensure_mailing_list(archive, LIST)
    archive_message(mailing_list, mail(1))
    archive_message(mailing_list, mail(2, sender=("Bob", "Bob@Example.org")))
    archive_message(mailing_list, mail(3, sender=("Bob", "bob@example.org")))
    transaction.commit()
    root = archive._p_jar.root()
    # As it was at schema version 1.
    for name in ("people", "votes", "tagging", "readers"):
        delattr(archive, name)
    archive.schema_version = 1
    transaction.commit()

    upgraded = bootstrap_archive(root, config.registry)
    assert upgraded is root[ROOT_KEY] and upgraded.schema_version == len(EVOLVE_STEPS)
    people = upgraded.people
    bob = people.person_id("bob@example.org")
    assert people.addresses[bob] == "bob@example.org"
    assert people.posts[(bob, LIST)] == 2
    assert people.posts[(people.person_id("ann@example.org"), LIST)] == 1
    assert len(upgraded.readers) == 0 and len(upgraded.votes.tallies) == 0
