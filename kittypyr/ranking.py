"""A page of search matches in the order asked, and how many there are.

Only the matches that can reach the page asked for are put in order, so a
page costs about the same however many messages match: by relevance the
best ones (``kittypyr.scored.top``), by date those of the newest or the
oldest months (``_by_months``); phrases are looked for in the candidates in
that order until the page is full, and the rest is counted from a sample.
``kittypyr.search.run_search`` asks here.
"""

import itertools

import numpy as np

from kittypyr.scored import held_in, restricted, rounded_estimate, spread_positions, top, verified

# Up to this many matches are put in date order by looking each one's date up.
DATE_LOOKUP_MAX = 50_000


def _date_of(archive):
    return archive.catalog["date"]._rev_index.get


def ordered_page(archive, scored, sort, start, size):
    """The docids of the page asked for, in the order asked."""
    start = last_page_start(start, size, len(scored))
    if not len(scored):
        return []
    if sort == "relevance":
        best = top(scored, start + size, _date_of(archive))
        return [int(scored.docids[at]) for at in best[start:]]
    if len(scored) <= DATE_LOOKUP_MAX:
        # The dates of the matches that can reach the page looked up and
        # sorted at once: the date index's sort of a few thousand docids
        # walked far more of the index.
        candidates = _by_months(archive, scored, sort == "date-desc", start + size)
        date_of = _date_of(archive)
        dates = np.fromiter((date_of(docid, 0) for docid in candidates.tolist()), dtype=np.int64,
                            count=len(candidates))
        order = np.lexsort((candidates, dates))
        if sort == "date-desc":
            order = order[::-1]
        return [int(docid) for docid in candidates[order[start:start + size]]]
    docids = archive.catalog["date"].family.IF.TreeSet(scored.docids.tolist())
    ordered = archive.catalog["date"].sort(docids, reverse=sort == "date-desc", limit=start + size)
    return list(itertools.islice(ordered, start, start + size))


def _by_months(archive, scored, newest_first, wanted):
    """The docids of ``scored`` that can be among its ``wanted`` first in date order.

    When the matches are many among the archive's messages, they are
    taken month by month from the newest (or the oldest) until ``wanted``
    are in, and one month more: a message's month is its sender's, hours
    off its place in time. Looking up every match's date would cost as
    many look-ups as matches; this, about ``wanted`` months' worth of
    messages divided by the share that matches. Otherwise every match.
    """
    months = archive.catalog["month"]
    messages = months._num_docs()
    if len(scored) ** 2 <= 4 * wanted * messages:
        return scored.docids
    keys = list(months._fwd_index.keys())
    if newest_first:
        keys.reverse()
    found, count, more = [], 0, None
    for key in keys:
        members = np.fromiter(months._fwd_index[key], dtype=np.int64)
        inside = members[held_in(scored.docids, members)]
        found.append(inside)
        count += len(inside)
        if more is not None:
            break
        if count >= wanted:
            more = key
    return np.concatenate(found) if found else scored.docids[:0]


def counted_total(total, limits, estimated=False):
    """``(count shown, whether it is an estimate)``: rounded above ``limits.max_exact_count``."""
    if estimated or total > limits.max_exact_count:
        return rounded_estimate(total), True
    return total, False


def _matches_in_order(archive, scored, sort, looked):
    """The real matches among the first ``looked`` candidates of ``scored``, in the order asked."""
    ordered = ordered_page(archive, scored, sort, 0, looked)
    if scored.check is None:
        return ordered
    return [docid for docid in ordered if scored.check(docid)]


# Candidates looked at, spread over all of them, to estimate how many match.
ESTIMATE_SAMPLE = 200


def _estimated_total(scored, looked, kept):
    """How many of ``scored`` match: ``kept`` of the first ``looked``, the rest from a sample.

    The first candidates in rank order match more often than the others
    (they hold the words more), so the rest is estimated from candidates
    spread evenly over the docids.
    """
    rest = len(scored) - looked
    if rest <= 0 or scored.check is None:
        return kept + max(rest, 0)
    sample = spread_positions(len(scored), ESTIMATE_SAMPLE)
    found = sum(1 for docid in scored.docids[sample].tolist() if scored.check(docid))
    return kept + round(rest * found / len(sample))


