"""Being Mailman 3's archiver: the protocol of the ``mailman-hyperkitty`` plugin.

Mailman core posts every message to ``api/mailman/archive`` and asks
``api/mailman/urls`` for the permalinks it writes into ``Archived-At:`` and
``List-Archive:``. The plugin re-queues a message whenever the answer is not
a 200 and sends it again with the next one, forever; so a duplicate answers
200, unreadable mail is kept in the quarantine and answers 200, and only
trouble with the storage answers an error, so that Mailman keeps the mail.
"""

import hashlib
import hmac
import logging
import threading
import time
import weakref
from datetime import datetime, timedelta, timezone
from urllib.parse import quote

from pyramid.settings import aslist
from pyramid.traversal import resource_path

from kittypyr.addresses import list_id_of  # noqa: F401 (for the modules that name it here)
from kittypyr.configfile import is_example_value
from kittypyr.msgid import message_id_hash

log = logging.getLogger(__name__)


def archiver_key(registry):
    """``kittypyr.archiver_key``; "" (no key opens the archiver API) when unset or still the example's."""
    key = registry.settings.get("kittypyr.archiver_key", "").strip()
    return "" if is_example_value(key) else key


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
    # remote_addr: the peer, or what waitress took from a trusted proxy;
    # client_addr would believe an X-Forwarded-For the client wrote itself.
    return not allowed or request.remote_addr in allowed


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
    # The path from the root alone: the request's own resource_path starts
    # with the path the site is served under, which base_url ends with.
    return base_url(request) + resource_path(resource).strip("/") + "/"



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


def account_of(client, address):
    """What tells the account of ``address`` (the one logging in checks the password of) apart now; None if none.

    Its user id and a digest of its password's hash, as Mailman keeps it:
    another account made for the address since, or a new password, is
    another string, and a session opened for the one before ends
    (``kittypyr.security.current_user``). Raises ``MailmanUnavailable``
    when Mailman cannot say.
    """
    user = _ask(client.get_user, address, answers={404: _ANSWERED})
    if user is _ANSWERED:
        return None
    password = (getattr(user, "rest_data", None) or {}).get("password") or ""
    return f"{user.user_id}:{hashlib.sha256(password.encode('utf-8')).hexdigest()[:16]}"


class AccountExists(Exception):
    """Mailman already knows the address."""


class AddressRefused(Exception):
    """Mailman's check of addresses refuses the address (one its rules do not take, though mail may reach it)."""


def create_account(registry, address, display_name, password):
    """A new Mailman user with an unverified address."""
    client = _client_or_raise(registry)
    if _ask(client.get_address, address, answers={404: _ANSWERED}) is not _ANSWERED:
        raise AccountExists(address)
    # Mailman answers 400 both for an address it holds and for one its check
    # of addresses refuses: it held none a moment ago.
    refused = _ask(client.create_user, address, password, display_name, answers={400: _ANSWERED})
    if refused is _ANSWERED:
        if _ask(client.get_address, address, answers={404: _ANSWERED}) is not _ANSWERED:
            raise AccountExists(address)  # made meanwhile
        raise AddressRefused(address)


def remove_unconfirmed_account(registry, address):
    """Delete the account of ``address`` while its address is not verified (a sign-up whose mail failed)."""
    client = _client_or_raise(registry)
    found = _ask(client.get_address, address, answers={404: _ANSWERED})
    if found is _ANSWERED or found.verified:
        return
    _ask(lambda: client.get_user(address).delete(), answers={404: _ANSWERED})


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
        "subject_prefix": settings.get("subject_prefix", "") or "",
        "owners": tuple(sorted(member.email.lower() for member in mailing_list.owners)),
        "moderators": tuple(sorted(member.email.lower() for member in mailing_list.moderators)),
    }


NO_SUCH_LIST = "no such list"


