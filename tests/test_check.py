"""``kittypyr check CONFIG [--repair]``: each kind of damage is found, mended, and the pages are right again."""

from datetime import datetime, timedelta, timezone

import pytest
import transaction
from pyramid.scripting import prepare
from pyramid.traversal import find_resource, resource_path
from webtest import TestApp

from kittypyr import moderation, votes
from kittypyr.archiving import archive_message, ensure_mailing_list
from kittypyr.catalog import docid_of
from kittypyr.msgid import message_id_hash
from kittypyr.readers import reader_for
from kittypyr.resources import Message
from kittypyr.resources.deleted import Tombstone
from kittypyr.security import User
from kittypyr.stats import activity_of
from tests.functional import kittypyr, write_config
from tests.mailbuilder import attachment, make_message, multipart, text_part
from tests.test_app import make_app

LIST = "dev@lists.example.org"
START = datetime(2021, 5, 3, 8, 0, tzinfo=timezone.utc)


def h(n):
    return message_id_hash(f"<chk{n}@example.org>")


def build(folder):
    """Two threads (0-2 with an attachment on 1; 3-4) and a deleted message 5; return the closed app."""
    app = make_app(folder)
    with prepare(registry=app.registry) as env:
        mailing_list = ensure_mailing_list(env["root"], LIST)
        for n in range(6):
            starter = 0 if n < 3 else 3
            body = f"Message number {n} about zeppelins.\n"
            if n == 1:
                body = multipart("mixed", text_part(body), attachment(b"a,b\n", "text/csv", "data.csv"))
            archive_message(mailing_list, make_message(
                message_id=f"<chk{n}@example.org>",
                subject="Zeppelins" if n == starter else "Re: Zeppelins",
                sender=(f"Person {n}", f"person{n}@example.org"),
                date=START + timedelta(days=n),
                in_reply_to=None if n == starter else f"<chk{n - 1}@example.org>",
                body=body), registry=app.registry)
        moderation.delete_messages(mailing_list, [h(5)], User("mod@example.org", "Mod"), registry=app.registry)
        transaction.commit()
    app.registry._zodb_databases[""].close()
    return app


def damage(folder, harm):
    """Open the storage and apply ``harm(archive, mailing_list)`` behind the subscribers' back."""
    app = make_app(folder)
    with prepare(registry=app.registry) as env:
        archive = env["root"]
        harm(archive, archive.lists[LIST])
        transaction.commit()
    app.registry._zodb_databases[""].close()


def docid_at(archive, path):
    return docid_of(archive, find_resource(archive, path))


def unindex_message(archive, mailing_list):
    archive.catalog.unindex_doc(docid_at(archive, f"/list/{LIST}/message/{h(1)}"))


def forget_message(archive, mailing_list):
    docid = docid_at(archive, f"/list/{LIST}/message/{h(2)}")
    archive.catalog.unindex_doc(docid)
    archive.document_map.remove_docid(docid)


def wrong_sender(archive, mailing_list):
    impostor = Message.__new__(Message)
    impostor.sender_address = "impostor@example.org"
    archive.catalog["sender"].index_doc(docid_at(archive, f"/list/{LIST}/message/{h(0)}"), impostor)


def broken_document_map(archive, mailing_list):
    mailing_list.messages[h(3)].catalog_docid = None
    archive.document_map.add(f"/list/{LIST}/message/NOSUCHMESSAGE")


def stored_before_docids_were_kept(archive, mailing_list):
    """Message 3 as one stored before messages kept their docid: found by its path in the document map."""
    message = mailing_list.messages[h(3)]
    docid = message.catalog_docid
    del message.catalog_docid
    archive.document_map.address_to_docid[resource_path(message)] = docid


def broken_older_document_map(archive, mailing_list):
    stored_before_docids_were_kept(archive, mailing_list)
    del archive.document_map.address_to_docid[f"/list/{LIST}/message/{h(3)}"]


