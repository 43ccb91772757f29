"""Tags that readers give threads, the ``tags`` catalog index and tag pages' queries.

A tag is a short lower-case word (``mips``, ``needs-review``, ``2.6.x``);
each reader may give a thread up to MAX_TAGS_PER_READER tags, each once,
and take back their own; the list's owners and moderators may take a tag
off a thread for everyone (``drop_tag``). The
catalog indexes threads by their tags, kept in step by ``ObjectModified``
events with ``indexes=("tags",)``; ``tag:`` in searches and the tag pages
ask that index.
"""

import re
import unicodedata
from datetime import datetime, timezone

from pyramid.traversal import find_root, traversal_path
from repoze.catalog.query import Any, Eq

from kittypyr.catalog import CompactKeywordIndex, Narrowed, _unindexed_as_tree, search_page
from kittypyr.events import IThreadMerged, ObjectModified, notify
from kittypyr.resources import Thread
from kittypyr.resources.community import HIGHEST

MAX_TAG_LENGTH = 40
# Tags one reader may give one thread: anyone with an account may tag.
MAX_TAGS_PER_READER = 20
_TAG = re.compile(r"^\w[\w.+-]*$", re.UNICODE)


def normalize_tag(text):
    """The tag that ``text`` names (lower case, spaces as dashes), or None if it names none.

    Letters that look alike are one tag, as far as Unicode says they are
    (NFKC: a fullwidth ``ｍｉｐｓ`` is ``mips``); a tag whose letters mix
    scripts (a Cyrillic ``м`` among Latin letters) names none: it would be
    shown as another's, and found by nobody who types it.
    """
    tag = "-".join(unicodedata.normalize("NFKC", text or "").strip().lstrip("#").lower().split())
    if not tag or len(tag) > MAX_TAG_LENGTH or not _TAG.match(tag) or len(_scripts_of(tag)) > 1:
        return None
    return tag


# Scripts written together in one word: Japanese mixes three.
_ONE_SCRIPT = {"HIRAGANA": "CJK", "KATAKANA": "CJK", "HANGUL": "CJK", "KATAKANA-HIRAGANA": "CJK"}


def _scripts_of(tag):
    """The scripts of the letters of ``tag``, by the first word of each letter's Unicode name."""
    scripts = set()
    for letter in tag:
        if letter.isalpha():
            script = unicodedata.name(letter, "UNKNOWN").split()[0]
            scripts.add(_ONE_SCRIPT.get(script, script))
    return scripts


def _tagging(resource):
    return getattr(find_root(resource), "tagging", None)


def _prefix(thread):
    return (thread.mailing_list.address, thread.__name__)


def _entries(tagging, list_address, thread_key):
    low = (list_address, thread_key)
    return tagging.entries.items(low, (list_address, thread_key, HIGHEST))


def thread_tags(thread, reader_address=None):
    """``[{"tag", "count", "mine"}]``: the thread's tags, most given first.

    ``count`` is how many readers gave it; ``mine`` whether ``reader_address`` did.
    """
    tagging = _tagging(thread)
    if tagging is None:
        return []
    found = {}
    for (_, _, tag, address), _ in _entries(tagging, *_prefix(thread)):
        entry = found.setdefault(tag, {"tag": tag, "count": 0, "mine": False})
        entry["count"] += 1
        entry["mine"] = entry["mine"] or address == reader_address
    return sorted(found.values(), key=lambda e: (-e["count"], e["tag"]))


def get_tags(obj, default):
    """Catalog discriminator: a thread's tags."""
    if isinstance(obj, Thread) and obj.__parent__ is not None:
        tags = [entry["tag"] for entry in thread_tags(obj)]
        if tags:
            return tags
    return default


def make_tags_index():
    return _unindexed_as_tree(CompactKeywordIndex(get_tags))


class TooManyTags(ValueError):
    """A reader gave a thread MAX_TAGS_PER_READER tags already."""


def add_tag(thread, tag, reader_address, now=None, registry=None):
    """Give ``thread`` the (normalized) ``tag`` from ``reader_address``; False if they had.

    Raises ``TooManyTags`` past MAX_TAGS_PER_READER of theirs on the thread.
    """
    tagging = _tagging(thread)
    list_address, key = _prefix(thread)
    entry = (list_address, key, tag, reader_address)
    if entry in tagging.entries:
        return False
    given = sum(1 for (_, _, _, address), _ in _entries(tagging, list_address, key) if address == reader_address)
    if given >= MAX_TAGS_PER_READER:
        raise TooManyTags(tag)
    tagging.entries[entry] = now or datetime.now(timezone.utc)
    given = (list_address, tag, key)
    tagging.by_list[given] = tagging.by_list.get(given, 0) + 1
    notify(ObjectModified(thread, indexes=("tags",)), registry)
    return True


