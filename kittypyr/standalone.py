"""An archive without Mailman core: what it offers instead of dead ends.

Accounts, posting from the web, votes, tags and favourites all lean on
Mailman core's REST API. A *stand-alone* install is one where it is not
configured (``kittypyr.mailman_url`` empty) or does not answer right now.
There, pages hide Log in, Sign up, Reply and New thread, and the pages
behind them explain instead; every message still offers "Reply by e-mail"
(a ``mailto:`` link to the list, as HyperKitty has), which works with any
install.

Whether Mailman answers is asked at most once a minute per process, and
the log says so once when it stops answering (and once when it is back),
not at every page or for every list.
"""

import base64
import logging
import threading
import time
from urllib.parse import quote
from urllib.request import Request, urlopen

from pyramid.httpexceptions import HTTPNotFound, HTTPServiceUnavailable
from pyramid.events import BeforeRender
from pyramid.renderers import render_to_response
from pyramid.security import NO_PERMISSION_REQUIRED

log = logging.getLogger(__name__)

# Seconds between two questions to Mailman about whether it answers, and how
# long one may take: a page waits for it at most once a minute.
CHECK_EVERY = 60.0
PROBE_TIMEOUT = 3.0


def mailman_url(registry):
    return registry.settings.get("kittypyr.mailman_url", "").strip().rstrip("/")


def probe(registry):
    """True when Mailman core's REST API answers with the configured credentials."""
    settings = registry.settings
    credentials = f"{settings.get('kittypyr.mailman_user', '')}:{settings.get('kittypyr.mailman_password', '')}"
    request = Request(mailman_url(registry) + "/3.1/system/versions", headers={
        "Authorization": "Basic " + base64.b64encode(credentials.encode("utf-8")).decode("ascii")})
    try:
        with urlopen(request, timeout=PROBE_TIMEOUT) as answer:
            return 200 <= answer.status < 300, f"HTTP {answer.status}"
    except Exception as exc:  # refused, timed out, 401, a bad answer: all the same here
        return False, repr(exc)


class MailmanPresence:
    """Whether Mailman core is configured and answers, asked now and then, per process."""

    def __init__(self, check_every=CHECK_EVERY, clock=time.monotonic, ask=probe):
        self.check_every = check_every
        self.clock = clock
        self.ask = ask
        self.lock = threading.Lock()
        self.known = {}  # Mailman URL -> (answers, when asked)

    def available(self, registry):
        url = mailman_url(registry)
        if not url:
            return False
        answers, asked = self.known.get(url, (None, None))
        if asked is not None and self.clock() - asked < self.check_every:
            return answers
        with self.lock:
            answers, asked = self.known.get(url, (None, None))
            if asked is not None and self.clock() - asked < self.check_every:
                return answers  # asked meanwhile by another request
            now_answers, why = self.ask(registry)
            self.known[url] = (now_answers, self.clock())
        if answers is not False and not now_answers:
            log.warning("Mailman core at %s does not answer (%s): logging in, signing up, posting from "
                        "the web, votes, tags and favourites are off until it does; asking again every "
                        "%d seconds", url, why, self.check_every)
        elif answers is False and now_answers:
            log.warning("Mailman core at %s answers again", url)
        return now_answers

    def seems_down(self, registry):
        """True when the last question found Mailman configured but silent (no new question)."""
        answers, _ = self.known.get(mailman_url(registry), (None, None))
        return bool(mailman_url(registry)) and answers is False


presence = MailmanPresence()


def mailman_available(request):
    return presence.available(request.registry)


def signup_offered(request):
    """Whether signing up can work: Mailman answers, and the site knows its own address.

    The confirmation link must be made from ``kittypyr.base_url``: made
    from the request, its host would be whatever the one signing up wrote
    in the Host header, and the mail to someone else's address would carry
    the token to their host.
    """
    return request.writing_offered and bool(request.registry.settings.get("kittypyr.base_url"))


def mail_offered(request):
    """Whether the site has a mail server to send through: ``kittypyr.smtp_host`` (localhost when unset) is not empty."""
    return bool(request.registry.settings.get("kittypyr.smtp_host", "localhost").strip())


def writing_offered(request):
    """Whether replying, starting a thread and signing up can work: Mailman answers and mail can be sent."""
    return request.mailman_available and request.mail_offered


class _RequestFlagPredicate:
    """View predicate ``<flag>=True|False``: whether the request's ``flag`` (a request method of this module) is so."""

    flag = None

    def __init__(self, value, config):
        self.value = bool(value)

    def text(self):
        return f"{self.flag} = {self.value}"

    phash = text

    def __call__(self, context, request):
        return getattr(request, self.flag) == self.value


