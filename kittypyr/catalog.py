"""The catalog: every index declared here, kept in step by subscribers here.

Messages and threads are catalogued; a ``DocumentMap`` maps each docid to
the resource's path. Discriminators are pure functions ``get_x(obj,
default)`` that return ``default`` when they do not apply.

Extensions add indexes with ``config.add_catalog_index(name, factory)``; a
missing index is created and filled, and an index nobody declares any more
is dropped, by the same ``sync_catalog`` run at start-up.
"""

import itertools
import logging

from persistent import Persistent
from pyramid.traversal import find_resource, find_root, resource_path
from repoze.catalog.catalog import Catalog
from repoze.catalog.document import DocumentMap
from repoze.catalog.indexes.field import CatalogFieldIndex
from repoze.catalog.indexes.keyword import CatalogKeywordIndex
from repoze.catalog.indexes.text import CatalogTextIndex
from repoze.catalog.query import Query
from ZODB.broken import Broken

from kittypyr.events import IObjectAdded, IObjectModified, IObjectWillBeRemoved
from kittypyr.fulltext import FullTextIndex, days_by_catalog, scope_postings_of, zoned_text_of
from kittypyr.lexicon import Lexicon, OkapiIndex
from kittypyr.merging import Entries
from kittypyr.resources import Archive, Message, Thread
from kittypyr.resources.thread import month_of
from kittypyr.subjects import leave_out_list_prefix
from kittypyr.zones import file_keys

log = logging.getLogger(__name__)

INDEX_FACTORIES_KEY = "kittypyr.catalog_indexes"


def get_kind(obj, default):
    if isinstance(obj, Message):
        return "message"
    if isinstance(obj, Thread):
        return "thread"
    return default


def get_list(obj, default):
    if isinstance(obj, (Message, Thread)):
        return obj.mailing_list.address
    return default


def get_date(obj, default):
    """Seconds since the epoch: a message's date, a thread's start."""
    if isinstance(obj, Message):
        return int(obj.timestamp)
    if isinstance(obj, Thread) and obj.date_started is not None:
        return int(obj.date_started.timestamp())
    return default


def get_last_active(obj, default):
    if isinstance(obj, Thread) and obj.last_date is not None:
        return int(obj.last_date.timestamp())
    return default


def get_size(obj, default):
    """A thread's number of messages: its busiest threads of all time are the largest."""
    if isinstance(obj, Thread):
        return len(obj)
    return default


def get_month(obj, default):
    """'YYYY-MM' of a message's date, or of a thread's start."""
    if isinstance(obj, Message):
        return month_of(obj.date)
    if isinstance(obj, Thread) and obj.date_started is not None:
        return month_of(obj.date_started)
    return default


def get_sender(obj, default):
    if isinstance(obj, Message) and obj.sender_address:
        return obj.sender_address.lower()
    return default


def get_thread(obj, default):
    if isinstance(obj, Message):
        return obj.thread
    if isinstance(obj, Thread):
        return obj.__name__
    return default


def get_has_attachment(obj, default):
    if isinstance(obj, Message):
        return bool(obj.attachments)
    return default


def get_text(obj, default):
    """Every word a reader sees of a message, by zone (see ``kittypyr.zones``)."""
    if isinstance(obj, Message):
        return zoned_text_of(obj)
    return default


def get_files(obj, default):
    """The ``file:`` keys of the paths a message's patches touch: path, folders, name."""
    if isinstance(obj, Message):
        keys = file_keys(zoned_text_of(obj).paths)
        if keys:
            return keys
    return default


def get_is(obj, default):
    """What ``is:`` finds a message as: ``patch``, ``reply``, ``first`` (it answers none archived)."""
    if isinstance(obj, Message):
        kinds = []
        if zoned_text_of(obj).has_patch:
            kinds.append("patch")
        if obj.in_reply_to or obj.references:
            kinds.append("reply")
        if obj.parent is None:
            kinds.append("first")
        return kinds or default
    return default


