"""Who the reader is, and what they may see and do.

Mailman core is the single source of truth for accounts and roles: a reader
logs in with their Mailman address and password, and their roles on lists
(member, owner, moderator) come from Mailman, cached for a minute. The
session only remembers who logged in, in a signed cookie, and the account's
session generation at the time: logging out raises the generation in the
archive, which ends every copy of the cookie (``end_sessions``); an account
deleted in Mailman ends its sessions within that minute.

Permissions are checked against the ``__acl__`` of the resources (see
``MailingList.__acl__``) with these principals:

- ``system.Everyone`` for all, ``system.Authenticated`` and ``user:<address>``
  once logged in;
- ``site-admin`` for the addresses in ``kittypyr.admins``;
- ``<role>:<list id>`` for each role the user has on a list in Mailman, by
  Mailman's list id (``member:dev.lists.example.org``, ``owner:...``,
  ``moderator:...``), as ``MailingList.__acl__`` names them.

``view`` is every page's default permission, so a private list's pages,
raw messages, attachments and API answers are closed to anyone else without
a view having to remember it.
"""

import base64
import functools
import hashlib
import hmac
import ipaddress
import json
import logging
import math
import re
import secrets
import threading
import time
from dataclasses import dataclass

from pyramid.authorization import ACLHelper, Authenticated, Everyone
from pyramid.events import ContextFound, NewResponse
from pyramid.httpexceptions import HTTPBadRequest
from pyramid.session import SignedCookieSessionFactory
from pyramid.settings import aslist
from pyramid_zodbconn import get_connection
from webob.cookies import make_cookie

from kittypyr.bootstrap import ROOT_KEY
from kittypyr.configfile import is_example_value
from kittypyr.mailman import account_of, list_id_of, mailman_client  # noqa: F401 (list_id_of: for the views)

log = logging.getLogger(__name__)

SITE_ADMIN = "site-admin"
MEMBERSHIP_TTL = 60.0
# After a failed lookup, try Mailman again this soon, not at every page.
MEMBERSHIP_FAILURE_TTL = 10.0
ROLES = ("member", "owner", "moderator")


@dataclass(frozen=True)
class User:
    """A logged-in reader, as their Mailman account identifies them."""

    address: str
    display_name: str = ""
    user_id: str = ""
    # The account the session was opened for (``kittypyr.mailman.account_of``); "" when unknown.
    account: str = ""

    @property
    def name(self):
        return self.display_name or self.address.split("@", 1)[0]


class Memberships:
    """What Mailman core says of each address: whether its account is still
    there, and its roles on lists; kept for a minute
    (``kittypyr.mailman_roles_ttl`` seconds).

    Per process: every waitress process asks Mailman at most once a minute
    for a given reader. When Mailman cannot be reached the reader has no
    roles (private lists stay closed), keeps their session, and the failure
    is logged.
    """

    def __init__(self, ttl=MEMBERSHIP_TTL, failure_ttl=MEMBERSHIP_FAILURE_TTL, clock=time.monotonic):
        self.ttl = ttl
        self.failure_ttl = failure_ttl
        self.clock = clock
        self.entries = {}
        self.lock = threading.Lock()

    def roles(self, registry, address):
        """A frozenset of ``(list_id, role)`` pairs for ``address``."""
        return self._known(registry, address)[0]

    def has_account(self, registry, address):
        """Whether Mailman still has an account of ``address``: deleted there, its sessions end."""
        return bool(self._known(registry, address)[1])

    def account(self, registry, address):
        """The account of ``address`` as ``kittypyr.mailman.account_of`` tells it; True when it
        cannot be told (no Mailman, or Mailman did not answer); False when there is none."""
        return self._known(registry, address)[1]

    def _known(self, registry, address):
        now = self.clock()
        with self.lock:
            entry = self.entries.get(address)
        if entry is not None and entry[0] > now:
            return entry[1:]
        ttl = _seconds(registry.settings.get("kittypyr.mailman_roles_ttl") or self.ttl, self.ttl)
        roles, exists, failed = self._fetch(registry, address)
        with self.lock:
            self.entries[address] = (now + (min(ttl, self.failure_ttl) if failed else ttl), roles, exists)
        return roles, exists

    def forget(self, address):
        """Drop what is known of ``address``: its roles just changed here."""
        with self.lock:
            self.entries.pop(address, None)

    def _fetch(self, registry, address):
        """``(roles, account, failed)`` from Mailman: the account as ``account_of`` tells it, or False."""
        client = mailman_client(registry)
        if client is None:
            return frozenset(), True, False
        account = True  # not told yet
        try:
            account = account_of(client, address)
            if account is None:
                return frozenset(), False, False
            if "*" in address:
                # Mailman reads a subscriber with "*" as a pattern of addresses and
                # names ("*@example.org": every member there): such an address
                # would hold everyone's roles. It can hold none of its own.
                return frozenset(), account, False
            _, found = client._connection.call("members/find", {"subscriber": address})
        except Exception as exc:  # refused connections, timeouts and HTTP errors alike
            log.warning("could not fetch the account and list roles of %s from Mailman: %r", address, exc)
            # The account, if Mailman told it before the roles failed, is kept.
            return frozenset(), account, True
        entries = (found or {}).get("entries", [])
        # Found by the address itself, each entry names it (as the member's own
        # address or its user's preferred one): any other is not this reader's.
        own = address.lower()
        roles = frozenset((entry["list_id"], entry["role"]) for entry in entries
                          if entry.get("role") in ROLES and (entry.get("email") or "").lower() == own)
        return roles, account, False


