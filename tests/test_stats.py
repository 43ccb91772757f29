"""Per-list aggregates: counted as mail arrives, uncounted when it goes."""

from datetime import date, datetime, timedelta, timezone

import transaction
from BTrees.OOBTree import OOBTree

from kittypyr import moderation
from kittypyr.archiving import archive_message, ensure_mailing_list
from kittypyr.msgid import message_id_hash
from kittypyr.security import User
from kittypyr.stats import activity_of, rebuild_activity
from tests.mailbuilder import attachment, make_message, multipart, text_part

DAY = date(2020, 2, 28)


def mail(n, sender, day_offset, reply_to=None):
    when = datetime(2020, 2, 28, 12, tzinfo=timezone.utc) - timedelta(days=day_offset)
    return make_message(message_id=f"<st{n}@example.org>", subject=f"s{n}", sender=sender, date=when,
                        in_reply_to=f"<st{reply_to}@example.org>" if reply_to is not None else None,
                        body=f"{n}\n")


def test_counts_windows_and_forgetting(archive, config):
    config.include("kittypyr.stats")
    config.commit()
    mailing_list = ensure_mailing_list(archive, "dev@example.org")
    ada, bob = ("Ada", "ada@example.org"), ("Bob", "bob@example.org")
    archive_message(mailing_list, mail(1, ada, 0))
    archive_message(mailing_list, mail(2, bob, 0, reply_to=1))
    archive_message(mailing_list, mail(3, ada, 1, reply_to=1))
    archive_message(mailing_list, mail(4, bob, 40))  # outside the 30-day window
    activity = activity_of(mailing_list)
    days = dict(activity.daily_counts(DAY, 30))
    assert days[DAY] == 2 and days[DAY - timedelta(days=1)] == 1 and sum(days.values()) == 3
    assert activity.top_senders(DAY) == [("ada@example.org", "Ada", 2), ("bob@example.org", "Bob", 1)]
    assert activity.participant_count(DAY) == 2
    assert activity.busiest_threads(DAY)[0][1] == 3
    assert dict((f"{y}-{m:02d}", c) for y, m, c in activity.months()) == {"2020-01": 1, "2020-02": 3}

    message = [m for m in mailing_list.messages.values() if m.subject == "s2"][0]
    activity.forget(message)
    assert activity.top_senders(DAY) == [("ada@example.org", "Ada", 2)]
    assert sum(c for _, c in activity.daily_counts(DAY, 30)) == 2

    rebuild_activity(mailing_list)
    # Recounted from the stored messages, message 2 included again.
    assert activity_of(mailing_list).top_senders(DAY)[1] == ("bob@example.org", "Bob", 1)


def ordered_mail(tag, day, reply_to=None, with_file=False):
    body = f"{tag}\n"
    if with_file:
        body = multipart("mixed", text_part(body), attachment(b"a,b\n", "text/csv", "data.csv"))
    sender = ("Bob", "bob@example.org") if reply_to else ("Ada", "ada@example.org")
    return make_message(message_id=f"<{tag}@example.org>", subject=tag, sender=sender,
                        date=datetime(2020, 3, day, 12, tzinfo=timezone.utc),
                        in_reply_to=f"<{reply_to}@example.org>" if reply_to else None, body=body)


def orders(mailing_list):
    """What the list's pages read: threads by activity, by size, March's by activity and by start."""
    activity = activity_of(mailing_list)
    subject = lambda key: mailing_list.threads[key].subject  # noqa: E731
    return {
        "active": [subject(k) for k in activity.active_thread_keys(0, 10)],
        "largest": [subject(k) for k in activity.largest_thread_keys(10)],
        "march": [subject(k) for k in activity.month_thread_keys("2020-03", 0, 10)],
        "march by start": [subject(k) for k in activity.month_thread_keys("2020-03", 0, 10, by_start=True)],
        "march count": activity.month_thread_count("2020-03"),
        "with files": sorted(subject(k) for k in mailing_list.threads.keys() if activity.has_attachment(k)),
        "newest": [subject(k) for k in activity.newest_thread_keys(10)],
        "top posters": activity.top_senders_ever(),
    }


