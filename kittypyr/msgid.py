"""Message-ID normalisation and the hash that names a message in URLs.

Both are computed exactly as HyperKitty computes them, so that permalinks
made by an existing HyperKitty keep resolving here, odd Message-IDs
included.
"""

import base64
import email.policy
import email.utils
import hashlib
import re

_WHITESPACE = re.compile(r"\s+")
# Ids of dot-atoms on both sides of one @, as nearly all mail has, come out
# of the standard parser as they went in: they are read without it (it
# costs a hundred times more, and References may name dozens of ids).
_ATOMS = r"[A-Za-z0-9!#$%&'*+/=?^_`{|}~-]+(?:\.[A-Za-z0-9!#$%&'*+/=?^_`{|}~-]+)*"
_PLAIN_ID = re.compile(rf"<?({_ATOMS}@{_ATOMS})>?")
# HyperKitty stores Message-IDs in a VARCHAR(255) and cuts longer ones here.
_LONGEST = 254


def normalize_message_id(value):
    """Return a Message-ID without whitespace and without one pair of <> or "".

    Returns '' for a missing or blank value.
    """
    if not value:
        return ""
    return email.utils.unquote(_WHITESPACE.sub("", str(value)))


def message_id_of_header_value(value):
    """The Message-ID a Message-ID header's value names, as HyperKitty reads it.

    HyperKitty reads the header through the standard library's structured
    Message-ID header (the ``email.policy.default`` parser) and then takes
    out whitespace and one pair of brackets. That parser keeps only the
    first well-formed part of an odd value (``<a b@c`` is ``<a``,
    ``<a@b,>`` is ``a@b``), so the same parser is used here rather than a
    reading of our own, which would give such messages other hashes. Where
    it fails outright (``<>``) HyperKitty cannot store the message at all;
    the plain reading is then used, which makes ``<>`` the empty id.
    """
    text = str(value or "")
    plain = _PLAIN_ID.fullmatch(text.strip())
    if plain and (text.strip()[0] == "<") == (text.strip()[-1] == ">"):
        message_id = plain.group(1)
        return message_id[:_LONGEST] if len(message_id) > _LONGEST else message_id
    try:
        text = str(email.policy.default.header_fetch_parse("Message-ID", text))
    except Exception:  # noqa: BLE001 - any parser failure means the plain reading
        pass
    message_id = normalize_message_id(text)
    return message_id[:_LONGEST] if len(message_id) > _LONGEST else message_id


def message_id_hash(message_id):
    """Return the 32-character base32 SHA-1 of a Message-ID.

    Whitespace is removed and one surrounding pair of <> (or "") stripped
    first, so ``<a@b>``, ``a@b`` and `` <a@b> `` share a hash.
    """
    digest = hashlib.sha1(normalize_message_id(message_id).encode("utf-8")).digest()
    return base64.b32encode(digest).decode("ascii").rstrip("=")


def _digest(text):
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()[:32]


# What may stand before a subject: a tag ("[Dev]", "[host1]") or a reply's
# mark ("Re:", "AW:", "Fwd:", "Re[2]:"), in either order ("Re: [Dev]" in a
# sender's copy, "[Dev] Re:" as Mailman 2 wrote it).
_LEADING = re.compile(r"\s*(\[[^\]]*\]|(?:re|aw|sv|fwd?)\s*(?:\[\d+\])?\s*:)", re.IGNORECASE)


def _subject_key(subject):
    """``subject`` without its replies' marks, its tags kept in their order, in any case and spacing."""
    tags, at = [], 0
    while (found := _LEADING.match(subject, at)) is not None:
        if found.group(1).startswith("["):
            tags.append(found.group(1))
        at = found.end()
    return " ".join(" ".join([*tags, subject[at:]]).casefold().split())


def writing_of(date, sender_address, subject):
    """What tells a post from another under its Message-ID in any form it comes in.

    ``(date, sender, subject)``: the moment its Date header said (None:
    none said); digests of its sender's address and of its subject (None:
    not known), the subject without its list's prefix (the caller takes it
    off) nor its replies' marks, whose place copies differ on. Its tags
    stay, in their order: they tell posts apart (a robot's "[host1] disk
    full" and "[host2] disk full"). Digests, so that a deleted message's
    tombstone keeps no word of it.
    """
    sender = _digest(sender_address.strip().lower()) if sender_address else None
    subject = None if subject is None else _digest(_subject_key(subject))
    return date, sender, subject