@functools.lru_cache(maxsize=8)
def _seconds(value, default):
    """A number of seconds from the settings; ``default``, said once in the log, for what is none."""
    try:
        return float(value)
    except (TypeError, ValueError):
        log.warning("kittypyr.mailman_roles_ttl = %r is no number of seconds: %s used", value, default)
        return default


memberships = Memberships()


def site_admins(registry):
    return {address.lower() for address in aslist(registry.settings.get("kittypyr.admins", ""))}


def current_user(request):
    """The logged-in ``User``, or None (also for a session ended by logging out)."""
    data = request.session.get("user") if _has_session_cookie(request) else None
    if not data:
        return None
    # Sessions from before logouts were recorded have no generation: 0, the
    # generation of an account that has not logged out since.
    if data.get("generation", 0) != session_generation(request, data["address"]):
        return None
    account = memberships.account(request.registry, data["address"])
    if not account:
        return None
    # Opened for another account of the address (deleted and made again
    # since) or before its password changed: a copy of the cookie must not
    # outlive either. A session from before accounts were told apart has none.
    opened_for = data.get("account")
    if opened_for and isinstance(account, str) and opened_for != account:
        return None
    return User(data["address"], data.get("display_name", ""), data.get("user_id", ""), opened_for or "")


def session_generation(request, address):
    """How many times ``address`` has logged out: a session is good while it is unchanged.

    The session cookie is signed, not stored, so a copy of it would outlive
    a logout; this number, in the database, is what every process checks.
    """
    generations = _session_generations(request)
    # An archive not yet upgraded to keep them has recorded no logout.
    return generations.get(address, 0) if generations is not None else 0


def end_sessions(request, address):
    """End every session of ``address``, in every process and browser."""
    generations = _session_generations(request)
    generations[address] = generations.get(address, 0) + 1


def _session_generations(request):
    # pyramid_tm asks who the user is, to note it in the transaction, before
    # traversal has set request.root: then read the archive from the
    # request's connection, in the same transaction.
    archive = getattr(request, "root", None)
    if archive is None:
        archive = get_connection(request).root().get(ROOT_KEY)
    return getattr(archive, "session_generations", None)


def _has_session_cookie(request):
    # Reading an anonymous reader's session would be harmless, but looking
    # for the cookie first keeps pages for anonymous readers free of it.
    return request.registry.settings["kittypyr.session_cookie"] in request.cookies


