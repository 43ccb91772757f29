"""Transient resources that traversal makes on the way: no state of their own."""


def is_number(name):
    """Whether a path segment is a number written in ASCII digits.

    ``str.isdigit`` is true of "²", which ``int`` refuses, and ``int`` reads
    "٢٠٢٤" as 2024: a second address for a page, or a traceback.
    """
    return name.isascii() and name.isdigit()


class Year:
    """``/list/<address>/<YYYY>/``: a year of a list's archive."""

    def __init__(self, mailing_list, year):
        self.__name__ = str(year)
        self.__parent__ = mailing_list
        self.year = year
        self.mailing_list = mailing_list

    def __getitem__(self, name):
        if is_number(name) and 1 <= int(name) <= 12 and len(name) <= 2:
            return Month(self, int(name))
        raise KeyError(name)


class Month:
    """``/list/<address>/<YYYY>/<M>/``: the threads started in one month."""

    def __init__(self, year, month):
        self.__name__ = str(month)
        self.__parent__ = year
        self.year = year.year
        self.month = month
        self.mailing_list = year.mailing_list

    @property
    def key(self):
        """The 'YYYY-MM' form the catalog's month index holds."""
        return f"{self.year:04d}-{self.month:02d}"


class ThreadAlias:
    """A thread key merged into another thread, or a message's hash: it redirects to the thread.

    ``target``: the thread, or its JSON.
    """

    def __init__(self, name, threads, target):
        self.__name__ = name
        self.__parent__ = threads
        self.target = target


class MessageAlias:
    """The hash Mailman's permalink names for a message stored under another: it redirects to the message.

    ``target``: the message's name (see ``Messages.permalinks``).
    """

    def __init__(self, name, messages, target):
        self.__name__ = name
        self.__parent__ = messages
        self.target = target


class ListAlias:
    """A list's address spelled in other case, and whatever path follows it.

    Lists are keyed by their lower-case address; the alias leads there
    (``target``: the list, or its JSON), so that every page keeps one URL.
    ``rest`` holds the names traversed after the address.
    """

    # No page of a list lies deeper below it than a few names: a longer
    # path is none, and answers as any path no page has.
    DEPTH_MAX = 32

    def __init__(self, name, parent, target, depth=0):
        self.__name__ = name
        self.__parent__ = parent
        self.target = target
        self.depth = depth

    def __getitem__(self, name):
        # Traversal goes on through the whole path, so the redirect keeps it
        # (and no view name is left over to miss).
        if self.depth >= self.DEPTH_MAX:
            raise KeyError(name)
        return ListAlias(name, self, self.target, self.depth + 1)

    @property
    def rest(self):
        """The names traversed after the address, read up the aliases (each keeps only its own)."""
        names = []
        alias = self
        while alias.depth:
            names.append(alias.__name__)
            alias = alias.__parent__
        return tuple(reversed(names))


class TagFolder:
    """``/list/<address>/tag/``: the tags readers gave the list's threads."""

    def __init__(self, mailing_list):
        self.__name__ = "tag"
        self.__parent__ = mailing_list
        self.mailing_list = mailing_list

    def __getitem__(self, name):
        # Any name: the tag page shows what it is, or leads to its usual spelling.
        return Tag(self, name)


class Tag:
    """``/list/<address>/tag/<tag>/``: the list's threads with that tag."""

    def __init__(self, folder, tag):
        self.__name__ = tag
        self.__parent__ = folder
        self.tag = tag
        self.mailing_list = folder.mailing_list