def test_thread_orders_follow_mail_deletions_and_merges(archive, config):
    config.include("kittypyr.stats")
    config.commit()
    mailing_list = ensure_mailing_list(archive, "dev@example.org")
    for raw in (ordered_mail("a", 1), ordered_mail("b", 2), ordered_mail("c", 3, with_file=True),
                ordered_mail("a1", 4, "a"), ordered_mail("a2", 9, "a1"), ordered_mail("c1", 5, "c"),
                # Its parent arrives later: a thread of its own until then.
                ordered_mail("d1", 8, "d")):
        archive_message(mailing_list, raw)
    assert orders(mailing_list) == {
        "active": ["a", "d1", "c", "b"], "largest": ["a", "c", "d1", "b"], "march": ["a", "d1", "c", "b"],
        "march by start": ["a", "b", "c", "d1"], "march count": 4, "with files": ["c"],
        "newest": ["d1", "c", "b", "a"],
        "top posters": [("bob@example.org", "Bob", 4), ("ada@example.org", "Ada", 3)]}

    archive_message(mailing_list, ordered_mail("d", 6, with_file=True))  # d1's thread joins d's
    archive_message(mailing_list, ordered_mail("b1", 10, "b"))
    expected = {
        "active": ["b", "a", "d", "c"], "largest": ["a", "b", "d", "c"], "march": ["b", "a", "d", "c"],
        "march by start": ["a", "b", "c", "d"], "march count": 4, "with files": ["c", "d"],
        "newest": ["d", "c", "b", "a"],
        "top posters": [("bob@example.org", "Bob", 5), ("ada@example.org", "Ada", 4)]}
    assert orders(mailing_list) == expected

    # Deleting a thread's latest message takes its activity back; deleting
    # the last message with a file takes the mark away.
    moderation.delete_messages(mailing_list, [message_id_hash("<b1@example.org>"), message_id_hash("<d@example.org>")],
                               User("mod@example.org", "Mod"))
    after = orders(mailing_list)
    assert after["active"] == ["a", "d1", "c", "b"] and after["with files"] == ["c"]
    assert after["march by start"] == ["a", "b", "c", "d1"] and after["march count"] == 4
    assert after["top posters"] == [("bob@example.org", "Bob", 4), ("ada@example.org", "Ada", 3)]

    # ``kittypyr reindex`` recounts them to the same orders, and rewrites
    # no thread whose rank has not changed.
    transaction.commit()
    rebuild_activity(mailing_list)
    assert orders(mailing_list) == after
    assert [thread for thread in mailing_list.threads.values() if thread._p_changed] == []


def test_a_month_page_of_threads_is_a_slice_of_the_month(archive, config):
    config.include("kittypyr.stats")
    config.commit()
    mailing_list = ensure_mailing_list(archive, "dev@example.org")
    for day in range(1, 29):
        archive_message(mailing_list, ordered_mail(f"m{day}", day))
    archive_message(mailing_list, make_message(message_id="<april@example.org>", subject="april",
                                               date=datetime(2020, 4, 1, 0, tzinfo=timezone.utc)))
    activity = activity_of(mailing_list)
    subject = lambda key: mailing_list.threads[key].subject  # noqa: E731
    assert activity.month_thread_count("2020-03") == 28 and activity.month_thread_count("2020-04") == 1
    assert [subject(k) for k in activity.month_thread_keys("2020-03", 25, 10)] == ["m3", "m2", "m1"]
    assert [subject(k) for k in activity.month_thread_keys("2020-03", 25, 10, by_start=True)] == [
        "m26", "m27", "m28"]
    assert [subject(k) for k in activity.month_thread_keys("2020-04", 0, 10, by_start=True)] == ["april"]


def test_an_archive_from_before_the_orders_of_threads_and_senders_is_upgraded(archive, config):
    from kittypyr.bootstrap import EVOLVE_STEPS, ROOT_KEY, add_list_orders, bootstrap_archive

    config.include("kittypyr.stats")
    config.commit()
    mailing_list = ensure_mailing_list(archive, "dev@example.org")
    for raw in (ordered_mail("a", 1), ordered_mail("b", 2), ordered_mail("c", 3, with_file=True),
                ordered_mail("a1", 4, "a"), ordered_mail("c1", 5, "c", with_file=True)):
        archive_message(mailing_list, raw)
    expected = orders(mailing_list)
    transaction.commit()
    # As it was before schema version 7.
    activity = activity_of(mailing_list)
    for name in ("by_activity", "by_size", "month_by_activity", "month_threads",
                 "thread_attachments", "sender_bands"):
        delattr(activity, name)
    for thread in mailing_list.threads.values():
        thread.filed_rank = None
    archive.schema_version = EVOLVE_STEPS.index(add_list_orders)
    transaction.commit()

    upgraded = bootstrap_archive(archive._p_jar.root(), config.registry)
    assert upgraded is archive._p_jar.root()[ROOT_KEY] and upgraded.schema_version == len(EVOLVE_STEPS)
    assert orders(upgraded.lists["dev@example.org"]) == expected
    assert activity_of(mailing_list).thread_attachments[message_id_hash("<c@example.org>")] == 2


