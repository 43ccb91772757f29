"""A Pipermail folder's scrubbed attachments, kept with the messages that link them.

Mailman 2's scrubber took each non-text part out of the mail it archived,
saved it as ``attachments/<YYYYMMDD>/<id>/<name>`` in the archive folder
and left a notice with its URL in the body. The month files hold only the
notice, so ``kittypyr import`` of the folder reads the files too and adds
each to the message whose body holds its notice (or, failing that, whose
page links it) as an attachment of that message: the message keeps its
hash, its original bytes and its thread. Such an attachment is marked by
``pipermail_path`` (its path below ``attachments/``) and numbered from
``FIRST_INDEX`` on, after any part of the mail itself; the list's
``PipermailArchive.files`` maps the old path to it, for the redirect.

The scrubber made one folder per message, named by the day and by the
first and last four hex digits of the SHA-1 of its Message-ID header, so
a file no notice links is kept with the message of the other files of its
folder, or else with the one message whose Message-ID gives its folder's
name; a second copy ``<name>-0001.<ext>`` of a kept file's very bytes
(``bin/arch`` run again leaves those) leads to the kept one. A file of a
folder no message links is named in the import's summary, and so is one
that cannot be read (a dangling link, say), which fails the import.
"""

import hashlib
import mimetypes
import os
import re
from collections import Counter

from kittypyr.events import ObjectModified, notify
from kittypyr.mailboxes import read_regular_file
from kittypyr.pipermail.mapping import pipermail_archive
from kittypyr.pipermail.pages import scrubbed_links
from kittypyr.stats import activity_of
from kittypyr.resources.message import Attachment
from kittypyr.wording import counted

__all__ = ["FIRST_INDEX", "ScrubbedFiles"]

# Attachments from the folder are numbered from here: a MIME walk of the
# mail itself never gets this far, so their URLs cannot meet its parts'.
FIRST_INDEX = 1000
# The summary names this many of the files no message links, then counts the rest.
NAMED_UNLINKED = 20

KEPT, ALREADY_KEPT, BESIDE, COPY = "kept", "already kept", "beside", "copy"
# bin/arch names a file it scrubs again ``<stem>-0001<.ext>`` beside the first.
_SECOND_COPY = re.compile(r"^(?P<stem>.+)-\d{4}(?P<extension>\.[^./]*)?$")
MISSING, NOT_ARCHIVED = "linked, not in the folder", "linked by no archived message"
UNREADABLE = "not read"


def _content_type(name, noticed):
    if noticed:
        return noticed
    guessed, encoding = mimetypes.guess_type(name, strict=False)
    return guessed if guessed and not encoding else "application/octet-stream"


def _files_below(folder):
    """Every file below ``folder``, as paths relative to it with ``/``."""
    found = []
    for root, dirs, files in os.walk(folder):
        dirs.sort()
        for name in sorted(files):
            found.append(os.path.relpath(os.path.join(root, name), folder).replace(os.sep, "/"))
    return found


def attach_file(mailing_list, message, path, data, content_type):
    """Add the scrubbed file at ``path`` to ``message``; return its attachment index.

    Where the message already holds a part of that name from its own mail
    (the list's mbox was imported first), that part is the file.
    """
    name = path.rsplit("/", 1)[-1]
    for attachment in message.attachments:
        if attachment.pipermail_path == path or (attachment.pipermail_path is None
                                                 and attachment.filename == name):
            return attachment.index
    index = max([FIRST_INDEX - 1] + [a.index for a in message.attachments]) + 1
    attachment = Attachment(index, name, content_type, data, mailing_list._p_jar)
    attachment.pipermail_path = path
    attachment.__parent__ = message
    if not message.attachments:
        # Its thread now holds a message with attachments (the month page's mark).
        activity_of(mailing_list).gained_attachments(message)
    message.attachments = (*message.attachments, attachment)
    mailing_list.attachment_count.change(1)
    return index


def folder_name_of(message_id):
    """The name Mailman 2's scrubber gave the attachments folder of a message with this Message-ID."""
    digest = hashlib.sha1(f"<{message_id}>".encode("utf-8", "surrogateescape")).hexdigest()
    return digest[:4] + digest[-4:]


def _folder_names(root):
    """The names of the message folders below ``root`` (``attachments/<day>/<name>``)."""
    names = set()
    if os.path.isdir(root):
        for day in os.scandir(root):
            if _is_folder(day):
                names.update(entry.name for entry in os.scandir(day.path) if _is_folder(entry))
    return names


def _is_folder(entry):
    """Whether a ``DirEntry`` is a folder; a link that loops is none, as for ``os.walk``."""
    try:
        return entry.is_dir()
    except OSError:
        return False


def _same_bytes(one, other):
    try:
        if os.path.getsize(one) != os.path.getsize(other):
            return False
        with open(one, "rb") as a, open(other, "rb") as b:
            return a.read() == b.read()
    except OSError:
        return False


