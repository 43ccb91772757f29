"""Bringing a HyperKitty database's lists, mail and readers' marks into the archive.

Each message is stored under HyperKitty's own Message-ID, so under its
hash; kittypyr threads it itself (it does not split threads at missing
parents as HyperKitty does), and a HyperKitty thread id, the hash of that
thread's first message, answers as that message's thread does. Votes,
tags, favourites and last views belong to readers, who are known here by
address: each HyperKitty user's is that of their account.
"""

import random
import time
from dataclasses import dataclass, field, replace

from ZODB.POSException import ConflictError

from kittypyr.archiving import ARCHIVED, DUPLICATE, ensure_mailing_list, store_parsed
from kittypyr.hyperkitty.database import as_datetime, rows
from kittypyr.hyperkitty.rebuild import rebuild_message
from kittypyr.mail import UnparseableMessage, parse_message
from kittypyr.readers import reader_for, set_favourite
from kittypyr.tags import add_tag, normalize_tag
from kittypyr.votes import OwnMessage, cast_vote
from kittypyr.wording import counted


# HyperKitty's ArchivePolicy: never 0, private 1, public 2.
_PUBLIC = 2


@dataclass
class MigrationReport:
    lists: int = 0
    messages: int = 0
    already: int = 0
    skipped: list = field(default_factory=list)  # (kind, what, why), e.g. ("tag", "tag '!'", "not a tag ...")
    votes: int = 0
    tags: int = 0
    favourites: int = 0
    last_views: int = 0

    def summary(self, listed=None):
        """Human-readable lines: totals, then every message, vote and tag skipped, with why.

        ``listed``: at most so many of each kind are named, and how many
        more there are said (a damaged database can skip thousands).
        """
        lines = [
            f"{counted(self.lists, 'list')}, {counted(self.messages, 'message')} imported"
            + (f" ({self.already} were already archived)" if self.already else ""),
            f"{counted(self.votes, 'vote')}, {counted(self.tags, 'tag')}, {counted(self.favourites, 'favourite')}, "
            f"{counted(self.last_views, 'last view')} kept",
        ]
        by_kind = {}
        for kind, what, why in self.skipped:
            by_kind.setdefault(kind, []).append(f"skipped {what}: {why}")
        for kind, skipped in by_kind.items():
            shown = skipped if listed is None else skipped[:listed]
            lines += shown
            if len(skipped) > len(shown):
                lines.append(f"skipped: {counted(len(skipped) - len(shown), 'more ' + kind)}")
        return lines


def _emails_with_attachments(connection):
    # Only the ids: attachments are read one message at a time, as it is stored.
    return {row["email_id"] for row in rows(connection, "SELECT DISTINCT email_id FROM hyperkitty_attachment")}


def _attachments_of(connection, email_id):
    return list(rows(connection, "SELECT counter, name, content_type, content FROM hyperkitty_attachment "
                                 "WHERE email_id = ?", (email_id,)))


def _store_email(mailing_list, email, attachments, registry):
    parsed = parse_message(rebuild_message(email, attachments))
    # HyperKitty's id, as it stored it: its hash is the one in its URLs.
    parsed.message_id = email["message_id"]
    parsed.message_id_derived = False
    parsed.rebuilt = True
    return store_parsed(mailing_list, parsed, registry=registry)


def _users(connection):
    return {row["id"]: (row["email"] or "").strip().lower()
            for row in rows(connection, "SELECT id, email FROM auth_user")}


# Attempts at each batch when other writers (live mail, another process)
# changed what it changed, with a pause growing up to about a second.
CONFLICT_ATTEMPTS = 10


def _committed(step, commit, abort, report):
    """Run ``step`` and ``commit``; after a write conflict, abort and run both again, the report as it was.

    Every step here can be run again: a list or a message already stored
    is found, not made twice. ConflictError after the last attempt.
    """
    for attempt in range(1, CONFLICT_ATTEMPTS + 1):
        saved = replace(report, skipped=list(report.skipped))
        try:
            result = step()
            commit()
            return result
        except ConflictError:
            abort()
            if attempt == CONFLICT_ATTEMPTS:
                raise
            vars(report).update(vars(saved))
            time.sleep(random.uniform(0.5, 1.0) * min(attempt, 10) / 10)


