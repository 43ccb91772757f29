"""A real HyperKitty 1.3.12's database, built by its own hyperkitty_import, moved in with
``kittypyr import-hyperkitty``: its URLs keep answering, its votes and tags are kept."""

import sqlite3
from datetime import datetime, timedelta, timezone

import pytest
from pyramid.paster import bootstrap
from webtest import TestApp

from kittypyr.people import person_id_of
from kittypyr.readers import reader_for
from kittypyr.tags import thread_tags
from kittypyr.votes import reputation
from tests.functional import kittypyr, mbox_bytes, write_config
from tests.hyperkitty_site import HYPERKITTY_PYTHON, HyperKittySite
from tests.mailbuilder import attachment, make_message, multipart, text_part

LIST = "dev@lists.example.org"
START = datetime(2021, 3, 1, 9, 0, tzinfo=timezone.utc)
ADA, BOB, CY = ("Ada", "ada@example.org"), ("Bob", "bob@example.org"), ("Cy", "cy@example.org")

pytestmark = pytest.mark.skipif(not HYPERKITTY_PYTHON.exists(),
                                reason="no HyperKitty virtualenv (make hyperkitty-venv)")


def _mail():
    at = lambda minutes: START + timedelta(minutes=minutes)  # noqa: E731
    return [
        # Late in the mbox, early in time: HyperKitty, reading in mbox order, finds no
        # parent for it and starts a thread of its own; kittypyr puts it in its thread.
        make_message(message_id="<early@example.org>", subject="Re: Release plan", sender=CY,
                     date=at(2), in_reply_to="<start@example.org>", body="Friday, yes.\n"),
        make_message(message_id="<start@example.org>", subject="Release plan", sender=ADA, date=at(0),
                     body="Shall we release on Friday?\n"),
        make_message(message_id="<reply@example.org>", subject="Re: Release plan", sender=BOB, date=at(5),
                     in_reply_to="<start@example.org>", references="<start@example.org>",
                     body="Friday is fine.\n"),
        # Its In-Reply-To names mail neither ever saw: a thread of its own in both.
        make_message(message_id="<split@example.org>", subject="Re: Release plan", sender=CY, date=at(9),
                     in_reply_to="<missing@example.org>",
                     references="<start@example.org> <reply@example.org> <missing@example.org>",
                     body="Late to the party.\n"),
        # A Message-ID ending in a comma inside its brackets.
        make_message(message_id="<comma@example.org,>", subject="Odd id", sender=CY, date=at(20),
                     body="Odd.\n"),
        make_message(message_id="<log@example.org>", subject="Build log", sender=BOB,
                     date="Mon, 01 Mar 2021 10:00:00 +0100",
                     body=multipart("mixed", text_part("A log.\n"),
                                    attachment(b"line one\nline two\n", "text/plain", "build.log"))),
    ]


_COMMUNITY = """
from django.contrib.auth.models import User
from hyperkitty.models import Email, Favorite, LastView, MailingList, Tag, Tagging, Vote
ada = User.objects.create_user("ada", "Ada@Example.org", "x")
dan = User.objects.create_user("dan", "dan@example.org", "x")
reply = Email.objects.get(message_id="reply@example.org")
Vote.objects.create(email=reply, user=ada, value=1)
Vote.objects.create(email=reply, user=dan, value=-1)
Vote.objects.create(email=Email.objects.get(message_id="log@example.org"), user=dan, value=1)
thread = Email.objects.get(message_id="start@example.org").thread
tag = Tag.objects.create(name="release")
Tagging.objects.create(tag=tag, thread=thread, user=ada)
Favorite.objects.create(thread=Email.objects.get(message_id="early@example.org").thread, user=dan)
LastView.objects.create(thread=thread, user=ada)
MailingList.objects.create(name="board@lists.example.org", archive_policy=1, subject_prefix="[Board] ")
"""


@pytest.fixture(scope="session")
def hyperkitty_database(tmp_path_factory):
    """A HyperKitty database of ``_mail()`` with votes, a tag and a favourite."""
    return _build(HyperKittySite(tmp_path_factory.mktemp("hyperkitty"))).database


