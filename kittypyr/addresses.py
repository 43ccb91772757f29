"""List addresses: what names a list, and Mailman's list id for it.

Pure helpers at the bottom of the import graph, beside ``msgid``: resources,
the archiver API and the command line all use them.
"""

import re

# Mailman 3 allows list names of [-_.0-9a-z] (its ``listname_chars``) in any
# order ("-dev", "dev." and "a..b" are lists it makes), and a domain is
# dot-separated labels of letters, digits and inner hyphens.
_LIST_ADDRESS = re.compile(
    r"[-_.0-9a-z]*[-_0-9a-z][-_.0-9a-z]*"
    r"@(?:[0-9a-z](?:[-0-9a-z]*[0-9a-z])?\.)*[0-9a-z](?:[-0-9a-z]*[0-9a-z])?"
)
# RFC 5321's limit on a whole address.
MAX_ADDRESS_LENGTH = 254


def normalize_list_address(value):
    """``value`` as a list's posting address in lower case, or None if it is not one.

    Refuses what would never name a Mailman list: path tricks (``../x@y``),
    a lone ``@``, two ``@``, line breaks, a name of dots alone, a domain
    with empty labels, and anything longer than an address can be.
    """
    if not isinstance(value, str):
        return None
    address = value.lower()
    if len(address) > MAX_ADDRESS_LENGTH:
        return None
    if _LIST_ADDRESS.fullmatch(address) is None:
        return None
    return address


def list_id_of(list_address):
    """Mailman's list id for a posting address: ``dev@example.org`` -> ``dev.example.org``."""
    return list_address.lower().replace("@", ".", 1)