def migrate(archive, connection, registry=None, commit=None, batch_size=500, abort=None):
    """Import everything in the HyperKitty database ``connection`` into ``archive``.

    ``commit`` is called every ``batch_size`` messages and at the end;
    after a write conflict, ``abort`` is, and the batch is stored again
    (see ``_committed``). Returns a ``MigrationReport``.
    """
    commit = commit or (lambda: None)
    abort = abort or (lambda: None)
    report = MigrationReport()
    lists = {}

    def store_lists():
        lists.clear()
        for row in rows(connection, "SELECT id, name, display_name, description, archive_policy, subject_prefix "
                                    "FROM hyperkitty_mailinglist"):
            address = row["name"].lower()
            new = address not in archive.lists
            mailing_list = lists[row["id"]] = ensure_mailing_list(archive, address, row["display_name"] or "",
                                                                  row["description"] or "")
            if new:
                # Only a list HyperKitty showed to everyone is public here; a list
                # archived "never" had no public archive either.
                mailing_list.archive_policy = "public" if row["archive_policy"] == _PUBLIC else "private"
                # HyperKitty kept Mailman's, and left it out of the subjects as kittypyr does.
                mailing_list.subject_prefix = row["subject_prefix"] or ""
            report.lists += 1

    _committed(store_lists, commit, abort, report)

    with_attachments = _emails_with_attachments(connection)
    # email id -> (kittypyr list, message hash), for the marks that name emails.
    names = {}

    def store_batch(batch):
        for email in batch:
            mailing_list = lists[email["mailinglist_id"]]
            try:
                attachments = _attachments_of(connection, email["id"]) if email["id"] in with_attachments else ()
                result = _store_email(mailing_list, email, attachments, registry)
            except UnparseableMessage as exc:
                report.skipped.append(("message", f"message {email['message_id']}", str(exc)))
                continue
            if result.outcome == ARCHIVED:
                report.messages += 1
            elif result.outcome == DUPLICATE:
                report.already += 1
            else:
                report.skipped.append(("message", f"message {email['message_id']}", result.reason))
                continue
            names[email["id"]] = (mailing_list, result.message.__name__)

    emails = rows(connection, "SELECT e.id, e.mailinglist_id, e.message_id, e.message_id_hash, e.subject, "
                              "e.content, e.date, e.timezone, e.in_reply_to, e.sender_name, "
                              "e.sender_id AS sender_address FROM hyperkitty_email e ORDER BY e.date, e.id")
    batch = []
    for email in emails:
        email["date"] = as_datetime(email["date"])
        batch.append(email)
        if len(batch) == batch_size:
            _committed(lambda: store_batch(batch), commit, abort, report)
            batch = []
    _committed(lambda: store_batch(batch), commit, abort, report)

    def store_marks():
        users = _users(connection)
        _migrate_votes(archive, connection, names, users, report)
        threads = _threads(connection, lists)
        _migrate_thread_marks(archive, connection, threads, users, report, registry)

    _committed(store_marks, commit, abort, report)
    return report


def _migrate_votes(archive, connection, names, users, report):
    for row in rows(connection, "SELECT email_id, user_id, value FROM hyperkitty_vote"):
        where = names.get(row["email_id"])
        address = users.get(row["user_id"])
        if where is None or not address:
            continue
        mailing_list, name = where
        message = mailing_list.messages.data.get(name)
        if message is None:
            continue
        value = 1 if row["value"] > 0 else -1 if row["value"] < 0 else 0
        try:
            cast_vote(archive, reader_for(archive, address, create=True), message, value)
        except OwnMessage:
            # HyperKitty let some vote on their own mail; kittypyr counts no such vote.
            report.skipped.append(("vote", f"vote of {address}", "on their own message"))
            continue
        report.votes += 1


def _threads(connection, lists):
    """HyperKitty thread row id -> the kittypyr thread its first message is in."""
    found = {}
    for row in rows(connection, "SELECT id, mailinglist_id, thread_id FROM hyperkitty_thread"):
        mailing_list = lists.get(row["mailinglist_id"])
        if mailing_list is None:
            continue
        thread = mailing_list.threads.live(row["thread_id"])
        if thread is None:
            message = mailing_list.messages.data.get(row["thread_id"])
            thread = mailing_list.threads.live(message.thread) if message is not None else None
        if thread is not None:
            found[row["id"]] = thread
    return found


def _migrate_thread_marks(archive, connection, threads, users, report, registry):
    tags = {row["id"]: row["name"] for row in rows(connection, "SELECT id, name FROM hyperkitty_tag")}
    for row in rows(connection, "SELECT thread_id, tag_id, user_id FROM hyperkitty_tagging"):
        thread, address = threads.get(row["thread_id"]), users.get(row["user_id"])
        tag = normalize_tag(tags.get(row["tag_id"], ""))
        if thread is None or not address:
            continue
        if tag is None:
            report.skipped.append(("tag", f"tag {tags.get(row['tag_id'])!r}", "not a tag kittypyr can name"))
            continue
        if add_tag(thread, tag, address, registry=registry):
            report.tags += 1
    for row in rows(connection, "SELECT thread_id, user_id FROM hyperkitty_favorite"):
        thread, address = threads.get(row["thread_id"]), users.get(row["user_id"])
        if thread is not None and address:
            set_favourite(reader_for(archive, address, create=True), thread, True)
            report.favourites += 1
    for row in rows(connection, "SELECT thread_id, user_id, view_date FROM hyperkitty_lastview"):
        thread, address = threads.get(row["thread_id"]), users.get(row["user_id"])
        if thread is None or not address:
            continue
        reader = reader_for(archive, address, create=True)
        key = (thread.mailing_list.address, thread.__name__)
        # Seen up to the view: what came later stays unread, as in HyperKitty.
        seen = as_datetime(row["view_date"]).timestamp()
        if seen > reader.seen.get(key, 0):
            reader.seen[key] = seen
        report.last_views += 1