def _build(site):
    site.manage("migrate")
    mbox = site.folder / "dev.mbox"
    mbox.write_bytes(mbox_bytes(_mail()))
    site.manage("hyperkitty_import", "--no-sync-mailman", "-l", LIST, str(mbox))
    site.shell(_COMMUNITY)
    return site


@pytest.fixture(scope="session")
def migrated(hyperkitty_database, tmp_path_factory):
    folder = tmp_path_factory.mktemp("kittypyr")
    config = write_config(folder)
    result = kittypyr("import-hyperkitty", config, hyperkitty_database, check=True)
    return config, result.stdout


def _hyperkitty(database, sql):
    with sqlite3.connect(database) as connection:
        return connection.execute(sql).fetchall()


def test_every_message_answers_under_its_hyperkitty_hash(hyperkitty_database, migrated):
    config, output = migrated
    assert "6 messages imported" in output
    env = bootstrap(str(config))
    try:
        browser = TestApp(env["app"])
        hashes = _hyperkitty(hyperkitty_database, "SELECT message_id, message_id_hash FROM hyperkitty_email")
        assert len(hashes) == 6
        for message_id, name in hashes:
            page = browser.get(f"/list/{LIST}/message/{name}/")
            assert message_id in page.text
            raw = browser.get(f"/list/{LIST}/message/{name}/raw")
            assert "X-Kittypyr-Rebuilt" in raw.text
        log = dict(hashes)["log@example.org"]
        # The date and the sender's time zone come through.
        messages = env["root"].lists[LIST].messages
        assert messages[dict(hashes)["start@example.org"]].date == START
        rebuilt_log = messages[log]
        assert rebuilt_log.date == datetime(2021, 3, 1, 9, 0, tzinfo=timezone.utc)
        assert "+0100" in browser.get(f"/list/{LIST}/message/{log}/raw").text
        links = [a["href"] for a in browser.get(f"/list/{LIST}/message/{log}/").html.select("a[href]")
                 if "/attachment/" in a["href"] and a["href"].endswith("/build.log")]
        assert links and browser.get(links[0]).body == b"line one\nline two\n"
    finally:
        env["closer"]()
        env["registry"]._zodb_databases[""].close()


def test_a_private_list_stays_private(migrated):
    config, output = migrated
    assert "2 lists" in output
    env = bootstrap(str(config))
    try:
        assert env["root"].lists["board@lists.example.org"].archive_policy == "private"
        assert env["root"].lists[LIST].archive_policy == "public"
        # Mailman's subject prefix, as HyperKitty kept it: left out of the mail archived next.
        assert env["root"].lists["board@lists.example.org"].subject_prefix == "[Board] "
        TestApp(env["app"]).get("/list/board@lists.example.org/", status=403)
    finally:
        env["closer"]()
        env["registry"]._zodb_databases[""].close()


def test_every_hyperkitty_thread_id_answers(hyperkitty_database, migrated):
    config, _ = migrated
    env = bootstrap(str(config))
    try:
        browser = TestApp(env["app"])
        start, early, split = (_hyperkitty(hyperkitty_database, "SELECT t.thread_id FROM hyperkitty_thread t JOIN "
                                    f"hyperkitty_email e ON e.id = t.starting_email_id WHERE e.message_id = '{m}'")
                        for m in ("start@example.org", "early@example.org", "split@example.org"))
        ids = [row[0] for row in _hyperkitty(hyperkitty_database, "SELECT thread_id FROM hyperkitty_thread")]
        # HyperKitty split the conversation; kittypyr keeps it whole.
        assert len(ids) == 5
        for thread_id in ids:
            assert browser.get(f"/list/{LIST}/thread/{thread_id}/", status="*").status_int in (200, 301)
        assert "Friday is fine" in browser.get(f"/list/{LIST}/thread/{start[0][0]}/").text
        assert "Late to the party" in browser.get(f"/list/{LIST}/thread/{split[0][0]}/").text
        moved = browser.get(f"/list/{LIST}/thread/{early[0][0]}/", status=301)
        assert moved.location.endswith(f"/list/{LIST}/thread/{start[0][0]}/")
        assert "Friday, yes" in moved.follow().text
    finally:
        env["closer"]()
        env["registry"]._zodb_databases[""].close()


