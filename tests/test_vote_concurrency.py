"""Many readers voting on one busy message at the same moment: every vote counts.

Each voter is a thread with a ZODB connection of its own, as each web
request has. They all read the archive before any of them commits, so
every commit after the first finds the counters changed under it: ZODB
then asks ``BTrees.Length`` to merge the changes, which it does by adding
them up, and nobody has to retry. Only the very first votes on a message
race to create its counters; the losers retry, as pyramid_retry would, and
are counted too.
"""

import threading
from datetime import datetime, timedelta, timezone

import pytest
import transaction
from BTrees.Length import Length
from pyramid.scripting import prepare
from pyramid.threadlocal import manager as threadlocal_manager
from ZODB.POSException import ConflictError

from kittypyr import main, moderation, votes
from kittypyr.archiving import archive_message, ensure_mailing_list
from kittypyr.bootstrap import ROOT_KEY
from kittypyr.health import check_archive
from kittypyr.msgid import message_id_hash
from kittypyr.readers import reader_for
from kittypyr.security import User
from tests.mailbuilder import make_message
from tests.test_app import make_app

LIST = "busy@lists.example.org"
VOTERS = 24
START = datetime(2024, 2, 1, 12, 0, tzinfo=timezone.utc)


def mail(n, reply_to=None):
    return make_message(
        message_id=f"<busy{n}@example.org>", subject="Re: Busy" if reply_to is not None else "Busy",
        sender=("Bea Busy", "bea@example.org"), date=START + timedelta(minutes=n),
        in_reply_to=f"<busy{reply_to}@example.org>" if reply_to is not None else None,
        body=f"Busy message {n}.\n")


def voter(n):
    return f"voter{n}@example.org"


def message(archive, n):
    return archive.lists[LIST].messages[message_id_hash(f"<busy{n}@example.org>")]


def fill(registry):
    with prepare(registry=registry) as env:
        mailing_list = ensure_mailing_list(env["root"], LIST)
        archive_message(mailing_list, mail(0))
        archive_message(mailing_list, mail(1, reply_to=0))
        transaction.commit()


