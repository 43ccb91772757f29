"""Checking that an archive's derived records agree with its messages, and mending them.

The messages (each with its list, thread and parent) are the truth; what
is kept beside them to answer pages quickly is derived, and kept in step
by subscribers in the same transaction. A bug, an interrupted upgrade or a
hand-edited database can still leave it behind. ``check_archive`` compares,
in this order (each step's repairs are what the next one sees):

1. threads: each thread's member set, count, reply tree and aggregates
   against the messages that name it; a message naming no live thread;
   a thread no message names; each attachment's (and large original's)
   blob file;
2. tombstones: a deleted message or thread that is live again;
3. lists' aggregates (``kittypyr.stats``) and attachment counts, and each
   sender's post count and dated posts per list (``kittypyr.people``);
4. the document map: its two directions, and paths that lead nowhere;
5. the catalog: every live message and thread in every index, with the
   field values its discriminators give, and no docid of anything else;
   of the text index, the high postings each group of a large word's
   chunks keeps (``kittypyr.fulltext.split_high``) against its chunks;
6. votes: each message's tally against the live messages, and the
   threads' totals and senders' reputations against the tallies.

Repairs touch only what disagrees: a thread is recounted, a list's
aggregates recounted from its messages, a document indexed or unindexed
alone, a group of chunks split again, the votes' totals recounted from
the tallies; nothing is reindexed whole.
"""

import collections
import logging
import re
from dataclasses import dataclass
from types import SimpleNamespace

from pyramid.traversal import find_resource, resource_path
from ZODB.blob import Blob
from ZODB.POSException import POSKeyError
from repoze.catalog.indexes.field import CatalogFieldIndex

from kittypyr.catalog import docid_of, index_resource, keeps_docid
from kittypyr.fulltext import FullTextIndex, chunk_groups_of, days_by_catalog, scope_postings_of, scopes_disagreeing
from kittypyr.mail import ADDRESS_MAX
from kittypyr.msgid import message_id_hash
from kittypyr.people import dated_post, dated_posts_in, rebuild_people
from kittypyr.resources import Message, Thread
from kittypyr.resources.thread import ROOTS, month_of
from kittypyr.stats import ListActivity, activity_of, rank_of, rebuild_activity
from kittypyr.votes import rebuild_totals, tallies_and_messages, totals_due
from kittypyr.wording import counted

log = logging.getLogger(__name__)

# Parts whose findings no repair can mend (the bytes are gone): the check says so, and fails.
UNREPAIRABLE = ("files",)

# The deletions check completes are signed so in the audit log.
CHECK_ACTOR = SimpleNamespace(address="kittypyr-check", name="kittypyr check --repair")

# ListActivity's records, each a mapping a recount must give again.
ACTIVITY_RECORDS = ("per_day", "per_month", "sender_days", "sender_names", "thread_days",
                    "participants", "thread_starts", "by_activity", "by_size",
                    "month_by_activity", "month_threads", "thread_attachments", "sender_bands")


@dataclass
class Finding:
    """One disagreement: ``part`` (threads, tombstones, aggregates, document map, catalog), where, what."""

    part: str
    where: str
    what: str
    repaired: bool = False

    def __str__(self):
        return f"{self.part}: {self.where}: {self.what}" + (" (repaired)" if self.repaired else "")