def ask_list_details(registry, list_address):
    """What Mailman says of ``list_address``: its details, ``NO_SUCH_LIST`` or None.

    None when Mailman is not configured or cannot be reached (logged).
    """
    client = mailman_client(registry)
    if client is None:
        return None
    from urllib.error import HTTPError

    try:
        return _list_details(client.get_list(list_address))
    except HTTPError as exc:
        if _status(exc) == 404:
            return NO_SUCH_LIST
        log.warning("could not fetch the details of %s from Mailman: %r", list_address, exc)
    except Exception as exc:  # refused connections, timeouts, bad answers alike
        log.warning("could not fetch the details of %s from Mailman: %r", list_address, exc)
    return None


def fetch_list_details(registry, list_address):
    """``{display_name, description, archive_policy, subject_prefix, owners, moderators}`` from Mailman, or None.

    Mailman being unreachable must never cost a message or a page: the
    failure is logged and the list keeps what it has.
    """
    details = ask_list_details(registry, list_address)
    return None if details is NO_SUCH_LIST else details


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
        "subject_prefix": details.get("subject_prefix", mailing_list.subject_prefix),
        "policy_known": True,
        "policy_reason": "Mailman's archive policy",
        "in_mailman": True,
    }
    for name, value in wanted.items():
        if getattr(mailing_list, name) != value:
            setattr(mailing_list, name, value)
    mailing_list.synced_at = _now()


def mailman_is_configured(registry):
    return bool(registry.settings.get("kittypyr.mailman_url", "").strip())


def first_policy(registry, list_address, explicit=None):
    """``(details, policy, reason)`` for a list the archive does not have yet.

    Where Mailman is configured a list is private until Mailman says
    otherwise: a private list shown to everyone cannot be taken back, a
    public one closed for a while can. ``details`` is what Mailman said
    (None if nothing, ``NO_SUCH_LIST`` if it has no such list).
    """
    if explicit is not None:
        details = ask_list_details(registry, list_address) if mailman_is_configured(registry) else None
        return details, explicit, "as given by --policy"
    if not mailman_is_configured(registry):
        return None, "public", "no Mailman core is configured (kittypyr.mailman_url): a stand-alone archive is public"
    details = ask_list_details(registry, list_address)
    if details is NO_SUCH_LIST:
        return details, "private", "Mailman core has no such list: private until it has (or use --policy)"
    if details is None:
        return None, "private", "Mailman core could not be reached: private until its policy is learned"
    return details, details["archive_policy"], "Mailman's archive policy"


def create_list_with_policy(archive, registry, list_address, explicit=None):
    """Create the list ``list_address`` with its first policy; return ``(list, reason, said)``.

    ``said`` is what Mailman said of the list: its details, ``NO_SUCH_LIST``,
    or None when it was not asked or did not answer.
    """
    from kittypyr.archiving import ensure_mailing_list

    details, policy, reason = first_policy(registry, list_address, explicit)
    mailing_list = ensure_mailing_list(archive, list_address)
    if isinstance(details, dict):
        apply_list_details(mailing_list, details)
    elif details is NO_SUCH_LIST:
        mailing_list.in_mailman = False
    mailing_list.archive_policy = policy
    mailing_list.policy_reason = reason
    # An explicit policy is known; one assumed for want of Mailman is not,
    # and the list is asked about again as soon as Mailman answers.
    mailing_list.policy_known = explicit is not None or isinstance(details, dict)
    return mailing_list, reason, details


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
    except MailmanUnavailable:
        raise
    except Exception as exc:
        raise MailmanUnavailable(repr(exc)) from exc
    return created, updated


def sync_ttl(registry):
    return float(registry.settings.get("kittypyr.mailman_sync_ttl", 300))


