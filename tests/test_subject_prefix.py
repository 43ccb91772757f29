"""The list's subject prefix ("[Dev] "), which Mailman puts before every subject, is left out of the archive's."""

import json

import pytest
import transaction
from pyramid.scripting import prepare
from webtest import TestApp

from kittypyr.archiving import ensure_mailing_list
from kittypyr.importing import import_mail
from kittypyr.mailman import apply_list_details
from kittypyr.msgid import message_id_hash
from kittypyr.search import run_search
from kittypyr.subjects import without_list_prefix
from tests.functional import answered_apart, mbox_bytes
from tests.mailbuilder import make_message
from tests.test_archiver_api import make, post

LIST = "dev@lists.example.org"


@pytest.mark.parametrize("subject, prefix, shown", [
    ("[Dev] Release plans", "[Dev] ", "Release plans"),
    ("[dev]Release plans", "[Dev] ", "Release plans"),
    ("[Dev] Re: Release plans", "[Dev] ", "Re: Release plans"),
    # A reply whose prefix Mailman 2 or a mail program left behind its "Re:".
    ("Re: [Dev] Release plans", "[Dev] ", "Re: Release plans"),
    ("AW: Re:  [Dev]  Release plans", "[Dev]", "AW: Re: Release plans"),
    # Mailman numbers the posts with "%d".
    ("[Dev 1234] Release plans", "[Dev %d] ", "Release plans"),
    ("[Dev 00042] Release plans", "[Dev %05d] ", "Release plans"),
    ("[Dev] Release plans", "[Dev %d] ", "[Dev] Release plans"),
    ("[Dev] ", "[Dev] ", ""),
    # Not the list's prefix: kept as it is.
    ("[Dev-users] Release plans", "[Dev] ", "[Dev-users] Release plans"),
    ("Release plans [Dev]", "[Dev] ", "Release plans [Dev]"),
    ("Development plans", "Dev", "Development plans"),
    ("Dev: plans", "Dev:", "plans"),
    ("[Dev] Release plans", "", "[Dev] Release plans"),
    ("", "[Dev] ", ""),
    # Literal "%" signs, and a number first.
    ("[%x 100%] Release plans", "[%x 100%] ", "Release plans"),
    ("17: Release plans", "%d: ", "Release plans"),
])
def test_the_prefix_is_left_out_at_the_start_and_after_re(subject, prefix, shown):
    assert without_list_prefix(subject, prefix) == shown


@pytest.mark.parametrize("subject, prefix, shown", [
    ("[Dev" + " " * 500_000 + "x", "[Dev %d] ", "[Dev" + " " * 500_000 + "x"),
    ("Re:" + " " * 500_000 + "x", "%d: ", "Re:" + " " * 500_000 + "x"),
    ("[Dev 7]" + " " * 500_000 + "Plans", "[Dev %d] ", "Plans"),
    ("[A" + " " * 500_000 + "B] Plans", "[A  B] ", "Plans"),
])
def test_a_subject_of_many_spaces_is_read_once(subject, prefix, shown):
    """A sender's subject of half a million spaces: the prefix's spaces and
    number were two patterns of spaces side by side, tried every way of
    sharing the spaces out (hours of a process's time)."""
    assert answered_apart("kittypyr.subjects:without_list_prefix", subject, prefix) == shown


@pytest.fixture
def app(tmp_path):
    application = make(tmp_path)
    with prepare(registry=application.registry) as env:
        ensure_mailing_list(env["root"], LIST).subject_prefix = "[Dev] "
        transaction.commit()
    yield application
    application.registry._zodb_databases[""].close()


def hits(app, query):
    with prepare(registry=app.registry) as env:
        return sorted(hit.message.subject for hit in run_search(env["root"], query, [LIST], mlist=LIST).hits)


def test_mail_mailman_archives_is_shown_and_searched_without_the_prefix_and_kept_with_it(app):
    browser = TestApp(app)
    post(browser, make_message(message_id="<p1@example.org>", subject="[Dev] Release plans", body="When?\n"))
    post(browser, make_message(message_id="<p2@example.org>", subject="[Dev] Re: Release plans", body="Soon.\n",
                               in_reply_to="<p1@example.org>", references=["<p1@example.org>"]))
    first, reply = message_id_hash("<p1@example.org>"), message_id_hash("<p2@example.org>")

    overview = browser.get(f"/list/{LIST}/").html
    assert [a.text for a in overview.select("a[href*='/thread/']")][0] == "Release plans"
    thread = browser.get(f"/list/{LIST}/thread/{first}/")
    assert thread.html.h1.text.strip() == "Release plans" and "[Dev]" not in thread.text
    assert browser.get(f"/list/{LIST}/message/{reply}/").html.h1.text.strip() == "Re: Release plans"
    # Its words are the subject's, not the prefix's.
    assert hits(app, "release") == ["Re: Release plans", "Release plans"]
    assert hits(app, "dev") == []
    # The original, as Mailman sent it, keeps it.
    assert b"Subject: [Dev] Release plans" in browser.get(f"/list/{LIST}/message/{first}/raw").body


