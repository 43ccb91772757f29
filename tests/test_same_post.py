"""Another form of a post already archived is the same post; another post under its Message-ID is kept.

An archive is filled from several copies of one list's mail: Mailman's,
an old mbox, Pipermail's month files (decoded, footers added). A copy
whose bytes differ is still the post it copies when it was written at the
same moment by the same sender under the same subject; a post that reuses
a Message-ID differs in one of those and is kept beside it.
"""

import pickle
from datetime import datetime, timezone

import pytest
import transaction
from pyramid.scripting import prepare

from kittypyr import moderation
from kittypyr.archiving import ensure_mailing_list, store_parsed
from kittypyr.mail import parse_message
from kittypyr.security import User
from tests.functional import kittypyr, mbox_bytes, write_config
from tests.mailbuilder import make_message, text_part
from tests.test_app import make_app

LIST = "dev@lists.example.org"
WHEN = datetime(2021, 3, 4, 10, 20, 30, tzinfo=timezone.utc)
ADMIN = User("admin@example.org", "Admin")


def post(body, message_id="<same@example.org>", subject="Café meeting", date=WHEN, footer="", cte=None,
         sender=("Ann", "ann@example.org")):
    return make_message(message_id=message_id, subject=subject, sender=sender, date=date,
                        body=text_part(body + footer, cte=cte))


FOOTER = "\n_______________________________________________\nDev mailing list\n"


@pytest.fixture
def site(tmp_path):
    app = make_app(tmp_path)
    yield app
    app.registry._zodb_databases[""].close()


def archive(app, *raws):
    """Archive ``raws`` as an import does; the outcome of each."""
    with prepare(registry=app.registry) as env:
        mailing_list = ensure_mailing_list(env["root"], LIST)
        outcomes = [store_parsed(mailing_list, parse_message(raw), registry=app.registry).outcome for raw in raws]
        transaction.commit()
    return outcomes


def stored(app):
    """``{Message-ID: body text}`` of the list's messages."""
    with prepare(registry=app.registry) as env:
        messages = env["root"].lists[LIST].messages
        return sorted((message.message_id, message.body_text.strip()) for message in messages.values())


def delete(app, message_id):
    with prepare(registry=app.registry) as env:
        mailing_list = env["root"].lists[LIST]
        names = [message.__name__ for message in mailing_list.messages.values() if message.message_id == message_id]
        moderation.delete_messages(mailing_list, names, ADMIN)
        transaction.commit()


FIRST = "Let us meet at the café on Friday."
OTHER = "Sorry, wrong list: ignore my last mail."


def test_copies_of_a_post_reusing_an_archived_message_id_are_that_post(site):
    # Two posts under one Message-ID, written a minute apart; then each of
    # them again as another archive holds it, quoted-printable, with a footer.
    later = WHEN.replace(minute=21)
    archive(site, post(FIRST), post(OTHER, date=later))
    assert len(stored(site)) == 2

    archive(site, post(FIRST, cte="quoted-printable"), post(OTHER, date=later, cte="quoted-printable"),
            post(FIRST, footer=FOOTER), post(OTHER, date=later, footer=FOOTER))
    assert [body for _, body in stored(site)] == sorted([FIRST, OTHER])


def test_a_deleted_post_reusing_a_message_id_stays_deleted_in_another_form(site):
    later = WHEN.replace(minute=21)
    archive(site, post(FIRST), post(OTHER, date=later))
    derived = [message_id for message_id, body in stored(site) if body == OTHER][0]
    delete(site, derived)

    archive(site, post(OTHER, date=later, cte="quoted-printable"), post(OTHER, date=later, footer=FOOTER))
    assert stored(site) == [("same@example.org", FIRST)]
    # The first post's copies are that post, not the deleted one.
    archive(site, post(FIRST, cte="quoted-printable"))
    assert stored(site) == [("same@example.org", FIRST)]


def test_copies_of_a_post_without_a_date_header_are_that_post(site):
    archive(site, post(FIRST, date=None))
    archive(site, post(FIRST, date=None, cte="quoted-printable"), post(FIRST, date=None, footer=FOOTER))
    assert [body for _, body in stored(site)] == [FIRST]

    delete(site, "same@example.org")
    archive(site, post(FIRST, date=None, footer=FOOTER))
    assert stored(site) == []


def test_another_post_under_the_same_id_date_and_sender_is_kept_when_its_subject_differs(site):
    # A build robot that makes its ids from the second it reports in.
    failed = post("arm64: 3 tests failed.", message_id="<build-1614853230@ci.example.org>",
                  subject="Nightly build FAILED on arm64", sender=("CI", "ci@example.org"))
    passed = post("x86_64: all tests passed.", message_id="<build-1614853230@ci.example.org>",
                  subject="Nightly build passed on x86_64", sender=("CI", "ci@example.org"))
    assert archive(site, failed, passed) == ["archived", "archived"]
    assert [body for _, body in stored(site)] == ["arm64: 3 tests failed.", "x86_64: all tests passed."]
    # Each again, as another archive holds it: the same two.
    archive(site, failed.replace(b"3 tests failed.", b"3 tests failed.\n-- \nCI"), passed)
    assert len(stored(site)) == 2


def test_a_deleted_posts_tombstone_keeps_no_word_of_it(site):
    archive(site, post(FIRST))
    delete(site, "same@example.org")
    with prepare(registry=site.registry) as env:
        kept = pickle.dumps(list(env["root"].lists[LIST].messages.tombstones.values()))
    for word in (b"ann@example.org", "Café".encode(), b"meeting", FIRST[:20].encode()):
        assert word not in kept
    # What it keeps still tells the post again in another form.
    archive(site, post(FIRST, cte="quoted-printable", footer=FOOTER))
    assert stored(site) == []


