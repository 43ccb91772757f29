"""The HTML part of a message as it was sent, sanitized, on a page that runs no script.

``/list/<address>/message/<hash>/html`` shows the message's first HTML
part (``/html/<n>`` the attachment numbered n) cleaned by nh3 (Ammonia):
no script, style, frame, form or event handler survives, links get
``rel="nofollow noopener noreferrer ugc"``, addresses are obfuscated as on
every page, and remote images are left out until the reader asks
(``?images=show``): loading them would tell the sender who read the mail
and when. The page's Content-Security-Policy allows no script at all and
images only from where the reader allowed them.
"""

import re

import nh3
from pyramid.httpexceptions import HTTPNotFound

from kittypyr.mail import decode_bytes
from kittypyr.rendering import obfuscate_address
from kittypyr.resources import Message
from kittypyr.resources.browsing import is_number

HTML_TYPES = frozenset({"text/html", "application/xhtml+xml"})

# Removed with their content, not only their tags.
DROPPED_WITH_CONTENT = {"script", "style", "iframe", "noscript", "template", "object", "title", "head"}

_BASE = ("default-src 'none'; script-src 'none'; style-src 'self'; base-uri 'none'; form-action 'none'; "
         "frame-ancestors 'none'")
POLICY_IMAGES_BLOCKED = _BASE + "; img-src data:"
POLICY_IMAGES_SHOWN = _BASE + "; img-src data: https: http:"

_META_CHARSET = re.compile(rb"""<meta[^>]{0,200}?charset\s*=\s*["']?\s*([A-Za-z0-9_.:-]+)""", re.I)

# What a browser ignores when it reads a URL's scheme.
_TAB_OR_NEWLINE = re.compile(r"[\t\n\r]")
_C0_OR_SPACE = "".join(chr(code) for code in range(0x21))


def html_parts(message):
    """The message's stored HTML parts (attachments), in order."""
    return [a for a in message.attachments if a.content_type in HTML_TYPES]


def decoded_html(data):
    """The text of an HTML part's bytes, by its own ``<meta charset>`` when it has one."""
    match = _META_CHARSET.search(data[:4096])
    return decode_bytes(data, match.group(1).decode("ascii") if match else None)


def _as_read(url):
    """``url`` as a browser reads its start: without tabs, newlines and leading blanks or controls, in lower case."""
    return _TAB_OR_NEWLINE.sub("", url).lstrip(_C0_OR_SPACE).lower()


def _is_data_url(value):
    """True when a browser reads ``value`` as a data: URL (any case, blanks and controls around it)."""
    return _as_read(value).startswith("data:")


def _is_absolute_web_url(value):
    """True when ``value`` names its scheme, http or https, as a browser reads it."""
    return _as_read(value).startswith(("http://", "https://"))


def sanitized_html(html, images=False):
    """``html`` made safe to show inside a page; remote images kept only when ``images``."""

    def keep(tag, attribute, value):
        if attribute == "cite":
            return None  # a URL no browser follows: nothing to check it for
        if attribute in ("href", "src") and not (_is_absolute_web_url(value) or _is_data_url(value)
                                                 or (attribute == "href" and value.startswith("#"))):
            # Relative to the archive's page, it would name the archive's own
            # pages (an image shown is a request sent with the reader's
            # cookies); "//host/" another host at the page's scheme.
            return None
        if attribute in ("href", "src") and _is_data_url(value) and (tag, attribute) != ("img", "src"):
            # Inline images need data:, but a data: link opens a page the
            # sender wrote, script and all.
            return None
        if tag == "img" and attribute == "src" and not images and not _is_data_url(value):
            return None
        if tag == "a" and attribute == "href" and value.lower().startswith("mailto:"):
            return None  # an address handed to harvesters
        return value

    cleaned = nh3.clean(
        html,
        clean_content_tags=DROPPED_WITH_CONTENT,
        attribute_filter=keep,
        link_rel="nofollow noopener noreferrer ugc",
        url_schemes={"http", "https", "data"},
        strip_comments=True,
    )
    # Obfuscating adds only " at ": no markup, so the result stays sanitized.
    return obfuscate_address(cleaned)


def html_page(context, request):
    parts = html_parts(context)
    subpath = request.subpath
    if subpath:
        if len(subpath) != 1 or not is_number(subpath[0]):
            raise HTTPNotFound()
        parts = [p for p in parts if p.index == int(subpath[0])]
    if not parts:
        raise HTTPNotFound()
    part = parts[0]
    images = request.params.get("images") == "show"
    headers = request.response.headers
    headers["Content-Security-Policy"] = POLICY_IMAGES_SHOWN if images else POLICY_IMAGES_BLOCKED
    # A remote image shown must not learn which archive page it is on.
    headers["Referrer-Policy"] = "no-referrer"
    here = request.resource_url(context, "html", *subpath)
    return {
        "message": context,
        "mailing_list": context.mailing_list,
        "html": sanitized_html(decoded_html(part.data()), images=images),
        "images": images,
        "show_images_url": here + "?images=show",
        "hide_images_url": here,
    }


def includeme(config):
    config.add_view(html_page, context=Message, name="html", renderer="kittypyr.templates:htmlview.pt")