def halved_by_utf7(archive, mailing_list):
    # What UTF-7 mail was stored as before half pairs were refused.
    message = mailing_list.messages[h(0)]
    message.subject, message.sender_name = "Zeppelins \ud800", "Person \udc00"
    message.body_text = "About zeppelins \ud800 and more.\n"
    mailing_list.threads[h(0)].subject = message.subject


def overlong_address(archive, mailing_list):
    # As mail was stored before such addresses were left out.
    mailing_list.messages[h(1)].sender_address = "a." * 200 + "a@example.org"


def lost_member(archive, mailing_list):
    thread = mailing_list.threads[h(0)]
    thread.members.remove(h(2))
    thread._count += 3


def misplaced_reply(archive, mailing_list):
    # The tree says 2 answers 0, its message says it answers 1.
    thread = mailing_list.threads[h(0)]
    thread.children = {"": thread.children[""], h(0): thread.children[h(0)] + thread.children.pop(h(1))}


def wrong_aggregates(archive, mailing_list):
    activity = activity_of(mailing_list)
    activity.per_day[(START + timedelta(days=4)).date().isoformat()] += 5
    del activity.participants["person3@example.org"]
    mailing_list.attachment_count.change(2)


def wrong_thread_orders(archive, mailing_list):
    activity = activity_of(mailing_list)
    # A reply the orders did not see: the thread as active and as large as before.
    activity.unfile_thread(mailing_list.threads[h(3)])
    activity.thread_attachments.clear()


def stale_thread_rank(archive, mailing_list):
    # The orders right, the rank the thread keeps a minute older: the next
    # message would take it out of the orders at entries that are not there.
    thread = mailing_list.threads[h(0)]
    month, last, size = thread.filed_rank
    thread.filed_rank = (month, last - 60, size)


def wrong_post_count(archive, mailing_list):
    people = archive.people
    people.posts[(people.person_id("person1@example.org"), LIST)] += 2


def lost_dated_post(archive, mailing_list):
    people = archive.people
    person_id = people.person_id("person2@example.org")
    people.dated_posts.remove(next(iter(people.dated_posts.keys(min=(person_id, LIST), max=(person_id, LIST + "\0")))))


def posts_of_nobody(archive, mailing_list):
    people = archive.people
    people.posts[(people.person_id("person1@example.org"), "other@lists.example.org")] = 4


def live_tombstones(archive, mailing_list):
    mailing_list.messages.tombstones[h(4)] = Tombstone()
    mailing_list.threads.tombstones[h(0)] = Tombstone()


def wrong_high_postings(archive, mailing_list):
    # A word of many messages (here of docids that are none), one of whose
    # chunks' kept best postings names a posting the chunk does not hold:
    # a search of two such words would find it.
    from kittypyr.fulltext import ChunkDirectory, RankedPostings
    from kittypyr.lexicon import _PAIR

    index = archive.catalog["text"].index
    postings = RankedPostings()
    for docid in range(ChunkDirectory.GROUP_CHUNKS * RankedPostings.CHUNK_PAIRS):
        postings.append(10**6 + docid, (1 + docid % 5) << 16 | (10 + docid % 90))
    group = postings._directory.groups[0]
    group.highs = (group.highs[0] + _PAIR.pack(7, 9 << 16 | 3),) + group.highs[1:]
    index._wordinfo[max(index._wordinfo.keys()) + 1000] = postings


def lost_list_posting(archive, mailing_list):
    # A second list's first message gives the first postings of its own;
    # then a search in it would no longer find the message by this word.
    archive_message(ensure_mailing_list(archive, "other@lists.example.org"), make_message(
        message_id="<other@example.org>", subject="Zeppelins elsewhere", date=START, body="Zeppelins.\n"))
    index = archive.catalog["text"].index
    wid, = index.word_ids(["zeppelins"])
    index._scopes[LIST]._remove_posting(wid, mailing_list.messages.data[h(0)].catalog_docid)


