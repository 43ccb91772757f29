"""Per-list aggregates: counted as mail arrives, uncounted when it goes."""

from datetime import date, datetime, timedelta, timezone

from kittypyr.archiving import archive_message, ensure_mailing_list
from kittypyr.stats import activity_of, rebuild_activity
from tests.mailbuilder import make_message

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