class SparseFieldIndex(CatalogFieldIndex):
    """A field index for values that each document has alone or shares with a few.

    repoze.catalog maps each value to a set of docids, a record of its own:
    with dates, one new record per document and per commit. Here a value
    held by a single document maps to that docid itself, one held by a few
    (a thread and its first message share a date) to a sorted tuple of
    them, both kept in the bucket that maps the value; a value shared by
    more than SHARED_INLINE documents gets a set. Queries and sorting
    answer as CatalogFieldIndex does (BTrees' multiunion takes docids,
    tuples and sets alike). A value held by one document is now kept as a
    tuple of one: two processes that change the same bucket have their
    changes merged (BTrees' conflict resolution), which compares a value's
    old and new forms, and an int does not compare with a tuple. A value
    stored alone as an int before stays so until its next change.
    """

    SHARED_INLINE = 8

    def clear(self):
        super().clear()
        # A value's entry changes type (a tuple, then a set): see Entries.
        self._fwd_index = Entries()

    def index_doc(self, docid, obj):
        # CatalogIndex.index_doc, then FieldIndex.index_doc, for this layout.
        value = _value_to_index(self, docid, obj)
        if value is _MISSING:
            return None
        if isinstance(value, (Persistent, Broken)):
            raise ValueError(f"Catalog cannot index persistent or broken object {value}")
        rev_index = self._rev_index
        old = rev_index.get(docid, _MISSING)
        if old is not _MISSING:
            if old == value:
                return None
            self.unindex_doc(docid)
        fwd_index = self._fwd_index
        docids = fwd_index.get(value)
        if docids is None:
            fwd_index[value] = (docid,)
        elif type(docids) is int:
            fwd_index[value] = tuple(sorted((docids, docid)))
        elif type(docids) is tuple:
            if docid not in docids:
                shared = tuple(sorted(docids + (docid,)))
                fwd_index[value] = shared if len(shared) <= self.SHARED_INLINE else self.family.IF.TreeSet(shared)
        else:
            docids.insert(docid)
        self._num_docs.change(1)
        rev_index[docid] = value
        return None

    reindex_doc = index_doc

    def unindex_doc(self, docid):
        if docid in self._not_indexed:
            self._not_indexed.remove(docid)
        rev_index = self._rev_index
        value = rev_index.get(docid, _MISSING)
        if value is _MISSING:
            return
        del rev_index[docid]
        fwd_index = self._fwd_index
        docids = fwd_index.get(value)
        if type(docids) is int:
            if docids == docid:
                del fwd_index[value]
        elif type(docids) is tuple:
            rest = tuple(other for other in docids if other != docid)
            if len(rest) != len(docids):
                if rest:
                    fwd_index[value] = rest
                else:
                    del fwd_index[value]
        elif docids is not None:
            if docid in docids:
                docids.remove(docid)
            if not docids:
                del fwd_index[value]
        self._num_docs.change(-1)

    def documents_with(self, value):
        """The docids of the documents indexed under ``value`` (an iterable; empty when none)."""
        docids = self._fwd_index.get(value, ())
        return (docids,) if type(docids) is int else docids

    def timsort_descending(self, docids, limit):
        # Documents of one value newest first by docid, as nbest_descending
        # orders them: repoze.catalog's own sort kept them in docid order,
        # so a page 300 deep (where it sorts so) repeated some messages of
        # one second the page before it showed, and skipped others.
        value_of = self._rev_index.get
        ordered = sorted(((value, docid) for docid in docids
                          for value in (value_of(docid, _MISSING),) if value is not _MISSING), reverse=True)
        return (docid for _, docid in itertools.islice(ordered, limit))

    def scan_forward(self, docids, limit=None):
        def each_docid():
            for value in self._fwd_index.values():
                if type(value) is int:
                    yield value
                else:
                    yield from value

        return itertools.islice(filter(docids.__contains__, each_docid()), limit)


