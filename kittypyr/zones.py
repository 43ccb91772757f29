"""Where each line of a message stands, for the full-text index and for snippets.

A reader sees more than the author's own words: quoted text (whose original
may not be in the archive), patch hunks, the commit message of a
``git format-patch`` mail, the signature, text attachments. Every one of
them is indexed; each line is tagged with its zone so that a search can ask
for one zone only (``quoted:``, ``added:``...) and the ranking can put the
author's own words first.

``message_zones`` is pure: it reads a subject, a sender name, a body and
attachments and returns ``Zones``; nothing here touches the database.
"""

from dataclasses import dataclass, field

from kittypyr.mail import _is_attribution, decode_bytes, wide_text_charset
from kittypyr.patches import PATCH_HEADERS, PATCH_START

# Zone flags, kept per word in the full-text index (six bits: see
# kittypyr.fulltext for the posting layout).
OWN = 1  # the author's own words, the subject and the sender's name
QUOTED = 2
PATCH = 4  # any line of a diff: headers, context, added and removed lines
ADDED = 8
REMOVED = 16
ATTACHED = 32  # a text attachment's own lines
ZONE_BITS = 6

# A word in the author's own words counts this many times over one
# elsewhere: ranking puts own-words matches above quote-only matches.
OWN_WEIGHT = 3

# What is indexed of a message: the text a page shows (its first 256 KB,
# see kittypyr.rendering) with room to spare, and text attachments of up to
# this size each. Beyond them a multi-megabyte log would cost an import
# more than a thousand ordinary messages.
BODY_INDEX_MAX = 1024 * 1024
ATTACHMENT_INDEX_MAX = 256 * 1024
PATCH_SUFFIXES = (".patch", ".diff", ".txt", ".log")

_PATCH_FIRST = frozenset(start[0] for start in PATCH_START)
_PATCH_CONTINUE = ("+", "-", " ", "@@", *PATCH_HEADERS)
_BLANKS = frozenset(" \t\f\v")
# First characters of the diff header lines that name files.
_HEADER_FIRST = frozenset("d-+I")
SIGNATURE = "-- "


@dataclass
class Zones:
    """A message's text by zone: ``segments`` of ``(flags, weight, text)`` in reading order."""

    parts: list = field(default_factory=list)  # [flags, weight, [lines]]
    paths: set = field(default_factory=set)  # files a patch in it touches
    has_patch: bool = False

    def add(self, flags, weight, text):
        if not text:
            return
        # Lines are gathered and joined once: adding to a string line by
        # line costs the square of a long patch's length.
        if self.parts and self.parts[-1][0] == flags and self.parts[-1][1] == weight:
            self.parts[-1][2].append(text)
        else:
            self.parts.append([flags, weight, [text]])

    @property
    def segments(self):
        return [(flags, weight, "\n".join(lines)) for flags, weight, lines in self.parts]


def _patch_line(zones, line, attached):
    extra = ATTACHED if attached else 0
    if line.startswith("+") and not line.startswith("+++"):
        zones.add(PATCH | ADDED | extra, 1, line[1:])
    elif line.startswith("-") and not line.startswith("---"):
        zones.add(PATCH | REMOVED | extra, 1, line[1:])
    elif line[:1] == " ":
        zones.add(PATCH | extra, 1, line[1:])
    else:
        if line[:1] in _HEADER_FIRST:
            zones.paths.update(paths_of_header(line))
        zones.add(PATCH | extra, 1, line)


def paths_of_header(line):
    """The file paths a diff header line names (``diff --git``, ``---``, ``+++``, ``Index:``)."""
    if line.startswith("diff "):
        words = [w for w in line.split()[1:] if not w.startswith("-")]
        return {p for w in words[-2:] for p in _path_forms(w)}
    if line.startswith(("--- ", "+++ ")):
        name = line[4:].split("\t")[0].strip()
        if " " in name:  # "--- file 2005-03-01 12:00:00" from diff -u without tabs
            name = name.split(" ")[0]
        return _path_forms(name)
    if line.startswith("Index: "):
        return _path_forms(line[7:].strip())
    return set()


