"""Mailman 2's URLs, answered with 301s to where the same things are now.

Pipermail served a public list's archive at ``/pipermail/<list>/`` and a
private one through the ``private`` script, ``/mailman/private/<list>/``
(``/cgi-bin/mailman/private/<list>/`` where Mailman's scripts were in
cgi-bin; some sites also exposed ``/pipermail/private/<list>/``); list
pages were ``/mailman/listinfo/<list>``. ``<list>`` is Mailman 2's short
name: the local part of the list's address here.

A redirect says no more than its target would: the message's URL names its
hash, never its subject. A reader who may not read a private list gets the
403 of the list's own pages for every old URL of it, mapped or not: where
one number or file redirected and another did not, walking them would count
the list's messages and name each one's hash. The one page that shows
something of its own, the 404 of a message that was not found, shows its
subject to readers of the list only.
"""

import re
from datetime import timedelta

from pyramid.httpexceptions import HTTPForbidden, HTTPMovedPermanently, HTTPNotFound
from pyramid.renderers import render_to_response
from pyramid.view import view_config

from kittypyr.exports import SUFFIX, month_export_url, range_export_url
from kittypyr.pipermail.mapping import pipermail_archive, subject_key
from kittypyr.mailboxes import pipermail_volume
from kittypyr.resources import Archive, MailingList
from kittypyr.resources.browsing import Month, Year
from kittypyr.views.accounts import refusal_page
from kittypyr.views.presentation import file_label
from kittypyr.views.threads import attachment_url

# Pipermail numbers its pages with six digits or more (ASCII ones: "٠٠٠٠٠١"
# would be a second address of page 1); no archive reaches twelve.
_MESSAGE_PAGE = re.compile(r"^([0-9]{6,12})\.html$")
_VOLUME_TEXT = re.compile(r"^([\w-]+)\.txt(?:\.gz)?$")
_VOLUME_INDEXES = ("", "date.html", "thread.html", "subject.html", "author.html", "index.html")
WEEK = timedelta(days=7)
# A list prefix such as "[Dev]" says nothing a search of the list needs.
_LIST_PREFIX = re.compile(r"^\s*\[[^\]]*\]\s*")


def lists_named(archive, name):
    """The archived lists whose address's local part is ``name`` (any case)."""
    local = name.lower() + "@"
    # Addresses sort by local part first: the lists of one name are one run of keys.
    return [archive.lists.data[address] for address in archive.lists.keys(min=local, max=local + "\uffff")
            if address.startswith(local)]


def list_for(request, name):
    """The list a Mailman 2 short name stands for, or the page to answer instead.

    One list of that name is the one; of several (one name in several
    domains), the one in ``kittypyr.pipermail_domain``, else the one the
    reader may see, else a page listing those they may see. Raises 404 when
    there is none; the one list answers 403 to a reader who may not view it.
    Lists the reader may not see count only when no other is left: a page
    listing one list, or none, would tell that a private one has the name.
    """
    found = lists_named(request.root, name)
    if not found:
        raise HTTPNotFound()
    if len(found) == 1:
        return _list_or_refusal(request, found[0])
    domain = request.registry.settings.get("kittypyr.pipermail_domain", "").strip().lower()
    for mailing_list in found:
        if domain and mailing_list.address.endswith("@" + domain):
            return _list_or_refusal(request, mailing_list)
    visible = [m for m in found if m.is_public or request.has_permission("view", m)]
    if not visible:
        raise HTTPForbidden()
    if len(visible) == 1:
        return visible[0]
    response = render_to_response("kittypyr.templates:pipermail_lists.pt",
                                  {"name": name, "lists": visible}, request=request)
    # 300 Multiple Choices: the name is the same list's in several domains.
    response.status = 300
    return response


def _list_or_refusal(request, mailing_list):
    """``mailing_list``, or the 403 its own pages answer to a reader who may not view it."""
    if request.has_permission("view", mailing_list):
        return mailing_list
    return refusal_page(request, mailing_list)


def _moved(url):
    return HTTPMovedPermanently(location=url)


def _message_url(request, mailing_list, message_hash):
    # Through the container, so that a deleted message answers 410 there.
    return request.resource_url(mailing_list.messages[message_hash])


def _to_message(request, mailing_list, number, message_hash):
    try:
        return _moved(_message_url(request, mailing_list, message_hash))
    except KeyError:  # neither archived nor deleted: a mapping older than the archive
        return missing_message(request, mailing_list, number)


def _month(mailing_list, year, month):
    return Month(Year(mailing_list, year), month)


def search_words(subject):
    """What to search for to find a message by its subject: without list prefix and ``Re:``."""
    return subject_key(_LIST_PREFIX.sub("", subject or "")) if subject else ""


def missing_message(request, mailing_list, number):
    """404 for a page number no message stands for, offering a search for its subject."""
    record = pipermail_archive(mailing_list)
    subject = record.unmapped.get(number, "") if record is not None else ""
    words = search_words(subject)
    search_url = request.resource_url(request.root, "search", query={"q": words, "mlist": mailing_list.address})
    response = render_to_response(
        "kittypyr.templates:pipermail_missing.pt",
        {"mailing_list": mailing_list, "number": number, "subject": subject, "words": words,
         "search_url": search_url if words else None},
        request=request,
    )
    response.status = 404
    return response