def vote_outliving_its_message(archive, mailing_list):
    # What a vote cast while its message was being deleted leaves: the
    # message's tally, and its score in the thread's and sender's totals.
    votes.cast_vote(archive, reader_for(archive, "keen@example.org", create=True), mailing_list.messages[h(1)], 1)
    archive.votes.tallies[(LIST, h(5))] = archive.votes.tallies.pop((LIST, h(1)))


def tombstone_in_the_clear(archive, mailing_list):
    # As tombstones were made for a while: the sender's address and Date as they were.
    kept = mailing_list.messages.tombstones[h(5)]
    kept.__dict__.pop("_writing", None)
    kept.sender_address, kept.date = "person5@example.org", START + timedelta(days=5)
    mailing_list.messages.tombstones[h(5)] = kept


def address_of_nobody(archive, mailing_list):
    people = archive.people
    people.addresses[people.person_id("gone@example.org")] = "gone@example.org"


def writer_without_an_address(archive, mailing_list):
    people = archive.people
    del people.addresses[people.person_id("person1@example.org")]


DAMAGE = {
    "a message missing from the catalog": (unindex_message, f"catalog: /list/{LIST}/message/{h(1)}: missing"),
    "a message unknown to the catalog": (forget_message, f"catalog: /list/{LIST}/message/{h(2)}: not catalogued"),
    "a wrong value in an index": (wrong_sender, "index 'sender' holds 'impostor@example.org' instead of "
                                                "'person0@example.org'"),
    "a document map out of step": (broken_document_map, "has no way back from its path"),
    "a dangling document": (broken_document_map, "NOSUCHMESSAGE: docid"),
    "an older message's way back": (broken_older_document_map, "has no way back from its path"),
    "a thread's member set": (lost_member, "1 of its messages missing from its members; count 6 instead of 3"),
    "a thread's reply tree": (misplaced_reply, "its reply tree disagrees with its messages' parents"),
    "a list's aggregates": (wrong_aggregates, "per_day differs at 1 key(s)"),
    "a list's attachment count": (wrong_aggregates, "attachment count 3 instead of 1"),
    "a list's thread orders": (wrong_thread_orders, "by_activity differs at 1 key(s)"),
    "a list's threads with attachments": (wrong_thread_orders, "thread_attachments differs at 1 key(s)"),
    "a thread taken out of the orders": (wrong_thread_orders, "1 thread(s) filed under a rank not their own"),
    "a thread's stale rank": (stale_thread_rank, f"1 thread(s) filed under a rank not their own, e.g. '{h(0)}'"),
    "a sender's post count": (wrong_post_count, "person1@example.org: 3 posts and 1 dated instead of 1"),
    "a sender's dated posts": (lost_dated_post, "person2@example.org: 1 post and 0 dated instead of 1"),
    "posts in a list the sender never wrote to": (posts_of_nobody, "person1@example.org: 4 posts, and no message"),
    "a writer without an address": (writer_without_an_address, "/users/: 1 sender with messages and no address"),
    "an address kept of nobody": (address_of_nobody, "/users/: 1 address kept of senders with no message"),
    "a deleted message still present": (live_tombstones, f"{h(4)}: deleted, yet still in the archive"),
    "a tombstone keeping a sender's address": (tombstone_in_the_clear, "1 deleted message kept with the sender's"
                                                                       " address in the clear"),
    "a live thread marked deleted": (live_tombstones, "marked deleted, yet it has live messages"),
    "a group of chunks' high postings": (wrong_high_postings, "text index 'text': 1 group(s) of chunks whose high "
                                                              "postings disagree with the chunks"),
    "text UTF-7 left halved": (halved_by_utf7, f"{h(0)}: its subject and sender's name and text hold half of a"
                                               " UTF-16 pair"),
    "an address longer than any": (overlong_address, f"{h(1)}: its sender's address is 413 characters long"),
    "a vote outliving its message": (vote_outliving_its_message, f"votes: /list/{LIST}/message/{h(5)}/: 1 vote"
                                                                 " kept for a message not in the archive"),
    "a thread's total of votes": (vote_outliving_its_message, "the thread's total of votes is 1, its messages' "
                                                              "votes add up to 0"),
    "a list's postings": (lost_list_posting, f"the postings of 1 list(s) disagree with the index's, e.g. '{LIST}'"),
}


