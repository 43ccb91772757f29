"""Atom feeds (RFC 4287) with threading (RFC 4685): new messages, new threads, a thread, a search.

| path | feed |
| --- | --- |
| ``/list/<address>/feed/`` | the list's newest messages (HyperKitty served its RSS here) |
| ``/list/<address>/feed/threads`` | the list's newest threads |
| ``/list/<address>/thread/<key>/t.atom`` | one thread's newest messages |
| ``/search.atom?q=&mlist=`` | a search's newest results |

Every entry's id is its permalink, and a reply names its parent's with
``thr:in-reply-to``; a thread entry links its own feed as ``replies`` with
its count. What a feed shows is what the pages show: addresses written
``jdoe at example.com``, bodies rendered as on the message's page (and cut
sooner), deleted messages gone (they left the catalog), a private list's
feeds closed to anyone who may not read the list (403, as its pages: feed
readers send no cookie). An ETag lets readers poll cheaply: an unchanged
feed answers 304 before any entry is rendered. (No Last-Modified: a
deleted message changes a feed, not the date of its newest entry.)

So that a feed reader can follow a private list, a logged-in reader's
pages name the list's and threads' feeds with their feed key
(``?key=``): the reader's address and a keyed hash of it, good for the
lists that address may read (asked of Mailman as for a login), until the
reader makes a new key at ``/feed-keys`` (``Reader.feed_generation``
counts the renewals).
"""

import base64
import hashlib
import hmac
import re
from urllib.parse import urlencode
from xml.sax.saxutils import escape, quoteattr

from pyramid.authorization import ACLHelper, Authenticated, Everyone
from pyramid.httpexceptions import HTTPMovedPermanently, HTTPNotFound, HTTPSeeOther
from pyramid.security import NO_PERMISSION_REQUIRED
from pyramid.traversal import find_root
from pyramid.view import view_config
from repoze.catalog.query import Eq

from kittypyr.catalog import Narrowed, search
from kittypyr.queries import newest_messages
from kittypyr.readers import reader_for
from kittypyr.rendering import obfuscate_address, render_body
from kittypyr.resources import Archive, MailingList, Message, Thread
from kittypyr.resources.browsing import Month, ThreadAlias
from kittypyr.search import SearchLimits, run_search, visible_list_addresses
from kittypyr.security import SITE_ADMIN, memberships, site_admins, site_secret
from kittypyr.stats import activity_of
from kittypyr.views.presentation import display_name, set_validators, subject_line
from kittypyr.views.threads import shown_part

ATOM_TYPE = "application/atom+xml"
# Entries in a feed: feed readers poll often and keep what they saw.
FEED_SIZE = 30
# Characters of a body an entry carries; the message's page has the rest.
FEED_TEXT_CHARS = 32 * 1024

# What XML 1.0 cannot carry at all (mail holds control characters, and
# undecodable bytes kept as surrogates): replaced, so the feed stays well-formed.
_NOT_XML = re.compile("[^\t\n\r\u0020-\ud7ff\ue000-\ufffd\U00010000-\U0010ffff]")


def _text(value):
    return escape(_NOT_XML.sub("\ufffd", value or ""))


def _attr(value):
    return quoteattr(_NOT_XML.sub("\ufffd", value or ""))


def atom_date(moment):
    """RFC 3339, in UTC."""
    return moment.strftime("%Y-%m-%dT%H:%M:%SZ") if moment.year >= 1000 else "1970-01-01T00:00:00Z"


def _content(message, request):
    text = message.body_text or ""
    shown = shown_part(text, FEED_TEXT_CHARS)
    html = str(render_body(shown))
    if len(shown) < len(text):
        html += f'<p><a href="{escape(request.resource_url(message))}">The rest of this message</a></p>'
    return f'<content type="html">{_text(html)}</content>'


def message_entry(request, message):
    """One message as an Atom entry (a string of XML)."""
    url = request.resource_url(message)
    parts = [
        "<entry>",
        f"<id>{_text(url)}</id>",
        f'<title type="text">{_text(subject_line(message.subject))}</title>',
        f'<link rel="alternate" type="text/html" href={_attr(url)}/>',
        f"<author><name>{_text(display_name(message.sender_name, message.sender_address))}</name></author>",
        f"<published>{atom_date(message.date)}</published>",
        f"<updated>{atom_date(message.date)}</updated>",
    ]
    messages = message.mailing_list.messages
    # The parent's permalink is made from its hash: its record is not read.
    if message.parent and message.parent in messages.data:
        parent_url = request.resource_url(messages, message.parent, "")
        parts.append(f'<thr:in-reply-to ref={_attr(parent_url)} href={_attr(parent_url)} type="text/html"/>')
    parts += [_content(message, request), "</entry>"]
    return "".join(parts)


