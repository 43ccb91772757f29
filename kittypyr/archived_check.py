"""An archived message is answered "200" only once a commit has stored it.

Mailman deletes a message from its queue when the archiver answers 200, so
that answer must mean stored. pyramid_tm has ended the request's
transaction by the time the answer leaves; this part then looks at the
stored object itself before the answer goes: a commit leaves it with its
object id and the serial of that commit and nothing changed since, while a
transaction that ended any other way (aborted, or never begun, as a
storage restarting between the steps of a request could once leave it)
leaves it without its object id, or changed. Then the answer becomes 503
with Retry-After, so Mailman keeps the message and sends it again. The
check reads nothing from the storage: reading the record back (FileStorage
from its file, ZEO from its server) cost a quarter of the archiver's
throughput in ``bench/archiver_load.py``, for a failure no storage showed.
"""

import logging

from ZODB.utils import oid_repr, z64

from kittypyr.retries import come_back_later, storage_unavailable_errors

log = logging.getLogger(__name__)

# What the archiver view leaves in the request's environ: the object it stored.
ARCHIVED_KEY = "kittypyr.archived"
NOT_STORED = "the archive could not store the message; send it again later"


def note_stored(request, stored):
    """Have ``stored`` (an archived message, or quarantined mail) checked before the answer leaves."""
    request.environ[ARCHIVED_KEY] = stored


def committed(stored):
    """Whether ``stored`` was committed: it has an object id and a serial, and no change waits."""
    if stored._p_jar is None or stored._p_oid is None:
        return False
    if stored._p_changed is None and stored._p_serial == z64:
        # A ghost never loaded: a duplicate's message, stored long ago and
        # named by what the request read. A ghost with a serial was loaded
        # or written by this connection, and its cache dropped it since: the
        # message just committed, evicted as the transaction ended. Loading
        # that one would read the view the transaction began with (the
        # connection does not poll as it ends, see kittypyr.retries), where
        # it is not yet.
        stored._p_activate()
    return not stored._p_changed and stored._p_serial != z64


def archived_check_tween_factory(handler, registry):
    """Over pyramid_tm: check what an archive request is about to answer 200 for."""
    unavailable = storage_unavailable_errors()

    def answer_only_what_is_stored(request):
        response = handler(request)
        stored = request.environ.get(ARCHIVED_KEY)
        if stored is None or response.status_code != 200:
            return response
        # Named by its class and object id: reading its name could load it.
        what = f"{type(stored).__name__} {oid_repr(stored._p_oid) if stored._p_oid else '(no object id)'}"
        try:
            held = committed(stored)
        except unavailable as exc:
            log.error("could not check %s: %s: %s", what, type(exc).__name__, exc)
            return come_back_later(request, NOT_STORED)
        if held:
            return response
        log.error("%s was answered 200 by a transaction that did not commit it: answered 503", what)
        return come_back_later(request, NOT_STORED)

    return answer_only_what_is_stored


def includeme(config):
    config.add_tween("kittypyr.archived_check.archived_check_tween_factory", over="pyramid_tm.tm_tween_factory")
