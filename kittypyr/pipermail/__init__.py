"""Moving in from Mailman 2: a Pipermail folder's page numbers and attachments, and its old URLs answered.

``kittypyr import`` of a Pipermail archive folder reads its per-message
pages and ``database/`` articles (``pages``) and maps each page number to
the archived message (``mapping``, kept per list in
``mailing_list.pipermail``), and keeps the files of its ``attachments/``
with the messages that link them (``attachments``); ``views`` answers
Mailman 2's URLs with redirects to the same things here.
"""

import os

from kittypyr.mailboxes import pipermail_months
from kittypyr.pipermail.attachments import ScrubbedFiles
from kittypyr.pipermail.mapping import PageMatcher
from kittypyr.pipermail.pages import read_folder


def folder_observers(paths):
    """Import observers for each Pipermail archive folder among ``paths`` (those with month files):
    its ``PageMatcher``, then its ``ScrubbedFiles``, which finishes after the pages are mapped."""
    observers = []
    for path in paths:
        path = os.fspath(path)
        if os.path.isdir(path) and pipermail_months(path):
            unread = []
            pages = read_folder(path, unread)
            observers.append(PageMatcher(path, pages, errors=unread))
            observers.append(ScrubbedFiles(path, pages))
    return observers


def includeme(config):
    config.scan("kittypyr.pipermail.views")