def test_votes_tags_and_favourites_are_kept_by_address(hyperkitty_database, migrated):
    config, output = migrated
    assert "3 votes, 1 tag, 1 favourite, 1 last view kept" in output
    env = bootstrap(str(config))
    try:
        root = env["root"]
        mailing_list = root.lists[LIST]
        (reply_hash,), = _hyperkitty(hyperkitty_database,
                                     "SELECT message_id_hash FROM hyperkitty_email WHERE message_id = 'reply@example.org'")
        ada, dan = reader_for(root, "ada@example.org"), reader_for(root, "dan@example.org")
        assert ada.votes[(LIST, reply_hash)][0] == 1
        assert dan.votes[(LIST, reply_hash)][0] == -1
        thread = mailing_list.threads.live(mailing_list.messages[reply_hash].thread)
        # Ada's account address was in capitals: readers are known by the address in lower case.
        assert thread_tags(thread, "ada@example.org") == [{"tag": "release", "count": 1, "mine": True}]
        # Bob's reputation: +1 and -1 on his reply, +1 on his build log.
        assert reputation(root, person_id_of(root, "bob@example.org"), [LIST]) == 1
        assert list(dan.favourites.keys()) == [(LIST, thread.__name__)]
        # Ada viewed the thread after its last message: it is read for her.
        assert ada.seen[(LIST, thread.__name__)] >= thread.last_date.timestamp()
        browser = TestApp(env["app"])
        page = browser.get(f"/list/{LIST}/thread/{thread.__name__}/")
        assert "release" in page.text
    finally:
        env["closer"]()
        env["registry"]._zodb_databases[""].close()


def test_importing_the_original_mbox_replaces_rebuilt_mail_keeping_votes_and_tags(hyperkitty_database,
                                                                                  tmp_path):
    config = write_config(tmp_path)
    kittypyr("import-hyperkitty", config, hyperkitty_database, check=True)
    originals = tmp_path / "dev.mbox"
    originals.write_bytes(mbox_bytes(_mail()))
    output = kittypyr("import", config, LIST, originals, "--quiet", check=True).stdout
    (reply_hash,), = _hyperkitty(hyperkitty_database,
                                 "SELECT message_id_hash FROM hyperkitty_email WHERE message_id = 'reply@example.org'")
    env = bootstrap(str(config))
    try:
        root = env["root"]
        mailing_list = root.lists[LIST]
        assert len(mailing_list.messages) == 6, output
        browser = TestApp(env["app"])
        for message_id, name in _hyperkitty(hyperkitty_database,
                                            "SELECT message_id, message_id_hash FROM hyperkitty_email"):
            raw = browser.get(f"/list/{LIST}/message/{name}/raw").text
            assert "X-Kittypyr-Rebuilt" not in raw
            assert "To: list@example.org" in raw  # a header HyperKitty did not keep
        assert reader_for(root, "ada@example.org").votes[(LIST, reply_hash)][0] == 1
        assert reputation(root, person_id_of(root, "bob@example.org"), [LIST]) == 1
        thread = mailing_list.threads.live(mailing_list.messages[reply_hash].thread)
        assert thread_tags(thread) == [{"tag": "release", "count": 1, "mine": False}]
        assert "Friday is fine" in browser.get(f"/list/{LIST}/message/{reply_hash}/").text
    finally:
        env["closer"]()
        env["registry"]._zodb_databases[""].close()