def user_roles(request):
    """``{list_id: {roles}}`` of the logged-in user (empty when anonymous)."""
    user = request.user
    if user is None:
        return {}
    roles = {}
    for list_id, role in memberships.roles(request.registry, user.address):
        roles.setdefault(list_id, set()).add(role)
    return roles


def principals(request):
    found = [Everyone]
    user = request.user
    if user is None:
        return found
    found += [Authenticated, f"user:{user.address}"]
    if user.address in site_admins(request.registry):
        found.append(SITE_ADMIN)
    for list_id, roles in request.user_roles.items():
        found += [f"{role}:{list_id}" for role in roles]
    return found


class SecurityPolicy:
    """Identity from the session, permissions from ACLs and Mailman roles."""

    def __init__(self):
        self.helper = ACLHelper()

    def identity(self, request):
        return request.user

    def authenticated_userid(self, request):
        user = request.user
        return user.address if user is not None else None

    def permits(self, request, context, permission):
        return self.helper.permits(context, request.principals, permission)

    def remember(self, request, user, **kw):
        """Start a fresh session for ``user`` (never reuse one from before login)."""
        request.session.invalidate()
        request.session["user"] = {"address": user.address, "display_name": user.display_name,
                                   "user_id": user.user_id, "account": user.account or None,
                                   "generation": session_generation(request, user.address)}
        request.session.new_csrf_token()
        if not request.script_name:
            return []
        # Served under a prefix, a cookie of the same name for the whole host
        # (set before the cookie's path was the prefix) would be sent along,
        # last, and read instead of the new one: it ends here.
        name = request.registry.settings["kittypyr.session_cookie"]
        return [("Set-Cookie", make_cookie(name, None, path="/"))]

    def forget(self, request, **kw):
        """End the session here, and every copy of its cookie elsewhere."""
        user = request.user
        if user is not None:
            end_sessions(request, user.address)
        request.session.invalidate()
        return []


class LoginThrottle:
    """Slows down password guessing without locking out everyone else.

    Failures count against the account guessed: after ``account_limit`` of
    them within ``window`` seconds, from any addresses, that account's
    logins are refused until the oldest ages out. A client address is
    refused only when it has ``client_limit`` failures across at least
    ``client_accounts`` different accounts: many readers behind one NAT or
    proxy share an address, and one of them guessing one account must not
    close the door on the others. Attempts refused here are not failures,
    so a throttled attacker does not keep the door closed any longer.

    The failures are kept in the archive (``archive.login_failures``, an
    ``AgeingCounts``), so every process of the site counts what the others
    counted, on any storage: a wrong password is one small write, which
    merges with another process's at the same moment; a right password
    writes only when its account had failures, and other pages never look.
    Times are the wall clock's, to the second, the same in every process.
    """

    def __init__(self, account_limit=5, client_limit=50, client_accounts=10, window=600.0, clock=time.time):
        self.account_limit = account_limit
        self.client_limit = client_limit
        self.client_accounts = client_accounts
        self.window = window
        self.clock = clock
        # Accounts whose password is being checked in this process (``checking``).
        self.in_flight = set()
        self.lock = threading.Lock()

    def checking(self, address):
        """Claim ``address`` for one password check; False while another one of this process holds it.

        The failures are read before Mailman is asked and written after,
        when the request commits: guesses sent together would all read the
        count as it was, and each be checked. One at a time, each reads the
        failures of the one before. Give it back with ``checked`` once the
        request has committed.
        """
        with self.lock:
            if address in self.in_flight:
                return False
            self.in_flight.add(address)
            return True

    def checked(self, address):
        with self.lock:
            self.in_flight.discard(address)

    def recent(self, failures, kind, who, now):
        """``[(time, account address)]`` of what ``failures`` counts for ``who`` under ``kind`` within the window, oldest first.

        ``kind``: "account" or "client" for wrong passwords, or the kind of
        ``RecentActs`` the same record counts ("signup", "post").
        """
        who = who or ""
        entries = []
        for (_, _, when, address), count in failures.items((kind, who), (kind, who, math.inf)):
            if when > now - self.window:
                entries += [(when, address)] * count
        entries.sort()
        return entries

    def _account_wait(self, failures, address, now):
        entries = self.recent(failures, "account", address, now)
        if len(entries) < self.account_limit:
            return 0
        return entries[-self.account_limit][0] + self.window - now

    def _client_wait(self, failures, client, now):
        entries = self.recent(failures, "client", client, now)
        if len(entries) < self.client_limit:
            return 0
        latest = {}
        for when, address in entries:
            latest[address] = when
        if len(latest) < self.client_accounts:
            return 0
        # Open again as soon as either too few failures or too few accounts
        # are left within the window.
        fewer_failures = entries[-self.client_limit][0]
        fewer_accounts = sorted(latest.values(), reverse=True)[self.client_accounts - 1]
        return min(fewer_failures, fewer_accounts) + self.window - now

    def wait_seconds(self, failures, address, client):
        """Seconds until ``client`` may try a password for ``address`` (0: now). Writes nothing."""
        now = self.clock()
        return max(self._account_wait(failures, address, now), self._client_wait(failures, client, now))

    def failed(self, failures, address, client):
        """Count a wrong password for ``address`` from ``client`` in ``failures``."""
        now = self.clock()
        second = int(now)
        # Keys are compared with each other: no None (a client without an address) among strings.
        failures.add(("account", address, second, address), now, self.window)
        failures.add(("client", client or "", second, address), now, self.window)

    def succeeded(self, failures, address):
        """The right password for ``address``: its failures no longer count.

        The client's do: an attacker's own account must not wipe their record.
        """
        failures.remove(("account", address), ("account", address, math.inf))