def _path_forms(name):
    if not name or name == "/dev/null" or "/" not in name and "." not in name:
        return set()
    if name.startswith(("a/", "b/")):
        return {name[2:]}
    forms = {name.lstrip("./")}
    # "linux-2.6.orig/arch/mips/x.c": the tree's own folder is not the path.
    head, _, rest = name.partition("/")
    if rest and head not in ("arch", "drivers", "include", "kernel", "fs", "net", "lib", "mm", "src"):
        forms.add(rest)
    return {form for form in forms if form}


def file_keys(paths):
    """The ``file:`` index keys of ``paths``: each path, its folders (``arch/mips/``) and its name."""
    keys = set()
    for path in paths:
        path = path.lower()
        keys.add(path)
        parts = path.split("/")
        keys.add(parts[-1])
        for end in range(1, len(parts)):
            keys.add("/".join(parts[:end]) + "/")
    return sorted(keys)


def _walk_text(zones, text, attached):
    """Tag each line of ``text`` (a body or a text attachment) with its zone."""
    own = ATTACHED if attached else OWN
    weight = 1 if attached else OWN_WEIGHT
    in_patch = in_quote = signed = False
    pending = []  # own lines not yet added: an attribution line may end them

    def flush():
        if pending:
            zones.add(own if not signed else 0, weight if not signed else 1, "\n".join(pending))
            pending.clear()

    for line in text.split("\n"):
        if line == SIGNATURE and not signed:
            # git format-patch signs after the last hunk, where "-- " would
            # otherwise read as a removed line.
            flush()
            signed, in_patch = True, False
            continue
        if in_patch:
            if not line or line.startswith(_PATCH_CONTINUE):
                _patch_line(zones, line, attached)
                continue
            in_patch = False
        first = line[:1]
        if first in _PATCH_FIRST and line.startswith(PATCH_START):
            flush()
            in_patch, in_quote = True, False
            zones.has_patch = True
            _patch_line(zones, line, attached)
            continue
        if first == ">" or (first in _BLANKS and line.lstrip().startswith(">")):
            if not in_quote:
                # The line introducing a quote ("On Monday, X wrote:") is not
                # the author's words, as the own-words text has it.
                while pending and not pending[-1].strip():
                    pending.pop()
                if pending and _is_attribution(pending[-1]):
                    attribution = pending.pop()
                    flush()
                    zones.add(0, 1, attribution)
                flush()
            in_quote = True
            zones.add(QUOTED, 1, line.lstrip(" \t>"))
            continue
        in_quote = False
        pending.append(line)
    flush()


def _attachment_text(attachment):
    """The text of a text attachment worth indexing, or None."""
    content_type = (getattr(attachment, "content_type", "") or "").lower()
    filename = (getattr(attachment, "filename", "") or "").lower()
    if not (content_type.startswith("text/") and content_type != "text/html"
            or filename.endswith(PATCH_SUFFIXES)):
        return None
    size = getattr(attachment, "size", None)
    data = attachment.data
    if size is not None and size > ATTACHMENT_INDEX_MAX:
        return None
    if callable(data):
        data = data()
    if len(data) > ATTACHMENT_INDEX_MAX:
        return None
    charset = getattr(attachment, "charset", "") or None
    if b"\0" in data[:1024]:
        # A binary file, unless it is text in UTF-16 or UTF-32.
        charset = wide_text_charset(data, charset)
        if charset is None:
            return None
    return decode_bytes(data, charset)


def message_zones(subject, sender_name, body_text, attachments=()):
    """The ``Zones`` of a message: subject and sender, body, then its text attachments and every attachment's name."""
    zones = Zones()
    zones.add(OWN, OWN_WEIGHT, " ".join(part for part in (subject, sender_name) if part))
    _walk_text(zones, (body_text or "")[:BODY_INDEX_MAX], attached=False)
    for attachment in attachments:
        text = _attachment_text(attachment)
        if text:
            _walk_text(zones, text, attached=True)
    # Their names, as the message's page shows them: the sender's own words.
    zones.add(OWN, 1, " ".join(filter(None, (getattr(attachment, "filename", "") for attachment in attachments))))
    return zones