def thread_entry(request, thread):
    """A thread as an Atom entry: its first message, its replies counted and linked as their feed."""
    url = request.resource_url(thread)
    starter = thread.mailing_list.messages.data.get(thread.starter)
    replies = max(len(thread) - 1, 0)
    parts = [
        "<entry>",
        f"<id>{_text(url)}</id>",
        f'<title type="text">{_text(subject_line(thread.subject))}</title>',
        f'<link rel="alternate" type="text/html" href={_attr(url)}/>',
        (f'<link rel="replies" type="{ATOM_TYPE}" href={_attr(request.resource_url(thread, "t.atom"))} '
         f'thr:count="{replies}" thr:updated="{atom_date(thread.last_date)}"/>'),
        f"<author><name>{_text(_sender_of(starter))}</name></author>",
        f"<published>{atom_date(thread.date_started)}</published>",
        f"<updated>{atom_date(thread.last_date)}</updated>",
        f"<thr:total>{replies}</thr:total>",
    ]
    if starter is not None:
        parts.append(_content(starter, request))
    parts.append("</entry>")
    return "".join(parts)


def _sender_of(message):
    return display_name(message.sender_name, message.sender_address) if message is not None else "(unknown sender)"


def atom_response(request, self_url, title, page_url, entries, updated, subtitle=""):
    """The feed document at ``self_url`` (its id): ``entries`` are (already made) entry strings.

    Its ``self`` link keeps the reader's feed key, its id does not.
    """
    self_link = self_url
    if request.params.get("key"):
        self_link += ("&" if "?" in self_url else "?") + urlencode({"key": request.params["key"]})
    body = "".join([
        '<?xml version="1.0" encoding="utf-8"?>\n',
        '<feed xmlns="http://www.w3.org/2005/Atom" xmlns:thr="http://purl.org/syndication/thread/1.0">',
        f"<id>{_text(self_url)}</id>",
        f'<title type="text">{_text(title)}</title>',
        f'<subtitle type="text">{_text(subtitle)}</subtitle>' if subtitle else "",
        f"<updated>{updated}</updated>",
        f'<link rel="self" type="{ATOM_TYPE}" href={_attr(self_link)}/>',
        f'<link rel="alternate" type="text/html" href={_attr(page_url)}/>',
        # Entries name their own authors; the feed's is the archive.
        "<author><name>kittypyr</name></author>",
        '<generator>kittypyr</generator>',
        *entries,
        "</feed>\n",
    ])
    response = request.response
    response.content_type = ATOM_TYPE
    response.charset = "utf-8"
    response.text = body
    return response


def _not_modified(request, last_modified, *parts):
    """Set the validators; True when the reader's copy is current (the response is then a 304)."""
    set_validators(request, last_modified, *parts)
    response = request.response
    if response.etag and request.if_none_match and response.etag in request.if_none_match:
        response.status_int = 304
        return True
    return False


def _newest_messages(archive, query, limit=FEED_SIZE):
    _, found = search(archive, query, sort_index="date", reverse=True, limit=limit)
    return [message for message in found if isinstance(message, Message)]


def _messages_feed(request, self_url, messages, title, page_url, subtitle, *key):
    updated = max((m.date for m in messages), default=None)
    if _not_modified(request, updated, "atom", *key, *((m.__name__, m._p_serial) for m in messages)):
        return request.response
    return atom_response(request, self_url, title, page_url, [message_entry(request, m) for m in messages],
                         atom_date(updated) if updated else "1970-01-01T00:00:00Z", subtitle)


# The feeds check who may read them themselves (a feed reader has its key,
# not a session) and change nothing: no form token is asked even of a
# POST, which would otherwise answer 400 for a private list's thread that
# exists and 403 for one that does not.
@view_config(context=MailingList, name="feed", permission=NO_PERMISSION_REQUIRED, require_csrf=False)
def list_feed(context, request):
    """``/list/<address>/feed/``: the newest messages; ``.../feed/threads``: the newest threads."""
    refused = _refusal(request, context)
    if refused is not None:
        return refused
    if request.subpath == ("threads",):
        return threads_feed(context, request)
    if request.subpath:
        raise HTTPNotFound()
    messages = newest_messages(context, FEED_SIZE)
    return _messages_feed(request, request.resource_url(context, "feed", ""), messages,
                          f"{context.display_name}: new messages",
                          request.resource_url(context), obfuscate_address(context.description or ""),
                          context.address, context.message_count)


