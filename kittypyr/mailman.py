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

