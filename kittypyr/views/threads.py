"""A thread on one page, a single message, its raw bytes and attachments."""

import codecs
import collections
import re
import threading
from urllib.parse import quote

from pyramid.httpexceptions import HTTPMovedPermanently, HTTPNotFound
from pyramid.response import Response
from pyramid.view import view_config, view_defaults

from kittypyr.htmlview import html_parts
from kittypyr.mail import decode_bytes, is_utf8, known_charset
from kittypyr.moderation import split_refusal
from kittypyr.originals import recipients
from kittypyr.outline import neighbourhood, position_in, previous_and_next
from kittypyr.queries import neighbour_threads
from kittypyr.rendering import patch_html, quote_html, render_body
from kittypyr.resources import Message, Thread
from kittypyr.resources.browsing import MessageAlias, ThreadAlias, is_number
from kittypyr.views.community import annotate_messages, entries_fingerprint, thread_community
from kittypyr.views.presentation import (
    Page,
    avatar,
    display_name,
    file_label,
    format_date,
    human_size,
    iso_date,
    page_number,
    set_validators,
)

# Deeper replies are drawn at this depth, so long chains stay readable.
MAX_INDENT = 8

# A thread page shows at most this many messages; a longer thread is read
# page by page. An announcement answered thousands of times was one page of
# megabytes, every body rendered again for every reader of it.
THREAD_PAGE_SIZE = 100


def thread_page_query(number, by_date=False, expanded=False):
    """The query of a thread's page ``number`` (from 1) in its reading order and folding."""
    query = {"view": "flat"} if by_date else {}
    if expanded:
        query["expand"] = "all"
    if number > 1:
        query["page"] = number
    return query


