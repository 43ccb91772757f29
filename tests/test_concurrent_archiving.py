"""Two messages archived at the same moment by two processes: both commit.

Each writer has a ZODB connection (and transaction) of its own, as two
waitress processes on one ZEO server have; both read the archive before
either commits. The messages share a rare word, so both append a posting
to the same word's packed postings: the text index's buckets merge such
appends instead of failing one writer with a ConflictError.
"""

from datetime import datetime, timedelta, timezone

import transaction
from pyramid.scripting import prepare
from pyramid.threadlocal import manager as threadlocal_manager

import pytest
from ZODB.POSException import ConflictError

from kittypyr.archiving import archive_message, ensure_mailing_list
from kittypyr.bootstrap import ROOT_KEY
from kittypyr.catalog import search
from kittypyr.merging import AppendedBytesBucket, Counts, KeyedCountsBucket
from repoze.catalog.query import Contains
from tests.mailbuilder import make_message
from tests.test_app import make_app

LIST = "pair@lists.example.org"
START = datetime(2024, 3, 1, 12, 0, tzinfo=timezone.utc)


def mail(n, body):
    # One sender, days apart: the shared day and month counts and the word
    # postings are what both writers change.
    return make_message(message_id=f"<pair{n}@example.org>", subject="Topic",
                        sender=("Writer", "writer@example.org"),
                        date=START + timedelta(days=10 * n), body=body)


def writer(db, registry):
    manager = transaction.TransactionManager()
    connection = db.open(transaction_manager=manager)
    return manager, connection, connection.root()[ROOT_KEY]


def test_two_writers_sharing_words_both_commit(tmp_path):
    app = make_app(tmp_path)
    db = app.registry._zodb_databases[""]
    try:
        with prepare(registry=app.registry) as env:
            ensure_mailing_list(env["root"], LIST)
            # Every word the other two use is known already: new words are
            # numbered by the lexicon, and two writers numbering theirs at
            # once conflict (and are retried).
            archive_message(env["root"].lists[LIST], mail(0, "More on gyroscopes and zeppelins, part 1 2.\n"))
            env["request"].tm.commit()
        first, second = writer(db, app.registry), writer(db, app.registry)
        # As in a request: the app's registry is the current one (its subscribers index).
        threadlocal_manager.push({"registry": app.registry, "request": None})
        try:
            for n, (manager, connection, archive) in enumerate((first, second), 1):
                archive_message(archive.lists[LIST], mail(n, f"More on gyroscopes and zeppelins, part {n}.\n"))
            for manager, connection, archive in (first, second):
                manager.commit()  # the second finds the first's changes and merges them
                connection.close()
        finally:
            threadlocal_manager.pop()
        with prepare(registry=app.registry) as env:
            archive = env["root"]
            assert len(archive.lists[LIST].messages) == 3
            assert archive.lists[LIST].activity.per_month["2024-03"] == 3
            for word, expected in (("gyroscopes", 3), ("zeppelins", 3), ("1", 2)):
                count, _ = search(archive, Contains("text", word))
                assert count == expected, word
    finally:
        db.close()


def test_two_processes_sharing_words_both_commit_on_a_shared_storage(tmp_path, shared_storage):
    # Two applications with a database each, as two waitress processes on
    # one ZEO server or one PostgreSQL database have: the storage, not one
    # process's memory, sees both commits and merges them.
    from kittypyr import main

    apps = [main({}, **{"zodbconn.uri": shared_storage.uri(tmp_path / name),
                        "kittypyr.base_url": "http://localhost/"}) for name in ("first", "second")]
    try:
        with prepare(registry=apps[0].registry) as env:
            ensure_mailing_list(env["root"], LIST)
            archive_message(env["root"].lists[LIST], mail(0, "More on gyroscopes and zeppelins, part 1 2.\n"))
            env["request"].tm.commit()
        for app in apps:  # the second process must have heard of the list the first made
            shared_storage.catch_up(app.registry._zodb_databases[""])
        writers = [writer(app.registry._zodb_databases[""], app.registry) for app in apps]
        for n, ((manager, connection, archive), app) in enumerate(zip(writers, apps), 1):
            threadlocal_manager.push({"registry": app.registry, "request": None})
            try:
                archive_message(archive.lists[LIST], mail(n, f"More on gyroscopes and zeppelins, part {n}.\n"))
            finally:
                threadlocal_manager.pop()
        for manager, connection, archive in writers:
            manager.commit()
            connection.close()
        for app in apps:
            shared_storage.catch_up(app.registry._zodb_databases[""])
            with prepare(registry=app.registry) as env:
                archive = env["root"]
                assert len(archive.lists[LIST].messages) == 3
                assert archive.lists[LIST].activity.per_month["2024-03"] == 3
                for word, expected in (("gyroscopes", 3), ("zeppelins", 3), ("1", 2)):
                    count, _ = search(archive, Contains("text", word))
                    assert count == expected, word
    finally:
        for app in apps:
            app.registry._zodb_databases[""].close()


def test_appends_to_one_value_are_kept_and_anything_else_is_a_conflict():
    bucket = AppendedBytesBucket()
    old = ((1, b"aaaa", 2, b"bbbb"),)
    committed = ((1, b"aaaaCCCC", 2, b"bbbb", 3, b"xxxx"),)
    new = ((1, b"aaaaNNNN", 2, b"bbbbMMMM", 3, b"yyyy"),)
    assert bucket._p_resolveConflict(old, committed, new) == (
        (1, b"aaaaCCCCNNNN", 2, b"bbbbMMMM", 3, b"xxxxyyyy"),)
    shortened = ((1, b"aa", 2, b"bbbb"),)
    with pytest.raises(ConflictError):
        bucket._p_resolveConflict(old, shortened, new)
    split = ((1, b"aaaa"), object())
    with pytest.raises(ConflictError):
        bucket._p_resolveConflict(old, split, new)


def test_two_changes_of_one_count_add_up():
    tree = Counts()
    old = (((("2024-03", 5, "2024-04", 1),),),)
    committed = (((("2024-03", 6, "2024-04", 1),),),)
    new = (((("2024-03", 6, "2024-04", 0 + 2),),),)
    assert tree._p_resolveConflict(old, committed, new) == (((("2024-03", 7, "2024-04", 2),),),)
    gone = (((("2024-03", 5),),),)  # one writer took the last April message away
    assert tree._p_resolveConflict(old, gone, committed) == (((("2024-03", 6),),),)
    assert KeyedCountsBucket()._p_resolveConflict(((("d", "a"), 1),), ((("d", "a"), 2),), ((("d", "a"), 2),)) == (
        (("d", "a"), 3),)
