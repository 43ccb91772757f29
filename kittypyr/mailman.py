"""Being Mailman 3's archiver: the protocol of the ``mailman-hyperkitty`` plugin.

Mailman core posts every message to ``api/mailman/archive`` and asks
``api/mailman/urls`` for the permalinks it writes into ``Archived-At:`` and
``List-Archive:``. The plugin re-queues a message whenever the answer is not
a 200 and sends it again with the next one, forever; so a duplicate answers
200, unreadable mail is kept in the quarantine and answers 200, and only
trouble with the storage answers an error, so that Mailman keeps the mail.
"""

import hmac
import logging
from urllib.parse import quote

from pyramid.settings import aslist

from kittypyr.msgid import message_id_hash

log = logging.getLogger(__name__)


def archiver_key(registry):
    return registry.settings.get("kittypyr.archiver_key", "")


def key_is_valid(request):
    """True when the request carries ``Authorization: Token <kittypyr.archiver_key>``."""
    expected = archiver_key(request.registry)
    scheme, _, given = request.headers.get("Authorization", "").partition(" ")
    if not expected or scheme.lower() != "token":
        return False
    return hmac.compare_digest(given.strip().encode("utf-8"), expected.encode("utf-8"))


def client_is_allowed(request):
    """True unless ``kittypyr.archiver_from`` names addresses and the client is not one."""
    allowed = aslist(request.registry.settings.get("kittypyr.archiver_from", ""))
    return not allowed or request.client_addr in allowed


def base_url(request):
    """The site's public root URL, ending in '/'."""
    configured = request.registry.settings.get("kittypyr.base_url", "")
    return (configured or request.application_url).rstrip("/") + "/"


def list_url(request, list_address):
    return f"{base_url(request)}list/{quote(list_address.lower(), safe='@')}/"


def message_url(request, list_address, message_id):
    """The permalink of a message, computable before it has arrived."""
    return f"{list_url(request, list_address)}message/{message_id_hash(message_id)}/"


def absolute_url(request, resource):
    """``resource``'s URL under ``kittypyr.base_url``."""
    return base_url(request) + request.resource_path(resource).lstrip("/")



# Seconds to wait for Mailman core's REST API: a page never hangs on it.
MAILMAN_TIMEOUT = 10


def _with_timeout(params):
    params.setdefault("timeout", MAILMAN_TIMEOUT)
    return params


def mailman_client(registry):
    """A mailmanclient Client for Mailman core's REST API, or None if not configured."""
    settings = registry.settings
    url = settings.get("kittypyr.mailman_url", "").rstrip("/")
    if not url:
        return None
    from mailmanclient import Client

    return Client(url + "/3.1", settings.get("kittypyr.mailman_user", ""),
                  settings.get("kittypyr.mailman_password", ""), request_hooks=[_with_timeout])


class MailmanUnavailable(Exception):
    """Mailman core is not configured, cannot be reached or answered an error."""


class LoginRefused(Exception):
    """The address or password is wrong (Mailman does not say which)."""


class AddressNotVerified(Exception):
    """The password is right but the address was never confirmed."""


def _client_or_raise(registry):
    client = mailman_client(registry)
    if client is None:
        raise MailmanUnavailable("kittypyr.mailman_url is not set")
    return client


def _status(exc):
    return getattr(exc, "code", None) or getattr(getattr(exc, "response", None), "status_code", None)


def check_login(registry, address, password):
    """``(address, display_name, user_id)`` when Mailman accepts the password.

    Mailman's ``users/<id>/login`` answers 204 for the right password and
    403 for a wrong one.
    """
    from urllib.error import HTTPError

    client = _client_or_raise(registry)
    try:
        user = client.get_user(address)
    except HTTPError as exc:
        if _status(exc) == 404:
            raise LoginRefused(address) from None
        raise MailmanUnavailable(repr(exc)) from exc
    except Exception as exc:
        raise MailmanUnavailable(repr(exc)) from exc
    try:
        client._connection.call(f"users/{user.user_id}/login", {"cleartext_password": password},
                                method="POST")
    except HTTPError as exc:
        if _status(exc) in (401, 403):
            raise LoginRefused(address) from None
        raise MailmanUnavailable(repr(exc)) from exc
    except Exception as exc:
        raise MailmanUnavailable(repr(exc)) from exc
    try:
        verified = client.get_address(address).verified
    except Exception as exc:
        raise MailmanUnavailable(repr(exc)) from exc
    if not verified:
        raise AddressNotVerified(address)
    return address, user.display_name or "", str(user.user_id)


class AccountExists(Exception):
    """Mailman already knows the address."""


def create_account(registry, address, display_name, password):
    """A new Mailman user with an unverified address."""
    from urllib.error import HTTPError

    client = _client_or_raise(registry)
    try:
        client.get_address(address)
    except HTTPError as exc:
        if _status(exc) != 404:
            raise MailmanUnavailable(repr(exc)) from exc
    except Exception as exc:
        raise MailmanUnavailable(repr(exc)) from exc
    else:
        raise AccountExists(address)
    try:
        client.create_user(address, password, display_name)
    except HTTPError as exc:
        if _status(exc) == 400:
            raise AccountExists(address) from None
        raise MailmanUnavailable(repr(exc)) from exc
    except Exception as exc:
        raise MailmanUnavailable(repr(exc)) from exc


def verify_address(registry, address):
    """Mark ``address`` as verified in Mailman: it has proved it receives mail."""
    client = _client_or_raise(registry)
    try:
        client.get_address(address).verify()
    except Exception as exc:
        raise MailmanUnavailable(repr(exc)) from exc


def fetch_list_details(registry, list_address):
    """``{display_name, description, archive_policy}`` from Mailman, or None.

    Mailman being unreachable must never cost a message: the failure is
    logged and the list keeps what it has.
    """
    client = mailman_client(registry)
    if client is None:
        return None
    try:
        mailing_list = client.get_list(list_address)
        settings = mailing_list.settings
        return {
            "display_name": mailing_list.display_name or "",
            "description": settings.get("description", "") or "",
            "archive_policy": settings.get("archive_policy", "public") or "public",
        }
    except Exception as exc:  # HTTP errors, refused connections, timeouts alike
        log.warning("could not fetch the details of %s from Mailman: %r", list_address, exc)
        return None


def apply_list_details(mailing_list, details):
    if details:
        mailing_list.display_name = details["display_name"] or mailing_list.display_name
        mailing_list.description = details["description"]
        mailing_list.archive_policy = details["archive_policy"]
