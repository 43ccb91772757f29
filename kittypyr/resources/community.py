"""What readers add to the archive: profiles, votes, tags and their own reading state.

Everything here is kept apart from the messages and threads that archiving
writes, so that a vote or a tag never conflicts with mail arriving, and
shaped so that concurrent writers touch different records or merge:

- ``People`` (``/users/``): a stable, address-free id for every sender and
  their post counts per list (written by archiving, read by profiles);
- ``Votes``: per message a ``MessageTally`` of ``BTrees.Length`` counters,
  per thread and per sender (reputation) one ``Length`` each. ``Length``
  resolves concurrent changes by adding them up, so many readers voting on
  one busy message at once all commit;
- ``Tagging``: who gave which tag to which thread;
- ``Reader``: one record per logged-in reader (their votes, favourites and
  what they have read), written by that reader only.
"""

import hashlib
import hmac
import secrets

from BTrees.Length import Length
from BTrees.OOBTree import OOBTree, OOTreeSet
from persistent import Persistent
from pyramid.authorization import Allow, Authenticated

from kittypyr.merging import KeyedCounts

# Sorts after every list address, thread key and tag: the upper end of a
# range of tuple keys that share a prefix.
HIGHEST = "\U0010ffff"


class People(Persistent):
    """``/users/``: everyone who wrote to a list, by an id that hides their address.

    The id is a keyed hash of the lower-cased address, with a key made once
    for this archive: stable across restarts and re-imports, and not
    reversible by hashing guessed addresses. ``/users/me/`` is the logged-in
    reader's own page.
    """

    __name__ = "users"
    __parent__ = None

    # Only a logged-in reader has a page of their own.
    __acl__ = [(Allow, Authenticated, "personal")]

    def __init__(self):
        self.key = secrets.token_hex(16)
        self.addresses = OOBTree()  # person id -> address (lower case)
        # Merges two writers' changes of one count (kittypyr.merging).
        self.posts = KeyedCounts()  # (person id, list address) -> messages archived
        self.add_dated_posts()

    def add_dated_posts(self):
        """Each sender's messages in each list, newest first: what a profile shows reads its front."""
        self.dated_posts = OOTreeSet()  # (person id, list address, -timestamp, message hash)

    def person_id(self, address):
        """The id of the sender ``address`` (whether or not they wrote yet); '' for none."""
        if not address:
            return ""
        digest = hmac.new(self.key.encode("ascii"), address.strip().lower().encode("utf-8"), hashlib.sha256)
        return digest.hexdigest()[:16]

    def __getitem__(self, name):
        return Person(name, self.addresses[name], self)

    def get(self, name, default=None):
        try:
            return self[name]
        except KeyError:
            return default


class Person:
    """``/users/<id>/``: one sender, made on the way by traversal."""

    def __init__(self, person_id, address, people):
        self.__name__ = person_id
        self.__parent__ = people
        self.person_id = person_id
        self.address = address


class MessageTally(Persistent):
    """The votes on one message: counters that merge concurrent changes.

    Voters only change ``up`` and ``down``, never this record. ``serial``
    tells a ballot cast on this tally from one left over by a deleted
    message of the same name; ``thread`` is the thread whose total holds
    this message's score.
    """

    def __init__(self, sender, thread):
        self.serial = secrets.token_hex(4)
        self.sender = sender
        self.thread = thread
        self.up = Length()
        self.down = Length()

    @property
    def score(self):
        return self.up() - self.down()


class Votes(Persistent):
    """Every vote's counters; who voted what is in each ``Reader``."""

    def __init__(self):
        self.tallies = OOBTree()  # (list address, message hash) -> MessageTally
        self.threads = OOBTree()  # (list address, thread key) -> Length: sum of its messages' scores
        self.senders = OOBTree()  # (person id, list address) -> Length: reputation there


class Tagging(Persistent):
    """Tags that readers gave threads."""

    def __init__(self):
        self.entries = OOBTree()  # (list address, thread key, tag, reader address) -> datetime
        self.by_list = OOBTree()  # (list address, tag, thread key) -> readers who gave it


class Reader(Persistent):
    """One logged-in reader's own state; nobody else writes it.

    ``votes``: (list address, message hash) -> (value, tally serial, datetime);
    ``favourites``: (list address, thread key) -> datetime;
    ``seen``: (list address, thread key) -> timestamp of the newest message
    the reader saw there; ``since``: list address -> timestamp before which
    everything in the list counts as read. ``feed_generation``: how many
    times the reader made a new feed key (see ``kittypyr.feeds``).
    """

    feed_generation = 0

    def __init__(self, address):
        self.address = address
        self.votes = OOBTree()
        self.favourites = OOBTree()
        self.seen = OOBTree()
        self.since = OOBTree()


def add_community(archive):
    """Give ``archive`` the stores of this module, keeping any it has."""
    if getattr(archive, "people", None) is None:
        archive.people = People()
        archive.people.__parent__ = archive
    if getattr(archive, "votes", None) is None:
        archive.votes = Votes()
    if getattr(archive, "tagging", None) is None:
        archive.tagging = Tagging()
    if getattr(archive, "readers", None) is None:
        archive.readers = OOBTree()  # reader address -> Reader
