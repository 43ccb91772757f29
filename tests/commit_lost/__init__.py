"""An extension for the tests: the transaction of an archive request ends without writing.

It is doomed once the request has found its context, so pyramid_tm aborts
it instead of committing, yet gives back the view's answer, as a storage
that fails between the steps of a commit can leave a request: the view
stored the message in a transaction that never reached the storage.
``lost`` names the lists whose archive requests this happens to.
"""

from pyramid.events import ContextFound

lost = set()


def doom_archive_requests(event):
    request = event.request
    if request.path_info == "/api/mailman/archive" and request.POST.get("mlist") in lost:
        request.tm.doom()


def includeme(config):
    config.add_subscriber(doom_archive_requests, ContextFound)
