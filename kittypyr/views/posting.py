"""Writing to a list from the web: a reply to a message, or a new thread.

The post is sent by SMTP to the list's posting address, from the reader's
verified address, and comes back into the archive the way all mail does:
through Mailman and its archiver. Nothing is stored here on the way.
"""

import hashlib
import logging
import math
import secrets

from pyramid.httpexceptions import HTTPSeeOther
from pyramid.traversal import find_root
from pyramid.view import view_config, view_defaults

from kittypyr import mailer
from kittypyr.mail import DERIVED_ID_DOMAIN
from kittypyr.mailman import MailmanUnavailable, posting_rules, subscribe
from kittypyr.rendering import obfuscate_address
from kittypyr.resources import MailingList, Message
from kittypyr.security import POST_LIMIT, list_id_of, memberships, post_throttle

log = logging.getLogger(__name__)

MAX_BODY_CHARS = 100_000


def reply_subject(subject):
    subject = mailer.single_line(subject)
    return subject if subject.lower().startswith("re:") else f"Re: {subject}".strip()


def quoted(message):
    """The message's text, quoted as mail clients quote it, its addresses obfuscated as on its page."""
    lines = obfuscate_address(message.body_text or "").rstrip().splitlines()
    return "\n".join("> " + line if line else ">" for line in lines) + "\n\n"


class Compose:
    """The form and its sending, for a reply (context Message) or a new thread (context MailingList)."""

    def __init__(self, context, request):
        self.context = context
        self.request = request
        self.is_reply = isinstance(context, Message)
        self.mailing_list = context.mailing_list if self.is_reply else context

    def is_member(self):
        roles = self.request.user_roles.get(list_id_of(self.mailing_list.address), set())
        return "member" in roles

    def form(self, subject, body, error=None, status=200):
        self.request.response.status = status
        # Names this message, whatever it says: sent once, the same form
        # sent again (a reload, Back and Send) sends nothing more.
        draft = self.request.POST.get("draft") or secrets.token_urlsafe(12)
        member = self.is_member()
        rules = None if member else posting_rules(self.request.registry, self.mailing_list.address)
        return {
            "mailing_list": self.mailing_list,
            "parent": self.context if self.is_reply else None,
            "subject": subject,
            "body": body,
            "error": error,
            "is_member": member,
            "rules": rules,
            "csrf_token": self.request.session.get_csrf_token(),
            "draft": draft,
            "action": self.request.resource_url(self.context, "reply" if self.is_reply else "new"),
        }

    def show(self):
        if self.is_reply:
            # The form is a page like any other: addresses in what it quotes are not shown raw.
            return self.form(reply_subject(obfuscate_address(self.context.subject)), quoted(self.context))
        return self.form("", "")

    def send(self):
        request = self.request
        post = request.POST
        subject = mailer.single_line(post.get("subject", ""))
        body = post.get("body", "").replace("\r\n", "\n")
        if not subject:
            return self.form(subject, body, "Please give your message a subject.", 400)
        if not body.strip():
            return self.form(subject, body, "Your message is empty.", 400)
        if len(body) > MAX_BODY_CHARS:
            return self.form(subject, body, "Your message is too long for a list.", 400)
        user = request.user
        # The form's draft and what it says: the same form changed is another message.
        draft = _sent_form(post.get("draft", "")[:40], subject, body)
        if draft and draft in request.session.get(SENT_DRAFTS_KEY, ()):
            request.session.flash("This message was sent already: it was not sent again.")
            return HTTPSeeOther(request.resource_url(self._after_sending()))
        counts = find_root(self.context).login_failures
        limit = int(request.registry.settings.get("kittypyr.post_limit") or POST_LIMIT)
        wait = post_throttle.wait_seconds(counts, user.address, limit)
        if wait and request.environ.get(SENT_KEY) is None:
            request.response.retry_after = wait
            return self.form(subject, body, (
                f"You have sent many messages in a short while. Please wait {math.ceil(wait / 60)} minute(s)"
                " and send this one again: it is kept here."), 429)
        notice = "Your message was sent to the list."
        if not self.mailing_list.archives_no_more:
            notice += " It appears here once the list has delivered it."
        held = "Your message was sent to the list and waits for a moderator's approval."
        rules = posting_rules(request.registry, self.mailing_list.address)
        if self.is_member():
            if rules is not None and rules["members_held"]:
                notice = held
        elif rules is not None and rules["moderated"]:
            notice = held
        elif post.get("subscribe") != "yes":
            return self.form(subject, body, "To post, please confirm that you want to subscribe.", 400)
        else:
            try:
                joined = subscribe(request.registry, self.mailing_list.address, user.address, user.display_name)
            except MailmanUnavailable as exc:
                log.warning("subscribing %s to %s failed: %s", user.address, self.mailing_list.address, exc)
                return self.form(subject, body, "The list cannot be joined right now. Please try again later.", 503)
            memberships.forget(user.address)
            if not joined:
                notice = "Your subscription waits for a moderator's approval; your message will be held until then."
            elif rules is not None and rules["members_held"]:
                notice = held
        # The environ outlives a retry (pyramid_retry runs the request again
        # on the same environ after a conflict): a post already sent by an
        # earlier attempt is not sent again.
        sent_before = request.environ.get(SENT_KEY)
        if sent_before is None:
            try:
                message = mailer.new_message(request, user.address, user.display_name, self.mailing_list.address,
                                             subject, body)
                if self.is_reply:
                    mailer.add_reply_headers(message, _id_it_came_with(self.context), self.context.references)
                mailer.send(request.registry, message)
            except mailer.UnsafeHeader:
                return self.form(subject, body, (
                    "The subject or your name holds an encoded line break (=?…?=), which would forge the mail's"
                    " header: please write it otherwise."), 400)
            except mailer.MailRefused as exc:
                log.error("post from %s to %s refused: %s", user.address, self.mailing_list.address, exc)
                return self.form(subject, body, (
                    f"The mail server refused your message ({exc.reason[:300]}). It was not sent; your text is"
                    " kept here."), 502)
            except mailer.MailNotSent as exc:
                log.error("post from %s to %s not sent: %s", user.address, self.mailing_list.address, exc)
                return self.form(subject, body,
                                 "Your message could not be sent right now. Please try again later.", 503)
            request.environ[SENT_KEY] = message["Message-ID"]
            log.info("%s posted %s to %s from the web", user.address, message["Message-ID"],
                     self.mailing_list.address)
        # Run again after a conflict, the request sends nothing more but
        # counts what was sent once more: the first run's counts were undone.
        post_throttle.posted(counts, user.address)
        if draft:
            request.session[SENT_DRAFTS_KEY] = [*request.session.get(SENT_DRAFTS_KEY, ()), draft][-SENT_DRAFTS_KEPT:]
        if self.mailing_list.archives_no_more:
            notice += " This list's mail is no longer archived here: it will not appear on this site."
        request.session.flash(notice)
        return HTTPSeeOther(request.resource_url(self._after_sending()))

    def _after_sending(self):
        """Where a reader goes once their message is sent: its thread, or the list."""
        if self.is_reply:
            return self.mailing_list.threads.data.get(self.context.thread) or self.context
        return self.mailing_list