def test_a_hyperkitty_database_on_postgresql_is_read_the_same(hyperkitty_database, postgresql, tmp_path):
    name = postgresql.create_database("hyperkitty")
    site = HyperKittySite(tmp_path / "site", postgresql=("127.0.0.1", postgresql.port, postgresql.user, name))
    _build(site)
    (tmp_path / "kittypyr").mkdir()
    config = write_config(tmp_path / "kittypyr")
    url = f"postgresql://{postgresql.user}@127.0.0.1:{postgresql.port}/{name}"
    output = kittypyr("import-hyperkitty", config, url, check=True).stdout
    assert "6 messages imported" in output
    assert "3 votes, 1 tag, 1 favourite, 1 last view kept" in output
    env = bootstrap(str(config))
    try:
        browser = TestApp(env["app"])
        for message_id, name in _hyperkitty(hyperkitty_database,
                                            "SELECT message_id, message_id_hash FROM hyperkitty_email"):
            assert message_id in browser.get(f"/list/{LIST}/message/{name}/").text
    finally:
        env["closer"]()
        env["registry"]._zodb_databases[""].close()


def test_a_database_with_many_skipped_marks_names_twenty_of_each_kind_and_the_report_every_one(
        hyperkitty_database, tmp_path):
    database = tmp_path / "hyperkitty.db"
    database.write_bytes(hyperkitty_database.read_bytes())
    with sqlite3.connect(database) as connection:
        (thread,), = connection.execute("SELECT id FROM hyperkitty_thread LIMIT 1").fetchall()
        (ada,), = connection.execute("SELECT id FROM auth_user WHERE username = 'ada'").fetchall()
        for number in range(25):
            # No tag kittypyr can name: only punctuation.
            tag = connection.execute("INSERT INTO hyperkitty_tag (name) VALUES (?)", ("!?" * (number + 1),)).lastrowid
            connection.execute("INSERT INTO hyperkitty_tagging (tag_id, thread_id, user_id) VALUES (?, ?, ?)",
                               (tag, thread, ada))
    report = tmp_path / "report.txt"
    (tmp_path / "screen").mkdir()
    (tmp_path / "written").mkdir()
    screen = kittypyr("import-hyperkitty", write_config(tmp_path / "screen"), database, check=True).stdout
    written = kittypyr("import-hyperkitty", write_config(tmp_path / "written"), database, "--report", report,
                       check=True).stdout

    skipped_tag = "skipped tag '"
    assert screen.count(skipped_tag) == 20, screen
    assert "skipped: 5 more tags" in screen
    assert "--report FILE names every one" in screen
    assert "6 messages imported" in screen
    assert written.count(skipped_tag) == 20
    assert f"every one is named in {report}" in written
    whole = report.read_text()
    assert whole.count(skipped_tag) == 25
    assert "more tags" not in whole
    assert "'" + "!?" * 25 + "'" in whole


def test_a_batch_that_meets_a_write_conflict_is_stored_again(hyperkitty_database, tmp_path):
    # Live mail archived into the same list as the import ran: the import
    # ended at its first conflict with a traceback, no summary, and none
    # of its mail stored.
    import transaction

    from kittypyr.hyperkitty.database import open_database
    from kittypyr.hyperkitty.migrate import migrate

    env = bootstrap(str(write_config(tmp_path)))
    database = env["registry"]._zodb_databases[""]
    live = transaction.TransactionManager()
    other = database.open(transaction_manager=live)
    commits = []

    def commit_meeting_live_mail():
        commits.append(len(commits))
        if len(commits) in (2, 3):  # the first batch of mail, twice
            live.begin()
            other_list = other.root()["kittypyr"].lists[LIST]
            other_list.description = f"changed by a live writer ({len(commits)})"
            live.commit()
        transaction.manager.commit()

    connection = open_database(str(hyperkitty_database))
    try:
        aborted = []
        report = migrate(env["root"], connection, env["registry"], commit=commit_meeting_live_mail,
                         abort=lambda: aborted.append(transaction.manager.abort()))
        assert len(aborted) == 2  # the conflicts were real
        assert report.messages == 6 and not report.skipped
        transaction.manager.begin()
        assert sum(len(mailing_list.messages) for mailing_list in env["root"].lists.values()) == 6
        assert env["root"].lists[LIST].description == "changed by a live writer (3)"
    finally:
        connection.close()
        other.close()
        env["closer"]()
        database.close()
