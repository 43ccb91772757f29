"""An example kittypyr extension, as the README describes, used by the tests.

It adds a named view on Thread, a subscriber to MessageArchived and a
catalog index, all through ``includeme``.
"""

from persistent.list import PersistentList
from pyramid.view import view_config
from repoze.catalog.indexes.field import CatalogFieldIndex

from kittypyr.events import IMessageArchived
from kittypyr.resources import Message, Thread


def get_sender_domain(obj, default):
    if isinstance(obj, Message) and "@" in obj.sender_address:
        return obj.sender_address.rsplit("@", 1)[1]
    return default


def remember_arrival(event):
    """Keep the subjects of new messages on their list, newest last."""
    mailing_list = event.mailing_list
    if not hasattr(mailing_list, "arrivals"):
        mailing_list.arrivals = PersistentList()
    mailing_list.arrivals.append(event.message.subject)


@view_config(context=Thread, name="summary", renderer="json")
def thread_summary(context, request):
    return {
        "subject": context.subject,
        "messages": len(context),
        "participants": len(context.participants),
    }


def includeme(config):
    config.add_catalog_index("sender_domain", lambda: CatalogFieldIndex(get_sender_domain))
    config.add_subscriber(remember_arrival, IMessageArchived)
    config.scan(__name__)
