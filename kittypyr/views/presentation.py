"""How archive data reads on a page: dates, names, avatars, charts, paging.

Plain functions of their inputs, so they are testable without a request.
Anything that returns markup escapes what it embeds.
"""

import functools
import hashlib
import math
import re

from markupsafe import Markup
from pyramid.events import BeforeRender, subscriber

from kittypyr.rendering import obfuscate_address
from kittypyr.wording import counted


def format_date(moment):
    """'2019-03-14 09:26 UTC': unambiguous in every locale."""
    if moment is None:
        return ""
    return moment.strftime("%Y-%m-%d %H:%M UTC")


def iso_date(moment):
    return moment.isoformat() if moment is not None else ""


# Not shown in a name or a subject: control characters (a terminal's escape,
# a NUL), and the embeddings, overrides and isolates of text direction, which
# left unclosed reverse what follows them on the line (a date, a list's name).
# The marks (LRM, RLM, ALM) stay: right-to-left text places its punctuation
# with them, and they turn nothing around.
_NOT_SHOWN = re.compile("[\x00-\x08\x0a-\x1f\x7f\u202a-\u202e\u2066-\u2069]")


def shown_line(text):
    """``text`` (a name, a subject) without what no page shows of it: see _NOT_SHOWN."""
    if text.isascii() and text.isprintable():
        return text
    return _NOT_SHOWN.sub("", text.replace("\t", " "))


def display_name(name, address):
    """The sender's name, or the obfuscated address when there is no name."""
    name = shown_line(name) if name else name
    if name and "@" not in name:
        return name
    if name:
        return obfuscate_address(name)
    return obfuscate_address(address) if address else "(unknown sender)"


def subject_line(subject):
    """A subject as every page and the API write it: addresses obfuscated, '(no subject)' when empty."""
    subject = shown_line(subject) if subject else subject
    return obfuscate_address(subject) if subject else "(no subject)"


def file_label(filename):
    """An attachment's file name as pages show it (and name it in their links): addresses obfuscated."""
    return obfuscate_address(filename or "")


@subscriber(BeforeRender)
def presentation_helpers(event):
    """Subjects come from the mail and may hold addresses: every template writes them one way."""
    event["subject_line"] = subject_line
    event["counted"] = counted


def initials(name):
    words = [w for w in name.replace(".", " ").split() if w[:1].isalnum()]
    if not words:
        return "?"
    if len(words) == 1:
        return words[0][:2].upper()
    return (words[0][0] + words[-1][0]).upper()


@functools.lru_cache(maxsize=20_000)
def avatar(name, address, size=40):
    """An inline SVG avatar coloured by a hash of the address: no outside request.

    Kept per process: a busy thread shows the same few people many times.
    """
    digest = hashlib.sha1((address or name or "").lower().encode("utf-8")).digest()
    hue = int.from_bytes(digest[:2], "big") % 360
    label = initials(display_name(name, address))
    return Markup(
        '<svg class="avatar" width="{s}" height="{s}" viewBox="0 0 40 40" aria-hidden="true">'
        '<rect width="40" height="40" rx="8" fill="hsl({hue}, 45%, 45%)"></rect>'
        '<text x="20" y="25" text-anchor="middle" font-size="15" fill="#fff">{label}</text></svg>'
    ).format(s=size, hue=hue, label=label)


def sparkline(counts, width=120, height=24):
    """An inline SVG line of ``counts`` (one value a day)."""
    return _chart(counts, width, height, "sparkline")


def activity_chart(counts, width=600, height=80):
    return _chart(counts, width, height, "activity")


def _chart(counts, width, height, css_class):
    peak = max(counts) if counts else 0
    step = width / max(len(counts) - 1, 1)
    points = " ".join(
        f"{round(i * step, 1)},{round(height - 2 - (c / peak if peak else 0) * (height - 4), 1)}"
        for i, c in enumerate(counts)
    )
    total = sum(counts)
    return Markup(
        '<svg class="{cls}" width="{w}" height="{h}" viewBox="0 0 {w} {h}" role="img" '
        'aria-label="{total} in {days} days"><polyline fill="none" stroke="currentColor" '
        'stroke-width="1.5" points="{points}"></polyline></svg>'
    ).format(cls=css_class, w=width, h=height, total=counted(total, "message"), days=len(counts), points=points)


def human_size(size):
    for unit in ("bytes", "KB", "MB", "GB"):
        if size < 1024 or unit == "GB":
            return f"{size} {unit}" if unit == "bytes" else f"{size:.1f} {unit}"
        size /= 1024


class Page:
    """One page of ``total`` items, ``size`` a page; ``number`` counts from 1."""

    def __init__(self, number, total, size):
        self.size = size
        self.total = total
        self.count = max(1, math.ceil(total / size))
        self.number = min(max(1, number), self.count)

    @property
    def start(self):
        return (self.number - 1) * self.size

    @property
    def has_previous(self):
        return self.number > 1

    @property
    def has_next(self):
        return self.number < self.count


# Past any real archive's last page; every paginated query is asked for at
# most this page's items, and a number above it reads as this one.
MAX_PAGE_NUMBER = 100_000


def page_number(request):
    """The ``?page=`` asked for, from 1 to ``MAX_PAGE_NUMBER``; 1 when it is not a number.

    A number past the last page is left for ``Page`` (and the query) to
    turn into the last page. Only ASCII digits count: ``int()`` also reads
    "1_000", other scripts' digits, and raises on 5,000 of them.
    """
    given = request.params.get("page", "").strip()
    if not given.isascii() or not given.isdigit():
        return 1
    if len(given) > len(str(MAX_PAGE_NUMBER)):
        return MAX_PAGE_NUMBER
    return min(max(1, int(given)), MAX_PAGE_NUMBER)


def set_validators(request, last_modified, *parts):
    """Let browsers and proxies revalidate: an ETag, 304 when unchanged.

    ``parts`` are everything the page depends on; the day is among them
    wherever a page shows "the last 30 days". ``last_modified`` (the
    page's newest mail) counts among them, but is not sent as
    Last-Modified: deleting an older message, a vote or a tag changes a
    page and not that date, and a cache asking "modified since?" was told
    no, and went on showing the deleted mail.
    """
    response = request.response
    user = request.user
    if user is not None:
        # The page names the reader and carries their form token (and the
        # notices of what they just did); kittypyr.security keeps it private
        # to them, as every answer to a reader with a session.
        # Its feed links carry the reader's feed key, which they may renew.
        reader = request.reader
        parts += (user.address, request.session.get_csrf_token(), *request.session.peek_flash(),
                  reader.feed_generation if reader is not None else 0)
        if request.session.peek_flash():
            return  # a notice shown once: never answered by "not modified"
    digest = hashlib.sha1("\x1f".join(str(p) for p in (last_modified, *parts)).encode("utf-8")).hexdigest()[:20]
    response.etag = digest
    response.conditional_response = True
    request.add_response_callback(_etag_of_what_is_written)


def _etag_of_what_is_written(request, response):
    """The ETag covers the page as written too: what its parts leave out still changes it.

    A list of threads named by their keys kept its ETag when a thread's
    first message was deleted, and a cache asking with it was told "not
    modified" and went on showing that message's subject. The page is
    rendered before "not modified" is answered anyway: hashing it costs a
    millisecond for a megabyte.
    """
    if response.status_int == 200 and response.etag and isinstance(response.app_iter, (list, tuple)):
        response.etag = hashlib.sha1(response.etag.encode("ascii") + response.body).hexdigest()[:20]