class CompactKeywordIndex(CatalogKeywordIndex):
    """A keyword index that keeps each document's keywords as a plain tuple.

    zope.index keeps them as an OO.Set, a record of its own: one more
    record written for nearly every message, and kept for good (a fifth
    of all records in a large archive, each an entry in FileStorage's
    in-memory index). A tuple lives in the reverse index's bucket, which
    the same commit rewrites anyway. Entries stored as sets by an older
    kittypyr are read alike and become tuples when their document is
    indexed again. Queries answer as CatalogKeywordIndex does.
    """

    def index_doc(self, docid, obj):
        # CatalogIndex.index_doc, then KeywordIndex.index_doc, for this layout.
        value = _value_to_index(self, docid, obj)
        if value is _MISSING:
            return None
        if isinstance(value, str):
            raise TypeError("keywords must be a list or tuple of strings")
        old = self._rev_index.get(docid)
        if not value:
            if old:
                self.unindex_doc(docid)
            return None
        new = tuple(sorted(set(self.normalize(value))))
        if old is None:
            self._insert_forward(docid, new)
            self._num_docs.change(1)
        else:
            old = tuple(old)
            if old == new:
                return None
            fwd_index = self._fwd_index
            for word in set(old).difference(new):
                docids = fwd_index[word]
                docids.remove(docid)
                if not docids:
                    del fwd_index[word]
            self._insert_forward(docid, set(new).difference(old))
        self._rev_index[docid] = new
        return None

    reindex_doc = index_doc


# The indexes kittypyr declares whose entries an older kittypyr kept as
# records of their own: the class it was made of, and the class it is
# made of now. An archive's older ones are moved by kittypyr.bootstrap.
INLINE_ENTRY_INDEXES = {
    "file": (CatalogKeywordIndex, CompactKeywordIndex),
    "is": (CatalogKeywordIndex, CompactKeywordIndex),
    "tags": (CatalogKeywordIndex, CompactKeywordIndex),
    "thread": (CatalogFieldIndex, SparseFieldIndex),
}


def moved_into(index_class, index):
    """An ``index_class`` holding ``index``'s trees as they are: no document is read.

    For the classes above, which read the entries their base classes
    wrote and write their own from then on.
    """
    moved = index_class(index.discriminator)
    for name in ("_fwd_index", "_rev_index", "_num_docs", "_not_indexed"):
        setattr(moved, name, getattr(index, name))
    return moved


_MISSING = object()


def _value_to_index(index, docid, obj):
    """What ``index``'s discriminator gives for ``obj``, or _MISSING (the docid then noted as not indexed).

    CatalogIndex.index_doc's first half, for the indexes above that store
    their entries their own way.
    """
    if callable(index.discriminator):
        value = index.discriminator(obj, _MISSING)
    else:
        value = getattr(obj, index.discriminator, _MISSING)
    if value is _MISSING:
        index.unindex_doc(docid)
        index._not_indexed.add(docid)
    elif docid in index._not_indexed:
        index._not_indexed.remove(docid)
    return value


def _unindexed_as_tree(index):
    """Keep ``index``'s not-indexed docids in a tree, not a single-record set.

    Threads are not in the text, sender and attachment indexes, messages
    not in last_active: as one record, that set was rewritten whole by
    every commit, growing with the archive.
    """
    index._not_indexed = index.family.IF.TreeSet()
    return index


def make_text_index(discriminator=get_text, index_class=OkapiIndex):
    """A full-text index with kittypyr's compact lexicon and postings."""
    lexicon = Lexicon()
    return _unindexed_as_tree(CatalogTextIndex(discriminator, lexicon=lexicon, index=index_class(lexicon)))


def make_message_text_index():
    """The index of every word of every message, by zone (``kittypyr.fulltext``)."""
    return make_text_index(get_text, FullTextIndex)


# An archive made before the text index held every zone has an index of
# that name that is not current: it is made again and filled at start-up.
make_message_text_index.is_current = lambda index: isinstance(getattr(index, "index", None), FullTextIndex)


def _stale(catalog, factories):
    """Names of declared indexes the catalog holds in a form their factory no longer makes."""
    return sorted(name for name, factory in factories.items()
                  if name in catalog and not getattr(factory, "is_current", lambda index: True)(catalog[name]))


def _field(discriminator, factory=CatalogFieldIndex):
    return lambda: _unindexed_as_tree(factory(discriminator))


