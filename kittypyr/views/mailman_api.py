"""The archiver API that Mailman core's ``mailman-hyperkitty`` plugin calls."""

import logging
import re

from pyramid.httpexceptions import HTTPBadRequest, HTTPForbidden, HTTPServiceUnavailable, HTTPUnauthorized
from pyramid.view import view_config
from ZODB.POSException import ConflictError

from kittypyr import storage_unwritable
from kittypyr.addresses import normalize_list_address
from kittypyr.archived_check import note_stored
from kittypyr.archiving import store_parsed
from kittypyr.mail import UnparseableMessage, parse_message, permalink_id_of_stripped
from kittypyr.mailman import (
    NO_SUCH_LIST,
    absolute_url,
    apply_list_details,
    ask_list_details,
    client_is_allowed,
    create_list_with_policy,
    key_is_valid,
    list_url,
    mailman_is_configured,
    message_url,
)
from kittypyr.resources.api import ApiMailman
from kittypyr.retries import STORAGE_RETRY_AFTER

log = logging.getLogger(__name__)

_MESSAGE_ID = re.compile(rb"^message-id:\s*(<[^>\r\n]*>|\S+)", re.IGNORECASE | re.MULTILINE)
_HEADER_END = re.compile(rb"\r?\n\r?\n")


def _check_caller(request):
    if not client_is_allowed(request):
        raise HTTPForbidden(json_body={"error": "this address may not use the archiver API"})
    if not key_is_valid(request):
        raise HTTPUnauthorized(json_body={"error": "wrong or missing archiver key"})


@view_config(context=ApiMailman, name="archive", request_method="POST", renderer="json",
             require_csrf=False)  # authenticated by its key, not a session
def archive(context, request):
    """Archive one message; answer its permalink.

    "200" means stored: anything else makes Mailman keep the message and
    send it again, so every answer here is decided before it is given.
    """
    _check_caller(request)
    list_address = normalize_list_address(_form(request).get("mlist", ""))
    if list_address is None:
        # Never a new list, and not a 5xx that Mailman would resend forever.
        raise HTTPBadRequest(json_body={"error": "mlist is not a list's posting address"})
    raw = _uploaded_bytes(request)
    mailing_list = context.archive.lists.get(list_address)
    if mailing_list is None:
        mailing_list, details = _new_list(context.archive, request.registry, list_address)
    elif not mailing_list.policy_known:
        details = ask_list_details(request.registry, list_address)
        if isinstance(details, dict):
            apply_list_details(mailing_list, details)
    if mailing_list.archives_no_more and not _archives_again(mailing_list, request.registry, list_address):
        return {"url": list_url(request, list_address)}
    try:
        result = store_parsed(mailing_list, parse_message(raw), by_mailman=True)
    except UnparseableMessage as exc:
        held = context.archive.quarantine.hold(list_address, raw, str(exc))
        log.warning("quarantined mail %s for %s: %s", held.__name__, list_address, exc)
        note_stored(request, held)
        # Its header only (CR LF or LF): a Message-ID quoted in its body is another mail's.
        found = _MESSAGE_ID.search(_HEADER_END.split(raw, 1)[0])
        url = (message_url(request, list_address, found.group(1).decode("ascii", "replace"))
               if found else list_url(request, list_address))
        return {"url": url, "quarantined": held.__name__}
    if result.gone is not None:
        # Deleted by the list's administrators: it stays deleted. Answered
        # as a duplicate would be, so Mailman does not send it again.
        return {"url": f"{list_url(request, list_address)}message/{result.gone}/"}
    if result.message is None:  # it asked not to be archived
        return {"url": list_url(request, list_address)}
    note_stored(request, result.message)
    return {"url": absolute_url(request, result.message)}


