"""The archiver API that Mailman core's ``mailman-hyperkitty`` plugin calls."""

import logging
import re

from pyramid.httpexceptions import HTTPBadRequest, HTTPForbidden, HTTPUnauthorized
from pyramid.view import view_config

from kittypyr.archiving import ensure_mailing_list, store_parsed
from kittypyr.mail import UnparseableMessage, parse_message
from kittypyr.mailman import (
    absolute_url,
    apply_list_details,
    client_is_allowed,
    fetch_list_details,
    key_is_valid,
    list_url,
    message_url,
)
from kittypyr.resources.api import ApiMailman

log = logging.getLogger(__name__)

_MESSAGE_ID = re.compile(rb"^message-id:\s*(<[^>\r\n]*>|\S+)", re.IGNORECASE | re.MULTILINE)


def _check_caller(request):
    if not client_is_allowed(request):
        raise HTTPForbidden(json_body={"error": "this address may not use the archiver API"})
    if not key_is_valid(request):
        raise HTTPUnauthorized(json_body={"error": "wrong or missing archiver key"})


@view_config(context=ApiMailman, name="archive", request_method="POST", renderer="json",
             require_csrf=False)  # authenticated by its key, not a session
def archive(context, request):
    """Archive one message; answer its permalink."""
    _check_caller(request)
    list_address = request.POST.get("mlist", "").strip().lower()
    upload = request.POST.get("message")
    if "@" not in list_address or upload is None or not hasattr(upload, "file"):
        # A request Mailman never sends: no message is at stake.
        raise HTTPBadRequest(json_body={"error": "expected the fields mlist and message"})
    raw = upload.file.read()
    known = list_address in context.archive.lists
    mailing_list = ensure_mailing_list(context.archive, list_address)
    if not known:
        apply_list_details(mailing_list, fetch_list_details(request.registry, list_address))
    if mailing_list.archive_policy == "never":
        return {"url": list_url(request, list_address)}
    try:
        result = store_parsed(mailing_list, parse_message(raw))
    except UnparseableMessage as exc:
        held = context.archive.quarantine.hold(list_address, raw, str(exc))
        log.warning("quarantined mail %s for %s: %s", held.__name__, list_address, exc)
        found = _MESSAGE_ID.search(raw.split(b"\n\n", 1)[0])
        url = (message_url(request, list_address, found.group(1).decode("ascii", "replace"))
               if found else list_url(request, list_address))
        return {"url": url, "quarantined": held.__name__}
    if result.gone is not None:
        # Deleted by the list's administrators: it stays deleted. Answered
        # as a duplicate would be, so Mailman does not send it again.
        return {"url": f"{list_url(request, list_address)}message/{result.gone}/"}
    if result.message is None:  # it asked not to be archived
        return {"url": list_url(request, list_address)}
    return {"url": absolute_url(request, result.message)}


@view_config(context=ApiMailman, name="urls", request_method="GET", renderer="json")
def urls(context, request):
    """The list's URL, or with ``msgid`` the permalink the message has (or will have)."""
    _check_caller(request)
    list_address = request.GET.get("mlist", "").strip().lower()
    if "@" not in list_address:
        raise HTTPBadRequest(json_body={"error": "expected mlist"})
    message_id = request.GET.get("msgid")
    if message_id:
        return {"url": message_url(request, list_address, message_id)}
    return {"url": list_url(request, list_address)}


def _storage_trouble(exc, request):
    log.error("archiver API failed, Mailman will retry: %r", exc, exc_info=exc)
    request.response.status = 503
    return {"error": "the archive cannot store mail right now; send it again later"}


# An error answer makes Mailman keep the message in its spool and send it
# again. Conflicts are retried first (pyramid_retry): only the last attempt,
# or an error no retry can help, reaches these views.
@view_config(context=Exception, path_info=r"^/api/mailman/", renderer="json", retryable_error=False)
def archiver_error(exc, request):
    return _storage_trouble(exc, request)


@view_config(context=Exception, path_info=r"^/api/mailman/", renderer="json", last_retry_attempt=True)
def archiver_error_after_retries(exc, request):
    return _storage_trouble(exc, request)