def remove_tag(thread, tag, reader_address, registry=None):
    """Take back the ``tag`` that ``reader_address`` gave ``thread``; False if they had not."""
    tagging = _tagging(thread)
    list_address, key = _prefix(thread)
    entry = (list_address, key, tag, reader_address)
    if entry not in tagging.entries:
        return False
    del tagging.entries[entry]
    _uncount(tagging, (list_address, tag, key))
    notify(ObjectModified(thread, indexes=("tags",)), registry)
    return True


def drop_tag(thread, tag, registry=None):
    """Take ``tag`` off ``thread`` for every reader who gave it; how many had."""
    tagging = _tagging(thread)
    list_address, key = _prefix(thread)
    entries = [entry for entry, _ in _entries(tagging, list_address, key) if entry[2] == tag]
    for entry in entries:
        del tagging.entries[entry]
    if entries:
        _uncount(tagging, (list_address, tag, key), by=len(entries))
        notify(ObjectModified(thread, indexes=("tags",)), registry)
    return len(entries)


def _uncount(tagging, given, by=1):
    count = tagging.by_list.get(given, 0) - by
    if count > 0:
        tagging.by_list[given] = count
    else:
        tagging.by_list.pop(given, None)


def list_tags(mailing_list):
    """``[(tag, threads)]``: the tags in use in the list, most used first."""
    tagging = _tagging(mailing_list)
    if tagging is None:
        return []
    address = mailing_list.address
    live = mailing_list.threads.data
    counts = {}
    for _, tag, key in tagging.by_list.keys((address, ""), (address, HIGHEST)):
        if key in live:
            counts[tag] = counts.get(tag, 0) + 1
    return sorted(counts.items(), key=lambda item: (-item[1], item[0]))


def tagged_threads(mailing_list, tag, start, size):
    """``(total, threads)``: a page of the list's threads tagged ``tag``, latest activity first.

    A ``start`` past the end gives the last page.
    """
    query = Narrowed(Eq("tags", tag), kind="thread", list=mailing_list.address)
    return search_page(find_root(mailing_list), query, start, size, "last_active", reverse=True)


def tagged_thread_keys(archive, list_addresses, tags):
    """``{list address: [thread key]}``: the threads of those lists that carry every one of ``tags``.

    A tag may be a list of alternatives, any of which does. One catalog
    query; lists and keys are read from the threads' paths
    (``/list/<address>/thread/<key>``), so no thread is loaded.
    """
    query = None
    for tag in tags:
        condition = Eq("tags", tag) if isinstance(tag, str) else Any("tags", list(tag))
        query = condition if query is None else query & condition
    _, docids = archive.catalog.query(Narrowed(query, kind="thread", list=list_addresses))
    address_for = archive.document_map.address_for_docid
    found = {}
    for docid in docids:
        path = address_for(docid)
        if path is None:
            continue
        _, list_address, _, key = traversal_path(path)
        found.setdefault(list_address, []).append(key)
    return found


def move_tags(mailing_list, from_key, thread, registry=None):
    """Give ``thread`` the tags of the thread ``from_key`` that it absorbed."""
    tagging = _tagging(thread)
    address = mailing_list.address
    moved = list(_entries(tagging, address, from_key))
    if not moved:
        return
    for (_, _, tag, reader_address), when in moved:
        del tagging.entries[(address, from_key, tag, reader_address)]
        _uncount(tagging, (address, tag, from_key))
        entry = (address, thread.__name__, tag, reader_address)
        if entry not in tagging.entries:
            tagging.entries[entry] = when
            given = (address, tag, thread.__name__)
            tagging.by_list[given] = tagging.by_list.get(given, 0) + 1
    notify(ObjectModified(thread, indexes=("tags",)), registry)


def on_thread_merged(event):
    """Tags given to a thread that was absorbed stay with the conversation."""
    thread = event.thread
    if _tagging(thread) is not None:
        move_tags(thread.mailing_list, event.absorbed_key, thread)


def includeme(config):
    config.add_catalog_index("tags", make_tags_index)
    config.add_subscriber(on_thread_merged, IThreadMerged)
