"""An extension for the tests: what an archive request stored is evicted from its connection's cache as it commits.

A busy connection's cache drops its least used records when a transaction
ends; the message just stored may be one of them, and be a ghost when its
commit is checked (``kittypyr.archived_check``). Here it always is.
"""

from pyramid.events import ContextFound

from kittypyr.archived_check import ARCHIVED_KEY


def evict_what_is_stored(event):
    request = event.request
    if request.path_info != "/api/mailman/archive":
        return

    def evict(committed):
        stored = request.environ.get(ARCHIVED_KEY)
        if committed and stored is not None:
            stored._p_deactivate()

    request.tm.get().addAfterCommitHook(evict)


def includeme(config):
    config.add_subscriber(evict_what_is_stored, ContextFound)