class ListRefresher:
    """Re-reads lists' details from Mailman when they are older than the TTL.

    Runs before the request's own transaction begins (a tween above
    pyramid_tm), and commits what Mailman said in a transaction of its own:
    whatever the request then answers (a 403 aborts the request's
    transaction), the policy learned is kept, and the request reads it.
    Freshness is the list's ``synced_at`` in the database, so every process
    sees what one of them learned.

    A page that may show any list would read every list's ``synced_at``:
    instead, each process remembers from its last walk over the lists when
    the first of them becomes stale (``next_stale``), and walks again only
    then. Lists synced since, by any process, become stale later still; a
    list made since without its policy (Mailman silent) is private until
    that walk, at most a TTL later. One list's pages read that list only.

    When Mailman cannot be reached, nobody asks it again for
    ``failure_pause`` seconds: one timeout now and then, never one per
    page or per list. Lists keep what is known meanwhile; a list whose
    policy was never learned stays private.
    """

    def __init__(self, failure_pause=30.0, clock=time.monotonic):
        self.failure_pause = failure_pause
        self.clock = clock
        self.unreachable_since = None
        self.lock = threading.Lock()
        # Database -> when the first of its lists becomes stale (UTC), as
        # the last walk over them found: until then no list can be.
        self.next_stale = weakref.WeakKeyDictionary()

    def is_stale(self, registry, mailing_list):
        """Never heard from Mailman, or not within the TTL.

        A list Mailman said it does not have counts as heard from: it is
        asked again once a TTL, not at every page.
        """
        synced = mailing_list.synced_at
        return synced is None or (_now() - synced).total_seconds() >= sync_ttl(registry)

    def mailman_paused(self):
        since = self.unreachable_since
        return since is not None and self.clock() - since < self.failure_pause

    def may_be_stale(self, db):
        """Whether any list of ``db`` can be stale now, as far as this process knows."""
        next_stale = self.next_stale.get(db)
        return next_stale is None or _now() >= next_stale

    def refresh(self, registry, db, addresses=None):
        """Refresh the stale lists among ``addresses`` (None: every list); return those refreshed."""
        if not mailman_is_configured(registry) or self.mailman_paused():
            return []
        if addresses is None and not self.may_be_stale(db):
            return []
        # One refresh at a time per process: a second request waits for it
        # rather than asking Mailman the same again, and then reads its result.
        with self.lock:
            if addresses is None and not self.may_be_stale(db):
                return []
            return self._refresh(registry, db, addresses)

    def _refresh(self, registry, db, addresses):
        import transaction

        ttl = timedelta(seconds=sync_ttl(registry))
        manager = transaction.TransactionManager(explicit=True)
        connection = db.open(transaction_manager=manager)
        try:
            manager.begin()
            # Lists refreshed now are synced after this: stale no sooner than started + ttl.
            started = _now()
            archive = _archive_in(connection)
            if archive is None:
                return []
            next_stale = started + ttl
            if addresses is None:
                stale = []
                for ml in archive.lists.values():
                    if self.is_stale(registry, ml):
                        stale.append(ml.address)
                    else:
                        next_stale = min(next_stale, ml.synced_at + ttl)
            else:
                stale = [a for a in addresses if a in archive.lists
                         and self.is_stale(registry, archive.lists[a])]
            manager.abort()
            learned = {}
            for address in stale:
                details = ask_list_details(registry, address)
                if details is None:
                    self.unreachable_since = self.clock()
                    break
                learned[address] = details
            else:
                self.unreachable_since = None
            if learned:
                _commit_details(manager, connection, learned)
            if addresses is None:
                if self.unreachable_since is None:
                    self.next_stale[db] = next_stale
                else:  # lists left stale: walk again once Mailman is asked again
                    self.next_stale.pop(db, None)
            return list(learned)
        finally:
            connection.close()


def _archive_in(connection):
    from kittypyr.bootstrap import ROOT_KEY

    return connection.root().get(ROOT_KEY)


def _commit_details(manager, connection, learned, attempts=5):
    from ZODB.POSException import ConflictError

    for attempt in range(attempts):
        manager.begin()
        archive = _archive_in(connection)
        for address, details in learned.items():
            mailing_list = archive.lists.get(address)
            if mailing_list is None:
                continue
            if details is NO_SUCH_LIST:
                # Mailman no longer has it: keep the archive as it was, ask
                # again later. No member's roles open it meanwhile.
                if mailing_list.in_mailman is not False:
                    mailing_list.in_mailman = False
                mailing_list.synced_at = _now()
            else:
                apply_list_details(mailing_list, details)
        try:
            manager.commit()
            return
        except ConflictError:
            manager.abort()
            if attempt == attempts - 1:
                raise


