"""A mailing list's archive: its messages and its threads."""

from datetime import datetime, timezone

from BTrees.Length import Length
from BTrees.OOBTree import OOBTree
from persistent import Persistent
from pyramid.authorization import ALL_PERMISSIONS, DENY_ALL, Allow, Authenticated, Deny, Everyone

from kittypyr.addresses import list_id_of
from kittypyr.resources.admin import ListAdmin
from kittypyr.resources.browsing import MessageAlias, TagFolder, ThreadAlias, Year, is_number
from kittypyr.resources.containers import Container
from kittypyr.resources.deleted import DeletedMessage, DeletedThread


class Messages(Container):
    """Messages of one list, keyed by Message-ID hash.

    A deleted message leaves a ``Tombstone`` in ``tombstones`` under its
    hash: traversal then finds a ``DeletedMessage`` (410 Gone), while
    ``get``, ``in`` and iteration see live messages only.

    A different mail that reuses an archived Message-ID is kept under a
    derived one (``kittypyr.archiving``); ``reused`` maps the hash of the
    Message-ID it came with to the names it was kept under, so that the id
    finds every mail sent with it. Made with the first reuse.
    """

    reused = None
    # Mail that came without a Message-ID is kept under one made of its
    # bytes, which differ from one copy of the post to another: the key
    # of how it was written (``kittypyr.msgid.writing_of``: its Date, its
    # sender and subject) -> its name, so that another copy is found.
    # Made with the first.
    undeclared = None
    # The hash of the id whose permalink Mailman wrote into Archived-At ->
    # the message's name, where the two differ (odd Message-ID headers,
    # see ``kittypyr.mail.permalink_id_of_header``). Made with the first.
    permalinks = None

    def __init__(self):
        super().__init__()
        self.tombstones = OOBTree()

    def note_permalink(self, name_of_id, name):
        """Let ``name_of_id``, the hash Mailman's permalink of the message ``name`` names, lead to it."""
        if name_of_id == name or name_of_id in self.data or name_of_id in self.tombstones:
            return
        if self.permalinks is None:
            self.permalinks = OOBTree()
        self.permalinks.setdefault(name_of_id, name)

    def permalink_target(self, name_of_id):
        """The name of the message whose Archived-At names ``name_of_id`` though it is stored otherwise, or None."""
        return None if self.permalinks is None else self.permalinks.get(name_of_id)

    def note_reuse(self, name_of_id, name):
        """Remember that the message ``name`` came with the Message-ID whose hash is ``name_of_id``."""
        if self.reused is None:
            self.reused = OOBTree()
        known = self.reused.get(name_of_id, ())
        if name not in known:
            self.reused[name_of_id] = known + (name,)

    def note_undeclared(self, key, name):
        """Remember that the message ``name``, which came without a Message-ID, was written as ``key`` says."""
        if self.undeclared is None:
            self.undeclared = OOBTree()
        known = self.undeclared.get(key)
        # A name neither live nor deleted is a removed list's, made again.
        if known is None or (known not in self.data and known not in self.tombstones):
            self.undeclared[key] = name

    def undeclared_name(self, key):
        """The name of the mail without a Message-ID written as ``key`` says (live or deleted), or None."""
        return None if self.undeclared is None or key is None else self.undeclared.get(key)

    def reusing(self, name_of_id):
        """Names of the messages kept under another id that came with the Message-ID hashed ``name_of_id``."""
        return () if self.reused is None else self.reused.get(name_of_id, ())

    def __getitem__(self, name):
        try:
            return self.data[name]
        except KeyError:
            tombstone = self.tombstones.get(name)
            if tombstone is not None:
                return DeletedMessage(name, self, tombstone)
            target = self.permalink_target(name)
            if target is None:
                raise
            return MessageAlias(name, self, target)


class Threads(Container):
    """Threads of one list, keyed by the hash of their first message.

    A thread that was absorbed into another keeps its key as an alias, so
    that its old URL can still lead to the conversation. A thread deleted
    whole leaves a ``Tombstone`` under its key.
    """

    def __init__(self):
        super().__init__()
        self.aliases = OOBTree()
        self.tombstones = OOBTree()

    def __getitem__(self, name):
        try:
            return self.data[name]
        except KeyError:
            target = self.resolve_alias(name) or self._thread_of_message(name)
            if target is not None:
                return ThreadAlias(name, self, target)
            # Deleted, or merged into a thread deleted since: gone either way.
            end = self._alias_end(name)
            tombstone = self.tombstones.get(end)
            if tombstone is None:
                raise
            return DeletedThread(name, self, tombstone)

    def _thread_of_message(self, name):
        # Another archiver (HyperKitty names a thread by the first message it
        # saw of it, and splits threads at missing parents) may have named a
        # thread by any of its messages: that name leads to the message's thread.
        mailing_list = self.__parent__
        message = mailing_list.messages.data.get(name) if mailing_list is not None else None
        if message is None:
            return None
        return self.live(message.thread)

    def _alias_end(self, key):
        seen = set()
        while key in self.aliases and key not in seen and key not in self.data:
            seen.add(key)
            key = self.aliases[key]
        return key

    def named(self, keys):
        """The live threads named by ``keys``, in their order; a key of no live thread is skipped."""
        found = (self.data.get(key) for key in keys)
        return [thread for thread in found if thread is not None]

    def live(self, key):
        """The thread named ``key``, or the one it was merged into; None if neither."""
        return self.data.get(key) or self.resolve_alias(key)

    def resolve_alias(self, key):
        """Return the live thread that ``key`` was merged into, or None."""
        seen = set()
        while key in self.aliases and key not in seen:
            seen.add(key)
            key = self.aliases[key]
            if key in self.data:
                return self.data[key]
        return None


