"""Build raw test messages (bytes), including the broken kinds archives hold.

``make_message`` gives a complete message; the part helpers (``text_part``,
``html_part``, ``flowed_part``, ``attachment``, ``forwarded``,
``multipart``, ``alternative``) give a ``Part`` to pass as its ``body``.
String bodies are encoded with the declared charset when Python knows it
(else UTF-8, so a bogus label such as "uft-8" can be declared); byte bodies
and byte header values go out exactly as given.
"""

import base64
import codecs
import hashlib
from datetime import datetime, timezone
from email.utils import format_datetime
from typing import NamedTuple
from urllib.parse import quote

DEFAULT_DATE = datetime(2020, 1, 1, 12, 0, tzinfo=timezone.utc)
AUTO = object()


class Part(NamedTuple):
    """A MIME entity: its own header fields and its encoded body."""

    headers: list
    body: bytes


def encode_word(text, charset="utf-8", encoding="B"):
    """One RFC 2047 encoded word for ``text``."""
    data = text.encode(charset)
    if encoding.upper() == "B":
        payload = base64.b64encode(data).decode("ascii")
    else:
        payload = "".join(
            chr(b) if chr(b).isalnum() and b < 128 else "_" if b == 32 else "=%02X" % b for b in data
        )
    return "=?%s?%s?%s?=" % (charset, encoding.upper(), payload)


def _header_value(value):
    if isinstance(value, str) and not value.isascii():
        return encode_word(value)
    return value


def _encode(text, charset):
    if isinstance(text, bytes):
        return text
    try:
        codecs.lookup(charset or "utf-8")
        return text.encode(charset or "utf-8")
    except LookupError:
        return text.encode("utf-8")


def text_part(text, subtype="plain", charset="utf-8", cte=None, filename=None, disposition=None, params=""):
    """A text/* part; ``cte`` may be "base64" or "quoted-printable"."""
    data = _encode(text, charset)
    ctype = "text/%s" % subtype
    if charset:
        ctype += '; charset="%s"' % charset
    headers = [("Content-Type", ctype + params)]
    if cte == "base64":
        data = base64.encodebytes(data)
    elif cte == "quoted-printable":
        import quopri

        data = quopri.encodestring(data)
    if cte:
        headers.append(("Content-Transfer-Encoding", cte))
    elif not data.isascii():
        headers.append(("Content-Transfer-Encoding", "8bit"))
    if filename or disposition:
        value = disposition or "attachment"
        if filename:
            value += '; filename="%s"' % filename
        headers.append(("Content-Disposition", value))
    return Part(headers, data)


def html_part(html, charset="utf-8"):
    return text_part(html, "html", charset)


def flowed_part(text, delsp=False, charset="utf-8"):
    """A format=flowed text/plain part; ``text`` is already in flowed form."""
    params = "; format=flowed" + ("; delsp=yes" if delsp else "")
    return text_part(text, charset=charset, params=params)


def attachment(data, content_type="application/octet-stream", filename=None, rfc2231=False):
    """A base64 attachment; ``rfc2231`` writes the filename as filename*=utf-8''..."""
    disposition = "attachment"
    if filename is not None:
        if rfc2231:
            disposition += "; filename*=utf-8''%s" % quote(filename, safe="")
        else:
            disposition += '; filename="%s"' % _header_value(filename)
    headers = [
        ("Content-Type", content_type),
        ("Content-Transfer-Encoding", "base64"),
        ("Content-Disposition", disposition),
    ]
    return Part(headers, base64.encodebytes(data))


def forwarded(message_bytes):
    """A message/rfc822 part embedding a whole message."""
    return Part([("Content-Type", "message/rfc822"), ("Content-Disposition", "inline")], message_bytes)


def _render(part):
    lines = [name.encode("ascii") + b": " + _as_bytes(value) for name, value in part.headers]
    return b"\n".join(lines) + b"\n\n" + part.body


def multipart(subtype, *parts):
    """A multipart/<subtype> part holding ``parts`` (str becomes text/plain)."""
    parts = [text_part(p) if isinstance(p, (str, bytes)) else p for p in parts]
    rendered = [_render(p) for p in parts]
    boundary = "b-" + hashlib.sha1(b"".join(rendered)).hexdigest()[:24]
    body = b"This is a multi-part message in MIME format.\n"
    for chunk in rendered:
        body += b"\n--" + boundary.encode() + b"\n" + chunk.rstrip(b"\n") + b"\n"
    body += b"\n--" + boundary.encode() + b"--\n"
    return Part([("Content-Type", 'multipart/%s; boundary="%s"' % (subtype, boundary))], body)


def alternative(plain, html):
    return multipart("alternative", text_part(plain), html_part(html))


def _as_bytes(value):
    return value if isinstance(value, bytes) else str(value).encode("utf-8")


def make_message(
    message_id=AUTO,
    subject="Test message",
    sender=("Test Sender", "sender@example.org"),
    date=DEFAULT_DATE,
    in_reply_to=None,
    references=None,
    body="Hello.\n",
    headers=None,
    charset="utf-8",
    to="list@example.org",
    crlf=False,
):
    """Return the bytes of one message.

    ``None`` leaves a header out (message_id=None: no Message-ID, date=None:
    no Date); the default Message-ID is derived from subject and body.
    ``date`` may be a datetime or a literal string. ``sender`` is a
    (name, address) pair or a literal string. Non-ASCII subject and name
    are RFC 2047 encoded. ``headers`` adds fields or, with the same name,
    replaces a default one (a ``None`` value removes it). ``body`` is text
    (sent as text/plain in ``charset``; charset=None declares none), raw
    bytes, or a ``Part``.
    """
    if isinstance(body, Part):
        part = body
    else:
        part = text_part(body, charset=charset)
    if message_id is AUTO:
        digest = hashlib.sha1(_as_bytes(subject or "") + _render(part)).hexdigest()[:16]
        message_id = "<%s@example.org>" % digest
    if isinstance(sender, tuple):
        name, address = sender
        name = _header_value(name)
        if name and not name.startswith("=?") and any(c in name for c in ',.;:"()<>@'):
            name = '"%s"' % name.replace("\\", "\\\\").replace('"', '\\"')
        sender = "%s <%s>" % (name, address) if name else address
    if isinstance(date, datetime):
        date = format_datetime(date)
    fields = [
        ("Message-ID", message_id),
        ("Date", date),
        ("From", sender),
        ("To", to),
        ("Subject", _header_value(subject)),
        ("In-Reply-To", in_reply_to),
        ("References", " ".join(references) if references else None),
        ("MIME-Version", "1.0"),
    ] + list(part.headers)
    for name, value in (headers or {}).items():
        for position, (existing, _) in enumerate(fields):
            if existing.lower() == name.lower():
                fields[position] = (existing, value)
                break
        else:
            fields.append((name, value))
    raw = _render(Part([(n, v) for n, v in fields if v is not None], part.body))
    return raw.replace(b"\n", b"\r\n") if crlf else raw