def _uploaded_bytes(request):
    """The bytes of the ``message`` upload, however often the request is run.

    pyramid_retry runs the view again after a conflict with the same parsed
    form, whose upload the first attempt read to its end: read it from its
    start every time.
    """
    upload = _form(request).get("message")
    stream = getattr(upload, "file", None)
    if stream is None:
        raise HTTPBadRequest(json_body={"error": "expected a file upload named message"})
    stream.seek(0)
    raw = stream.read()
    if not raw.strip():
        # Mailman never sends an empty message: something lost it on the
        # way, and a 400 says so instead of keeping nothing as if it were mail.
        raise HTTPBadRequest(json_body={"error": "the message upload is empty"})
    return raw


def _archives_again(mailing_list, registry, list_address):
    """Whether Mailman now archives a list the archive knew as archived "never" (its new policy applied).

    Mailman hands mail over only for lists it archives: the "never" kept
    here is out of date (changed in Mailman since the last sync), and the
    mail would be answered 200 and dropped. Mailman is asked; 503 when it
    cannot be (it sends the mail again later). A list set so by hand
    (``--policy never``, no Mailman core) stays so.
    """
    if not mailman_is_configured(registry):
        return False
    details = ask_list_details(registry, list_address)
    if details is None:
        raise HTTPServiceUnavailable(
            json_body={"error": "Mailman core could not be asked whether this list is archived; send it again later"},
            headers={"Retry-After": str(STORAGE_RETRY_AFTER)})
    if details is NO_SUCH_LIST:
        raise HTTPBadRequest(json_body={"error": f"Mailman core has no list {list_address}"})
    apply_list_details(mailing_list, details)
    return not mailing_list.archives_no_more


def _new_list(archive, registry, list_address):
    """Create the list mail has just arrived for; 400 if Mailman has no such list."""
    mailing_list, _, said = create_list_with_policy(archive, registry, list_address)
    if said is NO_SUCH_LIST:
        # Mailman posts only for lists it has: this is not Mailman speaking.
        raise HTTPBadRequest(json_body={"error": f"Mailman core has no list {list_address}"})
    return mailing_list, None


@view_config(context=ApiMailman, name="urls", request_method="GET", renderer="json")
def urls(context, request):
    """The list's URL, or with ``msgid`` the permalink the message has (or will have)."""
    _check_caller(request)
    list_address = normalize_list_address(request.GET.get("mlist", ""))
    if list_address is None:
        raise HTTPBadRequest(json_body={"error": "mlist is not a list's posting address"})
    message_id = request.GET.get("msgid")
    if message_id is not None:
        # The plugin sends the Message-ID header stripped of its outer <>:
        # read as the archive reads that of every message it stores, so two
        # ids in one header, quotes or brackets inside give the same
        # permalink, and an odd header's leads where the message is.
        return {"url": message_url(request, list_address, permalink_id_of_stripped(message_id))}
    return {"url": list_url(request, list_address)}


def _form(request):
    """The request's form fields; 400 when they cannot be read, which no retry changes.

    A part declaring a charset its name is not written in (or none that
    exists) would otherwise be a 503, and Mailman would send it for ever.
    """
    try:
        return request.POST
    except (UnicodeDecodeError, LookupError) as exc:
        raise HTTPBadRequest(json_body={"error": f"the form could not be read: {exc}"})


def _storage_trouble(exc, request):
    if isinstance(exc, ConflictError):
        # Other processes wrote the same records at every attempt: busy, not
        # broken. One line, with the record that conflicted.
        log.warning("archiver API: a write conflict after every attempt, answered 503; "
                    "Mailman will send it again: %s", exc)
    elif isinstance(exc, OSError) and exc.errno is not None:
        # The disk's (full, gone read-only): one line a try, as Mailman tries again and again.
        log.error("archiver API failed, Mailman will retry: %s", storage_unwritable(exc))
    else:
        log.error("archiver API failed, Mailman will retry: %r", exc, exc_info=exc)
    request.response.status = 503
    request.response.headers["Retry-After"] = str(STORAGE_RETRY_AFTER)
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
