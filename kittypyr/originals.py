"""What a page reads from a message's original bytes beyond what is stored: its recipients.

Read on demand for the one message a page shows; archives made before a
field was kept need nothing re-imported.
"""

import email.parser
import email.policy

from kittypyr.mail import header_text
from kittypyr.rendering import obfuscate_address

# A header block is read from at most this many bytes of the original.
HEADER_BYTES = 64 * 1024

# Longer recipient lists (a mail to hundreds) are cut, and say so.
RECIPIENTS_SHOWN_CHARS = 2000


def header_block(message):
    """The original's header block, as bytes (the whole head of a message without a blank line)."""
    with message.open_original() as original:
        head = original.read(HEADER_BYTES)
    for separator in (b"\r\n\r\n", b"\n\n"):
        end = head.find(separator)
        if end != -1:
            return head[: end + len(separator)]
    return head


def _decoded(value):
    """A header value as text, read as a message's sender and subject are (``kittypyr.mail.header_text``)."""
    try:
        text = header_text(str(value))
    except Exception:  # shown as it came rather than not at all
        text = str(value).encode("utf-8", "surrogateescape").decode("utf-8", "replace")
    return " ".join(text.split())


def recipients(message):
    """``{"To": text, "Cc": text}`` with the fields the original has, addresses obfuscated."""
    try:
        # compat32 keeps every value as it came; decoding is done per field.
        headers = email.parser.BytesHeaderParser(policy=email.policy.compat32).parsebytes(header_block(message))
    except Exception:  # an original that cannot be read shows no recipients rather than no page
        return {}
    found = {}
    # raw_items: get_all would give raw 8-bit bytes as "unknown-8bit", which reads as U+FFFD.
    raw = list(headers.raw_items())
    for field in ("To", "Cc"):
        values = [value for name, value in raw if name.lower() == field.lower()]
        text = ", ".join(v for v in (_decoded(value) for value in values) if v)
        if not text:
            continue
        if len(text) > RECIPIENTS_SHOWN_CHARS:
            text = text[:RECIPIENTS_SHOWN_CHARS].rsplit(",", 1)[0] + ", …"
        found[field] = obfuscate_address(text)
    return found
