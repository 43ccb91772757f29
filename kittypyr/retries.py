"""Requests run again after a write conflict or a lost storage connection.

pyramid_retry runs such a request again on a fresh transaction; each retry
is logged here (at INFO), so an operator — and ``bench/archiver_load.py`` —
can see how often processes got in each other's way.
"""

import logging

from pyramid.response import Response
from pyramid_retry import IBeforeRetry, is_last_attempt, mark_error_retryable
from pyramid_zodbconn import ZODBConnectionOpened
from ZEO.Exceptions import ClientDisconnected
from ZODB.Connection import Connection

log = logging.getLogger(__name__)

# Seconds a reader (or Mailman's plugin) is asked to wait while the storage is away.
STORAGE_RETRY_AFTER = 5


def storage_unavailable_errors():
    """The errors that mean the storage server is away for now: ZEO's, and PostgreSQL's under RelStorage.

    RelStorage lets the driver's error through when PostgreSQL restarts or
    refuses connections; it opens a new connection at the next attempt.
    """
    errors = [ClientDisconnected]
    try:
        import psycopg2
    except ImportError:  # RelStorage on PostgreSQL is optional (kittypyr[postgresql])
        return tuple(errors)
    return (*errors, psycopg2.OperationalError, psycopg2.InterfaceError)


def log_retry(event):
    """Log one retry: the request, the attempt that failed and why."""
    environ = event.environ
    # str(), not repr(): a ConflictError names its record and class only there.
    log.info("retrying %s %s after attempt %s failed: %s: %s", environ.get("REQUEST_METHOD"),
             environ.get("PATH_INFO"), environ.get("pyramid_retry.attempt", 0) + 1,
             type(event.exception).__name__, event.exception)


def begin_the_next_attempt_afresh(event):
    """The next attempt begins a transaction of its own, even when this one failed to begin.

    pyramid_tm marks the environ as managed (``tm.active``) before it
    begins the transaction, and removes the mark only once it ends it; but
    beginning can fail too — the thread's transaction manager asks every
    connection registered with it for news from the storage, which fails
    while the storage is away — and pyramid_retry runs the next attempt on
    the same environ. pyramid_tm would then leave that attempt alone: its
    changes were never committed, and a message stored there was answered
    200 and lost.
    """
    event.environ.pop("tm.active", None)
    event.environ.pop("tm.manager", None)


def end_without_polling(event):
    """A request's ZODB connection does not ask the storage for news when its transaction ends.

    A connection polls the storage for invalidations as it is opened, and by
    default again whenever a transaction ends: after pyramid_tm's commit,
    and when pyramid_zodbconn aborts as the request finishes. Those last
    polls come after the answer is decided (a message stored, to be answered
    200), and the second outside every exception view: with the storage
    going away at that moment, a stored message was answered 503 or 500, and
    the connection, left open, spoilt later commits of its thread. Only the
    request's one transaction, which pyramid_tm runs, is concerned: the
    next request polls as it opens its connection, where a failure is
    retried and answered 503.
    """
    if event.request.environ.get("tm.active"):
        # The pool's next open() sets this back from its transaction manager.
        event.conn.explicit_transactions = True


def come_back_later(request, explained):
    """503 with Retry-After saying ``explained``: come back, nothing is broken."""
    if request.path_info.startswith("/api/"):
        # Mailman's plugin and the JSON API's clients read JSON.
        response = Response(json_body={"error": explained}, status=503)
    else:
        response = Response(explained.capitalize() + ".\n", status=503, content_type="text/plain", charset="utf-8")
    response.headers["Retry-After"] = str(STORAGE_RETRY_AFTER)
    return response


def storage_unavailable(exc, request):
    """The answer when the storage stays away for every attempt."""
    log.error("storage unavailable for %s %s: %s: %s", request.method, request.path_info, type(exc).__name__, exc)
    return come_back_later(request, "the archive cannot reach its storage right now; try again in a moment")


def storage_away_at_begin_tween_factory(handler, registry):
    """Over pyramid_tm: a transaction that cannot begin because the storage is away is a 503 too.

    pyramid_tm begins the transaction outside the exception views' reach;
    an attempt whose beginning failed is run again by pyramid_retry, and the
    last one answers "come back" as any other attempt would.
    """
    unavailable = storage_unavailable_errors()

    def begin_or_come_back(request):
        try:
            return handler(request)
        except unavailable as exc:
            if not is_last_attempt(request):
                raise
            return storage_unavailable(exc, request)

    return begin_or_come_back


class ConnectionBackToThePoolIfOpenFails(Connection):
    """A ZODB connection that goes back to its pool when opening it fails.

    Opening asks the storage for news; while the storage is away that
    fails, and ZODB's ``DB.open`` then loses the connection: out of the
    pool, still counted, still holding its storage connections (two
    PostgreSQL sessions under RelStorage) until the garbage collector
    finds it. During a PostgreSQL restart a process piled up dozens of
    them. Put back instead, it asks again when next opened, and misses no
    news: the storage keeps what it has not yet told it.
    """

    def open(self, transaction_manager=None, delegate=True):
        try:
            super().open(transaction_manager, delegate)
        except Exception:
            manager, self.transaction_manager = self.transaction_manager, None
            if manager is not None:
                try:
                    manager.unregisterSynch(self)
                except KeyError:  # it failed before it was registered
                    pass
            self._db._returnToPool(self)
            raise


def includeme(config):
    for database in getattr(config.registry, "_zodb_databases", {}).values():  # pyramid_zodbconn's
        database.klass = ConnectionBackToThePoolIfOpenFails
        # The connection the database made as it opened is of the plain
        # kind: a pool of no size lets it go, then the pool is as it was.
        size = database.getPoolSize()
        database.setPoolSize(0)
        database.setPoolSize(size)
    config.add_tween("kittypyr.retries.storage_away_at_begin_tween_factory", over="pyramid_tm.tm_tween_factory")
    config.add_subscriber(log_retry, IBeforeRetry)
    config.add_subscriber(begin_the_next_attempt_afresh, IBeforeRetry)
    config.add_subscriber(end_without_polling, ZODBConnectionOpened)
    for error in storage_unavailable_errors():
        # A lost connection is worth a new attempt on a fresh connection.
        mark_error_retryable(error)
        config.add_exception_view(storage_unavailable, context=error, last_retry_attempt=True)
        config.add_exception_view(storage_unavailable, context=error, retryable_error=False)
