"""An archived message is answered "200" only once the storage holds it.

Mailman deletes a message from its queue when the archiver answers 200, so
that answer must mean stored. pyramid_tm has committed by the time the
answer leaves; this part then reads the message back through a connection
of its own, which sees the storage as it is now, not the request's cache.
A storage that fails between the steps of a commit (a PostgreSQL or ZEO
server restarting at that moment) can leave a commit that reported success
and wrote nothing, or a connection whose next commit writes nothing: either
way the message is missing here, and the answer becomes 503 with
Retry-After, so Mailman keeps the message and sends it again.
"""

import logging

import transaction
from pyramid.response import Response

from kittypyr.bootstrap import ROOT_KEY
from kittypyr.retries import STORAGE_RETRY_AFTER, storage_unavailable_errors

log = logging.getLogger(__name__)

# What the archiver view leaves in the request's environ: what to look for, and where.
ARCHIVED_KEY = "kittypyr.archived"


def note_archived(request, list_address, name):
    """Have the message ``name`` of the list ``list_address`` read back before the answer leaves."""
    request.environ[ARCHIVED_KEY] = ("message", list_address, name)


def note_quarantined(request, name):
    """Have the quarantined mail ``name`` read back before the answer leaves."""
    request.environ[ARCHIVED_KEY] = ("quarantine", None, name)


def storage_holds(database, kind, list_address, name):
    """Whether ``database``, read afresh, holds what ``note_archived`` or ``note_quarantined`` noted."""
    manager = transaction.TransactionManager(explicit=True)
    manager.begin()  # begun first: the connection polls the storage as it joins
    connection = database.open(transaction_manager=manager)
    try:
        archive = connection.root().get(ROOT_KEY)
        if archive is None:
            return False
        if kind == "quarantine":
            return archive.quarantine.get(name) is not None
        mailing_list = archive.lists.get(list_address)
        return mailing_list is not None and mailing_list.messages.get(name) is not None
    finally:
        manager.abort()
        connection.close()


def archived_check_tween_factory(handler, registry):
    """Over pyramid_tm: read back what an archive request answered 200 for."""
    unavailable = storage_unavailable_errors()

    def answer_only_what_is_stored(request):
        response = handler(request)
        archived = request.environ.get(ARCHIVED_KEY)
        if archived is None or response.status_code != 200:
            return response
        kind, list_address, name = archived
        try:
            held = storage_holds(registry._zodb_databases[""], kind, list_address, name)  # pyramid_zodbconn's
        except unavailable as exc:
            log.error("could not read back %s %s of %s: %s: %s", kind, name, list_address, type(exc).__name__, exc)
            return _come_back_later()
        if held:
            return response
        log.error("%s %s of %s was committed but the storage does not hold it: answered 503",
                  kind, name, list_address)
        return _come_back_later()

    return answer_only_what_is_stored


def _come_back_later():
    response = Response(json_body={"error": "the archive could not store the message; send it again later"},
                        status=503)
    response.headers["Retry-After"] = str(STORAGE_RETRY_AFTER)
    return response


def includeme(config):
    config.add_tween("kittypyr.archived_check.archived_check_tween_factory", over="pyramid_tm.tm_tween_factory")