def threads_feed(mailing_list, request):
    threads = mailing_list.threads.data
    newest = [threads[key] for key in activity_of(mailing_list).newest_thread_keys(FEED_SIZE) if key in threads]
    updated = max((t.last_date for t in newest), default=None)
    if _not_modified(request, updated, "atom-threads", mailing_list.address,
                     *((t.__name__, len(t), t.last_date) for t in newest)):
        return request.response
    return atom_response(request, request.resource_url(mailing_list, "feed", "threads"),
                         f"{mailing_list.display_name}: new threads", request.resource_url(mailing_list),
                         [thread_entry(request, t) for t in newest],
                         atom_date(updated) if updated else "1970-01-01T00:00:00Z",
                         obfuscate_address(mailing_list.description or ""))


@view_config(context=Thread, name="t.atom", permission=NO_PERMISSION_REQUIRED, require_csrf=False)
def thread_feed(context, request):
    """``/list/<address>/thread/<key>/t.atom``: the thread's newest messages."""
    mailing_list = context.mailing_list
    refused = _refusal(request, mailing_list)
    if refused is not None:
        return refused
    query = Narrowed(Eq("thread", context.__name__), kind="message", list=mailing_list.address)
    messages = _newest_messages(find_root(context), query)
    return _messages_feed(request, request.resource_url(context, "t.atom"), messages,
                          subject_line(context.subject), request.resource_url(context),
                          f"A thread of {mailing_list.display_name}", context.__name__, len(context))


@view_config(context=ThreadAlias, name="t.atom", permission=NO_PERMISSION_REQUIRED, require_csrf=False)
def thread_alias_feed(context, request):
    """A merged thread's old key leads to the feed of the thread it joined, with its feed key.

    A feed reader has no session: its key is what lets it through, here as
    on the feed itself, and goes along to the new address. A reply's hash
    in the JSON API's tree leads to a thread of the API, which has no feed:
    404, once the reader may see the list (403 otherwise, as for a hash
    never archived).
    """
    target = context.target
    thread = target if isinstance(target, Thread) else target.thread
    refused = _refusal(request, thread.mailing_list)
    if refused is not None:
        return refused
    if thread is not target:
        raise HTTPNotFound()
    location = request.resource_url(context.target, request.view_name)
    if request.query_string:
        location += "?" + request.query_string
    return HTTPMovedPermanently(location=location)


@view_config(context=Archive, name="search.atom")
def search_feed(context, request):
    """``/search.atom?q=&mlist=``: the newest messages a search finds, in the lists the reader may see."""
    text = request.params.get("q", "").strip()
    mlist = request.params.get("mlist") or None
    messages = []
    if text:
        # The search page's own way to the newest matches, which reads what
        # it finds rather than every message of the lists in scope.
        found = run_search(context, text, _search_feed_lists(request), mlist=mlist, sort="date-desc",
                           size=FEED_SIZE, limits=SearchLimits.from_settings(request.registry.settings),
                           snippets=False)
        messages = [hit.message for hit in found.hits]
    query = [("q", text)] + ([("mlist", mlist)] if mlist else [])
    return _messages_feed(request, request.resource_url(context, "search.atom", query=query), messages,
                          f"Search: {text}",
                          request.resource_url(context, "search", query=query), "", "search", text, mlist)

def _search_feed_lists(request):
    """The lists a search's feed reads: those the reader may see, and the private ones its feed key opens."""
    visible = visible_list_addresses(request)
    holder = key_holder(request)
    if holder is None:
        return visible
    principals = _principals_of(request.registry, holder)
    acl = ACLHelper()
    opened = [mailing_list.address for mailing_list in request.root.lists.values()
              if mailing_list.address not in visible and acl.permits(mailing_list, principals, "view")]
    if opened:
        # A private list's mail, for one reader: no shared cache may keep it.
        request.response.cache_control.private = True
    return visible + opened


# --- feed keys: private feeds for feed readers, which send no cookie -----------


def _key_signature(registry, address, generation):
    message = f"kittypyr.feed-key\x1f{address}\x1f{generation}".encode("utf-8")
    return hmac.new(site_secret(registry).encode("utf-8"), message, hashlib.sha256).hexdigest()[:32]


def _generation(request, address):
    reader = reader_for(request.root, address)
    return reader.feed_generation if reader is not None else 0


def feed_key(request, address):
    """The feed key of ``address``: it names the reader and is good until they make a new one."""
    encoded = base64.urlsafe_b64encode(address.encode("utf-8")).decode("ascii").rstrip("=")
    return f"{encoded}.{_key_signature(request.registry, address, _generation(request, address))}"


