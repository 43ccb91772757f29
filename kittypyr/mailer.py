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
