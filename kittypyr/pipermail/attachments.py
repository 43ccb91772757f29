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

A file no message links is named in the import's summary.
"""

import mimetypes
import os
from collections import Counter

from kittypyr.events import ObjectModified, notify
from kittypyr.pipermail.mapping import pipermail_archive
from kittypyr.pipermail.pages import scrubbed_links
from kittypyr.resources.message import Attachment

__all__ = ["FIRST_INDEX", "ScrubbedFiles"]

# Attachments from the folder are numbered from here: a MIME walk of the
# mail itself never gets this far, so their URLs cannot meet its parts'.
FIRST_INDEX = 1000
# The summary names this many of the files no message links, then counts the rest.
NAMED_UNLINKED = 20

KEPT, ALREADY_KEPT = "kept", "already kept"
MISSING, NOT_ARCHIVED = "linked, not in the folder", "linked by a page of no archived message"


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
    message.attachments = (*message.attachments, attachment)
    mailing_list.attachment_count.change(1)
    return index


class ScrubbedFiles:
    """An import observer (see ``kittypyr.importing.Importer``) for one folder's ``attachments/``.

    ``stored`` notes the notices of each message stored; ``finish``, after
    the pages are mapped, adds every linked file to its message.
    """

    def __init__(self, folder):
        self.folder = folder
        self.root = os.path.join(folder, "attachments")
        # path -> (message hash, the type its notice says)
        self.noticed = {}
        self.outcomes = Counter()
        self.unlinked = []
        self.files = 0

    def stored(self, mailing_list, parsed, result):
        message = result.message
        if message is None:
            return
        for path, content_type in scrubbed_links(parsed.mail.body_text).items():
            # A later message with the same notice is a resend; the first holds the file.
            self.noticed.setdefault(path, (message.__name__, content_type))

    def finish(self, archive, mailing_list):
        record = pipermail_archive(mailing_list, create=True)
        if record.files is None:
            record.files = type(record.attachments)()
        self.outcomes.clear()
        linked = dict(self.noticed)
        for path, number in record.attachments.items():
            if path not in linked:
                message_hash = record.numbers.get(number)
                linked[path] = (message_hash, None)
        on_disk = _files_below(self.root) if os.path.isdir(self.root) else []
        self.files = len(on_disk)
        self.unlinked = [path for path in on_disk if path not in linked]
        modified = {}
        for path, (message_hash, content_type) in sorted(linked.items()):
            full = os.path.join(self.root, *path.split("/"))
            if not os.path.isfile(full):
                self.outcomes[MISSING] += 1
                continue
            message = mailing_list.messages.data.get(message_hash) if message_hash else None
            if message is None:
                self.outcomes[ALREADY_KEPT if path in record.files else NOT_ARCHIVED] += 1
                continue
            if path in record.files:
                self.outcomes[ALREADY_KEPT] += 1
                continue
            with open(full, "rb") as f:
                data = f.read()
            before = len(message.attachments)
            index = attach_file(mailing_list, message, path, data, _content_type(path, content_type))
            record.files[path] = (message_hash, index)
            if len(message.attachments) != before:
                modified[message_hash] = message
            self.outcomes[KEPT] += 1
        for message in modified.values():
            # Its attachment mark and text attachments are searched.
            notify(ObjectModified(message))

    def summary(self):
        kept = self.outcomes[KEPT] + self.outcomes[ALREADY_KEPT]
        lines = [f"pipermail attachments {self.root}: {self.files} files, {kept} kept with the message "
                 f"that links them, {len(self.unlinked)} linked by no message"]
        for why in (MISSING, NOT_ARCHIVED):
            if self.outcomes[why]:
                lines.append(f"attachments {why}: {self.outcomes[why]}")
        for path in self.unlinked[:NAMED_UNLINKED]:
            lines.append(f"attachment linked by no message: {path}")
        if len(self.unlinked) > NAMED_UNLINKED:
            lines.append(f"... and {len(self.unlinked) - NAMED_UNLINKED} more linked by no message")
        return lines
