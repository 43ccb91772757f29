"""Mail rebuilt from a HyperKitty database's fields.

HyperKitty keeps a message's sender, subject, date and time zone,
Message-ID, In-Reply-To, text and attachments, and discards the rest of
the original. The rebuilt message carries those, and says in a header of
its own that it is rebuilt, so its raw view does not pass it off as the
original (and a later import of the original replaces it).
"""

from datetime import timedelta, timezone
from email.header import Header
from email.message import EmailMessage
from email.policy import default
from email.utils import format_datetime, formataddr

REBUILT_HEADER = "X-Kittypyr-Rebuilt"
REBUILT_NOTE = "from a HyperKitty database, which keeps no original headers"


def _header_text(value):
    if value.isascii():
        return value
    return Header(value, "utf-8").encode()


def _identity_headers(email):
    # Written as text, not through the header classes, which would rewrite
    # (or refuse) an odd Message-ID; the importer stores the message under
    # HyperKitty's own id whatever is read back from here.
    lines = [
        f"{REBUILT_HEADER}: {REBUILT_NOTE}",
        f"From: {formataddr((email.get('sender_name') or '', email['sender_address']), 'utf-8')}",
        f"Subject: {_header_text(email['subject'] or '')}",
        f"Date: {format_datetime(email['date'].astimezone(timezone(timedelta(minutes=email.get('timezone') or 0))))}",
        f"Message-ID: <{email['message_id']}>",
    ]
    if email.get("in_reply_to"):
        lines.append(f"In-Reply-To: <{email['in_reply_to']}>")
    return "".join(f"{line}\n" for line in lines).encode("utf-8")


def rebuild_message(email, attachments=()):
    """The bytes of a message rebuilt from ``email`` (a row of hyperkitty_email with
    ``sender_address``) and its ``attachments`` (rows of hyperkitty_attachment)."""
    body = EmailMessage(policy=default)
    body.set_content(email["content"] or "", charset="utf-8")
    for attachment in sorted(attachments, key=lambda a: a["counter"]):
        maintype, _, subtype = (attachment["content_type"] or "application/octet-stream").partition("/")
        data = attachment["content"] or b""
        body.add_attachment(bytes(data), maintype=maintype, subtype=subtype or "octet-stream",
                            filename=attachment["name"] or f"attachment-{attachment['counter']}")
    return _identity_headers(email) + body.as_bytes()
