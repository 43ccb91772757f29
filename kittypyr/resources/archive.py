"""The root of the archive and the folder of mailing lists."""

import secrets

from BTrees.OOBTree import OOBTree
from persistent import Persistent
from pyramid.authorization import ALL_PERMISSIONS, Allow, Everyone

from kittypyr.merging import AgeingCounts
from kittypyr.resources.admin import AuditLog, SiteAdmin
from kittypyr.resources.api import ApiRoot
from kittypyr.resources.browsing import ListAlias
from kittypyr.resources.community import add_community
from kittypyr.resources.containers import Container
from kittypyr.resources.quarantine import Quarantine


class MailingLists(Container):
    """All archived lists, keyed by posting address (lower case).

    A removed list's deletions (its deleted messages' tombstones, the ids
    the mail reusing a Message-ID was kept under, and how the mail without
    one was written) are kept in
    ``deletions_of_removed`` and given back to a list made again under its
    address: what its administrators deleted stays deleted, whether its
    mail comes back from an import or from Mailman.
    """

    # Address -> (tombstones, reused, undeclared) of a removed list: made with the first.
    deletions_of_removed = None

    def add(self, name, resource, send_events=True):
        added = super().add(name, resource, send_events)
        kept = None if self.deletions_of_removed is None else self.deletions_of_removed.get(name)
        if kept is not None:
            del self.deletions_of_removed[name]
            messages = resource.messages
            messages.tombstones, messages.reused, messages.undeclared = kept
        return added

    def remove(self, name, send_events=True):
        mailing_list = super().remove(name, send_events)
        messages = mailing_list.messages
        if len(messages.tombstones):
            if self.deletions_of_removed is None:
                self.deletions_of_removed = OOBTree()
            self.deletions_of_removed[name] = (messages.tombstones, messages.reused, messages.undeclared)
        return mailing_list

    def __getitem__(self, name):
        """The list named ``name``; for an address in other case, a ListAlias leading to it.

        KeyError when no list has the address in any case.
        """
        mailing_list = self.data.get(name)
        if mailing_list is not None:
            return mailing_list
        canonical = name.lower()
        if canonical == name:
            raise KeyError(name)
        return ListAlias(name, self, self.data[canonical])


def new_quarantine(archive):
    quarantine = Quarantine()
    quarantine.__name__ = "quarantine"
    quarantine.__parent__ = archive
    return quarantine


class Archive(Persistent):
    """The root resource (``__name__ == ''``).

    Its traversable children are ``list``, ``users`` (profiles), the JSON
    ``api`` and the site administrators' ``admin`` pages. The quarantine of
    unreadable mail is an attribute too: only admins see it. The catalog and
    its document map, the audit log of administrative acts and the
    accounts' session generations (address -> how many times it logged out,
    see ``kittypyr.security``) and the recent wrong passwords the login
    throttle counts (``login_failures``) are attributes, deliberately out of
    traversal's reach.
    """

    __name__ = ""
    __parent__ = None

    schema_version = 0
    # What signs sessions, links in mail and feed keys when kittypyr.secret
    # is not set (kittypyr.security.site_secret): made at the first start,
    # shared by every process of the archive. None in an archive made before
    # it was kept, until its upgrade (bootstrap.add_archive_secret).
    secret = None
    # When the last pack began (kittypyr.packing): None before the first.
    packed_at = None
    # Whether the text indexes hold mail indexed before runs of CJK letters
    # were split into words (bootstrap.split_cjk_words), until
    # ``kittypyr reindex`` indexes it again.
    text_indexed_before_cjk_split = False
    # Whether ``kittypyr reindex`` began and has not ended (interrupted): the
    # catalog holds only part of the archive, and the archive answers 503
    # (kittypyr.bootstrap.closed_while_reindexing) until it is run again to its end.
    reindex_unfinished = False
    # Addresses signed up here whose sign-up is not confirmed yet (their
    # confirmation link, with the password chosen) -> when, in seconds
    # since 1970: made with the first.
    unconfirmed_signups = None

    __acl__ = [
        (Allow, "site-admin", ALL_PERMISSIONS),
        (Allow, Everyone, "view"),
    ]

    def __init__(self):
        self.lists = MailingLists()
        self.lists.__name__ = "list"
        self.lists.__parent__ = self
        self.catalog = None
        self.document_map = None
        self.quarantine = new_quarantine(self)
        self.audit_log = AuditLog()
        self.session_generations = OOBTree()
        self.login_failures = AgeingCounts()
        self.secret = secrets.token_hex(32)
        add_community(self)

    def note_signup(self, address, when):
        """``address`` was signed up here at ``when``: its account is not its owner's until the sign-up is
        confirmed."""
        if self.unconfirmed_signups is None:
            self.unconfirmed_signups = OOBTree()
        self.unconfirmed_signups[address] = when

    def signed_up_at(self, address):
        """When ``address`` was signed up here and not confirmed since, or None."""
        return None if self.unconfirmed_signups is None else self.unconfirmed_signups.get(address)

    def signup_confirmed(self, address):
        """The sign-up of ``address`` was confirmed, or its account taken back."""
        if self.unconfirmed_signups is not None and address in self.unconfirmed_signups:
            del self.unconfirmed_signups[address]

    def awaits_confirmation(self, address):
        """Whether ``address`` was signed up here and never confirmed through its link."""
        return self.signed_up_at(address) is not None

    def __getitem__(self, name):
        if name == "list":
            return self.lists
        if name == "api":
            return ApiRoot(self)
        if name == "admin":
            return SiteAdmin(self)
        if name == "users":
            return self.people
        raise KeyError(name)

    def get(self, name, default=None):
        try:
            return self[name]
        except KeyError:
            return default

    def values(self):
        return (self.lists,)
