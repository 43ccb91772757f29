"""The one persistent container every folder of the archive is built on."""

from BTrees.Length import Length
from BTrees.OOBTree import OOBTree
from persistent import Persistent

from kittypyr.events import ObjectAdded, ObjectWillBeRemoved, notify


class Container(Persistent):
    """A mapping of names to resources on an OOBTree, with an O(1) length.

    ``add`` is the only code that places a resource: it sets ``__name__`` and
    ``__parent__`` and notifies ``ObjectAdded`` (which keeps the catalog in
    step). ``remove`` notifies ``ObjectWillBeRemoved`` first.
    """

    __name__ = None
    __parent__ = None

    def __init__(self):
        self.data = OOBTree()
        self._count = Length()

    def __getitem__(self, name):
        return self.data[name]

    def get(self, name, default=None):
        return self.data.get(name, default)

    def __contains__(self, name):
        return name in self.data

    def __len__(self):
        return self._count()

    def __iter__(self):
        return iter(self.data.keys())

    def keys(self, min=None, max=None):
        return self.data.keys(min, max)

    def values(self):
        return self.data.values()

    def items(self):
        return self.data.items()

    def add(self, name, resource, send_events=True):
        """Place ``resource`` under ``name``; raise KeyError if it is taken."""
        if not isinstance(name, str) or not name or "/" in name:
            raise ValueError(f"not a usable resource name: {name!r}")
        if name in self.data:
            raise KeyError(f"{name!r} already exists")
        resource.__name__ = name
        resource.__parent__ = self
        self.data[name] = resource
        self._count.change(1)
        if send_events:
            notify(ObjectAdded(resource, self, name))
        return resource

    def remove(self, name, send_events=True):
        """Take the resource named ``name`` out of the tree and return it."""
        resource = self.data[name]
        if send_events:
            notify(ObjectWillBeRemoved(resource, self, name))
        del self.data[name]
        self._count.change(-1)
        resource.__parent__ = None
        return resource