login_throttle = LoginThrottle()


def throttled_client(request):
    """Whom the throttles count a request against: its client's address, an IPv6 client's /64 network.

    REMOTE_ADDR, never X-Forwarded-For (which ``request.client_addr``
    would believe from anyone): waitress puts the forwarded address there
    only when the request comes from its trusted_proxy. One IPv6 host is
    given a whole /64 and may send from any address in it: counted apart,
    each would have the limits of a client of its own.
    """
    address = request.remote_addr or ""
    try:
        ip = ipaddress.ip_address(address)
    except ValueError:
        return address
    if ip.version == 4:
        return address
    if ip.ipv4_mapped is not None:
        return str(ip.ipv4_mapped)
    return str(ipaddress.ip_network((ip, 64), strict=False))


# Sign-ups one client address may make within the login throttle's window.
SIGNUP_LIMIT = 5


class RecentActs:
    """Acts of one ``kind`` (sign-ups, posts) counted per client or reader within the login throttle's window.

    They are counted with the wrong passwords (``archive.login_failures``),
    whose generations age by that same window, so that every process
    counts them alike.
    """

    kind = None

    def __init__(self, clock=time.time):
        self.clock = clock

    @property
    def window(self):
        return login_throttle.window

    def wait_for(self, counts, who, limit):
        """Seconds ``who`` must wait before acting again, ``limit`` acts a window; 0 if none.

        A ``limit`` of 0 or less limits nothing.
        """
        if limit <= 0:
            return 0
        now = self.clock()
        recent = login_throttle.recent(counts, self.kind, who, now)
        if len(recent) < limit:
            return 0
        return max(1, math.ceil(recent[-limit][0] + self.window - now))

    def note(self, counts, who, address):
        """``who`` acted now, for ``address``."""
        now = self.clock()
        counts.add((self.kind, who or "", int(now), address), now, self.window)


class SignupThrottle(RecentActs):
    """Bounds the confirmation mails one client can have the site send.

    Anyone may sign up any address, and each sign-up makes a Mailman
    account and mails the address a link: without a bound, one client could
    have the site mail thousands of strangers. A client address gets
    ``limit`` sign-ups within the login throttle's window; the others wait
    until the oldest ages out.
    """

    kind = "signup"

    def __init__(self, limit=SIGNUP_LIMIT, clock=time.time):
        super().__init__(clock)
        self.limit = limit

    def wait_seconds(self, counts, client):
        """Seconds ``client`` must wait before its next sign-up; 0 if none."""
        return self.wait_for(counts, client, self.limit)

    def signed_up(self, counts, client, address):
        self.note(counts, client, address)