class Checker:
    def __init__(self, archive, registry=None, repair=False):
        self.archive = archive
        self.registry = registry
        self.repair = repair
        self.findings = []
        self.counts = collections.Counter()
        self.senders_seen = set()  # (person id, list address) of every message's sender
        self.people_to_rebuild = False  # with repair: a sender's counts or dated posts disagreed

    def found(self, part, where, what, repaired=None):
        finding = Finding(part, where, what, self.repair if repaired is None else repaired)
        self.findings.append(finding)
        return finding

    def run(self):
        for mailing_list in list(self.archive.lists.values()):
            self.counts["lists"] += 1
            self.check_threads(mailing_list)
            self.check_tombstones(mailing_list)
            self.check_aggregates(mailing_list)
        self.check_posts_of_nobody()
        if self.people_to_rebuild:
            rebuild_people(self.archive)
        self.check_document_map()
        self.check_catalog()
        self.check_high_postings()
        self.check_list_postings()
        self.check_votes()
        return self.findings

    # --- threads ------------------------------------------------------------

    def check_threads(self, mailing_list):
        threads = mailing_list.threads
        named = collections.defaultdict(list)  # thread key -> messages naming it
        messages = mailing_list.messages
        for message in messages.values():
            self.counts["messages"] += 1
            self._check_files(message)
            self._check_writable(mailing_list, message)
            self._check_address(message)
            named[message.thread].append(message)
            if message.original_message_id and message.message_id != message.original_message_id:
                self._check_reuse(messages, message)
        for key in [key for key in named if key not in threads.data]:
            self._rehome(mailing_list, key, named)
        for key, thread in list(threads.items()):
            self.counts["threads"] += 1
            messages = named.get(key, [])
            where = resource_path(thread)
            if not messages:
                self.found("threads", where, "no message belongs to this thread")
                if self.repair:
                    # Not a deletion (no message was deleted): no tombstone.
                    threads.remove(key, send_events=False)
                continue
            problems = _thread_disagreements(thread, messages)
            if problems:
                self.found("threads", where, "; ".join(problems))
                if self.repair:
                    thread.recount(messages)

    def _check_files(self, message):
        """The blob files of the message's attachments and large original: each must be in the blob folder."""
        kept = [(f"attachment {attachment.index} ({attachment.filename or 'no name'})", attachment.blob)
                for attachment in message.attachments]
        if isinstance(message.original, Blob):
            kept.append(("its original", message.original))
        for what, blob in kept:
            try:
                blob.committed()
            except POSKeyError:
                # Lost by a copy, a backup or a restore: only a backup has the bytes.
                self.found("files", resource_path(message), f"{what}: its file is missing from the blob folder;"
                                                            " restore it from a backup", repaired=False)

    def _check_writable(self, mailing_list, message):
        """Text no page can write out: half of a UTF-16 pair, which UTF-7 mail was decoded to before it was refused."""
        halved = [field for field in _TEXT_FIELDS if _HALF_PAIR.search(getattr(message, field) or "")]
        if not halved:
            return
        shown = " and ".join(_TEXT_FIELDS[field] for field in halved)
        self.found("messages", resource_path(message),
                   f"its {shown} hold half of a UTF-16 pair, which no page can write out")
        if self.repair:
            for field in halved:
                setattr(message, field, _HALF_PAIR.sub("\ufffd", getattr(message, field)))
            message._v_prepared_text = message._v_searchable_text = None
            thread = mailing_list.threads.data.get(message.thread)
            if thread is not None and thread.starter == message.__name__:
                thread.subject = message.subject
            index_resource(self.archive, message)
            if thread is not None:
                index_resource(self.archive, thread)
            self.people_to_rebuild = True

    def _check_address(self, message):
        """A sender's address longer than any can be, as mail was stored before such were left out."""
        if len(message.sender_address or "") <= ADDRESS_MAX:
            return
        self.found("messages", resource_path(message), f"its sender's address is {len(message.sender_address)}"
                                                       f" characters long, longer than any address can be")
        if self.repair:
            message.sender_address = ""
            index_resource(self.archive, message)
            self.people_to_rebuild = True

    def _check_reuse(self, messages, message):
        """A mail kept under another id than the Message-ID it came with: that id must lead to it."""
        name_of_id = message_id_hash(message.original_message_id)
        if message.__name__ not in messages.reusing(name_of_id):
            # Archived before reuses were noted.
            self.found("messages", resource_path(message),
                       f"sent with the Message-ID of {name_of_id}, which does not lead to it")
            if self.repair:
                messages.note_reuse(name_of_id, message.__name__)

    def _rehome(self, mailing_list, key, named):
        """Messages naming ``key``, which is no live thread: to the thread it became, or a new one."""
        threads = mailing_list.threads
        messages = named.pop(key)
        live = threads.live(key) if key is not None else None
        where = resource_path(mailing_list)
        if live is not None:
            self.found("threads", where, f"{len(messages)} message(s) name thread {key}, "
                       f"merged into {live.__name__}")
            target = live.__name__
        else:
            self.found("threads", where, f"{len(messages)} message(s) name thread {key}, which does not exist")
            names = {message.__name__ for message in messages}
            # The thread is named by its first message, where that is one of them.
            target = key if key in names else min(messages, key=lambda m: (m.timestamp, m.__name__)).__name__
            if self.repair:
                threads.tombstones.pop(target, None)
                threads.add(target, Thread(), send_events=False)
        if self.repair:
            for message in messages:
                message.thread = target
        named[target].extend(messages)

    # --- tombstones ---------------------------------------------------------

    def check_tombstones(self, mailing_list):
        from kittypyr.moderation import delete_messages

        messages, threads = mailing_list.messages, mailing_list.threads
        again = [name for name in messages.tombstones.keys() if name in messages.data]
        for name in again:
            # Archiving refuses a deleted Message-ID, so the live copy is
            # what a deletion failed to remove: deleted is deleted.
            self.found("tombstones", resource_path(messages.data[name]),
                       "deleted, yet still in the archive; --repair deletes it")
        if again and self.repair:
            delete_messages(mailing_list, again, CHECK_ACTOR,
                            reason="kittypyr check: deleted earlier, still present", registry=self.registry)
        in_clear = [name for name, tombstone in messages.tombstones.items()
                    if tombstone.digested() is not tombstone]
        if in_clear:
            self.found("tombstones", resource_path(mailing_list),
                       f"{counted(len(in_clear), 'deleted message')} kept with the sender's address in the clear;"
                       " --repair keeps a digest of it instead")
            if self.repair:
                for name in in_clear:
                    messages.tombstones[name] = messages.tombstones[name].digested()
        for key in [key for key in threads.tombstones.keys() if key in threads.data]:
            # The live thread's messages have no tombstones: they are what stands.
            self.found("tombstones", resource_path(threads.data[key]),
                       "marked deleted, yet it has live messages; --repair keeps the thread")
            if self.repair:
                del threads.tombstones[key]

    # --- aggregates ---------------------------------------------------------

    def check_aggregates(self, mailing_list):
        where = resource_path(mailing_list)
        expected = ListActivity()
        attachments = 0
        names_used = collections.defaultdict(set)  # address -> every display name it sent under
        people = getattr(self.archive, "people", None)
        dated = collections.defaultdict(set)  # person id -> the dated posts of their messages here
        for message in mailing_list.messages.values():
            expected.record(message)
            attachments += len(message.attachments)
            if message.sender_address and message.sender_name:
                names_used[message.sender_address].add(message.sender_name)
            if message.sender_address and people is not None:
                person_id = people.person_id(message.sender_address)
                dated[person_id].add(dated_post(person_id, mailing_list.address, message.timestamp, message.__name__))
        if people is not None:
            self._check_posts(mailing_list, people, dated)
        wrong_ranks = []  # keys of threads not filed under their present rank
        for thread in mailing_list.threads.values():
            if thread.date_started is not None:
                expected.thread_started(thread)
            rank = rank_of(thread)
            if rank is not None:
                expected.add_to_orders(thread.__name__, rank)
            if thread.filed_rank != rank:
                wrong_ranks.append(thread.__name__)
        activity = activity_of(mailing_list)
        wrong = []
        if wrong_ranks:
            wrong.append(f"{len(wrong_ranks)} thread(s) filed under a rank not their own, e.g. {wrong_ranks[0]!r}")
        for name in ACTIVITY_RECORDS:
            have = dict(getattr(activity, name, {}).items())
            want = dict(getattr(expected, name).items())
            if name == "sender_names":
                # The name kept is the one the sender's last archived message
                # bore, which a recount cannot tell: any name they used is right.
                want = {address: have[address] if have.get(address) in names_used[address] else kept
                        for address, kept in want.items()}
            if have != want:
                # Orders map their keys to None: a missing key is told apart from one holding None.
                keys = sorted((k for k in set(have) | set(want) if have.get(k, _NONE) != want.get(k, _NONE)),
                              key=repr)
                wrong.append(f"{name} differs at {len(keys)} key(s), e.g. {keys[0]!r}: "
                             f"{_shown(have.get(keys[0], _NONE))} instead of {_shown(want.get(keys[0], _NONE))}")
        if wrong:
            self.found("aggregates", where, "; ".join(wrong))
            if self.repair:
                rebuild_activity(mailing_list)
        counted = mailing_list.attachment_count()
        if counted != attachments:
            self.found("aggregates", where, f"attachment count {counted} instead of {attachments}")
            if self.repair:
                mailing_list.attachment_count.set(attachments)

    def _check_posts(self, mailing_list, people, dated):
        """Each sender's post count and dated posts in ``mailing_list`` against ``dated``, their messages there."""
        address = mailing_list.address
        wrong = []
        for person_id, expected in dated.items():
            key = (person_id, address)
            self.senders_seen.add(key)
            posts = people.posts.get(key, 0)
            have = set(dated_posts_in(people, person_id, address))
            if posts != len(expected) or have != expected:
                wrong.append(f"{people.addresses.get(person_id, person_id)}: {counted(posts, 'post')} and "
                             f"{len(have)} dated instead of {len(expected)}")
        if wrong:
            self.found("people", resource_path(mailing_list), "; ".join(sorted(wrong)[:3])
                       + (f" and {len(wrong) - 3} more" if len(wrong) > 3 else ""))
            if self.repair:
                self.people_to_rebuild = True

    def check_posts_of_nobody(self):
        """Counts of senders for lists where no message of theirs is."""
        people = getattr(self.archive, "people", None)
        if people is None:
            return
        for key, count in list(people.posts.items()):
            if count and key not in self.senders_seen:
                person_id, address = key
                self.found("people", f"/list/{address}", f"{people.addresses.get(person_id, person_id)}: "
                           f"{counted(count, 'post')}, and no message of theirs there")
                if self.repair:
                    self.people_to_rebuild = True
        writers = {person_id for person_id, _ in self.senders_seen}
        unnamed = [person_id for person_id in writers if person_id not in people.addresses]
        if unnamed:
            # Their last message deleted while they posted another: no profile leads to them.
            self.found("people", "/users/", f"{counted(len(unnamed), 'sender')} with messages and no address kept")
            if self.repair:
                self.people_to_rebuild = True
        kept = [person_id for person_id in people.addresses.keys() if person_id not in writers]
        if kept:
            # Their profile would answer, and their address stay on disk, with no mail of theirs left.
            self.found("people", "/users/", f"{counted(len(kept), 'address', 'addresses')} kept of senders"
                                            " with no message in the archive")
            if self.repair:
                self.people_to_rebuild = True

    # --- votes ----------------------------------------------------------------

    def check_votes(self):
        """The votes kept for each message against the live messages, and the totals against them.

        A vote cast while an administrator deleted its message commits
        beside the deletion (they write different records): the message's
        tally outlives it, or the totals keep the vote the deletion took out.
        """
        archive = self.archive
        kept = getattr(archive, "votes", None)
        if kept is None:
            return
        wrong = False
        for (list_address, name), tally, message in tallies_and_messages(archive):
            if message is None:
                self.found("votes", f"/list/{list_address}/message/{name}/",
                           f"{counted(tally.up() + tally.down(), 'vote')} kept for a message not in the archive")
                wrong = True
            elif tally.thread != message.thread:
                self.found("votes", resource_path(message),
                           f"its votes are counted in thread {tally.thread}, not in its own {message.thread}")
                wrong = True
        thread_totals, sender_totals = totals_due(archive)
        people = getattr(archive, "people", None)
        for kind, totals, expected in (("thread", kept.threads, thread_totals),
                                       ("sender", kept.senders, sender_totals)):
            have = {key: counter() for key, counter in totals.items() if counter()}
            for key in sorted(set(have) | set(expected)):
                if have.get(key, 0) == expected.get(key, 0):
                    continue
                if kind == "thread":
                    where = f"/list/{key[0]}/thread/{key[1]}/"
                else:
                    person_id, list_address = key
                    shown = people.addresses.get(person_id, person_id) if people is not None else person_id
                    where = f"/list/{list_address}/ ({shown})"
                self.found("votes", where, f"the {kind}'s total of votes is {have.get(key, 0)}, "
                                           f"its messages' votes add up to {expected.get(key, 0)}")
                wrong = True
        if wrong and self.repair:
            rebuild_totals(archive)

    # --- document map -------------------------------------------------------

    def check_document_map(self):
        document_map = self.archive.document_map
        forward, reverse = document_map.docid_to_address, document_map.address_to_docid
        dangling = []  # (docid, path) of the entries whose path leads to nothing live, told last
        for docid, path in list(forward.items()):
            resource = self._live_at(path)
            if resource is None:
                dangling.append((docid, path))
                continue
            # The way back from a path: the resource's kept docid, or the
            # map's path -> docid tree for a resource stored before.
            kept = keeps_docid(resource)
            claimed = resource.catalog_docid if kept else reverse.get(path)
            if claimed == docid:
                continue
            if claimed is None or forward.get(claimed) != path:
                self.found("document map", path, f"docid {docid} has no way back from its path")
                if self.repair:
                    if kept:
                        resource.catalog_docid = docid
                    else:
                        reverse[path] = docid
            else:
                self.found("document map", path, f"docid {docid} duplicates docid {claimed}")
                if self.repair:
                    self.archive.catalog.unindex_doc(docid)
                    del forward[docid]
        for path, docid in list(reverse.items()):
            if forward.get(docid) != path:
                self.found("document map", path, f"points at docid {docid}, which is not this path's")
                if self.repair:
                    del reverse[path]
        for docid, path in dangling:
            self.found("document map", path, f"docid {docid} names nothing live; --repair unindexes it")
            if self.repair:
                self.archive.catalog.unindex_doc(docid)
                document_map.remove_docid(docid)

    def _live_at(self, path):
        """The message or thread stored at ``path``, or None (a tombstone, an alias, nothing)."""
        try:
            resource = find_resource(self.archive, path)
        except KeyError:
            return None
        if isinstance(resource, (Message, Thread)) and resource_path(resource) == path:
            container = resource.__parent__
            if container is not None and container.data.get(resource.__name__) is resource:
                return resource
        return None

    # --- catalog ------------------------------------------------------------

    def check_catalog(self):
        catalog, document_map = self.archive.catalog, self.archive.document_map
        known = {name: index.docids() for name, index in catalog.items()}
        seen = set()
        for mailing_list in self.archive.lists.values():
            for container in (mailing_list.messages, mailing_list.threads):
                for resource in container.values():
                    path = resource_path(resource)
                    docid = docid_of(self.archive, resource, path)
                    if docid is None:
                        self.found("catalog", path, "not catalogued")
                        if self.repair:
                            seen.add(index_resource(self.archive, resource))
                        continue
                    seen.add(docid)
                    problems = self._index_disagreements(catalog, known, docid, resource)
                    if problems:
                        self.found("catalog", path, "; ".join(problems))
                        if self.repair:
                            catalog.reindex_doc(docid, resource)
        # Docids the indexes hold that name nothing in the document map.
        strays = set()
        for docids in known.values():
            strays.update(docid for docid in docids if docid not in seen and docid not in strays)
        for docid in sorted(strays):
            path = document_map.address_for_docid(docid)
            if path is not None and self._live_at(path) is not None:
                continue
            self.found("catalog", f"docid {docid}", "indexed, but names nothing live")
            if self.repair:
                catalog.unindex_doc(docid)

    def check_high_postings(self):
        """Each group of a text index's chunks keeps, of each chunk, postings it holds and a bound of the rest."""
        for name, catalog_index in self.archive.catalog.items():
            index = getattr(catalog_index, "index", None)
            if not isinstance(index, FullTextIndex):
                continue
            wrong = [group for group in chunk_groups_of(index) if not group.agrees()]
            if not wrong:
                continue
            self.found("catalog", f"text index {name!r}",
                       f"{len(wrong)} group(s) of chunks whose high postings disagree with the chunks")
            if self.repair:
                for group in wrong:
                    group.split(index.split_mean_length())

    def check_list_postings(self):
        """The text index's postings by list hold, of every word, the postings of the list's messages and no other."""
        catalog = self.archive.catalog
        index = getattr(catalog.get("text"), "index", None)
        lists = getattr(catalog.get("list"), "_rev_index", None)
        if not isinstance(index, FullTextIndex) or index._scopes is None or lists is None:
            return
        wrong = scopes_disagreeing(index, lists.get)
        if not wrong:
            return
        self.found("catalog", "text index 'text'", f"the postings of {len(wrong)} list(s) disagree with the "
                                                   f"index's, e.g. {wrong[0]!r}")
        if self.repair:
            # Made again from the index's postings: no message is read.
            scope_postings_of(index, lists.get, days_by_catalog(catalog))

    @staticmethod
    def _index_disagreements(catalog, known, docid, resource):
        problems = [f"missing from index {name!r}" for name, docids in known.items() if docid not in docids]
        for name, index in catalog.items():
            # Field indexes hold the value itself; their discriminators are
            # cheap. Text and keyword indexes are checked for presence only.
            if not isinstance(index, CatalogFieldIndex) or docid not in known[name]:
                continue
            discriminator = index.discriminator
            if callable(discriminator):
                want = discriminator(resource, _NONE)
            else:
                want = getattr(resource, discriminator, _NONE)
            have = index._rev_index.get(docid, _NONE)
            if have != want:
                problems.append(f"index {name!r} holds {_shown(have)} instead of {_shown(want)}")
        return problems