def test_each_thread_keeps_the_rank_its_list_filed_it_under(archive, config):
    config.include("kittypyr.stats")
    config.commit()
    mailing_list = ensure_mailing_list(archive, "dev@example.org")
    for raw in (ordered_mail("a", 1), ordered_mail("b", 2), ordered_mail("a1", 4, "a")):
        archive_message(mailing_list, raw)
    threads = mailing_list.threads
    replied = datetime(2020, 3, 4, 12, tzinfo=timezone.utc)
    assert threads[message_id_hash("<a@example.org>")].filed_rank == ("2020-03", int(replied.timestamp()), 2)
    assert threads[message_id_hash("<b@example.org>")].filed_rank[2] == 1
    # The list keeps no tree keyed by thread hash for them: a new message
    # rewrites its thread's record, not a bucket of such a tree as well.
    key = message_id_hash("<a@example.org>")
    keyed_by_thread = [name for name, tree in vars(activity_of(mailing_list)).items()
                       if isinstance(tree, OOBTree) and isinstance(next(iter(tree.keys()), None), str) and key in tree]
    assert keyed_by_thread == []
    assert orders(mailing_list)["active"] == ["a", "b"]


def test_an_archive_whose_list_ranked_threads_in_a_tree_is_upgraded(archive, config, monkeypatch):
    from kittypyr import stats
    from kittypyr.bootstrap import EVOLVE_STEPS, ROOT_KEY, bootstrap_archive, rank_threads_on_themselves

    # A savepoint between every two threads, as between every few thousand of a large list.
    monkeypatch.setattr(stats, "RANKED_BETWEEN_SAVEPOINTS", 2)
    config.include("kittypyr.stats")
    config.commit()
    mailing_list = ensure_mailing_list(archive, "dev@example.org")
    for raw in (ordered_mail("a", 1), ordered_mail("b", 2), ordered_mail("c", 3), ordered_mail("b1", 5, "b")):
        archive_message(mailing_list, raw)
    expected = orders(mailing_list)
    # As it was before schema version 14: the ranks in a tree of the list.
    activity = activity_of(mailing_list)
    activity.thread_ranks = OOBTree()
    for thread in mailing_list.threads.values():
        activity.thread_ranks[thread.__name__] = thread.filed_rank
        thread.filed_rank = None
    archive.schema_version = EVOLVE_STEPS.index(rank_threads_on_themselves)
    transaction.commit()

    upgraded = bootstrap_archive(archive._p_jar.root(), config.registry)
    assert upgraded is archive._p_jar.root()[ROOT_KEY] and upgraded.schema_version == len(EVOLVE_STEPS)
    mailing_list = upgraded.lists["dev@example.org"]
    assert not hasattr(activity_of(mailing_list), "thread_ranks")
    assert orders(mailing_list) == expected
    # A reply to the oldest thread moves it to the front, once: its entries
    # under the rank it was filed under in the tree are gone.
    archive_message(mailing_list, ordered_mail("a1", 7, "a"))
    after = orders(mailing_list)
    assert after["active"] == ["a", "b", "c"] and after["march"] == ["a", "b", "c"]
    assert after["largest"] == ["a", "b", "c"] and after["march count"] == 3


