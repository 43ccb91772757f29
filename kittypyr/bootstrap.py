"""Finding the archive in the ZODB, and creating or upgrading it."""

import secrets

from BTrees.OOBTree import OOBTree
from pyramid.httpexceptions import HTTPServiceUnavailable
from pyramid_zodbconn import get_connection

from kittypyr.catalog import catalog_is_in_sync, sync_catalog
from kittypyr.people import count_known_senders, date_known_posts
from kittypyr.resources import Archive
from kittypyr.resources.admin import AuditLog
from kittypyr.resources.archive import new_quarantine
from kittypyr.resources.community import add_community

ROOT_KEY = "kittypyr"


def add_quarantine(archive):
    """Version 1: a quarantine for mail that cannot be read as a message."""
    if getattr(archive, "quarantine", None) is None:
        archive.quarantine = new_quarantine(archive)


def add_deletion_records(archive):
    """Version 2: an audit log, and tombstones for deleted messages and threads."""
    if getattr(archive, "audit_log", None) is None:
        archive.audit_log = AuditLog()
    for mailing_list in archive.lists.values():
        for container in (mailing_list.messages, mailing_list.threads):
            if getattr(container, "tombstones", None) is None:
                container.tombstones = OOBTree()


def add_community_stores(archive):
    """Version 3: profiles, votes, tags and readers' own records.

    Senders known so far are counted from the lists' aggregates, not by
    loading every message.
    """
    add_community(archive)
    count_known_senders(archive)


def add_session_generations(archive):
    """Version 4: how many times each account has logged out, to end its sessions."""
    if getattr(archive, "session_generations", None) is None:
        archive.session_generations = OOBTree()


def merge_concurrent_changes(archive):
    """Version 5: counts and word postings in trees that merge concurrent writers' changes.

    Entries move as they are (counts, packed postings, references to
    postings records): no message is read or indexed again.
    """
    from kittypyr.lexicon import OkapiIndex
    from kittypyr.merging import AppendedBytes, KeyedCounts, converted
    from kittypyr.stats import merge_concurrent_counts

    for index in archive.catalog.values():
        text_index = getattr(index, "index", None)
        if isinstance(text_index, OkapiIndex):
            text_index._wordinfo = converted(text_index._wordinfo, AppendedBytes)
    for mailing_list in archive.lists.values():
        merge_concurrent_counts(mailing_list)
    people = getattr(archive, "people", None)
    if people is not None:
        people.posts = converted(people.posts, KeyedCounts)


def add_login_failures(archive):
    """Version 6: wrong passwords counted in the archive, so that every process sees them."""
    from kittypyr.merging import AgeingCounts

    if getattr(archive, "login_failures", None) is None:
        archive.login_failures = AgeingCounts()


def add_list_orders(archive):
    """Version 7: each list's threads and senders in the orders its pages show them (kittypyr.stats).

    Every thread is read once; messages only where the catalog says they
    carry an attachment.
    """
    from repoze.catalog.query import Eq

    from kittypyr.catalog import search
    from kittypyr.stats import add_orders

    for mailing_list in archive.lists.values():
        _, with_attachments = search(archive, Eq("list", mailing_list.address) & Eq("has_attachment", True))
        add_orders(mailing_list, with_attachments)


def rank_word_postings(archive):
    """Version 8: the text index's large postings keep each chunk's best possible score.

    A search then reads only the chunks of a common word that can reach
    the page asked for. Every chunk is read once; no message is read or
    indexed again.
    """
    from kittypyr.fulltext import FullTextIndex, rank_chunks_of

    for index in archive.catalog.values():
        text_index = getattr(index, "index", None)
        if isinstance(text_index, FullTextIndex):
            rank_chunks_of(text_index)


def date_word_chunks(archive):
    """Version 9: each chunk of the text index's large words keeps the span of its messages' days.

    A word searched within dates then reads only the chunks of those
    dates. Every chunk is read once, and each of its documents' dates
    from the catalog's ``date`` index; no message is read.
    """
    from kittypyr.fulltext import DAY, FullTextIndex, date_chunks_of

    dates = archive.catalog.get("date") if archive.catalog is not None else None
    seconds_of = getattr(dates, "_rev_index", None)
    if seconds_of is None:
        return
    get = seconds_of.get

    def day_of(docid):
        seconds = get(docid)
        return None if seconds is None else seconds // DAY

    for index in archive.catalog.values():
        text_index = getattr(index, "index", None)
        if isinstance(text_index, FullTextIndex):
            date_chunks_of(text_index, day_of)


