"""Logging in and out with a Mailman identity, signing up, and the 403 page."""

import logging
import math
import re
import time
from urllib.parse import quote, urlsplit

from pyramid.httpexceptions import HTTPForbidden, HTTPSeeOther
from pyramid.renderers import render_to_response
from pyramid.security import NO_PERMISSION_REQUIRED, forget, remember
from pyramid.traversal import find_interface
from pyramid.view import forbidden_view_config, view_config

from kittypyr import mailer
from kittypyr.mailman import (
    AccountExists,
    AddressNotVerified,
    AddressRefused,
    LoginRefused,
    MailmanUnavailable,
    base_url,
    check_login,
    create_account,
    remove_unconfirmed_account,
    verify_address,
)
from kittypyr.resources import Archive, MailingList
from kittypyr.security import (User, login_throttle, memberships, sign, signup_throttle, throttled_client,
                               unsign)
from kittypyr.standalone import no_accounts_page

log = logging.getLogger(__name__)

CONFIRMATION_MAX_AGE = 3 * 24 * 3600
MIN_PASSWORD_LENGTH = 8
# The longest address mail can carry (RFC 5321's path, less its brackets).
ADDRESS_MAX = 254
_NOT_IN_AN_ADDRESS = re.compile(r"[@\s<>\"]")
# Mailman's REST API finds an account by its address in a URL path, which
# undoes %-escapes, stops at "?" or "#" and walks "/": written with any of
# these, one account would have endless spellings, each with its own count
# of wrong passwords. A login address has none of them (a "%" not followed
# by two hex digits is read as it is, and may stay).
_LOGIN_ADDRESS = re.compile(r"^(?!.*%[0-9a-fA-F]{2})[^@\s<>\"/\\?#]+@[^@\s<>\"/\\?#]+$")


# What a path or a query keeps as it is: its delimiters and escapes.
_URL_SAFE = "/?:@!$&'()*+,;=%~"


def safe_came_from(request, value):
    """A path on this site to go back to; anything else becomes the front page."""
    parts = urlsplit(value or "")
    if parts.scheme or parts.netloc or not parts.path.startswith("/") or parts.path.startswith("//"):
        return request.resource_url(request.root)
    # It becomes the Location header, which holds ASCII only: a link may
    # name its page unescaped (?q=日本語), as a browser's address bar does.
    path = quote(parts.path, safe=_URL_SAFE)
    return path + (f"?{quote(parts.query, safe=_URL_SAFE)}" if parts.query else "")


def _login_form(request, came_from, address="", error=None, status=200, typed=""):
    """The login page's values; ``typed``: a message the reader wrote and could not send, shown back."""
    request.response.status = status
    return {"came_from": came_from, "address": address, "error": error, "typed": typed,
            "csrf_token": request.session.get_csrf_token()}


@view_config(context=Archive, name="login", request_method="GET", renderer="kittypyr.templates:login.pt",
             permission=NO_PERMISSION_REQUIRED)
def login_form(context, request):
    return _login_form(request, safe_came_from(request, request.params.get("came_from")))


@view_config(context=Archive, name="login", request_method="POST", renderer="kittypyr.templates:login.pt",
             permission=NO_PERMISSION_REQUIRED)
