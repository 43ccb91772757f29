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
import threading
import time
from datetime import datetime, timezone
from urllib.parse import quote

from pyramid.settings import aslist

from kittypyr.msgid import message_id_hash

log = logging.getLogger(__name__)


def list_id_of(list_address):
    """Mailman's list id for a posting address: ``dev@example.org`` -> ``dev.example.org``."""
    return list_address.lower().replace("@", ".", 1)


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


_ANSWERED = object()


def _ask(call, *args, answers=None, **kw):
    """``call(*args, **kw)`` against Mailman's REST API.

    ``answers`` maps an HTTP error status to what to return instead
    (``_ANSWERED`` for "that status is the answer") or to an exception to
    raise; any other failure raises MailmanUnavailable.
    """
    from urllib.error import HTTPError

    try:
        return call(*args, **kw)
    except HTTPError as exc:
        outcome = (answers or {}).get(_status(exc))
        if outcome is None:
            raise MailmanUnavailable(repr(exc)) from exc
        if isinstance(outcome, Exception):
            raise outcome from None
        return outcome
    except Exception as exc:  # refused connections, timeouts, bad answers alike
        raise MailmanUnavailable(repr(exc)) from exc


def check_login(registry, address, password):
    """``(address, display_name, user_id)`` when Mailman accepts the password.

    Mailman's ``users/<id>/login`` answers 204 for the right password and
    403 for a wrong one.
    """
    client = _client_or_raise(registry)
    refused = LoginRefused(address)
    user = _ask(client.get_user, address, answers={404: refused})
    _ask(client._connection.call, f"users/{user.user_id}/login", {"cleartext_password": password},
         method="POST", answers={401: refused, 403: refused})
    if not _ask(lambda: client.get_address(address).verified):
        raise AddressNotVerified(address)
    return address, user.display_name or "", str(user.user_id)


class AccountExists(Exception):
    """Mailman already knows the address."""


def create_account(registry, address, display_name, password):
    """A new Mailman user with an unverified address."""
    client = _client_or_raise(registry)
    if _ask(client.get_address, address, answers={404: _ANSWERED}) is not _ANSWERED:
        raise AccountExists(address)
    _ask(client.create_user, address, password, display_name, answers={400: AccountExists(address)})


def verify_address(registry, address):
    """Mark ``address`` as verified in Mailman: it has proved it receives mail."""
    client = _client_or_raise(registry)
    _ask(lambda: client.get_address(address).verify())


def _list_details(mailing_list):
    settings = mailing_list.settings
    return {
        "display_name": mailing_list.display_name or "",
        "description": settings.get("description", "") or "",
        "archive_policy": settings.get("archive_policy", "public") or "public",
        "owners": tuple(sorted(member.email.lower() for member in mailing_list.owners)),
        "moderators": tuple(sorted(member.email.lower() for member in mailing_list.moderators)),
    }


def fetch_list_details(registry, list_address):
    """``{display_name, description, archive_policy, owners, moderators}`` from Mailman, or None.

    Mailman being unreachable must never cost a message or a page: the
    failure is logged and the list keeps what it has.
    """
    client = mailman_client(registry)
    if client is None:
        return None
    try:
        return _list_details(client.get_list(list_address))
    except Exception as exc:  # HTTP errors, refused connections, timeouts alike
        log.warning("could not fetch the details of %s from Mailman: %r", list_address, exc)
        return None


def apply_list_details(mailing_list, details):
    """Store what Mailman said, writing only what changed."""
    if not details:
        return
    wanted = {
        "display_name": details["display_name"] or mailing_list.display_name,
        "description": details["description"],
        "archive_policy": details["archive_policy"],
        "owners": tuple(details.get("owners", ())),
        "moderators": tuple(details.get("moderators", ())),
    }
    for name, value in wanted.items():
        if getattr(mailing_list, name) != value:
            setattr(mailing_list, name, value)
    if mailing_list.synced_at is None:
        mailing_list.synced_at = _now()


def _now():
    return datetime.now(timezone.utc)