class Crowd:
    """``count`` threads voting up message ``n`` at once, each from its own connection.

    A voter whose commit fails with a ConflictError starts over, up to
    ``attempts`` times in all; ``conflicts`` keeps every such error.
    """

    def __init__(self, db, n, count=VOTERS, attempts=1):
        self.db = db
        self.n = n
        self.count = count
        self.attempts = attempts
        self.ready = threading.Barrier(count)
        self.conflicts = []
        self.failures = []
        self.lock = threading.Lock()

    def vote(self, number):
        manager = transaction.TransactionManager()
        connection = self.db.open(transaction_manager=manager)
        try:
            for attempt in range(self.attempts):
                manager.begin()
                archive = connection.root()[ROOT_KEY]
                reader = reader_for(archive, voter(number), create=True)
                votes.cast_vote(archive, reader, message(archive, self.n), 1)
                if attempt == 0:
                    # Everyone has read the counters before anyone commits.
                    self.ready.wait(timeout=60)
                try:
                    manager.commit()
                    return
                except ConflictError as exc:
                    manager.abort()
                    with self.lock:
                        self.conflicts.append(exc)
            self.failures.append(number)
        except Exception as exc:  # reported by the test, not lost in a thread
            self.failures.append((number, exc))
        finally:
            connection.close()

    def run(self):
        threads = [threading.Thread(target=self.vote, args=(number,)) for number in range(self.count)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(timeout=120)
        return self


def counted(db, n):
    """``(message score, thread total, sender's reputation, readers whose ballot counts)``."""
    connection = db.open()
    try:
        archive = connection.root()[ROOT_KEY]
        voted = message(archive, n)
        tally = votes.tally_of(archive, voted)
        thread = archive.lists[LIST].threads[voted.thread]
        person = archive.people.person_id(voted.sender_address)
        key = (LIST, voted.__name__)
        ballots = sum(1 for reader in archive.readers.values() if votes.ballot(reader, tally, key))
        return (tally.score, votes.thread_score(archive, thread), votes.reputation(archive, person, [LIST]),
                ballots)
    finally:
        connection.close()


@pytest.fixture
def app(tmp_path):
    application = make_app(tmp_path)
    fill(application.registry)
    yield application
    application.registry._zodb_databases[""].close()


def test_simultaneous_votes_on_one_message_merge_without_a_retry(app, monkeypatch):
    db = app.registry._zodb_databases[""]
    db.setPoolSize(VOTERS + 2)
    with prepare(registry=app.registry) as env:
        archive = env["root"]
        # Readers who used the site before, and a first vote that made the counters.
        for number in range(VOTERS):
            reader_for(archive, voter(number), create=True)
        early = reader_for(archive, "early@example.org", create=True)
        votes.cast_vote(archive, early, message(archive, 1), 1)
        transaction.commit()

    merges = []
    resolve = Length._p_resolveConflict
    monkeypatch.setattr(Length, "_p_resolveConflict",
                        lambda self, *states: merges.append(1) or resolve(self, *states))

    # Meanwhile a reply arrives in the same thread: archiving and votes touch different records.
    def reply_arrives():
        manager = transaction.TransactionManager()
        connection = db.open(transaction_manager=manager)
        try:
            mailing_list = connection.root()[ROOT_KEY].lists[LIST]
            archive_message(mailing_list, mail(2, reply_to=1), registry=app.registry)
            manager.commit()
        finally:
            connection.close()

    archiver = threading.Thread(target=reply_arrives)
    archiver.start()
    crowd = Crowd(db, 1).run()
    archiver.join(timeout=120)

    assert crowd.failures == [] and crowd.conflicts == []
    assert counted(db, 1) == (VOTERS + 1, VOTERS + 1, VOTERS + 1, VOTERS + 1)
    # Each commit after the first merged the message's, the thread's and the sender's counters.
    assert len(merges) >= 3 * (VOTERS - 1)
    with prepare(registry=app.registry) as env:
        assert len(env["root"].lists[LIST].threads[message_id_hash("<busy0@example.org>")]) == 3


def test_new_voters_and_first_votes_through_a_shared_storage(tmp_path, shared_storage):
    # The archive as the web application makes it on that server.
    application = main({}, **{"zodbconn.uri": shared_storage.uri(tmp_path / "app"),
                              "kittypyr.base_url": "http://localhost/"})
    try:
        fill(application.registry)
        with prepare(registry=application.registry) as env:
            votes.cast_vote(env["root"], reader_for(env["root"], "early@example.org", create=True),
                            message(env["root"], 1), 1)
            transaction.commit()
    finally:
        application.registry._zodb_databases[""].close()

    db = shared_storage.open_db(tmp_path / "voters", pool_size=VOTERS + 2)
    try:
        # Readers new to the site: their records are created as they vote,
        # side by side in one tree, and the storage merges those too.
        crowd = Crowd(db, 1).run()
        assert crowd.failures == [] and crowd.conflicts == []
        assert counted(db, 1) == (VOTERS + 1, VOTERS + 1, VOTERS + 1, VOTERS + 1)

        # The first votes on a message race to create its counters: the
        # losers retry once, and none is lost.
        crowd = Crowd(db, 0, attempts=3).run()
        assert crowd.failures == []
        assert 0 < len(crowd.conflicts) <= VOTERS - 1
        score, total, reputation, ballots = counted(db, 0)
        assert (score, ballots) == (VOTERS, VOTERS)
        # Both messages are in one thread and by one sender.
        assert total == 2 * VOTERS + 1 and reputation == 2 * VOTERS + 1
    finally:
        db.close()


def race(db, registry, vote_first_committed, earlier_vote):
    """A reader votes up message 1 while an administrator deletes it, both from their own connection.

    Both read the archive before either commits; ``vote_first_committed``
    says whose commit comes first. ``earlier_vote``: someone voted on the
    message before, so its counters exist already.
    """
    if earlier_vote:
        with prepare(registry=registry) as env:
            archive = env["root"]
            votes.cast_vote(archive, reader_for(archive, "early@example.org", create=True), message(archive, 1), 1)
            transaction.commit()
    voting, deleting = transaction.TransactionManager(), transaction.TransactionManager()
    voter_connection = db.open(transaction_manager=voting)
    admin_connection = db.open(transaction_manager=deleting)
    # The subscribers that keep the catalog and the counts, as in a request.
    threadlocal_manager.push({"registry": registry, "request": None})
    try:
        voting.begin()
        deleting.begin()
        archive = voter_connection.root()[ROOT_KEY]
        votes.cast_vote(archive, reader_for(archive, "late@example.org", create=True), message(archive, 1), 1)
        archive = admin_connection.root()[ROOT_KEY]
        moderation.delete_messages(archive.lists[LIST], [message(archive, 1).__name__],
                                   User("mod@example.org", "Mod"), registry=registry)
        for manager in (voting, deleting) if vote_first_committed else (deleting, voting):
            manager.commit()
    finally:
        threadlocal_manager.pop()
        voter_connection.close()
        admin_connection.close()


def standing(db):
    """``(thread total of message 0's thread, Bea's reputation)``: what pages show."""
    connection = db.open()
    try:
        archive = connection.root()[ROOT_KEY]
        first = message(archive, 0)
        thread = archive.lists[LIST].threads[first.thread]
        person = archive.people.person_id(first.sender_address)
        return votes.thread_score(archive, thread), votes.reputation(archive, person, [LIST])
    finally:
        connection.close()


@pytest.mark.parametrize("earlier_vote", [False, True], ids=["first-vote", "later-vote"])
@pytest.mark.parametrize("vote_first_committed", [False, True], ids=["deletion-first", "vote-first"])
def test_a_vote_racing_the_deletion_of_its_message_is_found_and_dropped_by_check(app, vote_first_committed,
                                                                                earlier_vote):
    db = app.registry._zodb_databases[""]
    with prepare(registry=app.registry) as env:
        archive = env["root"]
        # A vote on the message that stays, counted before and after.
        votes.cast_vote(archive, reader_for(archive, "keen@example.org", create=True), message(archive, 0), 1)
        transaction.commit()
    race(db, app.registry, vote_first_committed, earlier_vote)

    with prepare(registry=app.registry) as env:
        findings, _ = check_archive(env["root"], app.registry, repair=True)
        transaction.commit()
    # Only the vote on the message that stays counts, in its thread and for its sender.
    assert standing(db) == (1, 1)
    with prepare(registry=app.registry) as env:
        assert check_archive(env["root"], app.registry)[0] == []
        # Whatever the race left over is gone, not merely outvoted.
        assert [key[1] for key in env["root"].votes.tallies.keys()] == [message(env["root"], 0).__name__]
    assert findings == [] or all(finding.part == "votes" for finding in findings)