def test_an_import_leaves_out_the_prefix_the_list_has(app, tmp_path):
    mbox = tmp_path / "dev.mbox"
    mbox.write_bytes(mbox_bytes([make_message(message_id=f"<i{n}@example.org>", subject=f"[Dev] Topic {n}",
                                              body=f"Imported note {n}.\n") for n in range(1, 4)]))
    with prepare(registry=app.registry) as env:
        # One parser process: the prefix reaches it, and the index's words are those stored.
        report = import_mail(env["root"], LIST, [mbox], transaction.manager, workers=1, progress=False)
        assert report.ok
        messages = env["root"].lists[LIST].messages
        assert sorted(message.subject for message in messages.values()) == ["Topic 1", "Topic 2", "Topic 3"]
    assert hits(app, "topic") == ["Topic 1", "Topic 2", "Topic 3"]
    assert hits(app, "dev") == []


def test_the_prefix_is_learned_from_mailman_with_the_list_details(app):
    with prepare(registry=app.registry) as env:
        mailing_list = env["root"].lists[LIST]
        apply_list_details(mailing_list, {"display_name": "Dev", "description": "", "archive_policy": "public",
                                          "subject_prefix": "[Dev %d] "})
        assert mailing_list.subject_prefix == "[Dev %d] "
        # Details that do not say (an older caller) leave it as it was.
        apply_list_details(mailing_list, {"display_name": "Dev", "description": "", "archive_policy": "public"})
        assert mailing_list.subject_prefix == "[Dev %d] "



def test_an_import_is_told_the_prefix_where_no_mailman_says_it(tmp_path):
    from pyramid.paster import bootstrap

    from tests.functional import kittypyr, write_config

    config = write_config(tmp_path)
    mbox = tmp_path / "dev.mbox"
    mbox.write_bytes(mbox_bytes([make_message(message_id="<t1@example.org>", subject="[Dev 12] Plans",
                                              body="A plan.\n")]))
    result = kittypyr("import", config, LIST, mbox, "--workers", "0", "--subject-prefix", "[Dev %d] ", check=True)
    assert "subjects stored without '[Dev %d]'" in result.stdout
    said = json.loads(kittypyr("info", config, LIST, "--json", check=True).stdout)
    assert said["subject_prefix"] == "[Dev %d] "
    env = bootstrap(str(config))
    try:
        mailing_list = env["root"].lists[LIST]
        assert mailing_list.subject_prefix == "[Dev %d] "
        assert [message.subject for message in mailing_list.messages.values()] == ["Plans"]
    finally:
        env["closer"]()
        env["registry"]._zodb_databases[""].close()


def test_a_reindex_leaves_out_a_prefix_learned_after_the_mail_was_archived(app):
    from kittypyr.catalog import reindex_archive

    browser = TestApp(app)
    with prepare(registry=app.registry) as env:
        env["root"].lists[LIST].subject_prefix = ""  # not known yet
        transaction.commit()
    post(browser, make_message(message_id="<o1@example.org>", subject="[Dev] Old plans", body="Then.\n"))
    post(browser, make_message(message_id="<o2@example.org>", subject="Re: [Dev] Old plans", body="Later.\n",
                               in_reply_to="<o1@example.org>", references=["<o1@example.org>"]))
    assert hits(app, "dev") == ["Re: [Dev] Old plans", "[Dev] Old plans"]
    with prepare(registry=app.registry) as env:
        env["root"].lists[LIST].subject_prefix = "[Dev] "  # as Mailman says later
        reindex_archive(env["root"], app.registry, commit=transaction.commit)
    assert hits(app, "plans") == ["Old plans", "Re: Old plans"]
    assert hits(app, "dev") == []
    thread = browser.get(f"/list/{LIST}/thread/{message_id_hash('<o1@example.org>')}/")
    assert thread.html.h1.text.strip() == "Old plans"
    assert b"Subject: [Dev] Old plans" in browser.get(f"/list/{LIST}/message/{message_id_hash('<o1@example.org>')}/raw").body