def archive_redirect(request, mailing_list, rest):
    """The answer to ``/pipermail/<list>/<rest...>``."""
    rest = [part for part in rest if part]
    if not rest or rest == ["index.html"]:
        return _moved(request.resource_url(mailing_list))
    record = pipermail_archive(mailing_list)
    first = rest[0]
    if first == "attachments" and len(rest) >= 4:
        return _attachment(request, mailing_list, record, "/".join(rest[1:]))
    text = _VOLUME_TEXT.match(first)
    if text is not None and len(rest) == 1:
        return _volume_export(request, mailing_list, text.group(1))
    if len(rest) == 2:
        page = _MESSAGE_PAGE.match(rest[1])
        if page is not None:
            number = int(page.group(1))
            message_hash = record.numbers.get(number) if record is not None else None
            if message_hash is None:
                return missing_message(request, mailing_list, number)
            return _to_message(request, mailing_list, number, message_hash)
    if len(rest) <= 2 and (len(rest) == 1 or rest[1] in _VOLUME_INDEXES):
        span = pipermail_volume(first)
        if span is not None:
            return _moved(request.resource_url(_volume_page(mailing_list, *span)))
    raise HTTPNotFound()


def _one_month(first, after):
    last = after - timedelta(days=1)
    return (first.year, first.month) == (last.year, last.month)


def _volume_page(mailing_list, first, after):
    """The page of a volume: the month a month, week or day starts in; the year of a quarter or a year."""
    if after - first <= WEEK or _one_month(first, after):
        return _month(mailing_list, first.year, first.month)
    return Year(mailing_list, first.year)


def _volume_export(request, mailing_list, volume):
    """``<volume>.txt`` and ``.txt.gz``: the export of the volume's days (a month's as the month page links it)."""
    span = pipermail_volume(volume)
    if span is None:
        raise HTTPNotFound()
    first, after = span
    if after - first > WEEK and _one_month(first, after):
        return _moved(month_export_url(request, _month(mailing_list, first.year, first.month)))
    return _moved(range_export_url(request, mailing_list, volume, first, after))


def _attachment(request, mailing_list, record, path):
    """A scrubbed attachment's link: the attachment where the archive holds it, else its message.

    A file the import kept (``PipermailArchive.files``) is named by its
    message's hash and its index alone, so a deleted message's answers 410
    at the target, as any attachment's would.
    """
    place = record.files.get(path) if record is not None and record.files is not None else None
    if place is not None:
        message_hash, index = place
        try:
            message = mailing_list.messages[message_hash]
        except KeyError:  # neither archived nor deleted: a record older than the archive
            raise HTTPNotFound() from None
        name = file_label(path.rsplit("/", 1)[-1])
        return _moved(request.resource_url(message, "attachment", str(index), name))
    number = record.attachments.get(path) if record is not None else None
    message_hash = record.numbers.get(number) if number is not None else None
    if message_hash is None:
        raise HTTPNotFound()
    message = mailing_list.messages.data.get(message_hash)
    if message is not None:
        name = path.rsplit("/", 1)[-1]
        for attachment in message.attachments:
            if attachment.filename == name:
                return _moved(attachment_url(request, attachment))
    return _to_message(request, mailing_list, number, message_hash)


def _whole_list_export(request, mailing_list):
    name = f"{mailing_list.address.split('@')[0]}{SUFFIX}"
    return _moved(request.resource_url(mailing_list, "export", name))


def _archive_or_mbox(request, rest):
    """``<list>/...`` below /pipermail/ or /mailman/private/; ``<list>.mbox/<list>.mbox`` is the whole list."""
    if not rest:
        return _moved(request.resource_url(request.root))
    name = rest[0]
    if name.endswith(".mbox"):
        mailing_list = list_for(request, name[: -len(".mbox")])
        if not isinstance(mailing_list, MailingList):
            return mailing_list  # the page of candidates
        if rest[1:] != [name]:
            raise HTTPNotFound()
        return _whole_list_export(request, mailing_list)
    mailing_list = list_for(request, name)
    if not isinstance(mailing_list, MailingList):
        return mailing_list
    return archive_redirect(request, mailing_list, rest[1:])


@view_config(context=Archive, name="pipermail")
def pipermail(context, request):
    """``/pipermail/<list>/...`` and ``/pipermail/private/<list>/...``."""
    rest = list(request.subpath)
    if len(rest) >= 2 and rest[0] == "private":
        rest = rest[1:]
    return _archive_or_mbox(request, rest)


def _mailman_script(request, rest):
    """``/mailman/<script>/<list>...``: the archive (``private``) or the list's page (``listinfo``)."""
    if rest and rest[0] == "private":
        return _archive_or_mbox(request, rest[1:])
    if rest and rest[0] == "listinfo":
        if len(rest) == 1:
            return _moved(request.resource_url(request.root))
        mailing_list = list_for(request, rest[1])
        if not isinstance(mailing_list, MailingList):
            return mailing_list
        return _moved(request.resource_url(mailing_list))
    raise HTTPNotFound()


@view_config(context=Archive, name="mailman")
def mailman(context, request):
    return _mailman_script(request, list(request.subpath))


@view_config(context=Archive, name="cgi-bin")
def cgi_bin(context, request):
    """Mailman 2 installed with its scripts in cgi-bin: ``/cgi-bin/mailman/...``."""
    rest = list(request.subpath)
    if not rest or rest[0] != "mailman":
        raise HTTPNotFound()
    return _mailman_script(request, rest[1:])