@pytest.fixture
def site(tmp_path):
    build(tmp_path)
    config = write_config(tmp_path, uri=f"file://{tmp_path}/Data.fs?blobstorage_dir={tmp_path}/blobs")
    return tmp_path, config


def test_a_healthy_archive_passes(site):
    folder, config = site
    result = kittypyr("check", config)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "1 list, 5 messages, 2 threads checked: everything agrees" in result.stdout


@pytest.mark.parametrize("kind", sorted(DAMAGE))
def test_damage_is_found_and_repaired(site, kind):
    folder, config = site
    harm, expected = DAMAGE[kind]
    damage(folder, harm)

    found = kittypyr("check", config)
    assert found.returncode == 1, found.stdout + found.stderr
    assert expected in found.stdout
    assert "--repair` mends them" in found.stdout

    repaired = kittypyr("check", config, "--repair")
    assert repaired.returncode == 0, repaired.stdout + repaired.stderr
    assert [line for line in repaired.stdout.splitlines() if expected in line][0].endswith("(repaired)")

    again = kittypyr("check", config)
    assert again.returncode == 0, again.stdout + again.stderr
    assert "everything agrees" in again.stdout


def test_text_utf7_left_halved_is_readable_again_after_repair(site):
    # One such message made its list's overview, month and page answer 500.
    folder, config = site
    damage(folder, halved_by_utf7)
    kittypyr("check", config, "--repair", check=True)
    app = make_app(folder)
    try:
        browser = TestApp(app)
        for path in (f"/list/{LIST}/", f"/list/{LIST}/message/{h(0)}/", f"/list/{LIST}/thread/{h(0)}/",
                     "/search?q=zeppelins"):
            assert "Zeppelins \ufffd" in browser.get(path).text, path
    finally:
        app.registry._zodb_databases[""].close()


def test_a_message_stored_before_docids_were_kept_passes_and_leaves_the_catalog_when_deleted(site):
    folder, config = site
    damage(folder, stored_before_docids_were_kept)
    result = kittypyr("check", config)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "everything agrees" in result.stdout
    search, = read(folder, "/api/search?q=zeppelins")
    assert search.json["count"] == 5

    def delete_it(archive, mailing_list):
        moderation.delete_messages(mailing_list, [h(3)], User("mod@example.org", "Mod"))

    damage(folder, delete_it)
    search, = read(folder, "/api/search?q=zeppelins")
    assert search.json["count"] == 4
    result = kittypyr("check", config)
    assert result.returncode == 0, result.stdout + result.stderr

    def paths_mapped(archive, mailing_list):
        mapped.update(archive.document_map.address_to_docid.keys())
        mapped.update(archive.document_map.docid_to_address.values())

    mapped = set()
    damage(folder, paths_mapped)
    assert f"/list/{LIST}/message/{h(3)}" not in mapped


def test_a_sender_who_changed_names_passes(tmp_path):
    app = make_app(tmp_path)
    # Archived in the order opposite to the messages' names, which a recount follows.
    ids = sorted(("<alias1@example.org>", "<alias2@example.org>"), key=message_id_hash, reverse=True)
    with prepare(registry=app.registry) as env:
        mailing_list = ensure_mailing_list(env["root"], LIST)
        for message_id, name in zip(ids, ("Alan Cox", "Alan")):
            archive_message(mailing_list, make_message(message_id=message_id, sender=(name, "alan@example.org"),
                                                       date=START), registry=app.registry)
        transaction.commit()
    app.registry._zodb_databases[""].close()
    config = write_config(tmp_path, uri=f"file://{tmp_path}/Data.fs?blobstorage_dir={tmp_path}/blobs")

    result = kittypyr("check", config)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "everything agrees" in result.stdout


