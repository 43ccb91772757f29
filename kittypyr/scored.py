"""Sets of matching documents with their scores, as numpy arrays, and the best of them.

``kittypyr.fulltext`` makes them from the text index's postings;
``kittypyr.search`` and ``kittypyr.ranking`` cut, combine and order them.
"""

import math

import numpy as np


class Scored:
    """Matching documents: ``docids`` (sorted, unique) and their ``scores``, numpy arrays.

    ``check``, when not None, says of a docid whether it really matches:
    the documents are then candidates holding every word of a phrase, not
    yet looked at for the phrase itself, so that a page of results need
    only look at the candidates that can reach it (see ``verified``).
    """

    __slots__ = ("docids", "scores", "check")

    def __init__(self, docids, scores, check=None):
        self.docids = docids
        self.scores = scores
        self.check = check

    def __len__(self):
        return len(self.docids)


def verified(scored):
    """``scored`` without the candidates its ``check`` refuses: every one looked at."""
    if scored.check is None or not len(scored):
        return Scored(scored.docids, scored.scores)
    check = scored.check
    keep = np.fromiter((check(docid) for docid in scored.docids.tolist()), dtype=bool, count=len(scored))
    return Scored(scored.docids[keep], scored.scores[keep])


def best_passing(scored, count):
    """The first ``count`` of ``scored``'s candidates, in the order of their scores, that pass its check.

    With every other that passes and scores as the last of them: a page
    orders equals by date.
    """
    kept = []
    check = scored.check
    scores = scored.scores
    for at in np.argsort(-scores, kind="stable").tolist():
        if len(kept) >= count and scores[at] < scores[kept[-1]]:
            break
        if check(int(scored.docids[at])):
            kept.append(at)
    kept = np.array(sorted(kept), dtype=np.int64)
    return Scored(scored.docids[kept], scored.scores[kept])


def all_of(checks):
    """One check out of several (None for none), each docid's answer remembered."""
    checks = [check for check in checks if check is not None]
    if not checks:
        return None
    answers = {}

    def check(docid):
        answer = answers.get(docid)
        if answer is None:
            answer = answers[docid] = all(one(docid) for one in checks)
        return answer

    return check


EMPTY = Scored(np.empty(0, dtype=np.int64), np.empty(0))


def in_docid_order(docids, scores):
    if len(docids) > 1 and not np.all(docids[1:] > docids[:-1]):
        order = np.argsort(docids, kind="stable")
        docids, scores = docids[order], scores[order]
    return Scored(docids, scores)


def union(parts):
    """Documents in any of ``parts``, their scores added."""
    parts = [part for part in parts if len(part)]
    if not parts:
        return EMPTY
    if len(parts) == 1:
        return parts[0]
    docids, inverse = np.unique(np.concatenate([p.docids for p in parts]), return_inverse=True)
    scores = np.bincount(inverse, weights=np.concatenate([p.scores for p in parts]), minlength=len(docids))
    return Scored(docids, scores)


def intersection(first, second):
    """Documents in both, their scores added (the first's plus the second's).

    The smaller is looked up in the larger, both being in docid order:
    no sort of the two together.
    """
    small, large = (first, second) if len(first) <= len(second) else (second, first)
    # Where each of the smaller's docids is found, the larger's score is there too.
    at, keep = placed_in(large.docids, small.docids)
    docids = small.docids[keep]
    small_scores, large_scores = small.scores[keep], large.scores[at[keep]]
    if small is first:
        return Scored(docids, small_scores + large_scores)
    return Scored(docids, large_scores + small_scores)


def held_in(sorted_docids, docids):
    """Which of ``docids`` (an array) are in ``sorted_docids`` (a sorted array), as a boolean array."""
    return placed_in(sorted_docids, docids)[1]


def placed_in(sorted_docids, docids):
    """``(at, held)``: where each of ``docids`` is in ``sorted_docids`` (a sorted array), and whether it is there.

    ``at`` is meaningful only where ``held`` is true.
    """
    if not len(sorted_docids):
        return np.zeros(len(docids), dtype=np.int64), np.zeros(len(docids), dtype=bool)
    at = np.minimum(np.searchsorted(sorted_docids, docids), len(sorted_docids) - 1)
    return at, sorted_docids[at] == docids


def restricted(scored, docids, keep=True):
    """``scored`` limited to ``docids`` (a sorted array), or without them when ``keep`` is false."""
    if not len(scored) or not len(docids):
        return scored if not keep else EMPTY
    found = held_in(docids, scored.docids)
    mask = found if keep else ~found
    return Scored(scored.docids[mask], scored.scores[mask], scored.check)


def top(scored, count, date_of):
    """Positions in ``scored`` of its ``count`` best, best first; newer first among equal scores.

    ``date_of(docid)`` is asked only for the documents that can reach the
    page: those scoring at least the ``count``-th best score.
    """
    if not len(scored) or count <= 0:
        return []
    if count < len(scored):
        threshold = np.partition(scored.scores, len(scored) - count)[len(scored) - count]
        candidates = np.nonzero(scored.scores >= threshold)[0]
    else:
        candidates = np.arange(len(scored))
    dates = [date_of(docid) or 0 for docid in scored.docids[candidates].tolist()]
    order = sorted(range(len(candidates)), key=lambda i: (-scored.scores[candidates[i]], -dates[i]))
    return [int(candidates[i]) for i in order[:count]]


def spread_positions(length, most):
    """Up to ``most`` positions in ``range(length)`` spread evenly from the first to the last, ascending.

    At least one apart, so distinct: no ``np.unique`` (whose first call in
    a process imports numpy.ma, 14 ms of a reader's first search).
    """
    return np.linspace(0, length - 1, min(length, most)).astype(np.int64)


def rounded_estimate(count):
    """``count`` rounded to two significant figures, for "about 21,000 messages"."""
    if count < 100:
        return count
    magnitude = 10 ** (int(math.log10(count)) - 1)
    return int(round(count / magnitude) * magnitude)