_NONE = object()


_HALF_PAIR = re.compile("[\ud800-\udfff]")
_TEXT_FIELDS = {"subject": "subject", "sender_name": "sender's name", "body_text": "text"}


def _shown(value):
    return "nothing" if value is _NONE else repr(value)


def _thread_disagreements(thread, messages):
    """What ``thread``'s records say that ``messages`` (those naming it) do not; [] when they agree."""
    names = {message.__name__ for message in messages}
    members = set(thread.members)
    problems = []
    if members != names:
        if names - members:
            problems.append(f"{len(names - members)} of its messages missing from its members")
        if members - names:
            problems.append(f"{len(members - names)} member(s) that are not its messages")
    if len(thread) != len(names):
        problems.append(f"count {len(thread)} instead of {len(names)}")
    placed = [(parent, entry) for parent, entries in thread.children.items() for entry in entries]
    if sorted(name for _, (_, name) in placed) != sorted(names):
        problems.append("its reply tree does not hold each of its messages once")
    else:
        # Each under its own parent (the thread's first messages under
        # ROOTS), filed at its own date: what the pages walk.
        expected = {(message.parent if message.parent in names else ROOTS, (message.timestamp, message.__name__))
                    for message in messages}
        if set(placed) != expected:
            problems.append("its reply tree disagrees with its messages' parents or dates")
    months = collections.Counter(month_of(message.date) for message in messages)
    if dict(months) != dict(thread.months):
        problems.append("months disagree")
    participants = collections.Counter(m.sender_address for m in messages if m.sender_address)
    if dict(participants) != dict(thread.participants):
        problems.append("participants disagree")
    last = max(message.date for message in messages)
    if thread.last_date != last:
        problems.append(f"last date {thread.last_date} instead of {last}")
    return problems


def check_archive(archive, registry=None, repair=False):
    """``(findings, counts)``: every disagreement found (mended when ``repair``), and what was checked.

    With ``repair`` the caller commits; nothing here does.
    """
    checker = Checker(archive, registry, repair)
    findings = checker.run()
    return findings, checker.counts
