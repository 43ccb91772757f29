"""Events that kittypyr notifies through the Pyramid registry.

Extensions subscribe to them with ``config.add_subscriber(handler, EventClass)``.
"""

from pyramid.threadlocal import get_current_registry
from zope.interface import Attribute, Interface, implementer


class IObjectEvent(Interface):
    object = Attribute("The resource the event is about")


class IObjectAdded(IObjectEvent):
    """A resource (and everything below it) was placed in the tree."""


class IObjectWillBeRemoved(IObjectEvent):
    """A resource (and everything below it) is about to leave the tree."""


class IObjectModified(IObjectEvent):
    """A resource's indexed attributes changed."""


class IMessageArchived(IObjectEvent):
    """A new message was stored in a mailing list's archive."""


class IThreadMerged(IObjectEvent):
    """A thread was absorbed into another; ``object`` is the thread that grew."""


class IMessageMoved(IObjectEvent):
    """A message now belongs to another thread (its URL stays the same)."""


class IMessageReplaced(IObjectEvent):
    """A message's content was replaced by its original's (it had been rebuilt from another archive)."""


class IThreadRestarted(IObjectEvent):
    """A thread's first message changed, and with it its start date (None: emptied)."""


@implementer(IObjectAdded)
class ObjectAdded:
    def __init__(self, object, parent, name):
        self.object = object
        self.parent = parent
        self.name = name


@implementer(IObjectWillBeRemoved)
class ObjectWillBeRemoved:
    def __init__(self, object, parent, name):
        self.object = object
        self.parent = parent
        self.name = name


@implementer(IObjectModified)
class ObjectModified:
    """``indexes`` names the catalog indexes affected; None means all of them."""

    def __init__(self, object, indexes=None):
        self.object = object
        self.indexes = indexes


@implementer(IMessageArchived)
class MessageArchived:
    def __init__(self, message, mailing_list):
        self.object = self.message = message
        self.mailing_list = mailing_list


@implementer(IThreadMerged)
class ThreadMerged:
    def __init__(self, thread, absorbed_key):
        self.object = self.thread = thread
        self.absorbed_key = absorbed_key


@implementer(IMessageMoved)
class MessageMoved:
    """``object`` moved from the thread keyed ``old_thread`` to ``object.thread``."""

    def __init__(self, message, old_thread):
        self.object = self.message = message
        self.old_thread = old_thread


@implementer(IMessageReplaced)
class MessageReplaced:
    """``object`` took its original's content; ``before`` holds what the counts knew of it
    (``date``, ``timestamp``, ``sender_address``, ``sender_name``, ``thread``, ``attachments``,
    ``mailing_list``, ``__name__``)."""

    def __init__(self, message, before):
        self.object = self.message = message
        self.before = before


@implementer(IThreadRestarted)
class ThreadRestarted:
    """``object`` started at ``old_start`` (a datetime) and now starts at ``object.date_started``."""

    def __init__(self, thread, old_start):
        self.object = self.thread = thread
        self.old_start = old_start


def notify(event, registry=None):
    """Send ``event`` to the subscribers of the active (or given) registry."""
    (registry or get_current_registry()).notify(event)