def key_holder(request):
    """The address whose feed key the request carries (``?key=``); None without one, or for an old one."""
    encoded, _, signature = request.params.get("key", "").partition(".")
    if not encoded or not signature:
        return None
    try:
        address = base64.urlsafe_b64decode(encoded + "=" * (-len(encoded) % 4)).decode("utf-8")
    except (ValueError, UnicodeDecodeError):
        return None
    expected = _key_signature(request.registry, address, _generation(request, address))
    return address if hmac.compare_digest(signature, expected) else None


def _principals_of(registry, address):
    """What ``address`` would be allowed as if it had logged in: its roles come from Mailman."""
    if not memberships.has_account(registry, address):
        return [Everyone]
    found = [Everyone, Authenticated, f"user:{address}"]
    if address in site_admins(registry):
        found.append(SITE_ADMIN)
    found += [f"{role}:{list_id}" for list_id, role in memberships.roles(registry, address)]
    return found


def _refusal(request, mailing_list):
    """None when the reader may read ``mailing_list`` (logged in, or by a feed key); else the 403 answer."""
    if request.has_permission("view", mailing_list):
        return None
    holder = key_holder(request)
    if holder is not None and ACLHelper().permits(mailing_list, _principals_of(request.registry, holder),
                                                  "view"):
        # A private list's mail, for one reader: no shared cache may keep it.
        request.response.cache_control.private = True
        return None
    from kittypyr.views.accounts import forbidden

    return forbidden(request)


def _keyed(request, mailing_list, url):
    """``url`` with the logged-in reader's feed key, when ``mailing_list`` is private."""
    if request.user is None or mailing_list.is_public:
        return url
    return url + ("&" if "?" in url else "?") + urlencode({"key": feed_key(request, request.user.address)})


@view_config(context=Archive, name="feed-keys", request_method="GET", renderer="kittypyr.templates:feed_keys.pt")
def feed_keys_page(context, request):
    """What a feed key is, and the form that makes a new one."""
    if request.user is None:
        from kittypyr.views.accounts import forbidden

        return forbidden(request)
    return {"renewed": request.params.get("renewed") == "1"}


@view_config(context=Archive, name="feed-keys", request_method="POST")
def renew_feed_key(context, request):
    """Make a new feed key: every feed address with the old one stops working."""
    if request.user is None:
        from kittypyr.views.accounts import forbidden

        return forbidden(request)
    reader = reader_for(context, request.user.address, create=True)
    reader.feed_generation += 1
    return HTTPSeeOther(request.resource_url(context, "feed-keys", query={"renewed": "1"}))


def feed_key_links(request):
    """``[(label, url)]``: on a private list's overview, for a reader logged in, where feed keys are renewed."""
    context = getattr(request, "context", None)
    if (request.user is None or not isinstance(context, MailingList) or request.view_name
            or context.is_public or not request.has_permission("view", context)):
        return []
    return [("Your feed addresses carry a key: make a new one", request.resource_url(request.root, "feed-keys"))]



def feed_links(request):
    """``[(title, url)]``: the feeds of the page's resource, for ``<link rel="alternate">`` and its template."""
    context = getattr(request, "context", None)
    if isinstance(context, Archive):
        if request.view_name == "search" and request.params.get("q", "").strip():
            query = [("q", request.params["q"])]
            mlist = request.params.get("mlist") or None
            if mlist:
                query.append(("mlist", mlist))
            url = request.resource_url(context, "search.atom", query=query)
            # A feed reader sends no cookie: a search of private lists carries the reader's key.
            private = next((mailing_list for mailing_list in request.visible_lists if not mailing_list.is_public
                            and (mlist is None or mailing_list.address == mlist.lower())), None)
            return [("Feed of these results (Atom)", url if private is None else _keyed(request, private, url))]
        return []
    if not isinstance(context, (MailingList, Month, Thread, Message)):
        return []
    mailing_list = context if isinstance(context, MailingList) else context.mailing_list
    if request.view_name or not request.has_permission("view", mailing_list):
        return []
    links = []
    thread = context if isinstance(context, Thread) else None
    if isinstance(context, Message):
        thread = mailing_list.threads.data.get(context.thread)
    if thread is not None:
        links.append(("Feed of this thread (Atom)", request.resource_url(thread, "t.atom")))
    links.append(("Feed of new messages (Atom)", request.resource_url(mailing_list, "feed", "")))
    links.append(("Feed of new threads (Atom)", request.resource_url(mailing_list, "feed", "threads")))
    # A feed reader sends no cookie: a private list's feeds carry the reader's key.
    return [(label, _keyed(request, mailing_list, url)) for label, url in links]


def includeme(config):
    config.add_request_method(feed_links, "feed_links", reify=True)
    config.add_request_method(feed_key_links, "feed_key_links", reify=True)
    config.scan(__name__)