def thread_page_at(request, thread, index, name, by_date=False, expanded=False):
    """The URL of ``thread``'s page showing message ``name``, the ``index``-th (from 0) of its reading order."""
    query = thread_page_query(index // THREAD_PAGE_SIZE + 1, by_date, expanded)
    return request.resource_url(thread, query=query, anchor=f"m-{name}")


def message_in_thread_url(request, thread, name, order=None, by_date=False, expanded=False):
    """The URL of ``thread``'s page that shows message ``name``, at its place.

    ``order``: the thread's ``reading_order(by_date)``, when known already.
    """
    index = 0
    if len(thread) > THREAD_PAGE_SIZE:
        if order is None:
            order = thread.reading_order(by_date)
        index = next((i for i, (other, _, _) in enumerate(order) if other == name), 0)
    return thread_page_at(request, thread, index, name, by_date, expanded)

INLINE_TYPES = frozenset({"image/png", "image/jpeg", "image/gif", "image/webp"})
# Types no page can run or apply, served as the sender gave them; any other
# attachment is saved as application/octet-stream (see ``attachment``).
INERT_TYPES = INLINE_TYPES | frozenset({"text/plain", "application/pdf", "application/zip", "application/gzip",
                                        "application/x-tar", "application/octet-stream"})

# Attachments readers want to read in the browser (patches are often sent
# as application/octet-stream): offered as text/plain, never as what they say.
TEXT_TYPES = frozenset({"application/x-patch", "application/x-diff", "application/json", "application/xml",
                        "application/x-sh", "application/x-shellscript", "application/javascript",
                        "message/rfc822"})
TEXT_EXTENSIONS = (".patch", ".diff", ".txt", ".log", ".c", ".h", ".py", ".sh", ".conf", ".cfg", ".ini",
                   ".config", ".dts", ".dtsi", ".S", ".mk", ".md", ".rst", ".csv", ".json", ".xml", ".yaml",
                   ".yml")

# Larger ones are downloaded, not read in a tab.
TEXT_VIEW_MAX = 4 * 1024 * 1024


def readable_as_text(attachment):
    """Whether the page offers to show ``attachment`` as plain text."""
    if attachment.size > TEXT_VIEW_MAX:
        return False
    kind = attachment.content_type
    return (kind.startswith("text/") or kind in TEXT_TYPES
            or (attachment.filename or "").endswith(TEXT_EXTENSIONS))

# A page shows at most this much of a body (characters of decoded text) and
# links to the raw message for the rest: a 65 MB log pasted into a mail
# would otherwise be 65 MB of HTML, rendered and sent for every reader.
BODY_SHOWN_CHARS = 256 * 1024


def shown_part(text, limit=BODY_SHOWN_CHARS):
    """``text``, or its beginning up to ``limit`` characters, cut after a line when one ends near there."""
    if len(text) <= limit:
        return text
    line_end = text.rfind("\n", limit - 4096, limit)
    return text[: line_end + 1] if line_end != -1 else text[:limit]


class RenderedBodies:
    """A bounded cache of rendered bodies, keyed by the stored revision.

    A thread page renders every body in it; keeping the HTML of recently
    shown messages makes popular threads cheap. The key includes the
    object's serial, so an edited message is never served stale. Bounded
    by count and by the characters kept: a body's HTML can be some 35
    times its text (a line of text and a line of quote in turn), so 5,000
    bodies of 256 KB could have kept tens of gigabytes in every process.
    A body whose HTML alone would take a sixteenth of it is not kept.
    """

    def __init__(self, capacity=5000, max_chars=32 * 1024 * 1024):
        self.capacity = capacity
        self.max_chars = max_chars
        self.chars = 0
        self.entries = collections.OrderedDict()
        self.lock = threading.Lock()

    def __call__(self, message, **options):
        """The HTML of ``message``'s body; ``options`` are ``render_body``'s."""
        key = ((message._p_oid, message._p_serial, tuple(sorted(options.items())))
               if message._p_oid is not None else None)
        if key is not None:
            with self.lock:
                html = self.entries.get(key)
                if html is not None:
                    self.entries.move_to_end(key)
                    return html
        html = render_body(shown_part(message.body_text), **options)
        if key is not None and len(html) <= self.max_chars // 16:
            with self.lock:
                if key not in self.entries:
                    self.entries[key] = html
                    self.chars += len(html)
                while self.entries and (len(self.entries) > self.capacity or self.chars > self.max_chars):
                    self.chars -= len(self.entries.popitem(last=False)[1])
        return html


rendered_body = RenderedBodies()


def message_entry(message, depth=0, **options):
    """What a page shows of one message; ``options`` as for ``render_body``."""
    text = message.body_text or ""
    shown = len(shown_part(text))
    return {
        "message": message,
        "depth": min(depth, MAX_INDENT),
        "true_depth": depth,
        "sender": display_name(message.sender_name, message.sender_address),
        "avatar": avatar(message.sender_name, message.sender_address),
        "date": format_date(message.date),
        "iso_date": iso_date(message.date),
        "body": rendered_body(message, **options),
        # The sizes in characters of what is shown and of the whole, when cut.
        "cut": {"shown": human_size(shown), "total": human_size(len(text))} if shown < len(text) else None,
        "attachments": [
            {"attachment": a, "name": file_label(a.filename), "size": human_size(a.size),
             "as_text": readable_as_text(a)}
            for a in message.attachments
        ],
    }


def _moderating(request, context, entries):
    """Whether the reader moderates ``context``; for a moderator, each entry says whether its thread can be
    split there (never at a thread's only first message: the link would lead to a refusal)."""
    moderator = bool(request.has_permission("moderate", context))
    if moderator:
        for entry in entries:
            entry["splittable"] = split_refusal(entry["message"]) is None
    return moderator


@view_defaults(context=Thread)
class ThreadViews:
    def __init__(self, context, request):
        self.context = context
        self.request = request

    @view_config(renderer="kittypyr.templates:thread.pt")
    def page(self):
        thread = self.context
        flat = self.request.params.get("view") == "flat"
        # Diffs are folded, so that a patch series reads as its commit
        # messages; "expand all" is a link, so it works without a script.
        # Folded, a diff is only a link (which the script follows in
        # place): a long series is then a page of commit messages.
        expanded = self.request.params.get("expand") == "all"
        fold = "open" if expanded else "closed"
        path = self.request.resource_path

        def entry(message, depth=0):
            return message_entry(message, depth, fold_patches=fold,
                                 diff_url=None if expanded else path(message))

        # Only hashes and dates are ordered; the page loads the messages it shows.
        order = thread.reading_order(by_date=flat)
        page = Page(page_number(self.request), len(order), THREAD_PAGE_SIZE)
        messages = thread.mailing_list.messages
        entries = [entry(messages[name], depth) for name, depth, _ in order[page.start:page.start + page.size]]
        shown = {item["message"].__name__ for item in entries}

        def link(name):
            if name in shown:
                return f"#m-{name}"
            return message_in_thread_url(self.request, thread, name, order, flat, expanded)

        older, newer = neighbour_threads(thread)
        community = thread_community(self.request, thread, entries, order, link)
        set_validators(self.request, thread.last_date, thread.__name__, len(thread),
                       int(thread.last_date.timestamp()), "flat" if flat else "tree", fold, page.number,
                       community["fingerprint"])
        return {
            "thread": thread,
            "mailing_list": thread.mailing_list,
            "entries": entries,
            "page": page,
            "page_url": lambda number: self.request.resource_url(
                thread, query=thread_page_query(number, flat, expanded)),
            "flat": flat,
            "expand_url": self.request.resource_url(thread, query=thread_page_query(page.number, flat, True)),
            "collapse_url": self.request.resource_url(thread, query=thread_page_query(page.number, flat)),
            "older": older,
            "newer": newer,
            "started": format_date(thread.date_started),
            "moderator": _moderating(self.request, thread, entries),
            "community": community,
        }


@view_config(context=ThreadAlias)
def thread_alias(context, request):
    """An absorbed thread's old URL leads to the thread it joined."""
    return HTTPMovedPermanently(location=request.resource_url(context.target, *request.subpath))


@view_config(context=MessageAlias)
def message_alias(context, request):
    """The permalink Mailman wrote for a message whose Message-ID header it read otherwise: the message."""
    try:
        message = context.__parent__[context.target]
    except KeyError:
        raise HTTPNotFound() from None
    return HTTPMovedPermanently(location=request.resource_url(message))


@view_defaults(context=Message)
class MessageViews:
    def __init__(self, context, request):
        self.context = context
        self.request = request

    @view_config(renderer="kittypyr.templates:message.pt")
    def page(self):
        message = self.context
        mailing_list = message.mailing_list
        messages = mailing_list.messages
        thread = mailing_list.threads.data.get(message.thread)
        # Only hashes are walked; the page loads just the messages it names.
        walked = list(thread.walk()) if thread is not None else []
        index = position_in(walked, message.__name__)
        outline, previous, following = [], None, None
        if index is not None:
            previous, following = (messages.get(name) if name else None
                                   for name in previous_and_next(walked, index))
            for kind, name, depth in neighbourhood(walked, index):
                if kind == "gap":
                    outline.append({"gap": name})
                    continue
                other = messages[name]
                outline.append({
                    "message": other,
                    "depth": min(depth, MAX_INDENT),
                    "true_depth": depth,
                    "sender": display_name(other.sender_name, other.sender_address),
                    "date": format_date(other.date),
                    "current": other is message,
                })
        answers = messages.get(message.parent) if message.parent else None
        older, newer = neighbour_threads(thread) if thread is not None else (None, None)
        entry = annotate_messages(self.request, [message_entry(message, patch_anchors=True)])[0]
        set_validators(self.request, message.date, message.__name__,
                       thread.__name__ if thread is not None else "", len(walked),
                       previous.__name__ if previous is not None else "",
                       following.__name__ if following is not None else "",
                       older.__name__ if older is not None else "", newer.__name__ if newer is not None else "",
                       entries_fingerprint([entry]))
        started = thread.date_started if thread is not None and thread.date_started else message.date
        return {
            "mailing_list": mailing_list,
            "thread": thread,
            "thread_size": len(walked),
            "whole_thread_url": self._whole_thread_url(thread, index, len(walked)),
            "month": mailing_list[str(started.year)][str(started.month)],
            "entry": entry,
            "recipients": recipients(message),
            "html_url": html_url(self.request, message),
            "answers": answers,
            "answers_sender": display_name(answers.sender_name, answers.sender_address) if answers else "",
            "previous": previous,
            "next": following,
            "older": older,
            "newer": newer,
            "outline": outline,
            "moderator": _moderating(self.request, message, [entry]),
        }

    def _whole_thread_url(self, thread, index, size):
        """The thread's page that shows this message (its ``index`` in the thread's reading order)."""
        if thread is None:
            return None
        if index is None or size <= THREAD_PAGE_SIZE:
            return self.request.resource_url(thread)
        return thread_page_at(self.request, thread, index, self.context.__name__)

    @view_config(name="diff")
    def diff(self):
        """One diff of the message (``diff/N``, from 1) as an HTML fragment, for a folded diff to load."""
        return self._fragment(patch_html)

    @view_config(name="quote")
    def quote(self):
        """One quote of the message (``quote/N``, from 1) as an HTML fragment, for a folded quote to load."""
        return self._fragment(quote_html)

    def _fragment(self, part_html):
        subpath = self.request.subpath
        if len(subpath) != 1 or not is_number(subpath[0]) or len(subpath[0]) > 4:
            raise HTTPNotFound()
        html = part_html(shown_part(self.context.body_text or ""), int(subpath[0]))
        if html is None:
            raise HTTPNotFound()
        set_validators(self.request, self.context.date, self.context.__name__, self.context._p_serial, subpath[0])
        response = self.request.response
        response.content_type = "text/html"
        response.charset = "utf-8"
        response.text = str(html)
        return response

    @view_config(name="raw")
    def raw(self):
        data = self.context.original_bytes()
        response = Response(body=data, content_type="text/plain")
        # The bytes are the mail as received, in whatever charset it came;
        # browsers must not guess a type from them.
        response.charset = _raw_charset(data)
        response.headers["Content-Disposition"] = "inline"
        return response

    @view_config(name="attachment")
    def attachment(self):
        subpath = self.request.subpath
        if not subpath or not is_number(subpath[0]):
            raise HTTPNotFound()
        try:
            attachment = self.context.attachment(int(subpath[0]))
        except KeyError:
            raise HTTPNotFound() from None
        if len(subpath) == 1:
            return HTTPMovedPermanently(location=attachment_url(self.request, attachment))
        if self.request.params.get("view") == "text" and readable_as_text(attachment):
            # Text in whatever charset it came, sent as UTF-8 plain text:
            # with nosniff, a browser never runs an HTML file shown so.
            response = Response(body=decode_bytes(attachment.data(), attachment.charset or None).encode("utf-8"),
                                content_type="text/plain", charset="utf-8")
            response.content_disposition = "inline"
            return response
        # Served from the site's own address, which its content security
        # policy trusts for scripts and styles: a type of the sender's
        # choosing (JavaScript, CSS) would let any page of the site load the
        # file as its own. Saved, it keeps its name.
        content_type = attachment.content_type if attachment.content_type in INERT_TYPES else "application/octet-stream"
        disposition = "inline" if content_type in INLINE_TYPES else "attachment"
        data = attachment.data()
        response = Response(body=data, content_type=content_type)
        if content_type.startswith("text/"):
            response.charset = _download_charset(attachment, data)
        response.content_disposition = f"{disposition}; filename*=UTF-8''{quote(attachment.filename, safe='')}"
        return response


# A Content-Type field of the mail or of one of its parts, folded lines and all.
_CONTENT_TYPE_FIELD = re.compile(rb"^content-type:[^\n]*(?:\n[ \t][^\n]*)*", re.IGNORECASE | re.MULTILINE)
_CHARSET_PARAMETER = re.compile(rb'charset\s*=\s*"?([A-Za-z0-9_.:-]{1,40})', re.IGNORECASE)


def _raw_charset(data):
    """What to label a mail's original bytes with: UTF-8 when they are that, else the first other charset
    its Content-Type fields declare (a mail's text in its body is no declaration), else none."""
    if is_utf8(data):
        return "utf-8"
    for field in _CONTENT_TYPE_FIELD.finditer(data, 0, 65536):
        match = _CHARSET_PARAMETER.search(field.group())
        label = known_charset(match.group(1).decode("ascii")) if match else None
        # A part in UTF-16 or UTF-32 is no label for the whole: its headers
        # and every other part would read as garbage.
        if label is not None and not codecs.lookup(label).name.startswith(("utf-8", "utf-16", "utf-32")):
            return label
    return None


def _download_charset(attachment, data):
    """The charset a text file is labelled with as it came: the one it declared, else UTF-8 if it is that.

    Otherwise none, for the browser to tell, rather than a wrong one.
    """
    declared = known_charset(attachment.charset)
    if declared is not None:
        return declared
    return "utf-8" if is_utf8(data) else None


def html_url(request, message):
    """The sanitized view of the message's HTML part, when it has one."""
    return request.resource_url(message, "html") if html_parts(message) else None


def attachment_url(request, attachment):
    message = attachment.__parent__
    # The URL's last segment only names the file for the reader; the view
    # ignores it, so it carries the name as pages show it.
    return request.resource_url(message, "attachment", str(attachment.index), file_label(attachment.filename))