def login(context, request):
    address = request.POST.get("address", "").strip().lower()
    password = request.POST.get("password", "")
    came_from = safe_came_from(request, request.POST.get("came_from"))
    client = throttled_client(request)
    if not _LOGIN_ADDRESS.match(address):
        # No account is written so: nothing to ask Mailman, nothing to count.
        return _login_form(request, came_from, address, status=403,
                           error="The address or the password is not right.")
    if not login_throttle.checking(address):
        request.response.headers["Retry-After"] = "1"
        return _login_form(request, came_from, address, status=429, error=(
            "A password for this address is being checked right now. Try again in a moment."))
    # Finished callbacks run after pyramid_tm has committed (or aborted):
    # the next guess reads this one's failure.
    request.add_finished_callback(lambda request: login_throttle.checked(address))
    failures = context.login_failures
    wait = login_throttle.wait_seconds(failures, address, client)
    if wait > 0:
        request.response.headers["Retry-After"] = str(int(wait) + 1)
        return _login_form(request, came_from, address, status=429, error=(
            f"Too many failed attempts. Try again in {int(wait // 60) + 1} minute(s)."))
    try:
        address, display_name, user_id = check_login(request.registry, address, password)
    except LoginRefused:
        # Committed with the 403 page: with no tm.commit_veto (kittypyr sets
        # none) pyramid_tm aborts only when a view raises, and this one returns.
        login_throttle.failed(failures, address, client)
        return _login_form(request, came_from, address, status=403,
                           error="The address or the password is not right.")
    except AddressNotVerified:
        return _login_form(request, came_from, address, status=403, error=(
            "This address has not been confirmed yet: follow the link in the mail we sent to it."))
    except MailmanUnavailable as exc:
        log.warning("login of %s impossible: %s", address, exc)
        return _login_form(request, came_from, address, status=503,
                           error="Accounts cannot be checked right now. Please try again later.")
    if context.awaits_confirmation(address):
        # Signed up here and never confirmed: whoever did may not own the
        # address, though Mailman may have marked it proved another way
        # since (its owner confirming a subscription by mail does).
        return _login_form(request, came_from, address, status=403, error=(
            "This address has not been confirmed yet: follow the link in the mail we sent to it."))
    login_throttle.succeeded(failures, address)
    # Mailman just accepted the account: what this process kept of it (its
    # roles, that it was deleted, if it was made again since) is stale.
    memberships.forget(address)
    # The account logged in to: a password changed, or the account made
    # again, ends this session (security.current_user).
    account = memberships.account(request.registry, address)
    if not isinstance(account, str):
        # Mailman took the password, then could not say which account it is:
        # a session opened now would outlive a change of that password.
        log.warning("login of %s: Mailman could not tell its account", address)
        return _login_form(request, came_from, address, status=503,
                           error="Accounts cannot be checked right now. Please try again later.")
    headers = remember(request, User(address, display_name, user_id, account))
    return HTTPSeeOther(came_from, headers=headers)


@view_config(context=Archive, name="logout", request_method="POST", permission=NO_PERMISSION_REQUIRED)
def logout(context, request):
    headers = forget(request)
    return HTTPSeeOther(request.resource_url(request.root), headers=headers)


def _signup_form(request, values=None, error=None, status=200):
    request.response.status = status
    return {"values": values or {}, "error": error, "sent_to": None, "unoffered": False,
            "csrf_token": request.session.get_csrf_token()}


def _signup_unoffered(request):
    """The sign-up page of a site without ``kittypyr.base_url`` (see ``standalone.signup_offered``)."""
    return dict(_signup_form(request, status=404), unoffered=True)


@view_config(context=Archive, name="signup", request_method="GET", renderer="kittypyr.templates:signup.pt",
             permission=NO_PERMISSION_REQUIRED)
def signup_form(context, request):
    if not request.signup_offered:
        return _signup_unoffered(request)
    return _signup_form(request)


SIGNED_UP_KEY = "kittypyr.signed_up_address"


def is_signup_address(address):
    """Whether ``address`` reads as an e-mail address: one @, a dot inside its domain, no space, quote or bracket.

    Checked by its parts, not by one pattern: a pattern whose parts both
    take dots tried every way of sharing out those of ``a@....@``, in time
    growing with the square of its length, holding every thread meanwhile.
    """
    local, at, domain = address.partition("@")
    if not at or not local or len(address) > ADDRESS_MAX:
        return False
    if _NOT_IN_AN_ADDRESS.search(local) or _NOT_IN_AN_ADDRESS.search(domain):
        return False
    return "." in domain[1:-1]


@view_config(context=Archive, name="signup", request_method="POST", renderer="kittypyr.templates:signup.pt",
             permission=NO_PERMISSION_REQUIRED)
