"""The read-only JSON API's URL space: transient wrappers around the tree.

``/api/lists/``, ``/api/list/<address>/``, ``/api/list/<address>/threads/``,
``/api/list/<address>/thread/<key>/`` and ``/api/list/<address>/email/<hash>/``.
"""

from kittypyr.resources.browsing import ListAlias, MessageAlias, ThreadAlias


class _Node:
    def __init__(self, name, parent):
        self.__name__ = name
        self.__parent__ = parent


class ApiRoot(_Node):
    def __init__(self, archive):
        super().__init__("api", archive)
        self.archive = archive

    def __getitem__(self, name):
        if name == "lists":
            return ApiLists("lists", self)
        if name == "list":
            return ApiListFolder("list", self)
        if name == "search":
            return ApiSearch("search", self)
        if name == "mailman":
            return ApiMailman("mailman", self)
        raise KeyError(name)


class ApiLists(_Node):
    """All lists."""

    @property
    def archive(self):
        return self.__parent__.archive


class ApiSearch(_Node):
    """``/api/search?q=...``: the search page's results as JSON."""

    @property
    def archive(self):
        return self.__parent__.archive


class ApiMailman(_Node):
    """``/api/mailman/``: where Mailman core's archiver plugin hands over mail."""

    @property
    def archive(self):
        return self.__parent__.archive


class ApiListFolder(_Node):
    def __getitem__(self, address):
        lists = self.__parent__.archive.lists
        mailing_list = lists.data.get(address)
        if mailing_list is not None:
            return ApiList(mailing_list, address, self)
        canonical = address.lower()
        # KeyError when no list has the address in any case.
        return ListAlias(address, self, ApiList(lists.data[canonical], canonical, self))


class ApiList(_Node):
    """One list; children ``threads``, ``thread`` and ``email``."""

    def __init__(self, mailing_list, name, parent):
        super().__init__(name, parent)
        self.mailing_list = mailing_list

    @property
    def __acl__(self):
        # The JSON of a list is as closed as its pages.
        return self.mailing_list.__acl__

    def __getitem__(self, name):
        if name == "threads":
            return ApiThreads(name, self)
        if name == "thread":
            return ApiThreadFolder(name, self)
        if name == "email":
            return ApiEmailFolder(name, self)
        raise KeyError(name)


class ApiThreads(_Node):
    """A list's threads, newest activity first."""

    @property
    def mailing_list(self):
        return self.__parent__.mailing_list


class ApiThreadFolder(_Node):
    def __getitem__(self, key):
        threads = self.__parent__.mailing_list.threads
        thread = threads.live(key)
        if thread is not None:
            return ApiThread(thread, key, self)
        found = threads[key]  # KeyError if no thread, message or tombstone has the key
        if isinstance(found, ThreadAlias):
            # A reply's hash: it leads to its thread's JSON, as the page leads to the thread.
            target = found.target
            return ThreadAlias(key, self, ApiThread(target, target.key, self))
        return ApiGone(found, key, self)


class ApiThread(_Node):
    def __init__(self, thread, name, parent):
        super().__init__(name, parent)
        self.thread = thread


class ApiEmailFolder(_Node):
    def __getitem__(self, name):
        messages = self.__parent__.mailing_list.messages
        message = messages.data.get(name)
        if message is None:
            found = messages[name]  # KeyError if it never existed
            if isinstance(found, MessageAlias):
                # The hash Mailman's Archived-At names: the message it was written for.
                return self[found.target]
            return ApiGone(found, name, self)
        return ApiEmail(message, name, self)


class ApiGone(_Node):
    """A deleted message or thread (``deleted``: its DeletedMessage or DeletedThread)."""

    def __init__(self, deleted, name, parent):
        super().__init__(name, parent)
        self.deleted = deleted


class ApiEmail(_Node):
    def __init__(self, message, name, parent):
        super().__init__(name, parent)
        self.message = message