def default_index_factories():
    """Name -> callable making the index: the indexes kittypyr itself needs."""
    return {
        "kind": _field(get_kind),
        "list": _field(get_list),
        "date": _field(get_date, SparseFieldIndex),
        "last_active": _field(get_last_active, SparseFieldIndex),
        "size": _field(get_size),
        "month": _field(get_month),
        "sender": _field(get_sender),
        "thread": _field(get_thread, SparseFieldIndex),
        "has_attachment": _field(get_has_attachment),
        "text": make_message_text_index,
        "file": _field(get_files, CompactKeywordIndex),
        "is": _field(get_is, CompactKeywordIndex),
    }


def declared_index_factories(registry):
    factories = default_index_factories()
    factories.update(registry.get(INDEX_FACTORIES_KEY, {}))
    return factories


def sync_catalog(archive, registry):
    """Make the catalog hold exactly the declared indexes; return the names added.

    Creates catalog and document map when missing. A newly declared index
    is filled from every catalogued resource.
    """
    if archive.catalog is None:
        archive.catalog = Catalog()
        archive.document_map = DocumentMap()
    catalog = archive.catalog
    factories = declared_index_factories(registry)
    for name in set(catalog.keys()) - set(factories):
        log.info("dropping catalog index %r: no longer declared", name)
        del catalog[name]
    for name in _stale(catalog, factories):
        log.info("rebuilding catalog index %r: made by an older kittypyr", name)
        del catalog[name]
    added = sorted(set(factories) - set(catalog.keys()))
    for name in added:
        catalog[name] = index = factories[name]()
        for docid, path in archive.document_map.docid_to_address.items():
            resource = _resolve(archive, docid, path)
            if resource is not None:
                index.index_doc(docid, resource)
        text = getattr(index, "index", None)
        if isinstance(text, FullTextIndex) and text._lone is not None and text._scopes:
            # Filled list by list: the first is the lone one, among others.
            keep_lists_apart(catalog, text._lone)
    return added


def catalog_is_in_sync(archive, registry):
    if archive.catalog is None:
        return False
    factories = declared_index_factories(registry)
    return set(archive.catalog.keys()) == set(factories) and not _stale(archive.catalog, factories)


def _catalog_of(resource):
    root = find_root(resource)
    if isinstance(root, Archive) and root.catalog is not None:
        return root
    return None


def catalogued_in(resource):
    """Iterate ``resource`` and everything below it that the catalog holds."""
    pending = [resource]
    while pending:
        node = pending.pop()
        if get_kind(node, None) is not None:
            yield node
        values = getattr(node, "values", None)
        if values is not None and not isinstance(node, (Message, Thread)):
            pending.extend(values())


# Messages and threads keep their own docid (``catalog_docid``, None until
# catalogued): their paths end in a hash, so the document map's tree from
# path to docid took one write of a random bucket for each of them, the
# largest share of an import's writes in a large archive. The map's
# docid -> path entry confirms a kept docid (a catalog rebuilt since, or a
# resource removed and added again, leaves it stale). Resources stored
# before docids were kept have no such attribute and are found by path.
_NOT_KEPT = object()


def _kept_docid(resource):
    """``resource``'s own docid: None if not catalogued, _NOT_KEPT if it keeps none."""
    return getattr(resource, "catalog_docid", _NOT_KEPT)


def keeps_docid(resource):
    return _kept_docid(resource) is not _NOT_KEPT


def docid_of(archive, resource, path=None):
    """The docid the catalog holds ``resource`` under (at ``path``, its path), or None."""
    if path is None:
        path = resource_path(resource)
    document_map = archive.document_map
    kept = _kept_docid(resource)
    if kept is _NOT_KEPT:
        return document_map.docid_for_address(path)
    if kept is not None and document_map.docid_to_address.get(kept) == path:
        return kept
    return None


def _add_document(document_map, resource, path):
    """A docid for ``resource``, mapped to ``path``: its kept one where that is free, else a new one."""
    kept = _kept_docid(resource)
    if kept is _NOT_KEPT:
        return document_map.add(path)
    if kept is None or kept in document_map.docid_to_address:
        kept = resource.catalog_docid = document_map.new_docid()
    document_map.docid_to_address[kept] = path
    return kept