def signup(context, request):
    if not request.signup_offered:
        return _signup_unoffered(request)
    values = {
        "address": mailer.single_line(request.POST.get("address", "")).lower(),
        "display_name": mailer.single_line(request.POST.get("display_name", "")),
    }
    password = request.POST.get("password", "")
    if not is_signup_address(values["address"]):
        return _signup_form(request, values, "Please give a valid e-mail address.", 400)
    if not _LOGIN_ADDRESS.match(values["address"]) or "*" in values["address"]:
        # Mailman would take it, but could find it neither to confirm it nor
        # to log in (see _LOGIN_ADDRESS); "*" it reads as a pattern of other
        # members' addresses (see Memberships._fetch).
        return _signup_form(request, values, (
            "An address with /, ?, #, * or a %-escape in it cannot be used for an account here."), 400)
    if not mailer.decodes_to_one_line(values["display_name"]):
        # It would be the name of every post from the web (see mailer).
        return _signup_form(request, values, (
            "Your name holds an encoded line break (=?…?=), which mail cannot carry: please write it otherwise."),
                            400)
    if len(password) < MIN_PASSWORD_LENGTH:
        return _signup_form(request, values,
                            f"Please choose a password of at least {MIN_PASSWORD_LENGTH} characters.", 400)
    if password != request.POST.get("password_again", ""):
        return _signup_form(request, values, "The two passwords differ.", 400)
    if request.environ.get(SIGNED_UP_KEY) == values["address"]:
        # Run again after a conflict (pyramid_retry reuses the environ): the
        # account exists and its mail is sent; do neither twice.
        return dict(_signup_form(request), sent_to=values["address"])
    counts = context.login_failures
    wait = signup_throttle.wait_seconds(counts, throttled_client(request))
    if wait:
        request.response.retry_after = wait
        return _signup_form(request, values, (
            f"Too many sign-ups from your network just now. Please try again in {math.ceil(wait / 60)} "
            f"minute(s)."), 429)
    # Counted whatever Mailman answers: asking it about addresses is what is bounded.
    signup_throttle.signed_up(counts, throttled_client(request), values["address"])
    try:
        _take_back_expired_signup(context, request.registry, values["address"])
        create_account(request.registry, values["address"], values["display_name"], password)
        context.note_signup(values["address"], time.time())
    except AccountExists:
        return _signup_form(request, values, (
            "An account with this address exists already: log in with it instead."), 409)
    except AddressRefused:
        return _signup_form(request, values, (
            "Mailman does not accept this address: check its spelling, or sign up with another."), 400)
    except MailmanUnavailable as exc:
        log.warning("sign-up of %s impossible: %s", values["address"], exc)
        return _signup_form(request, values, "Accounts cannot be created right now. Please try again later.",
                            503)
    token = sign(request.registry, "confirm", values["address"], CONFIRMATION_MAX_AGE)
    link = f"{base_url(request)}confirm?token={token}"
    # Whoever signs up chooses the address this goes to: the mail greets the
    # address, never the name they typed, or the site would mail anyone a
    # text of a stranger's choosing.
    message = mailer.new_message(
        request, f"noreply@{urlsplit(base_url(request)).hostname or 'localhost'}", "kittypyr archive",
        values["address"], "Confirm your address",
        f"Hello {values['address']},\n\n"
        f"someone, probably you, signed up at {base_url(request)} with this address.\n"
        f"To confirm it, open this link within three days:\n\n{link}\n\n"
        "If it was not you, ignore this mail: nothing more will happen.\n")
    try:
        mailer.send(request.registry, message)
    except mailer.MailNotSent as exc:
        log.error("confirmation mail to %s not sent: %s", values["address"], exc)
        # Left unconfirmed, the account could neither be signed up for again
        # nor logged in to, and nothing would send its mail again.
        try:
            remove_unconfirmed_account(request.registry, values["address"])
            context.signup_confirmed(values["address"])
        except MailmanUnavailable as removal:
            log.error("the unconfirmed account of %s stays: %s", values["address"], removal)
            return _signup_form(request, values, (
                "The confirmation mail could not be sent. Please ask the site's administrators."), 503)
        return _signup_form(request, values, (
            "The confirmation mail could not be sent, so no account was made. Please try again later."), 503)
    request.environ[SIGNED_UP_KEY] = values["address"]
    result = _signup_form(request)
    result["sent_to"] = values["address"]
    return result


def _take_back_expired_signup(archive, registry, address):
    """Remove the account an earlier sign-up of ``address`` made here, if its link expired unused.

    Anyone may sign up anyone's address: its owner could otherwise never
    sign up (the account exists) nor confirm it (the password is another's).
    Mailman keeps an account whose address it holds proved.
    """
    signed_up = archive.signed_up_at(address)
    if signed_up is not None and time.time() - signed_up > CONFIRMATION_MAX_AGE:
        # Still noted unconfirmed: kept by Mailman, it logs in no one.
        remove_unconfirmed_account(registry, address)


@view_config(context=Archive, name="confirm", renderer="kittypyr.templates:confirm.pt",
             permission=NO_PERMISSION_REQUIRED, require_csrf=False)
