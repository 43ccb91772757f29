"""Mail kittypyr itself sends: address confirmations and posts from the web.

Everything goes to the SMTP server of ``kittypyr.smtp_host`` and
``kittypyr.smtp_port``; a post reaches the list through it and Mailman, and
comes back into the archive the normal way.
"""

import re
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


class MailRefused(MailNotSent):
    """The SMTP server refused the mail for good (a 5xx answer): sent again, it would be refused again.

    ``reason``: what the server said.
    """

    def __init__(self, message, reason):
        super().__init__(message)
        self.reason = reason


def _refusal(exc):
    """The server's words when ``exc`` is a refusal for good, else None."""
    if isinstance(exc, smtplib.SMTPRecipientsRefused):
        answers = list(exc.recipients.values())
    elif isinstance(exc, (smtplib.SMTPSenderRefused, smtplib.SMTPDataError)):
        answers = [(exc.smtp_code, exc.smtp_error)]
    else:
        return None
    permanent = [text for code, text in answers if 500 <= code < 600]
    if not permanent:
        return None
    said = permanent[0]
    return single_line(said.decode("utf-8", "replace") if isinstance(said, bytes) else str(said))


class UnsafeHeader(ValueError):
    """A mail would be written with header fields not its own: a line break decoded from an encoded word
    (``=?…?=``) in a value."""


def user_agent():
    try:
        return f"kittypyr/{version('kittypyr')}"
    except PackageNotFoundError:
        return "kittypyr"


def single_line(text):
    """``text`` without line breaks: no header can be smuggled in through it."""
    return " ".join((text or "").split())


# What ends a line for some reader of the mail, once a header is decoded.
_LINE_BREAK = re.compile(r"[\r\n\x0b\x0c\x1c-\x1e\x85\u2028\u2029]")


def _decoded(text):
    """``text`` as the mail library holds it in a header: its encoded words (``=?utf-8?q?…?=``) decoded."""
    probe = EmailMessage(policy=SMTP)
    probe["Subject"] = text
    return str(probe["Subject"])


def decodes_to_one_line(text):
    """Whether ``text`` stays on one line as a header's value.

    ``single_line`` takes out the line breaks typed, but an encoded word is
    decoded as the header is made, and Python's mail library (before 3.11.10
    and 3.12.5) then writes the CR LF it holds as it is: a Bcc, a Message-ID
    and a body of the poster's choosing.
    """
    return not _LINE_BREAK.search(_decoded(single_line(text)))


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
    if _decoded(kept) != kept:
        # An encoded word in it would be decoded in the header (one with a
        # line break in it, written as it is, forged others): it would not
        # name the parent any more either.
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
    """An EmailMessage from the reader, with a fresh Message-ID.

    A subject or name that decodes to more than one line is refused when
    it is sent (``send``), whichever header field it would have forged.
    """
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


# The fields a mail made here has, each once.
_OUR_FIELDS = frozenset({"from", "to", "subject", "date", "message-id", "user-agent", "in-reply-to", "references",
                         "mime-version", "content-type", "content-transfer-encoding"})


# A CR or LF that is not part of a CR LF: most mail readers and MTAs end a line there too.
_LONE_BREAK = re.compile(rb"\r(?!\n)|(?<!\r)\n")


def _check_header(message):
    """Raise ``UnsafeHeader`` unless ``message`` is written with its own fields only, each once.

    Whatever got a line break into a value shows here as a field of its
    own (or the real ones pushed into the body), whichever way it came:
    a CR LF, a lone CR or LF, or another character that ends a line for
    some reader, in a value as written or as decoded.
    """
    head = message.as_bytes().split(b"\r\n\r\n", 1)[0]
    if _LONE_BREAK.search(head):
        raise UnsafeHeader("a lone line break")
    for field in ("From", "To", "Subject"):
        if _LINE_BREAK.search(str(message[field] or "")):
            raise UnsafeHeader(field)
    text = head.decode("ascii", "replace")
    names = [line.split(":", 1)[0].strip().lower() for line in text.split("\r\n") if line and line[0] not in " \t"]
    if len(names) != len(set(names)) or not set(names) <= _OUR_FIELDS or "message-id" not in names:
        raise UnsafeHeader(", ".join(names))


def send(registry, message):
    """Hand ``message`` to the configured SMTP server; ``UnsafeHeader`` if it would be written with forged fields."""
    _check_header(message)
    settings = registry.settings
    host = settings.get("kittypyr.smtp_host", "localhost")
    port = int(settings.get("kittypyr.smtp_port", 25))
    sender = message["From"].addresses[0].addr_spec
    recipients = [address.addr_spec for address in message["To"].addresses]
    international = not all(address.isascii() for address in (sender, *recipients))
    # Written by the message's own policy: smtplib's send_message writes a
    # body line that starts with "From " as ">From ".
    data = message.as_bytes(policy=message.policy.clone(utf8=True) if international else message.policy)
    try:
        smtp = smtplib.SMTP(host, port, timeout=30)
    except (OSError, smtplib.SMTPException) as exc:
        raise MailNotSent(f"could not send mail through {host}:{port}: {exc}") from exc
    try:
        smtp.sendmail(sender, recipients, data, ("SMTPUTF8", "BODY=8BITMIME") if international else ())
    except (OSError, smtplib.SMTPException) as exc:
        reason = _refusal(exc)
        if reason is not None:
            raise MailRefused(f"{host}:{port} refused the mail: {reason}", reason) from exc
        raise MailNotSent(f"could not send mail through {host}:{port}: {exc}") from exc
    finally:
        # Once the server took the mail, how it answers QUIT changes nothing:
        # told "not sent", the reader would send it again.
        try:
            smtp.quit()
        except (OSError, smtplib.SMTPException):
            smtp.close()
