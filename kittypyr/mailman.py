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



def mailman_client(registry):
    """A mailmanclient Client for Mailman core's REST API, or None if not configured."""
    settings = registry.settings
    url = settings.get("kittypyr.mailman_url", "").rstrip("/")
    if not url:
        return None
    from mailmanclient import Client

    return Client(url + "/3.1", settings.get("kittypyr.mailman_user", ""),
                  settings.get("kittypyr.mailman_password", ""))


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