def read(folder, *paths):
    app = make_app(folder)
    try:
        browser = TestApp(app)
        return [browser.get(path, status="*") for path in paths]
    finally:
        app.registry._zodb_databases[""].close()


def test_after_repair_search_threads_and_figures_are_right_again(site):
    folder, config = site
    for harm in (unindex_message, forget_message, lost_member, wrong_aggregates):
        damage(folder, harm)
    search, thread = read(folder, "/api/search?q=zeppelins", f"/api/list/{LIST}/thread/{h(0)}/")
    assert search.json["count"] == 3
    assert thread.json["messages"] == 6

    assert kittypyr("check", config, "--repair").returncode == 0
    search, thread = read(folder, "/api/search?q=zeppelins", f"/api/list/{LIST}/thread/{h(0)}/")
    assert search.json["count"] == 5
    assert thread.json["messages"] == 3
    assert [email["hash"] for email in thread.json["emails"]["results"]] == [h(0), h(1), h(2)]


def test_after_repair_the_lists_pages_show_every_thread_again(site):
    folder, config = site
    damage(folder, wrong_thread_orders)
    month = f"/list/{LIST}/2021/5/"
    threads, page = read(folder, f"/api/list/{LIST}/threads/", month)
    assert [thread["key"] for thread in threads.json["results"]] == [h(0)]
    assert "Has attachments" not in page.text

    assert kittypyr("check", config, "--repair").returncode == 0
    threads, page = read(folder, f"/api/list/{LIST}/threads/", month)
    assert [thread["key"] for thread in threads.json["results"]] == [h(3), h(0)]
    assert "Has attachments" in page.text


def test_a_deleted_message_left_behind_is_deleted_on_repair(site):
    folder, config = site
    damage(folder, live_tombstones)
    repaired = kittypyr("check", config, "--repair")
    assert repaired.returncode == 0, repaired.stdout + repaired.stderr
    message, thread, other = read(folder, f"/list/{LIST}/message/{h(4)}/", f"/list/{LIST}/thread/{h(0)}/",
                                  f"/api/list/{LIST}/thread/{h(3)}/")
    assert message.status_code == 410
    assert thread.status_code == 200 and "Zeppelins" in thread.text
    assert other.json["messages"] == 1
    app = make_app(folder)
    with prepare(registry=app.registry) as env:
        entries = list(env["root"].audit_log.entries.values())
        transaction.abort()
    app.registry._zodb_databases[""].close()
    assert entries[-1].actor == "kittypyr-check"
    assert entries[-1].messages[0][1] == h(4)


def test_a_reused_message_id_not_linked_is_linked_on_repair(tmp_path):
    """An archive from before reuses were noted: check finds the other mail sent with a Message-ID, --repair
    links it, and the id then finds both."""
    app = make_app(tmp_path)
    with prepare(registry=app.registry) as env:
        mailing_list = ensure_mailing_list(env["root"], LIST)
        for n in range(2):
            archive_message(mailing_list, make_message(message_id="<twice@example.org>", subject=f"Twice {n}",
                                                       body=f"Mail number {n} under one id.\n",
                                                       date=START + timedelta(days=n)), registry=app.registry)
        del mailing_list.messages.reused
        transaction.commit()
    app.registry._zodb_databases[""].close()
    config = write_config(tmp_path, uri=f"file://{tmp_path}/Data.fs?blobstorage_dir={tmp_path}/blobs")
    search = "/api/search?q=id:twice@example.org"
    assert read(tmp_path, search)[0].json["count"] == 1

    found = kittypyr("check", config)
    assert found.returncode == 1, found.stdout + found.stderr
    assert f"sent with the Message-ID of {message_id_hash('<twice@example.org>')}, which does not lead to it" \
        in found.stdout
    assert kittypyr("check", config, "--repair").returncode == 0
    assert read(tmp_path, search)[0].json["count"] == 2
    again = kittypyr("check", config)
    assert again.returncode == 0 and "everything agrees" in again.stdout, again.stdout