class MailmanAvailablePredicate(_RequestFlagPredicate):
    flag = "mailman_available"


class MailOfferedPredicate(_RequestFlagPredicate):
    flag = "mail_offered"


def reply_subject(subject):
    subject = " ".join((subject or "").split())
    return subject if subject[:3].lower() == "re:" else f"Re: {subject}".rstrip()


def reply_mailto(message):
    """A ``mailto:`` link replying to ``message`` on its list: ``Re:`` subject and ``In-Reply-To``."""
    fields = f"subject={quote(reply_subject(message.subject), safe='')}"
    message_id = "".join((message.original_message_id or message.message_id or "").split())
    if message_id:
        message_id = message_id if message_id.startswith("<") else f"<{message_id}>"
        fields += f"&In-Reply-To={quote(message_id, safe='')}"
    return f"mailto:{quote(message.mailing_list.address, safe='@')}?{fields}"


def list_mailto(mailing_list):
    return f"mailto:{quote(mailing_list.address, safe='@')}"


def template_helpers(event):
    event["reply_mailto"] = reply_mailto
    event["list_mailto"] = list_mailto


def _unavailable(request, **shown):
    """The page shown instead: 404 when no Mailman is configured, 503 while it does not answer."""
    configured = bool(mailman_url(request.registry))
    request.response.status = HTTPServiceUnavailable.code if configured else HTTPNotFound.code
    if configured:
        request.response.retry_after = int(presence.check_every)
    return _explanation(configured=configured, **shown)


def _explanation(configured, no_mail=False, **shown):
    """What ``standalone.pt`` shows instead of a form that cannot work here."""
    return dict({"configured": configured, "no_mail": no_mail, "message": None, "mailing_list": None}, **shown)


def no_accounts_page(request, status):
    """``standalone.pt`` saying why nobody logs in here, answered ``status``: for a page that would offer a login form."""
    values = _explanation(configured=bool(mailman_url(request.registry)))
    response = render_to_response("kittypyr.templates:standalone.pt", values, request=request)
    response.status = status
    return response


def explain_accounts(context, request):
    return _unavailable(request)


def explain_reply(context, request):
    return _unavailable(request, message=context, mailing_list=context.mailing_list)


def explain_new_thread(context, request):
    return _unavailable(request, mailing_list=context)


def _without_mail(request, **shown):
    """The page shown instead of a form that would send mail, on a site with no mail server: 404."""
    request.response.status = HTTPNotFound.code
    return _explanation(configured=True, no_mail=True, **shown)


def explain_reply_without_mail(context, request):
    return _without_mail(request, message=context, mailing_list=context.mailing_list)


def explain_new_thread_without_mail(context, request):
    return _without_mail(request, mailing_list=context)


def includeme(config):
    config.add_request_method(mailman_available, "mailman_available", reify=True)
    config.add_request_method(signup_offered, "signup_offered", reify=True)
    config.add_request_method(mail_offered, "mail_offered", reify=True)
    config.add_request_method(writing_offered, "writing_offered", reify=True)
    config.add_view_predicate("mailman_available", MailmanAvailablePredicate)
    config.add_view_predicate("mail_offered", MailOfferedPredicate)
    config.add_subscriber(template_helpers, BeforeRender)
    from kittypyr.resources import Archive, MailingList, Message

    renderer = "kittypyr.templates:standalone.pt"
    for name in ("login", "signup", "confirm"):
        config.add_view(explain_accounts, context=Archive, name=name, mailman_available=False, renderer=renderer,
                        permission=NO_PERMISSION_REQUIRED, require_csrf=False)
    config.add_view(explain_reply, context=Message, name="reply", mailman_available=False, renderer=renderer,
                    permission="view", require_csrf=False)
    config.add_view(explain_new_thread, context=MailingList, name="new", mailman_available=False, renderer=renderer,
                    permission="view", require_csrf=False)
    config.add_view(explain_reply_without_mail, context=Message, name="reply", mailman_available=True,
                    mail_offered=False, renderer=renderer, permission="view", require_csrf=False)
    config.add_view(explain_new_thread_without_mail, context=MailingList, name="new", mailman_available=True,
                    mail_offered=False, renderer=renderer, permission="view", require_csrf=False)
    if not mailman_url(config.registry):
        log.info("no Mailman core is configured (kittypyr.mailman_url): a stand-alone archive, read by "
                 "everyone, with no accounts and no posting from the web; replies go by e-mail")
