"""Where a message stands in its thread: its neighbours in reading order and the outline around it.

Plain functions of a thread's walk (``[(hash, depth), ...]``), so that a
message page loads only the few messages it names, however long the
thread.
"""

# A message page lists this many messages on either side of the current one.
NEIGHBOURHOOD_RADIUS = 4


def position_in(walked, name):
    """The index of ``name`` in ``walked``, or None when it is not there."""
    for index, (other, _) in enumerate(walked):
        if other == name:
            return index
    return None


def previous_and_next(walked, index):
    """``(previous hash or None, next hash or None)`` around ``walked[index]`` in reading order."""
    previous = walked[index - 1][0] if index > 0 else None
    following = walked[index + 1][0] if index + 1 < len(walked) else None
    return previous, following


def neighbourhood(walked, index, radius=NEIGHBOURHOOD_RADIUS):
    """What an outline around ``walked[index]`` lists, in order.

    Items are ``("message", hash, depth)`` for the thread's first message
    and the ``radius`` messages on either side of the current one, and
    ``("gap", count, None)`` for each run of ``count`` messages left out.
    """
    start = max(0, index - radius)
    end = min(len(walked), index + radius + 1)
    items = []
    if start > 0:
        items.append(("message", *walked[0]))
        if start > 1:
            items.append(("gap", start - 1, None))
    items.extend(("message", name, depth) for name, depth in walked[start:end])
    if end < len(walked):
        items.append(("gap", len(walked) - end, None))
    return items
