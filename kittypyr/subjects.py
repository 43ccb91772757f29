"""A list's subject prefix ("[Dev] "), which Mailman puts before every subject, left out of the archive's."""

import functools
import re

# What may come before the prefix: "Re:" and "Fwd:" as mail programs
# write them in a few languages, when a reply's prefix was not moved first.
_MARKERS = r"(?:re|aw|sv|antw|vs|fwd?|wg|tr)(?:\[\d+\]|\^\d+)?\s*:"


def _prefix_pattern(prefix):
    """A regular expression of ``prefix``: any spaces where it has some, and any number for "%d".

    Never two runs of ``\\s*`` side by side: a subject of many spaces
    would be tried every way of sharing them out, in time growing with
    their square.
    """
    pattern = ""
    for part in re.split(r"(%\d*d|\s+)", prefix):
        number = re.fullmatch(r"%\d*d", part) is not None
        if number or part.isspace():
            # Spaces before the prefix are the subject's own (``\s*`` there).
            if pattern and not pattern.endswith(r"\s*"):
                pattern += r"\s*"
            if number:
                pattern += r"\d+\s*"
        else:
            pattern += re.escape(part)
    return pattern


@functools.lru_cache(maxsize=256)
def _prefix_at_start(prefix):
    """The compiled pattern of a subject starting with (reply markers and) the stripped ``prefix``.

    Made once per prefix: every message archived or imported asks.
    """
    # "Dev" is not the start of "Development".
    ending = r"(?!\w)" if prefix[-1].isalnum() else ""
    return re.compile(rf"\s*((?:{_MARKERS}\s*)*)(?:{_prefix_pattern(prefix)}){ending}\s*", re.IGNORECASE)


def without_list_prefix(subject, prefix):
    """``subject`` without the list's ``prefix`` at its start, nor after the replies' "Re:" there.

    Mailman's prefix may number the posts ("[Dev %d] ", "[Dev %05d] "): any
    number then stands for it. Case and the spaces around it do not matter. A subject
    that was only the prefix becomes empty; one without it is kept as it is.
    """
    prefix = (prefix or "").strip()
    if not subject or not prefix:
        return subject
    found = _prefix_at_start(prefix).match(subject)
    if found is None:
        return subject
    markers = " ".join(found.group(1).split())
    rest = subject[found.end():]
    return f"{markers} {rest}" if markers and rest else (rest or markers)


def leave_out_list_prefix(resource):
    """Leave its list's prefix out of a stored message's or thread's ``subject``; written only when that changes it."""
    subject = without_list_prefix(resource.subject, resource.mailing_list.subject_prefix)
    if subject != resource.subject:
        resource.subject = subject