def add_archive_secret(archive):
    """Version 10: the archive's own secret, which signs sessions where kittypyr.secret is not set."""
    if archive.secret is None:
        archive.secret = secrets.token_hex(32)


def split_cjk_words(archive):
    """Version 11: runs of Chinese, Japanese and Korean letters are indexed as characters and their pairs.

    Each text index's lexicon splits them so from now on, new mail and
    queries alike (``kittypyr.lexicon.split_cjk_runs``). Mail indexed
    before keeps each run whole: an archive holding such words notes it,
    for ``kittypyr info`` to say, until ``kittypyr reindex --cjk`` indexes
    that mail again. No message is read here.
    """
    from kittypyr.lexicon import Lexicon, has_cjk_letters

    if archive.catalog is None:
        return
    for index in archive.catalog.values():
        text_index = getattr(index, "index", None)
        lexicon = getattr(text_index, "_lexicon", None)
        if isinstance(lexicon, Lexicon):
            lexicon.use_cjk_splitter()
            # Read once, at the upgrade: the words alone, not the mail.
            if text_index.documentCount() and any(map(has_cjk_letters, lexicon.words())):
                archive.text_indexed_before_cjk_split = True


def add_dated_posts(archive):
    """Version 12: each sender's messages per list newest first, for profiles that cost what they show.

    Filled from the catalog's sender and date indexes and its document
    paths; no message is loaded.
    """
    if getattr(archive, "people", None) is not None:
        date_known_posts(archive)


def inline_small_catalog_entries(archive):
    """Version 13: catalog entries a message or a thread has alone or with a few live in the bucket that maps them.

    The keyword indexes keep each document's keywords as a tuple, and the
    thread index each thread's docids as a tuple while it is small, where
    both were records of their own (a fifth of an archive's records).
    Each index is moved into its new class with its trees as they are: no
    message is read, and the entries stored before are read as they are
    until their document is indexed again.
    """
    from kittypyr.catalog import INLINE_ENTRY_INDEXES, moved_into

    if archive.catalog is None:
        return
    for name, (older_class, index_class) in INLINE_ENTRY_INDEXES.items():
        index = archive.catalog.get(name)
        if type(index) is older_class:
            archive.catalog[name] = moved_into(index_class, index)


def rank_threads_on_themselves(archive):
    """Version 14: each thread keeps the rank its list's thread orders filed it under.

    The ranks move from each list's tree keyed by thread hash onto the
    threads (every thread that has a rank is read and written once); the
    orders themselves are kept as they are.
    """
    from kittypyr import stats

    for mailing_list in archive.lists.values():
        stats.rank_threads_on_themselves(mailing_list)


def split_word_chunks(archive):
    """Version 15: each group of a large word's chunks keeps their high postings apart.

    A search of several common words then reads those and only the
    chunks that can still reach its page (``kittypyr.fulltext.split_high``).
    Every chunk of a group made before is read once; no message is read.
    """
    from kittypyr.fulltext import FullTextIndex, split_chunks_of

    for index in archive.catalog.values():
        text_index = getattr(index, "index", None)
        if isinstance(text_index, FullTextIndex):
            split_chunks_of(text_index)


def move_word_sequences(archive):
    """Version 16: the text index keeps each message's word sequence in small buckets.

    A phrase is checked in its candidates' sequences, each read at its own
    place: zope.index's tree read 30 of them for each (``WordSequences``).
    Every sequence is stored again once; no message is read.
    """
    from kittypyr.fulltext import move_word_sequences_of
    from kittypyr.lexicon import OkapiIndex

    for index in archive.catalog.values():
        text_index = getattr(index, "index", None)
        if isinstance(text_index, OkapiIndex):
            move_word_sequences_of(text_index)