def sync_lists(archive, registry):
    """Bring every list Mailman core has into the archive, with its details.

    Lists Mailman does not archive (policy ``never``) are not created.
    Returns ``(created, updated)`` addresses; raises MailmanUnavailable.
    """
    from kittypyr.archiving import ensure_mailing_list

    client = _client_or_raise(registry)
    created, updated = [], []
    try:
        for found in client.lists:
            address = found.fqdn_listname.lower()
            details = _list_details(found)
            if address not in archive.lists:
                if details["archive_policy"] == "never":
                    continue
                created.append(address)
            else:
                updated.append(address)
            mailing_list = ensure_mailing_list(archive, address)
            apply_list_details(mailing_list, details)
            mailing_list.synced_at = _now()
    except MailmanUnavailable:
        raise
    except Exception as exc:
        raise MailmanUnavailable(repr(exc)) from exc
    return created, updated


def sync_ttl(registry):
    return float(registry.settings.get("kittypyr.mailman_sync_ttl", 300))


class ListRefresher:
    """Re-reads a list's details from Mailman when they are older than the TTL.

    Checks are remembered per process, so a page view writes to the list
    only when Mailman said something new; a failed attempt is not repeated
    for a while, so an unreachable Mailman costs one timeout per list now
    and then and never fails a page.
    """

    def __init__(self, failure_pause=60.0, clock=time.monotonic):
        self.failure_pause = failure_pause
        self.clock = clock
        self.checked_at = {}
        self.failed_at = {}
        self.lock = threading.Lock()

    def is_fresh(self, registry, mailing_list):
        ttl = sync_ttl(registry)
        with self.lock:
            checked = self.checked_at.get(mailing_list.address)
        if checked is not None and self.clock() - checked < ttl:
            return True
        synced = mailing_list.synced_at
        return synced is not None and (_now() - synced).total_seconds() < ttl

    def refresh_if_stale(self, registry, mailing_list):
        """True when Mailman was asked (and answered) now."""
        if not registry.settings.get("kittypyr.mailman_url") or self.is_fresh(registry, mailing_list):
            return False
        address = mailing_list.address
        with self.lock:
            failed = self.failed_at.get(address)
        if failed is not None and self.clock() - failed < self.failure_pause:
            return False
        details = fetch_list_details(registry, address)
        with self.lock:
            if details is None:
                self.failed_at[address] = self.clock()
                return False
            self.failed_at.pop(address, None)
            self.checked_at[address] = self.clock()
        apply_list_details(mailing_list, details)
        return True


list_refresher = ListRefresher()


def posting_rules(registry, list_address):
    """What happens to a post from the web: ``{"moderated", "approval_to_join"}``, or None.

    None when Mailman cannot say.
    """
    client = mailman_client(registry)
    if client is None:
        return None
    try:
        settings = client.get_list(list_address).settings
        return {
            "moderated": settings.get("default_member_action", "defer") in ("hold", "reject", "discard"),
            "approval_to_join": settings.get("subscription_policy", "") in ("moderate", "confirm_then_moderate"),
        }
    except Exception as exc:
        log.warning("could not fetch the posting rules of %s from Mailman: %r", list_address, exc)
        return None


def subscribe(registry, list_address, address, display_name):
    """Subscribe a verified, logged-in reader who asked for it.

    Returns True when they are a member now, False when the subscription
    waits for a moderator's approval.
    """
    client = _client_or_raise(registry)
    try:
        result = client.get_list(list_address).subscribe(
            address, display_name or None, pre_verified=True, pre_confirmed=True)
    except Exception as exc:
        raise MailmanUnavailable(repr(exc)) from exc
    return not isinstance(result, dict)


def refresh_list_details(event):
    """Before a list's page is shown, re-read its details from Mailman if they are stale.

    This runs before permissions are checked, so a list Mailman has just
    made private is closed from the next page on.
    """
    from pyramid.traversal import find_interface

    from kittypyr.resources import MailingList

    request = event.request
    mailing_list = find_interface(request.context, MailingList)
    if mailing_list is None:
        return
    try:
        list_refresher.refresh_if_stale(request.registry, mailing_list)
    except Exception:  # whatever happens, the page is served with what is known
        log.exception("refreshing %s from Mailman failed", mailing_list.address)


def includeme(config):
    from pyramid.events import ContextFound

    config.add_subscriber(refresh_list_details, ContextFound)