def page_of_matches(archive, scored, sort, start, size):
    """``(docids, total, estimated)``: the page asked for and how many match.

    Candidates that still need their ``check`` (phrases) are checked in
    the order asked only until the page is full; the total is then
    estimated. A ``start`` past the last match gives the last page.
    """
    if scored.check is None:
        return ordered_page(archive, scored, sort, start, size), len(scored), False
    wanted = start + size
    looked = min(len(scored), max(2 * wanted, 100))
    while True:
        kept = _matches_in_order(archive, scored, sort, looked)
        if len(kept) >= wanted or looked >= len(scored):
            break
        looked = min(len(scored), looked * 4)
    if looked >= len(scored):
        start = last_page_start(start, size, len(kept))
        return kept[start:start + size], len(kept), False
    return kept[start:wanted], _estimated_total(scored, looked, len(kept)), True


# Messages first looked at for each thread wanted: all of them scored, a
# few hundred cost nothing more; read from the best of a word's postings,
# the fewer the better (four times more are read when they are too few).
THREADS_FIRST_LOOKED = 2


def _threads_looked_at(wanted, best_only):
    """How many messages are first looked at for ``wanted`` threads."""
    return THREADS_FIRST_LOOKED * wanted if best_only is not None else max(4 * wanted, 200)


def page_of_threads(archive, found, sort, start, size, widen=None, lists=None):
    """The best message of each thread on the page:
    ``(docids, matches, total, threads, threads estimated, scored, total estimated)``.

    ``found`` is ``(scored, best_only)`` as ``kittypyr.search`` finds
    them; ``widen(n)``,
    when given, gives it again holding the ``n`` best. Messages are taken
    in the order asked and the first of each thread kept, until the page
    is full; ``matches`` counts each kept thread's matching messages,
    ``total`` the messages matched. ``threads`` is the number of threads
    matched: counted when all matches were looked at, else estimated from
    the share of new threads among those that were. ``lists``: the
    addresses searched, when known.
    """
    catalog = archive.catalog
    thread_of = catalog["thread"]._rev_index.get
    list_of = catalog["list"]._rev_index.get
    # One list searched: every match is of it, and the list index (a tree
    # keyed by docid, read at as many places as messages are looked at) is
    # left alone.
    list_of_match = (lambda docid, address=lists[0]: address) if lists is not None and len(lists) == 1 else list_of
    wanted = start + size
    scored, best_only = found
    looked = _threads_looked_at(wanted, best_only)
    while True:
        if best_only is None:
            candidates = len(scored)
        else:
            # Fewer than asked for only when every match was read.
            candidates = best_only.total if len(scored) >= looked else len(scored)
        looked = min(candidates, looked)
        ordered = _matches_in_order(archive, scored, sort, looked)
        firsts = {}
        for docid in ordered:
            key = (list_of_match(docid), thread_of(docid))
            if key not in firsts:
                firsts[key] = docid
        if len(firsts) >= wanted or looked >= candidates:
            break
        looked *= 4
        if widen is not None:
            scored, best_only = widen(looked)
    exhausted = looked >= candidates
    if best_only is not None:
        total, estimated = best_only.total, best_only.estimated
    else:
        total = len(ordered) if exhausted else _estimated_total(scored, looked, len(ordered))
        estimated = not exhausted and scored.check is not None
    threads = len(firsts)
    if not exhausted:
        threads = max(threads, round(threads * total / max(1, len(ordered))))
    shown = list(firsts.items())
    start = last_page_start(start, size, len(shown)) if exhausted else start
    page = shown[start:wanted]
    matches = []
    for (address, key), _ in page:
        members = catalog["thread"].documents_with(key)
        members = sorted(docid for docid in members if list_of(docid) == address)
        if best_only is not None:
            matches.append(len(best_only.matching(members)))
            continue
        in_thread = restricted(scored, np.array(members, dtype=np.int64))
        matches.append(len(verified(in_thread)) if scored.check is not None else len(in_thread))
    return [docid for _, docid in page], matches, total, threads, not exhausted, scored, estimated



def last_page_start(start, size, total):
    """``start``, or the first item of the last page when ``start`` is past the end.

    A page of no items starts at 0: threads are looked for among 0 matches
    when a search finds none.
    """
    if start < total:
        return start
    if size < 1:
        return 0
    return max(0, (total - 1) // size * size)