signup_throttle = SignupThrottle()


# Posts one reader may send from the web within the login throttle's window.
POST_LIMIT = 10


class PostThrottle(RecentActs):
    """Bounds the mail one reader can have the site send to lists.

    Any logged-in reader may post to a public list, and each post is a mail
    to every member: an account taken over, or made to spam, would
    otherwise send as fast as it can. A reader gets so many posts within
    the login throttle's window (``kittypyr.post_limit``).
    """

    kind = "post"

    def wait_seconds(self, counts, address, limit=POST_LIMIT):
        """Seconds the reader ``address`` must wait before their next post; 0 if none.

        ``limit``: the posts allowed within the window (``kittypyr.post_limit``; 0 or less: no limit).
        """
        return self.wait_for(counts, address, limit)

    def posted(self, counts, address):
        self.note(counts, address, address)


post_throttle = PostThrottle()


def sign(registry, purpose, value, max_age):
    """``value`` (a string) with its expiry and a signature, for a link in a mail."""
    expires = int(time.time() + max_age)
    payload = base64.urlsafe_b64encode(json.dumps([purpose, value, expires]).encode("utf-8")).decode("ascii")
    return payload + "." + _signature(registry, payload)


def unsign(registry, purpose, token):
    """The value signed by ``sign`` for ``purpose``, or None if forged, altered or expired."""
    payload, _, signature = (token or "").rpartition(".")
    if not payload or not hmac.compare_digest(signature, _signature(registry, payload)):
        return None
    try:
        signed_purpose, value, expires = json.loads(base64.urlsafe_b64decode(payload.encode("ascii")))
    except (ValueError, TypeError):
        return None
    if signed_purpose != purpose or expires < time.time():
        return None
    return value


def _signature(registry, payload):
    key = site_secret(registry).encode("utf-8")
    return hmac.new(key, b"kittypyr.link." + payload.encode("ascii"), hashlib.sha256).hexdigest()


def visible_lists(request):
    """The mailing lists the reader may see, in the archive's order."""
    return [mailing_list for mailing_list in request.root.lists.values()
            if mailing_list.is_public or request.has_permission("view", mailing_list)]


def may(request, permission, context):
    return bool(request.has_permission(permission, context))


def session_factory_under_prefix(**options):
    """A session factory whose cookie's path is the prefix the archive is served under.

    The prefix is the request's SCRIPT_NAME (waitress's ``url_prefix``, or a
    proxy's prefix made SCRIPT_NAME by the server), ``/`` when there is none:
    another application on the same host (Postorius under ``/mailman3/``, a
    second archive) never receives the cookie. One factory per prefix; a
    server has one or two. Cookies are signed with ``site_secret``, known
    once the storage has started.
    """
    factories = {}

    def session_for(request):
        path = request.script_name or "/"
        factory = factories.get(path)
        if factory is None:
            factory = factories[path] = SignedCookieSessionFactory(site_secret(request.registry), path=path,
                                                                   **options)
        return factory(request)

    return session_for


def configured_secret(settings):
    """``kittypyr.secret`` as set, or "" when it is not or holds a published example value."""
    secret = settings.get("kittypyr.secret", "").strip()
    if is_example_value(secret):
        # The example configurations once shipped such a value: published
        # with kittypyr, anyone could sign a session with it, as any reader
        # or administrator.
        log.warning("kittypyr.secret is still an example's %r, which anyone could sign with: the archive's "
                    "own secret is used instead; remove the line or set a long random string", secret)
        return ""
    return secret


def site_secret(registry):
    """What signs session cookies, links in mail and feed keys.

    ``kittypyr.secret`` when set; otherwise the archive's own (``Archive.secret``,
    made at its first start), which every process of the archive reads, so
    that sessions outlive a restart and hold in every process with nothing
    to configure. An application whose storage has not started yet (made
    without ``kittypyr.main``) signs with a secret of its own process.
    """
    secret = getattr(registry, "kittypyr_secret", None)
    if secret is None:
        secret = registry.kittypyr_secret = secrets.token_hex(32)
    return secret