class ScrubbedFiles:
    """An import observer (see ``kittypyr.importing.Importer``) for one folder's ``attachments/``.

    ``stored`` notes the notices of each message stored; ``finish``, after
    the pages are mapped, adds every linked file to its message.
    """

    def __init__(self, folder, pages=None):
        """``pages``: the folder's ``{number: Page}``, whose links count where no notice does."""
        self.folder = folder
        self.pages = pages or {}
        self.root = os.path.join(folder, "attachments")
        # path -> (message hash, the type its notice says)
        self.noticed = {}
        # folder name (without its day) -> the hashes of the messages whose Message-ID gives it,
        # for the folders there are (a list's other messages are not held in memory).
        self.by_folder_name = {name: set() for name in _folder_names(self.root)}
        self.outcomes = Counter()
        self.unlinked = []
        # "attachment not read: <file>: <reason>" for the import's errors.
        self.errors = []
        self.files = 0

    def stored(self, mailing_list, parsed, result):
        message = result.message
        if message is None:
            return
        if not parsed.mail.message_id_derived:
            named = self.by_folder_name.get(folder_name_of(parsed.mail.message_id))
            if named is not None:
                named.add(message.__name__)
        for path, content_type in scrubbed_links(parsed.mail.body_text).items():
            # A later message with the same notice is a resend; the first holds the file.
            self.noticed.setdefault(path, (message.__name__, content_type))

    def finish(self, archive, mailing_list):
        record = pipermail_archive(mailing_list, create=True)
        if record.files is None:
            record.files = type(record.attachments)()
        self.outcomes.clear()
        self.errors = []
        linked = dict(self.noticed)
        for number, page in sorted(self.pages.items()):
            for path in page.attachments:
                if path not in linked:
                    linked[path] = (record.numbers.get(number), page.attachments[path])
        on_disk = _files_below(self.root) if os.path.isdir(self.root) else []
        self.files = len(on_disk)
        modified = {}
        for path, (message_hash, content_type) in sorted(linked.items()):
            if not os.path.isfile(self._full(path)):
                self.outcomes[MISSING] += 1
                continue
            outcome = self._keep(mailing_list, record, path, message_hash, content_type, modified)
            self.outcomes[outcome] += 1
        self.unlinked = self._keep_the_rest(mailing_list, record,
                                            [path for path in on_disk if path not in linked], modified)
        for message in modified.values():
            # Its attachment mark and text attachments are searched: the
            # words made when it arrived, still cached with it, lack them.
            message._v_prepared_text = message._v_searchable_text = None
            notify(ObjectModified(message))

    def _full(self, path):
        return os.path.join(self.root, *path.split("/"))

    def _keep(self, mailing_list, record, path, message_hash, content_type, modified, outcome=KEPT):
        """Keep the file at ``path`` with the message ``message_hash``; return the outcome."""
        if path in record.files:
            return ALREADY_KEPT
        message = mailing_list.messages.data.get(message_hash) if message_hash else None
        if message is None:
            return NOT_ARCHIVED
        try:
            data = read_regular_file(self._full(path))
        except OSError as exc:
            # One file the import cannot read (a dangling link, a FIFO, no
            # permission) must not cost the folder its other files and
            # page numbers: it is named, and the import fails.
            self.errors.append(f"attachment not read: {self._full(path)}: {exc.strerror or exc}")
            return UNREADABLE
        before = len(message.attachments)
        index = attach_file(mailing_list, message, path, data, _content_type(path, content_type))
        record.files[path] = (message_hash, index)
        if len(message.attachments) != before:
            modified[message_hash] = message
        return outcome

    def _keep_the_rest(self, mailing_list, record, paths, modified):
        """Keep the unlinked files that are second copies or share a kept file's folder; return the others."""
        owners = {}
        for path, (message_hash, _) in record.files.items():
            owners.setdefault(path.rsplit("/", 1)[0], message_hash)
        left = []
        def first_files_first(path):
            # "x-0001.bin" sorts before "x.bin", whose second copy it is.
            return _SECOND_COPY.match(path.rsplit("/", 1)[-1]) is not None, path

        for path in sorted(paths, key=first_files_first):
            # A file right in attachments/ (one a web server left there) is in no
            # message's folder: its folder is "", which no message has.
            folder, _, name = path.rpartition("/")
            copy = _SECOND_COPY.match(name)
            first = f"{folder}/{copy['stem']}{copy['extension'] or ''}" if copy else None
            if path in record.files:  # by an earlier import
                self.outcomes[COPY if first and record.files.get(first) == record.files[path] else BESIDE] += 1
            elif first in record.files and _same_bytes(self._full(first), self._full(path)):
                record.files[path] = record.files[first]
                self.outcomes[COPY] += 1
            elif folder in owners:
                self.outcomes[self._keep(mailing_list, record, path, owners[folder], None, modified, BESIDE)] += 1
            elif len(named := self.by_folder_name.get(folder.rsplit("/", 1)[-1], ())) == 1:
                self.outcomes[self._keep(mailing_list, record, path, next(iter(named)), None, modified,
                                         BESIDE)] += 1
            else:
                left.append(path)
        return left

    def summary(self):
        if not self.files and not self.outcomes:
            return []  # a folder without attachments/, whose pages link none
        kept = self.outcomes[KEPT] + self.outcomes[ALREADY_KEPT]
        lines = [f"pipermail attachments {self.root}: {counted(self.files, 'file')}, {kept} kept with the message "
                 f"that links them, {self.outcomes[BESIDE]} with the message of their folder, "
                 f"{counted(self.outcomes[COPY], 'second copy', 'second copies')} of a kept file, "
                 f"{len(self.unlinked)} linked by no message"]
        for why in (MISSING, NOT_ARCHIVED):
            if self.outcomes[why]:
                lines.append(f"attachments {why}: {self.outcomes[why]}")
        for path in self.unlinked[:NAMED_UNLINKED]:
            lines.append(f"attachment linked by no message: {path}")
        if len(self.unlinked) > NAMED_UNLINKED:
            lines.append(f"... and {len(self.unlinked) - NAMED_UNLINKED} more linked by no message")
        return lines
