"""Mail kittypyr itself sends: address confirmations and posts from the web.

Everything goes to the SMTP server of ``kittypyr.smtp_host`` and
``kittypyr.smtp_port``; a post reaches the list through it and Mailman, and
comes back into the archive the normal way.
"""

import smtplib
from email.headerregistry import Address
from email.message import EmailMessage
from email.policy import SMTP
from email.utils import format_datetime, make_msgid
from importlib.metadata import PackageNotFoundError, version
from urllib.parse import urlsplit

from kittypyr.mailman import base_url


class MailNotSent(Exception):
    """The SMTP server could not be reached or refused the mail."""


def user_agent():
    try:
        return f"kittypyr/{version('kittypyr')}"
    except PackageNotFoundError:
        return "kittypyr"


def single_line(text):
    """``text`` without line breaks: no header can be smuggled in through it."""
    return " ".join((text or "").split())


# RFC 5322's limit on a header line: a longer id could not be sent unbroken.
MAX_REFERENCE_LENGTH = 998 - len("In-Reply-To: <>")


def message_id_reference(message_id):
    """``message_id`` written ``<id>`` for an In-Reply-To or References header; '' if none is left.

    Archived Message-IDs are kept as they arrived (their hash names the
    message), so they may hold anything a mail did: control characters
    (NUL, CR, LF ...), spaces and angle brackets would break the header or
    forge others, and are dropped. What remains is how a mail client would
    most likely have read the id.
    """
    kept = "".join(c for c in message_id or "" if c.isprintable() and not c.isspace() and c not in "<>")
    if not kept or len(kept) > MAX_REFERENCE_LENGTH:
        return ""
    return f"<{kept}>"


def add_reply_headers(message, parent_id, parent_references):
    """Make ``message`` a reply to the mail ``parent_id``, whose References were ``parent_references``.

    Sets In-Reply-To to the parent and References to the parent's chain
    ending with the parent, leaving out ids with nothing usable in them.
    """
    parent = message_id_reference(parent_id)
    chain = []
    for ref in parent_references:
        reference = message_id_reference(ref)
        if reference and reference != parent and reference not in chain:
            chain.append(reference)
    if parent:
        message["In-Reply-To"] = parent
        chain.append(parent)
    if chain:
        message["References"] = " ".join(chain)


def new_message(request, sender_address, sender_name, to, subject, body):
    """An EmailMessage from the reader, with a fresh Message-ID."""
    message = EmailMessage(policy=SMTP)
    message["From"] = Address(display_name=single_line(sender_name), addr_spec=single_line(sender_address))
    message["To"] = single_line(to)
    message["Subject"] = single_line(subject)
    message["Date"] = format_datetime(_now())
    message["Message-ID"] = make_msgid(domain=urlsplit(base_url(request)).hostname or "kittypyr.invalid")
    message["User-Agent"] = user_agent()
    message.set_content(body if body.endswith("\n") else body + "\n")
    return message


def _now():
    from datetime import datetime, timezone

    return datetime.now(timezone.utc)


def send(registry, message):
    """Hand ``message`` to the configured SMTP server."""
    settings = registry.settings
    host = settings.get("kittypyr.smtp_host", "localhost")
    port = int(settings.get("kittypyr.smtp_port", 25))
    try:
        with smtplib.SMTP(host, port, timeout=30) as smtp:
            smtp.send_message(message)
    except (OSError, smtplib.SMTPException) as exc:
        raise MailNotSent(f"could not send mail through {host}:{port}: {exc}") from exc
