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

When a request leaves more placeholders in its connection's cache than the
bound for its kind, the cache is emptied as the connection goes back to the
pool: the records are read again as the next requests need them, and the
placeholders go with the records that held them.

Reading and archiving keep connections of their own. Archiving a message
touches every catalog tree and the postings of each of its words, so its
working set grows with the archive (63,000 placeholders after 200 messages
into 280,000) where a page's does not; a bound low enough to keep readers
flat would empty an archiving connection after every message (4 to 5 times
the CPU). So the pool hands an archiver API request the connection that
archived last, and a page one that served pages, and each kind has its own
bound: ``kittypyr.connection_placeholders_max`` for pages (40,000 unless
set), ``kittypyr.archiver_placeholders_max`` for the archiver API (100,000).
"""

import contextvars

from pyramid.tweens import INGRESS
from pyramid_zodbconn import ZODBConnectionOpened, ZODBConnectionWillClose
from ZODB.DB import ConnectionPool

SETTING = "kittypyr.connection_placeholders_max"
ARCHIVER_SETTING = "kittypyr.archiver_placeholders_max"
READING, ARCHIVING = "reading", "archiving"
# Pages: a month page, a search and a thread each keep a few thousand
# placeholders whatever the archive's size, and readers all over ten times
# the 28,000-message corpus kept 57,000 unbounded; at 25,000 a serving
# process stayed flat from 1x to 10x with the same page times (README,
# Sizing). At 12,000 the month page and search took 5 to 10 times as long.
# But a search one per thread reads five trees keyed by docid at random
# (the thread, date and list of its matches, their paths and words): at
# ten times the corpus it keeps 35,700, and at 25,000 it emptied its
# connection every time (132 ms against 6).
DEFAULT_MAX = 40_000
# Archiving: above what 200 messages into ten times the corpus keep
# (63,000), so that a site of millions of messages has a bound that
# archiving seldom reaches.
DEFAULT_ARCHIVER_MAX = 100_000
KIND = "kittypyr_request_kind"  # what the connection last served, on the connection

# The kind of request opening a connection now, for the pool (set by the tween).
opening_for = contextvars.ContextVar("opening_for", default=READING)


def request_kind(request):
    """ARCHIVING for Mailman's archiver API, READING for everything else."""
    return ARCHIVING if request.path_info.startswith("/api/mailman/") else READING


def placeholders_in(connection):
    """How many placeholders (ghosts) ``connection``'s cache holds."""
    cache = connection._cache
    return len(cache) - cache.cache_non_ghost_count


class PlaceholdersMaxRefused(SystemExit):
    """The setting is not a count: the server exits saying so, without a traceback."""


def placeholders_max(settings, setting=SETTING, default=DEFAULT_MAX):
    """The bound ``settings`` give, as an int (0: none); PlaceholdersMaxRefused when it is not one."""
    value = settings.get(setting)
    if value in (None, ""):
        return default
    try:
        bound = int(value)
    except (TypeError, ValueError):
        bound = -1
    if bound < 0:
        raise PlaceholdersMaxRefused(
            f"kittypyr: {setting} must be a whole number of placeholders, 0 for no bound, not {value!r}")
    return bound


class PoolByKind(ConnectionPool):
    """ZODB's pool of connections, handing each kind of request a connection that served its kind.

    ZODB's pool gives the connection with the most records loaded,
    whichever request used it. Here the pages and the archiver API each get
    back the warmest connection of their own kind (or one that has served
    neither); when there is none, a new connection is made while the pool
    has room, and only a full pool lends one of the other kind.
    """

    def pop(self):
        kind = opening_for.get()
        available = self.available
        for index in range(len(available) - 1, -1, -1):
            if getattr(available[index][1], KIND, kind) == kind:
                return available.pop(index)[1]
        if available and len(self.all) >= self.size:
            return available.pop()[1]
        return None  # DB.open makes one, pushes it and pops again

    def clear(self):
        self.available.clear()


def opening_by_kind_tween_factory(handler, registry):
    """Outermost: tell the pool which kind of request the connection opened from here on is for."""

    def for_its_kind(request):
        token = opening_for.set(request_kind(request))
        try:
            return handler(request)
        finally:
            opening_for.reset(token)

    return for_its_kind


def sort_pools_by_kind(config):
    for database in getattr(config.registry, "_zodb_databases", {}).values():  # pyramid_zodbconn's
        old = database.pool
        pool = PoolByKind(old.size, old.timeout)
        pool.all, pool.available = old.all, old.available
        database.pool = pool


def includeme(config):
    settings = config.registry.settings
    bounds = {
        READING: placeholders_max(settings),
        ARCHIVING: placeholders_max(settings, ARCHIVER_SETTING, DEFAULT_ARCHIVER_MAX),
    }
    sort_pools_by_kind(config)
    config.add_tween("kittypyr.placeholders.opening_by_kind_tween_factory", under=INGRESS)

    def mark_its_kind(event):
        # The kind the tween told the pool: a request's kind is worked out once.
        setattr(event.conn, KIND, opening_for.get())

    def keep_placeholders_bounded(event):
        connection = event.conn
        bound = bounds[getattr(connection, KIND)]
        if bound and placeholders_in(connection) > bound:
            # Every unmodified record is dropped: the transaction has ended
            # (the response is made), so nothing the request changed is lost.
            connection.cacheMinimize()

    config.add_subscriber(mark_its_kind, ZODBConnectionOpened)
    config.add_subscriber(keep_placeholders_bounded, ZODBConnectionWillClose)