def confirm(context, request):
    """Prove an address. A GET only shows a button: mail scanners follow links."""
    if not request.signup_offered:
        # Its "sign up again" would lead to a sign-up that is not there.
        return render_to_response("kittypyr.templates:signup.pt", _signup_unoffered(request), request=request,
                                  response=request.response)
    token = request.params.get("token", "")
    address = unsign(request.registry, "confirm", token)
    if address is None:
        request.response.status = 400
        return {"address": None, "token": token, "confirmed": False}
    if request.method != "POST":
        return {"address": address, "token": token, "confirmed": False}
    # Anyone may sign up anyone's address: a stranger clicking Confirm in
    # the mail they got would hand whoever did a confirmed account with
    # their address. Only the one who chose the password confirms; wrong
    # ones count as wrong passwords at login do.
    failures, client = context.login_failures, throttled_client(request)
    # One password check of an account at a time, as for a login (see
    # LoginThrottle.checking): guesses sent together would each read the
    # failures as they were before any of them.
    if not login_throttle.checking(address):
        request.response.status = 429
        request.response.headers["Retry-After"] = "1"
        return {"address": address, "token": token, "confirmed": False,
                "error": "A password for this address is being checked right now. Try again in a moment."}
    request.add_finished_callback(lambda request: login_throttle.checked(address))
    if login_throttle.wait_seconds(failures, address, client) > 0:
        request.response.status = 429
        return {"address": address, "token": token, "confirmed": False,
                "error": "Too many failed attempts. Please try again later."}
    try:
        check_login(request.registry, address, request.POST.get("password", ""))
    except LoginRefused:
        login_throttle.failed(failures, address, client)
        request.response.status = 403
        return {"address": address, "token": token, "confirmed": False,
                "error": "This is not the password chosen when signing up. If you did not sign up, "
                         "close this page: nothing more will happen."}
    except AddressNotVerified:
        pass  # the right password, for an address not proved yet: as expected
    except MailmanUnavailable as exc:
        log.warning("confirmation of %s impossible: %s", address, exc)
        request.response.status = 503
        return {"address": address, "token": token, "confirmed": False,
                "error": "Addresses cannot be confirmed right now. Please try again later."}
    try:
        verify_address(request.registry, address)
    except MailmanUnavailable as exc:
        log.warning("confirmation of %s impossible: %s", address, exc)
        request.response.status = 503
        return {"address": address, "token": token, "confirmed": False,
                "error": "Addresses cannot be confirmed right now. Please try again later."}
    context.signup_confirmed(address)
    return {"address": address, "token": token, "confirmed": True}


# The views a reader writes a message in.
WRITING = ("reply", "new")


@forbidden_view_config()
def forbidden(request):
    """403: the login form for anonymous readers, an explanation for the others.

    Nothing about the refused resource is shown, not even its title.
    """
    refusal = request.exception
    if isinstance(refusal, HTTPForbidden) and getattr(refusal, "result", None) is None:
        # Raised by a view with its own explanation, not by a permission check.
        return refusal
    return refusal_page(request, find_interface(getattr(request, "context", None), MailingList))


def refusal_page(request, mailing_list):
    """The 403 of a page inside ``mailing_list`` (None: of no list), as ``forbidden`` describes it.

    For views that refuse a list they found by other means than traversal.
    """
    if request.path_info.startswith("/api/"):
        response = render_to_response("json", {"error": "you may not see this"}, request=request)
        response.status = 403
        return response
    if request.user is None and not request.mailman_available:
        # Its login form would post to a /login that cannot log anyone in.
        response = no_accounts_page(request, 403)
    elif request.user is None:
        typed = request.POST.get("body", "") if request.method == "POST" and request.view_name in WRITING else ""
        # A post sent by a reader logged out meanwhile (in another browser):
        # what they wrote is shown back, not lost.
        error = ("You are not logged in any more, so your message was not sent: log in, then send it again."
                 if typed else "Please log in to see this page.")
        values = _login_form(request, safe_came_from(request, request.path_qs), status=403, error=error,
                             typed=typed)
        response = render_to_response("kittypyr.templates:login.pt", values, request=request)
    else:
        # Refused inside a list the reader may read: an administrator's page.
        private_list = mailing_list is not None and not request.has_permission("view", mailing_list)
        response = render_to_response("kittypyr.templates:forbidden.pt",
                                      {"private_list": private_list}, request=request)
    response.status = 403
    response.cache_control.private = True
    return response