list_refresher = ListRefresher()


def posting_rules(registry, list_address):
    """What happens to a non-member's post from the web: ``{"moderated", "members_held", "approval_to_join"}``.

    ``moderated``: Mailman holds a non-member's post for a moderator, as it
    holds its members' (its default for non-members): sent as it is, it
    waits there. Otherwise (a list that accepts its members' posts, or
    rejects or discards non-members'), the reader subscribes to post;
    ``members_held``: the post then waits for a moderator all the same.
    None when Mailman cannot say.
    """
    client = mailman_client(registry)
    if client is None:
        return None
    try:
        settings = client.get_list(list_address).settings
        members_held = settings.get("default_member_action", "defer") in ("hold", "reject", "discard")
        return {
            "moderated": members_held and settings.get("default_nonmember_action", "hold") == "hold",
            "members_held": members_held,
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


# Paths whose answers depend on one list; every other page may show any list
# (the lists index, search, profiles, tags), so all stale lists are refreshed.
_ONE_LIST_PATHS = ("/list/", "/api/list/")
_NO_LIST_PATHS = ("/static/", "/api/mailman/", "/favicon.ico", "/login", "/logout", "/signup")


def lists_to_refresh(path):
    """The addresses a request for ``path`` reads, or None for "any list"."""
    from urllib.parse import unquote

    for prefix in _NO_LIST_PATHS:
        if path.startswith(prefix):
            return []
    for prefix in _ONE_LIST_PATHS:
        if path.startswith(prefix):
            return [unquote(path[len(prefix):].split("/", 1)[0]).strip().lower()]
    return None


def list_refresh_tween_factory(handler, registry):
    """Refresh stale list details before the request's transaction begins."""
    if not mailman_is_configured(registry):
        return handler

    def refresh_lists_then_handle(request):
        databases = getattr(registry, "_zodb_databases", None)  # pyramid_zodbconn's
        addresses = lists_to_refresh(request.path_info)
        # While Mailman is silent nothing is asked of it for each list (and
        # nothing logged for each): kittypyr.standalone says so once.
        from kittypyr.standalone import presence

        if databases and addresses != [] and presence.available(registry):
            try:
                list_refresher.refresh(registry, databases[""], addresses)
            except Exception:  # whatever happens, the page is served with what is known
                log.exception("refreshing list details from Mailman failed")
        return handler(request)

    return refresh_lists_then_handle


ARCHIVE_PATH = "/api/mailman/archive"


def archive_one_at_a_time_tween_factory(handler, registry):
    """Archive requests of one process run one after the other, commit included.

    Archiving is CPU work under one interpreter lock: threads archiving at
    once gain no speed, but they write the same records (the words they
    share, the day's counts) and all but one would fail at commit and be
    run again. Other processes (ZEO, RelStorage) can still conflict; those
    are retried.
    """
    lock = threading.Lock()

    def archive_in_turn(request):
        if request.path_info != ARCHIVE_PATH or request.method != "POST":
            return handler(request)
        with lock:
            return handler(request)

    return archive_in_turn


def includeme(config):
    key = config.registry.settings.get("kittypyr.archiver_key", "").strip()
    if is_example_value(key):
        # deploy/kittypyr.ini ships such a value: published with kittypyr,
        # anyone who reaches the archiver API could archive with it.
        log.warning("kittypyr.archiver_key is still the example's %r: the archiver API refuses every request "
                    "(401) until it is set to the api_key of mailman-hyperkitty.cfg, a long random string", key)
    config.add_tween("kittypyr.mailman.list_refresh_tween_factory", over="pyramid_tm.tm_tween_factory")
    config.add_tween("kittypyr.mailman.archive_one_at_a_time_tween_factory",
                     over="pyramid_tm.tm_tween_factory")