# What readers who may post may also do: vote on messages, tag threads,
# keep favourites and their read marks.
COMMUNITY_PERMISSIONS = ("vote", "tag", "follow")


class MailingList(Persistent):
    """The archive of one list, named by its posting address.

    Fixed children: ``message`` (by Message-ID hash), ``thread``, ``tag``,
    and ``admin``, the moderators' pages.
    """

    __name__ = None
    __parent__ = None

    archive_policy = "public"
    # False while the policy is assumed (private) for want of an answer from
    # Mailman; the list is then asked about again at every chance.
    policy_known = True
    # Why the list has its policy, for the import's summary and ``kittypyr info``.
    policy_reason = ""
    # Addresses, as Mailman last said (see kittypyr.mailman.sync_list).
    owners = ()
    moderators = ()
    synced_at = None
    # What Mailman puts before every subject ("[Dev] "), as it last said:
    # left out of the subjects of the messages archived (kittypyr.subjects).
    subject_prefix = ""

    @property
    def is_public(self):
        """Whether anyone may read the archive: its policy says ``public``.

        Mailman's other policies, ``private`` and ``never`` (archive no
        more), and any policy this version does not know, keep what is
        archived for the list's members: a list opened by mistake cannot
        be taken back, one closed by mistake can.
        """
        return self.archive_policy == "public"

    @property
    def archives_no_more(self):
        """Whether Mailman's policy is ``never``: new mail is not archived, what was archived stays."""
        return self.archive_policy == "never"

    @property
    def takes_posts(self):
        """Whether a post to the list reaches anyone: not once Mailman said it has no such list."""
        return self.in_mailman is not False

    @property
    def __acl__(self):
        """Owners and moderators moderate; a private archive is for members only."""
        # Roles come from Mailman, which names lists by their list id.
        list_id = self.list_id
        acl = []
        if not self.takes_posts:
            # Mailman has no such list: a post would go to no one.
            acl.append((Deny, Everyone, "post"))
        acl.append((Allow, "site-admin", ALL_PERMISSIONS))
        if self.in_mailman is not False:
            acl += [
                (Allow, f"owner:{list_id}", ("view", "post", "moderate")),
                (Allow, f"moderator:{list_id}", ("view", "post", "moderate")),
                (Allow, f"member:{list_id}", ("view", "post")),
            ]
            acl += [(Allow, f"{role}:{list_id}", COMMUNITY_PERMISSIONS)
                    for role in ("owner", "moderator", "member")]
        if not self.is_public:
            acl.append(DENY_ALL)
        else:
            acl.append((Allow, Authenticated, "post"))
            acl.append((Allow, Authenticated, COMMUNITY_PERMISSIONS))
        return acl

    # Whether Mailman has the list: False once it said it has none (a list
    # it deleted, an old list imported). Such a list has no members, and no
    # roles open it: Mailman's list id is its name and domain joined by a
    # dot, so a list made later as "team@board.example.org" has the id of
    # an archived "team.board@example.org", and its roles would be taken
    # for that list's. None: not known (an archive from before it was kept).
    in_mailman = None

    def __init__(self, address, display_name="", description=""):
        self.address = address.lower()
        self.display_name = display_name or self.address.split("@")[0]
        self.description = description
        self.created = datetime.now(timezone.utc)
        self.messages = Messages()
        self.messages.__name__ = "message"
        self.messages.__parent__ = self
        self.threads = Threads()
        self.threads.__name__ = "thread"
        self.threads.__parent__ = self
        # Message-ID hash not archived yet -> hashes of messages that would
        # rather hang below it than where they hang now.
        self.waiting_for_parent = OOBTree()
        self.attachment_count = Length()

    def __getitem__(self, name):
        if name == "message":
            return self.messages
        if name == "thread":
            return self.threads
        if name == "admin":
            return ListAdmin(self)
        if name == "tag":
            return TagFolder(self)
        if len(name) == 4 and is_number(name):
            return Year(self, int(name))
        raise KeyError(name)

    def get(self, name, default=None):
        try:
            return self[name]
        except KeyError:
            return default

    def values(self):
        """Children that hold resources, for walking the tree."""
        return (self.messages, self.threads)

    @property
    def list_id(self):
        return list_id_of(self.address)

    @property
    def message_count(self):
        return len(self.messages)

    @property
    def thread_count(self):
        return len(self.threads)