def adopt_archive_secret(registry, archive):
    """At start-up: sign with ``archive``'s own secret unless ``kittypyr.secret`` gave one."""
    if getattr(registry, "kittypyr_secret", None) is None:
        registry.kittypyr_secret = archive.secret


# A feed key in a query string, read without decoding it (an answer's
# query may be no UTF-8 at all: a 400, which must not become a 500 here).
_FEED_KEY = re.compile(r"(?:^|[&;])key=")


def answers_kept_to_their_reader(cookie_name):
    """A ``NewResponse`` subscriber: no shared cache keeps one reader's answer for another.

    The answer to any URL of a list may depend on who asks: a private
    list's message, raw mail or attachment for its members, a 403 for
    everyone else. A proxy or CDN that keeps responses by URL (an
    attachment's ``.csv`` or ``.pdf`` by its suffix) must never hand a
    member's copy on, so every answer to a request with a session, or that
    starts one, is private to that reader; and every answer varies with the
    cookie, so that what an anonymous reader was given is not handed to a
    member either; an answer to a URL with a feed key is private too. No
    cache may hand an answer on without asking again (``no-cache``): a
    deleted message or a list made private must not outlive its
    deletion in a cache. Static files are the same for all.
    """

    def keep_to_reader(event):
        request, response = event.request, event.response
        route = request.matched_route
        if route is not None and route.name.startswith("__"):  # add_static_view's routes
            return
        vary = tuple(response.vary or ())
        if "Cookie" not in vary:
            response.vary = vary + ("Cookie",)
        # A feed key in the URL (or a redirect's) is a reader's, as a cookie is.
        if cookie_name in request.cookies or "Set-Cookie" in response.headers or _FEED_KEY.search(request.query_string):
            response.cache_control.public = False
            response.cache_control.private = True
        # Mail is deleted and lists close: a cache keeps nothing without
        # asking again (an unchanged page answers 304, cheaply).
        if response.cache_control.max_age is None and not response.cache_control.no_store:
            response.cache_control.no_cache = True

    return keep_to_reader


_FORM_TYPES = ("multipart/form-data", "application/x-www-form-urlencoded")


def refuse_unreadable_forms(event):
    """A form whose body cannot be read (multipart with no boundary) is a 400, not the 500 its token check raised.

    The archiver API reads its own form and answers for it.
    """
    request = event.request
    if request.method != "POST" or request.content_type not in _FORM_TYPES:
        return
    if request.path_info.startswith("/api/mailman/"):
        return
    try:
        request.POST
    except (ValueError, LookupError) as exc:  # UnicodeDecodeError is a ValueError
        raise HTTPBadRequest(f"The form could not be read: {exc}") from exc


def includeme(config):
    settings = config.registry.settings
    # Once the root is found (the page that says so is the site's), before any view reads the form.
    config.add_subscriber(refuse_unreadable_forms, ContextFound)
    config.registry.kittypyr_secret = configured_secret(settings) or None
    cookie_name = settings.setdefault("kittypyr.session_cookie", "kittypyr_session")
    secure = settings.get("kittypyr.base_url", "").startswith("https:")
    config.set_session_factory(session_factory_under_prefix(
        cookie_name=cookie_name, httponly=True, samesite="Lax", secure=secure,
        timeout=14 * 24 * 3600, reissue_time=3600, salt="kittypyr.session."))
    config.add_subscriber(answers_kept_to_their_reader(cookie_name), NewResponse)
    config.set_security_policy(SecurityPolicy())
    config.set_default_permission("view")
    config.set_default_csrf_options(require_csrf=True)
    config.add_request_method(current_user, "user", reify=True)
    config.add_request_method(user_roles, "user_roles", reify=True)
    config.add_request_method(principals, "principals", reify=True)
    config.add_request_method(visible_lists, "visible_lists", reify=True)
