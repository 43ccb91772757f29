"""Message-ID normalisation and the hash that names a message in URLs.

The hash is computed exactly as HyperKitty computes it, so that permalinks
made by an existing HyperKitty keep resolving here.
"""

import base64
import hashlib
import re

_WHITESPACE = re.compile(r"\s+")


def normalize_message_id(value):
    """Return a Message-ID without whitespace and without one pair of <>.

    Returns '' for a missing or blank value.
    """
    if not value:
        return ""
    value = _WHITESPACE.sub("", str(value))
    if value.startswith("<") and value.endswith(">"):
        value = value[1:-1]
    return value


def message_id_hash(message_id):
    """Return the 32-character base32 SHA-1 of a Message-ID.

    Whitespace is removed and one surrounding pair of <> stripped first, so
    ``<a@b>``, ``a@b`` and `` <a@b> `` share a hash.
    """
    digest = hashlib.sha1(normalize_message_id(message_id).encode("utf-8")).digest()
    return base64.b32encode(digest).decode("ascii").rstrip("=")