def test_newest_threads_and_neighbours_walk_every_start_once(archive, config):
    config.include("kittypyr.stats")
    config.commit()
    mailing_list = ensure_mailing_list(archive, "dev@example.org")
    # Three threads start in one second, which the chronology orders by key.
    for n, second in enumerate((0, 0, 0, 1, 5, 5)):
        archive_message(mailing_list, make_message(
            message_id=f"<same{n}@example.org>", subject=f"t{n}",
            date=datetime(2020, 3, 1, 12, 0, second, tzinfo=timezone.utc)))
    activity = activity_of(mailing_list)
    chronology = [key for _, key in activity.thread_starts.keys()]
    assert activity.newest_thread_keys(10) == chronology[::-1]
    assert activity.newest_thread_keys(2) == chronology[:-3:-1]
    for position, key in enumerate(chronology):
        older = chronology[position - 1] if position else None
        newer = chronology[position + 1] if position + 1 < len(chronology) else None
        assert activity.neighbours(mailing_list.threads[key]) == (older, newer)


def test_top_posters_of_all_time_follow_posts_and_deletions(archive, config):
    config.include("kittypyr.stats")
    config.commit()
    mailing_list = ensure_mailing_list(archive, "dev@example.org")
    people = {"ada": 20, "bob": 17, "carl": 33, "dan": 3}
    n = 0
    for name, count in people.items():
        for _ in range(count):
            n += 1
            archive_message(mailing_list, make_message(
                message_id=f"<p{n}@example.org>", subject=f"p{n}", sender=(name.title(), f"{name}@example.org"),
                date=datetime(2020, 3, 1, tzinfo=timezone.utc) + timedelta(hours=n)))
    activity = activity_of(mailing_list)
    assert activity.top_senders_ever(3) == [("carl@example.org", "Carl", 33), ("ada@example.org", "Ada", 20),
                                            ("bob@example.org", "Bob", 17)]
    assert activity.top_senders_ever(1) == [("carl@example.org", "Carl", 33)]

    # Ada falls below Bob, and Carl to 32.
    moderation.delete_messages(mailing_list, [message_id_hash(f"<p{k}@example.org>") for k in (1, 2, 3, 4, 5, 50)],
                               User("mod@example.org", "Mod"))
    assert activity.top_senders_ever(4) == [("carl@example.org", "Carl", 32), ("bob@example.org", "Bob", 17),
                                            ("ada@example.org", "Ada", 15), ("dan@example.org", "Dan", 3)]
    assert activity.top_senders_ever(2) == [("carl@example.org", "Carl", 32), ("bob@example.org", "Bob", 17)]
    rebuild_activity(mailing_list)
    assert activity_of(mailing_list).top_senders_ever(4) == activity.top_senders_ever(4)



def test_a_reply_that_moves_its_own_parent_into_another_thread_is_counted_once(tmp_path):
    """N answers A, which waited for N: N's arrival moves A below a better parent, with N below it."""
    from pyramid.scripting import prepare
    from webtest import TestApp

    from kittypyr.health import check_archive
    from tests.test_archiver_api import LIST, make, post

    app = make(tmp_path)
    try:
        browser = TestApp(app)

        def send(name, date, headers=""):
            post(browser, (f"From: {name}@example.org\nSubject: {name}\nMessage-ID: <{name}@example.org>\n"
                           f"Date: {date}\n{headers}\n{name}\n").encode())

        # a answers p, and names n less; neither is there yet.
        send("a", "Mon, 3 Feb 2020 12:00:00 +0000", "In-Reply-To: <p@example.org>\nReferences: <n@example.org>\n")
        # p answers r, not there yet, and names a: below a for now.
        send("p", "Sat, 1 Feb 2020 13:00:00 +0000", "In-Reply-To: <r@example.org>\nReferences: <a@example.org>\n")
        send("r", "Mon, 3 Feb 2020 12:05:00 +0000")  # p moves below r, into r's thread
        # n answers a: a, waiting for n, moves below p, with n.
        send("n", "Sat, 1 Feb 2020 12:00:00 +0000", "In-Reply-To: <a@example.org>\n")
        thread = message_id_hash("<r@example.org>")
        assert len(browser.get(f"/api/list/{LIST}/thread/{thread}/").json["emails"]["results"]) == 4
        with prepare(registry=app.registry) as env:
            mailing_list = env["root"].lists[LIST]
            assert activity_of(mailing_list).busiest_threads(date(2020, 2, 3), days=3) == [(thread, 4)]
            findings, _ = check_archive(env["root"])
            assert findings == []
            transaction.abort()
    finally:
        app.registry._zodb_databases[""].close()