def keep_lists_apart(catalog, address):
    """Before a message of list ``address`` is indexed: when it makes the text index's lone list one of several,
    give that list postings of its own (``FullTextIndex.lone_to_split``).

    Once, as a second list gets its first message: every word's postings
    are read (``scope_postings_of``), about 30 s for 280,000 messages.
    """
    index = getattr(catalog.get("text"), "index", None)
    if isinstance(index, FullTextIndex) and index.lone_to_split(address):
        lists = catalog["list"]._rev_index
        scope_postings_of(index, lists.get, days_by_catalog(catalog), only=index._lone)


def index_resource(archive, resource, indexes=None):
    """Index ``resource`` (or refresh it in ``indexes`` only); return its docid."""
    if isinstance(resource, Message):
        keep_lists_apart(archive.catalog, resource.mailing_list.address)
    path = resource_path(resource)
    docid = docid_of(archive, resource, path)
    if docid is None:
        docid = _add_document(archive.document_map, resource, path)
        archive.catalog.index_doc(docid, resource)
    elif indexes is None:
        archive.catalog.reindex_doc(docid, resource)
    else:
        for name in indexes:
            archive.catalog[name].reindex_doc(docid, resource)
    return docid


def unindex_resource(archive, resource):
    docid = docid_of(archive, resource)
    if docid is not None:
        archive.catalog.unindex_doc(docid)
        archive.document_map.remove_docid(docid)


def on_added(event):
    """Index the added resource and every catalogued resource below it."""
    archive = _catalog_of(event.object)
    if archive is not None:
        for resource in catalogued_in(event.object):
            index_resource(archive, resource)


def on_will_be_removed(event):
    """Unindex the resource and everything below it, before it leaves."""
    archive = _catalog_of(event.object)
    if archive is not None:
        for resource in catalogued_in(event.object):
            unindex_resource(archive, resource)


# Indexes that read what another one does: a message moved under a new
# parent ("thread") may stop or start being a first message ("is").
_FOLLOWING_INDEXES = {"thread": ("is",)}


def on_modified(event):
    archive = _catalog_of(event.object)
    if archive is not None and get_kind(event.object, None) is not None:
        indexes = event.indexes
        if indexes is not None:
            indexes = tuple(indexes) + tuple(
                following for name in indexes for following in _FOLLOWING_INDEXES.get(name, ())
                if following in archive.catalog)
        index_resource(archive, event.object, indexes)


def _resolve(archive, docid, path):
    try:
        return find_resource(archive, path)
    except KeyError:
        log.warning("catalog docid %s points at missing %s", docid, path)
        return None


def search(archive, query, sort_index=None, limit=None, reverse=False):
    """Run a repoze.catalog query; return ``(total, resources)``.

    ``resources`` is a lazy iterator of the matching resources in order;
    docids whose resource is gone are skipped with a log line.
    """
    total, docids = archive.catalog.query(
        query, sort_index=sort_index, limit=limit, reverse=reverse
    )
    return total.total if hasattr(total, "total") else total, resources_of(archive, docids)


def resources_of(archive, docids):
    """The resources of ``docids``, lazily, in their order; a docid whose resource is gone is skipped with a log line."""
    address_for = archive.document_map.address_for_docid
    for docid in docids:
        path = address_for(docid)
        resource = None if path is None else _resolve(archive, docid, path)
        if resource is not None:
            yield resource


class Narrowed(Query):
    """The documents ``query`` finds whose values in field indexes are among ``values``.

    ``Narrowed(Eq("sender", address), list=addresses)``: each document
    found is tested through each index's value of it. ``Eq("list", ...)``
    or ``Eq("kind", ...)`` would take the index's whole set of that value
    (every message of a list, every message of the archive), which an
    ``And`` then intersects: a cost that grows with the list and the
    archive. A narrow query (one sender's, one thread's, one tag's) finds
    few documents, and testing those costs what it finds.
    """

    def __init__(self, query, **values):
        self.query = query
        self.values = {name: frozenset([value] if isinstance(value, str) else value)
                       for name, value in values.items()}

    def __str__(self):
        return f"Narrowed({self.query}, {self.values})"

    def _apply(self, catalog, names):
        found = self.query._apply(catalog, names)
        tests = [(catalog[name]._rev_index.get, wanted) for name, wanted in self.values.items()]
        return catalog.family.IF.Set(
            [docid for docid in found if all(value_of(docid) in wanted for value_of, wanted in tests)])