def scope_word_postings(archive):
    """Version 17: the text index keeps each list's postings apart too, when it holds several.

    A search in one list of many then reads that list's postings alone
    (``kittypyr.fulltext.ScopePostings``). Every word's postings are read
    once and split by the messages' lists (the catalog's ``list`` index),
    each chunk dated from its ``date`` index; no message is read. An
    archive of one list reads nothing: that list stays the lone one until
    another list's first message (``kittypyr.catalog.keep_lists_apart``).
    """
    from kittypyr.fulltext import FullTextIndex, days_by_catalog, scope_postings_of

    catalog = archive.catalog
    if catalog is None:
        return
    text_index = getattr(catalog.get("text"), "index", None)
    if not isinstance(text_index, FullTextIndex) or text_index._scopes is not None:
        return
    lists = catalog.get("list")
    held = list(lists._fwd_index.keys()) if lists is not None else []
    if len(held) <= 1:
        # The only list with mail: a search in it reads the whole index, as before.
        text_index.keep_lists_anew(lone=held[0] if held else None)
        return
    scope_postings_of(text_index, lists._rev_index.get, days_by_catalog(catalog))


def merge_sparse_entries(archive):
    """Version 18: the date, last-activity and thread indexes merge concurrent writers whatever their entries' forms.

    Their trees from value to docids become ``kittypyr.merging.Entries``:
    each is read and written once (a few seconds at 280,000 messages); no
    message is read.
    """
    from kittypyr.catalog import SparseFieldIndex
    from kittypyr.merging import Entries, converted

    if archive.catalog is None:
        return
    for index in archive.catalog.values():
        if isinstance(index, SparseFieldIndex):
            index._fwd_index = converted(index._fwd_index, Entries)


def split_chunks_at_the_mean_length(archive):
    """Version 19: each group of a large word's chunks keeps apart the postings that score best at the index's mean length.

    They were picked at the chunk's own mean, which documents holding a
    common word raise far above the index's: a search of two common words
    then read many chunks whole (``kittypyr.fulltext.split_high``). Every
    chunk of every group, the index's and its lists' postings, is read
    once; no message is read.
    """
    from kittypyr.fulltext import FullTextIndex, split_chunks_of

    if archive.catalog is None:
        return
    for index in archive.catalog.values():
        text_index = getattr(index, "index", None)
        if isinstance(text_index, FullTextIndex):
            split_chunks_of(text_index, every=True)


# Numbered steps that upgrade an older persistent schema, in order. Each
# takes the Archive; step N brings schema_version from N-1 to N.
EVOLVE_STEPS = [add_quarantine, add_deletion_records, add_community_stores, add_session_generations,
                merge_concurrent_changes, add_login_failures, add_list_orders, rank_word_postings,
                date_word_chunks, add_archive_secret, split_cjk_words, add_dated_posts,
                inline_small_catalog_entries, rank_threads_on_themselves, split_word_chunks,
                move_word_sequences, scope_word_postings, merge_sparse_entries,
                split_chunks_at_the_mean_length]


def bootstrap_archive(zodb_root, registry):
    """Return the Archive in ``zodb_root``, creating or upgrading it first.

    Idempotent; changes are left to the caller's transaction.
    """
    archive = zodb_root.get(ROOT_KEY)
    if archive is None:
        archive = zodb_root[ROOT_KEY] = Archive()
        archive.schema_version = len(EVOLVE_STEPS)
    for version, step in enumerate(EVOLVE_STEPS[archive.schema_version :], archive.schema_version + 1):
        step(archive)
        archive.schema_version = version
    if not catalog_is_in_sync(archive, registry):
        sync_catalog(archive, registry)
    return archive


def root_factory(request):
    return bootstrap_archive(get_connection(request).root(), request.registry)


def closed_while_reindexing(event):
    """A web request to an archive whose ``kittypyr reindex`` has not ended is answered 503.

    Its search, exports, feeds and counts would miss mail without a word
    (an export of no message); Mailman keeps what it sends meanwhile.
    Commands (which prepare their own requests) are not web requests.
    """
    if getattr(event.request.root, "reindex_unfinished", False):
        raise HTTPServiceUnavailable(
            "The archive's catalog is being built again (kittypyr reindex), or its rebuilding was interrupted:"
            " it answers once that is done.", headers={"Retry-After": "300"})