SENT_KEY = "kittypyr.posted_message_id"
# The drafts a session sent last (their forms' ``draft``): a cookie holds few.
SENT_DRAFTS_KEY = "sent_drafts"
SENT_DRAFTS_KEPT = 10


def _sent_form(draft, subject, body):
    """What a session remembers of a form it sent: its draft and a digest of what it said; '' without a draft."""
    if not draft:
        return ""
    said = "\n".join((subject, body)).encode("utf-8", "surrogatepass")
    return f"{draft}:{hashlib.sha256(said).hexdigest()[:16]}"


def _id_it_came_with(message):
    """The Message-ID ``message`` came with, which mail clients know it by; '' if it came with none.

    A post reusing another's id is kept under one of the archive's making,
    and one without an id under one made of its content: neither names it
    in anyone's mailbox.
    """
    came_with = getattr(message, "original_message_id", None) or message.message_id
    return "" if came_with.endswith(DERIVED_ID_DOMAIN) else came_with


@view_defaults(permission="post", renderer="kittypyr.templates:compose.pt")
class PostingViews:
    def __init__(self, context, request):
        self.compose = Compose(context, request)

    @view_config(context=Message, name="reply", request_method="GET")
    @view_config(context=MailingList, name="new", request_method="GET")
    def show(self):
        return self.compose.show()

    @view_config(context=Message, name="reply", request_method="POST")
    @view_config(context=MailingList, name="new", request_method="POST")
    def send(self):
        return self.compose.send()