def search_page(archive, query, start, size, sort_index, reverse=False):
    """``(total, resources)``: the ``size`` resources from the ``start``-th, in ``sort_index`` order.

    A ``start`` past the last result gives the last page instead (as
    ``Page`` numbers it), so a page number typed past the end answers the
    last page. The results before ``start`` are never loaded.
    """
    total, docids = archive.catalog.query(query, sort_index=sort_index, limit=start + size, reverse=reverse)
    total = total.total if hasattr(total, "total") else total
    if start >= total:
        start = max(0, (total - 1) // size * size)
    return total, list(resources_of(archive, itertools.islice(docids, start, start + size)))


def catalogued_count(archive):
    """How many resources the catalog holds when it is whole: every list's messages and threads."""
    return sum(len(mailing_list.messages) + len(mailing_list.threads) for mailing_list in archive.lists.values())


def reindex_archive(archive, registry, commit=None, every=1000, progress=None, finish=True):
    """Rebuild the catalog from the tree; ``commit()`` is called every ``every`` resources.

    ``progress(count)``, when given, is told of each ``every`` resources
    indexed (and of the last ones). Returns the number of resources indexed.
    Subjects archived before their list's prefix was known lose it first.
    Until it ends, ``archive.reindex_unfinished`` says so (``finish``
    False: the caller says it has ended, once what it rebuilds after is
    done too).
    """
    archive.reindex_unfinished = True
    archive.catalog = None
    archive.document_map = None
    archive.text_indexed_before_cjk_split = False
    sync_catalog(archive, registry)
    count = 0
    for resource in catalogued_in(archive):
        if isinstance(resource, (Message, Thread)):
            # Mail archived before its list's prefix was known.
            leave_out_list_prefix(resource)
        index_resource(archive, resource)
        count += 1
        if count % every == 0:
            if commit is not None:
                commit()
            if progress is not None:
                progress(every)
    if finish:
        archive.reindex_unfinished = False
    if commit is not None:
        commit()
    if progress is not None and count % every:
        progress(count % every)
    return count


def reindex_cjk_words(archive, commit=None, every=1000):
    """Index again, in the text indexes, the messages indexed before CJK words were split; return how many.

    Those holding a run of Chinese, Japanese or Korean letters (see
    ``OkapiIndex.documents_holding_unsplit_words``): the words of every
    other message split as they did, and none of them is read.
    ``commit()`` is called every ``every`` messages and at the end.
    """
    pending = {}  # docid -> the text indexes holding its unsplit words
    for index in archive.catalog.values():
        text_index = getattr(index, "index", None)
        if isinstance(text_index, OkapiIndex):
            for docid in text_index.documents_holding_unsplit_words():
                pending.setdefault(docid, []).append(index)
    address_for = archive.document_map.address_for_docid
    count = 0
    for docid, indexes in sorted(pending.items()):
        path = address_for(docid)
        resource = None if path is None else _resolve(archive, docid, path)
        if resource is None:
            continue
        for index in indexes:
            index.reindex_doc(docid, resource)
        count += 1
        if commit is not None and count % every == 0:
            commit()
    archive.text_indexed_before_cjk_split = False
    if commit is not None:
        commit()
    return count


def add_catalog_index(config, name, factory):
    """Configuration directive: declare a catalog index made by ``factory()``."""

    factory = config.maybe_dotted(factory)

    def register():
        config.registry.setdefault(INDEX_FACTORIES_KEY, {})[name] = factory

    config.action(("kittypyr-catalog-index", name), register)


def includeme(config):
    config.add_directive("add_catalog_index", add_catalog_index)
    config.add_subscriber(on_added, IObjectAdded)
    config.add_subscriber(on_will_be_removed, IObjectWillBeRemoved)
    config.add_subscriber(on_modified, IObjectModified)
