"""Snippets: a short piece of a message where the searched words matched, the words marked."""

import functools
import html
import itertools
import re

from markupsafe import Markup

from kittypyr.lexicon import has_cjk_letters
from kittypyr.rendering import obfuscate_address
from kittypyr.zones import OWN, message_zones

SNIPPET_CHARS = 240
# Words are looked for in this much of a body: twenty hits of a multi-MB
# log would otherwise be lower-cased and scanned whole for one page.
SNIPPET_SCAN_CHARS = 64 * 1024


# "Cc: x", "Signed-off-by: x", "Reported-by: x": lines that name people,
# shown in a snippet only when nothing else matched.
_HEADER_LIKE = re.compile(r"^\s*[A-Za-z][\w-]{0,30}:(\s|$)")


def _matching_line(text, pattern):
    """``(line, position of the match in it)`` of the best line of ``text`` that ``pattern`` matches.

    Best is the author's own words, then quotes and patches, then
    header-like lines; the first such line in reading order.
    """
    # Zones are worked out only as far as the first few matches reach: a
    # word matched deep in a long patch must not cost walking all of it.
    matches = list(itertools.islice(pattern.finditer(text), 3))
    if not matches:
        return None
    cut = text.find("\n", matches[-1].end())
    best = None
    for zone, _, pieces in message_zones("", "", text if cut < 0 else text[:cut]).parts:
        for line in itertools.chain.from_iterable(piece.split("\n") for piece in pieces):
            found = pattern.search(line)
            if found is None:
                continue
            rank = 2 if _HEADER_LIKE.match(line) else (0 if zone & OWN else 1)
            if best is None or rank < best[0]:
                best = (rank, line, found.start())
                if rank == 0:
                    return best[1:]
    return best[1:] if best else None


@functools.lru_cache(maxsize=256)
def _words_pattern(words):
    """The regular expression finding any of ``words`` (a tuple) at a word's start (a CJK word anywhere), cached."""
    if not words:
        return None
    longest_first = sorted(set(words), key=len, reverse=True)
    # A CJK word stands inside a run of letters (see kittypyr.lexicon.split_cjk_runs).
    cjk = [re.escape(w) for w in longest_first if has_cjk_letters(w)]
    others = [re.escape(w) for w in longest_first if not has_cjk_letters(w)]
    alternatives = ([r"(?<!\w)(?:" + "|".join(others) + ")"] if others else []) + cjk
    return re.compile("|".join(alternatives), re.IGNORECASE)


@functools.lru_cache(maxsize=256)
def _marks_pattern(words):
    """The regular expression marking ``words`` in text, cached."""
    return re.compile("|".join(re.escape(w) for w in sorted(set(words), key=len, reverse=True)), re.IGNORECASE)


def _marked(text, words):
    """``text`` escaped, ``words`` in <mark>.

    Marked in the text before it is escaped: in escaped text "lt" would be
    marked inside "&lt;" and break it.
    """
    if not words:
        return html.escape(text)
    pieces, last = [], 0
    for match in _marks_pattern(tuple(words)).finditer(text):
        pieces += [html.escape(text[last:match.start()]), f"<mark>{html.escape(match.group(0))}</mark>"]
        last = match.end()
    pieces.append(html.escape(text[last:]))
    return "".join(pieces)


# How far back a snippet looks for the beginning of the word it starts in.
_LONGEST_WORD = 30


def snippet(text, words):
    """A short piece of ``text`` where ``words`` matched, the words in <mark>.

    The piece comes from the author's own words when they hold a match,
    else from quotes or patches, and from a header-like line (``Cc:``,
    ``Signed-off-by:``) only when nothing else matched; without a match,
    the text's beginning. Only the first ``SNIPPET_SCAN_CHARS`` of
    ``text`` are looked at.
    """
    text = text[:SNIPPET_SCAN_CHARS]
    pattern = _words_pattern(tuple(words))
    found = _matching_line(text, pattern) if pattern is not None else None
    if found is None:
        piece, prefix = text, ""
    else:
        line, position = found
        at = text.find(line)
        begin = max(at, at + position - SNIPPET_CHARS // 3) if at >= 0 else 0
        if at < 0:
            piece = line
        else:
            # Start at a word's beginning, not in the middle of one; a text
            # without spaces (Chinese, Japanese) is cut where it is, rather
            # than from its line's start, which may leave the match out.
            earliest = max(at, begin - _LONGEST_WORD)
            while begin > earliest and not text[begin - 1].isspace():
                begin -= 1
            piece = text[begin:]
        prefix = "… " if begin > 0 else ""
    words_of_piece = " ".join(piece[: SNIPPET_CHARS * 2].split())
    shown = words_of_piece[:SNIPPET_CHARS]
    suffix = " …" if len(words_of_piece) > SNIPPET_CHARS or len(piece) > SNIPPET_CHARS * 2 else ""
    return Markup(prefix + _marked(obfuscate_address(shown), words) + suffix)