def test_an_import_names_the_copies_it_took_for_posts_archived_with_other_text(tmp_path):
    config = write_config(tmp_path)
    first = tmp_path / "list.mbox"
    first.write_bytes(mbox_bytes([post(FIRST, message_id=f"<m{n}@example.org>", date=WHEN.replace(second=n))
                                  for n in range(3)]))
    kittypyr("import", config, LIST, first, "--policy", "public", "--quiet", check=True)
    # Pipermail's month file of the same posts: the second with a footer.
    copies = tmp_path / "2021-March.txt"
    copies.write_bytes(mbox_bytes([post(FIRST, message_id=f"<m{n}@example.org>", date=WHEN.replace(second=n),
                                        footer=FOOTER if n == 1 else "") for n in range(3)]))
    result = kittypyr("import", config, LIST, copies, "--quiet", check=True)
    assert "read 3, archived 0, duplicates 3" in result.stdout
    assert (f"duplicates: 1 in {copies} with other text than the post archived under its Message-ID, Date, sender "
            "and subject, taken for another archive's copy of it (message 2: m1@example.org)") in result.stdout


def test_copies_of_a_post_without_a_message_id_are_that_post_and_stay_deleted(site):
    original = post(FIRST, message_id=None)
    archive(site, original)
    archive(site, post(FIRST, message_id=None, cte="quoted-printable"), post(FIRST, message_id=None, footer=FOOTER))
    assert [body for _, body in stored(site)] == [FIRST]
    # Another post without one, by the same sender at another moment, is another.
    archive(site, post(OTHER, message_id=None, date=WHEN.replace(minute=21)))
    assert len(stored(site)) == 2

    with prepare(registry=site.registry) as env:
        mailing_list = env["root"].lists[LIST]
        first = [message.__name__ for message in mailing_list.messages.values() if message.body_text == FIRST]
        moderation.delete_messages(mailing_list, first, ADMIN)
        transaction.commit()
    archive(site, original, post(FIRST, message_id=None, cte="quoted-printable"))
    assert [body for _, body in stored(site)] == [OTHER]


def test_a_copy_is_told_under_a_list_prefix_without_brackets(site):
    with prepare(registry=site.registry) as env:
        ensure_mailing_list(env["root"], LIST).subject_prefix = "Dev-L:"
        transaction.commit()
    archive(site, post(FIRST, subject="Dev-L: Café meeting"))
    assert archive(site, post(FIRST, subject="Dev-L: Café meeting", footer=FOOTER)) == ["duplicate"]
    assert len(stored(site)) == 1


def test_an_export_of_the_archive_keeps_each_post_without_a_message_id_apart(site):
    # Each message of a kittypyr export is a post of its own, however alike.
    with prepare(registry=site.registry) as env:
        mailing_list = ensure_mailing_list(env["root"], LIST)
        outcomes = [store_parsed(mailing_list, parse_message(post(text, message_id=None)), distinct=True).outcome
                    for text in (FIRST, OTHER)]
        transaction.commit()
    assert outcomes == ["archived", "archived"]
    assert len(stored(site)) == 2


def test_posts_without_a_message_id_told_apart_by_their_tags_are_kept(site):
    # A robot reporting on three hosts in one second.
    noted = [post(f"Body of {subject}.", message_id=None, subject=subject)
             for subject in ("[host1] disk full", "[host2] disk full", "disk full")]
    assert archive(site, *noted) == ["archived"] * 3
    # A copy is that post, whichever side of its tag a reply's mark stands on.
    assert archive(site, post("Body of [host1] disk full.", message_id=None, subject="Re: [host1] disk full",
                              footer=FOOTER)) == ["duplicate"]
    assert archive(site, post("Body of [host1] disk full.", message_id=None, subject="[host1] Re: disk full",
                              footer=FOOTER)) == ["duplicate"]
    assert len(stored(site)) == 3


def test_a_deleted_post_without_a_message_id_keeps_out_its_copies_only(site):
    with prepare(registry=site.registry) as env:
        store_parsed(ensure_mailing_list(env["root"], LIST), parse_message(post("one", message_id=None,
                                                                                subject="test")), by_mailman=True)
        transaction.commit()
    with prepare(registry=site.registry) as env:
        mailing_list = env["root"].lists[LIST]
        moderation.delete_messages(mailing_list, list(mailing_list.messages.data.keys()), ADMIN)
        transaction.commit()
    with prepare(registry=site.registry) as env:
        mailing_list = env["root"].lists[LIST]
        # An export's post is a post of its own; so is one Mailman hands over with another body, as it
        # handed over the deleted one; another archive's copy of the deleted one is that post.
        exported = store_parsed(mailing_list, parse_message(post("two", message_id=None, subject="test")),
                                distinct=True)
        handed = store_parsed(mailing_list, parse_message(post("three", message_id=None, subject="test")),
                              by_mailman=True)
        copy = store_parsed(mailing_list, parse_message(post("one", message_id=None, subject="test",
                                                             footer=FOOTER)))
        transaction.commit()
    assert (exported.outcome, handed.outcome, copy.outcome) == ("archived", "archived", "skipped")


def test_a_copy_is_told_once_the_list_prefix_is_known_after_archiving(site):
    archive(site, post(FIRST, subject="Dev-L: Café meeting"))  # the prefix not known yet: kept as it came
    with prepare(registry=site.registry) as env:
        env["root"].lists[LIST].subject_prefix = "Dev-L:"
        transaction.commit()
    assert archive(site, post(FIRST, subject="Dev-L: Café meeting", footer=FOOTER)) == ["duplicate"]
