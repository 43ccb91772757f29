"""A serving connection's placeholders kept within a bound, whatever the archive's size.

A connection's cache keeps at most ``connection_cache_size_bytes`` of
records, but each record it holds brings along a placeholder (a ghost) for
every record it refers to and that was not read: about 200 bytes each, which
that bound does not count. A tree read all over (a month page looks threads
and messages up by their hash, a search looks up dates by docid) keeps its
inner nodes loaded, and with them a placeholder for each of its buckets: a
number that grows with the archive (``bench/placeholders.py`` counted 18,000
on a 28,000-message list and 57,000 on ten times as much, 20 to 30 MB a
connection per million messages once readers have gone all over it).

When a request leaves more than ``kittypyr.connection_placeholders_max``
placeholders in its connection's cache (0: no bound), the cache is emptied
as the connection goes back to the pool: the records are read again as the
next requests need them, and the placeholders go with the records that held
them. The default is above what archiving and reading keep on ten times
a 28,000-message list: it bounds what a connection holds on an archive of
millions.
"""

from pyramid_zodbconn import ZODBConnectionWillClose

SETTING = "kittypyr.connection_placeholders_max"
# About 20 MB of placeholders a connection: above what archiving (63,000
# after 200 messages into 280,000: every catalog tree's nodes, looked up by
# docid all over) and reading pages leave at ten times the 28,000-message
# corpus, so that they reach it seldom and a site of millions of messages
# has a bound. Below what a kind of request needs, that request starts from
# an empty cache every time: at 25,000 an archived message took 4 to 5
# times the CPU (bench/archive_cost.py; README, Sizing).
DEFAULT_MAX = 100_000


def placeholders_in(connection):
    """How many placeholders (ghosts) ``connection``'s cache holds."""
    cache = connection._cache
    return len(cache) - cache.cache_non_ghost_count


class PlaceholdersMaxRefused(SystemExit):
    """The setting is not a count: the server exits saying so, without a traceback."""


def placeholders_max(settings):
    """The bound ``settings`` give, as an int (0: none); PlaceholdersMaxRefused when it is not one."""
    value = settings.get(SETTING)
    if value in (None, ""):
        return DEFAULT_MAX
    try:
        bound = int(value)
    except (TypeError, ValueError):
        bound = -1
    if bound < 0:
        raise PlaceholdersMaxRefused(
            f"kittypyr: {SETTING} must be a whole number of placeholders, 0 for no bound, not {value!r}")
    return bound


def includeme(config):
    bound = placeholders_max(config.registry.settings)
    if not bound:
        return

    def keep_placeholders_bounded(event):
        connection = event.conn
        if placeholders_in(connection) > bound:
            # Every unmodified record is dropped: the transaction has ended
            # (the response is made), so nothing the request changed is lost.
            connection.cacheMinimize()

    config.add_subscriber(keep_placeholders_bounded, ZODBConnectionWillClose)
