"""The persistent tree: Archive -> MailingList -> Thread / Message."""

from kittypyr.resources.archive import Archive, MailingLists
from kittypyr.resources.containers import Container
from kittypyr.resources.mailinglist import MailingList, Messages, Threads
from kittypyr.resources.message import Attachment, Message
from kittypyr.resources.thread import Thread

__all__ = [
    "Archive",
    "Attachment",
    "Container",
    "MailingList",
    "MailingLists",
    "Message",
    "Messages",
    "Thread",
    "Threads",
]


def includeme(config):
    from pyramid.events import ContextFound

    config.set_root_factory("kittypyr.bootstrap.root_factory")
    config.add_subscriber("kittypyr.bootstrap.closed_while_reindexing", ContextFound)
