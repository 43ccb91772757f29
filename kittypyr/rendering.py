"""Turn untrusted plain-text mail bodies into safe display HTML.

Everything here is pure: ``str`` in, ``str`` or :class:`markupsafe.Markup`
out, with no Pyramid or ZODB imports, so views, feeds and tests share it.

Thread pages render hundreds of bodies per request, and archives contain
pathological mail (megabyte-long lines, thousands of quote markers, diffs
pasted without headers), so every step is a single left-to-right pass with
precompiled, backtracking-safe regular expressions and no recursion.
"""

import re
from html import escape as _html_escape

from markupsafe import Markup

from kittypyr.patches import PATCH_HEADERS, PATCH_START

__all__ = ["obfuscate_address", "render_body"]

# Quote runs longer than this fold behind a <details> element.
FOLD_QUOTES_OVER = 6

# With a ``diff_url``, a folded quote longer than this (a review quoting a
# whole patch) is only a link, as a folded diff is.
LINK_QUOTES_OVER = 40

# URLs and addresses are found from a cheap anchor ("://", "www." or "@")
# and grown outwards from it.  A single pattern with look-behinds would be
# attempted at every offset of every body, which costs more than all the
# rest of the rendering; plain literals let the regex engine skip ahead,
# which is also why "www." is not matched case-insensitively.
_ANCHOR = re.compile(r"@|://|www\.|WWW\.")
_AT = re.compile("@")
_DOMAIN = re.compile(r"[\w-]+(?:\.[\w-]+)+")
# URLs stop at whitespace, quotes and angle brackets, which is where mail
# clients put them ("<https://...>", "\"https://...\""); trailing prose
# punctuation is trimmed afterwards in Python rather than with a lazy
# pattern, which keeps the scan linear.
_URL_REST = re.compile(r'[^\s<>"]*')

_TRAILING_PUNCTUATION = frozenset(".,;:!?'\"*")
_CLOSERS = {")": "(", "]": "[", "}": "{"}

_QUOTE_PREFIX = re.compile(r"[ >]*")

_SIGNATURE_DELIMITER = "-- "

_HUNK_HEADER = re.compile(r"@@ -\d+(?:,(\d+))? \+\d+(?:,(\d+))? @@")


def _escape(text):
    # Plain str on purpose: adding a str to a Markup would escape the str,
    # so the HTML is assembled from plain strings and wrapped in Markup once
    # at the end.  html.escape is used because it does not allocate a
    # Markup per fragment, which is measurable over hundreds of bodies.
    return _html_escape(text, quote=True)


def obfuscate_address(text):
    """Return ``text`` with every email address made unharvestable.

    ``jdoe@example.com`` becomes ``jdoe at example.com``, and a ``mailto:``
    in front of an address is dropped.  An address is a run of letters,
    digits and ``_.+-``, an ``@`` and a dotted domain, so ``@decorator``
    or ``a@b`` in code survive.  Plain ``str`` in, plain ``str`` out:
    nothing is escaped.
    """
    if "@" not in text:
        return text
    parts = []
    emitted = 0
    match = _AT.search(text)
    while match is not None:
        anchor = match.start()
        found = _find_address(text, anchor, emitted)
        if found is None:
            match = _AT.search(text, anchor + 1)
            continue
        start, end, plain = found
        parts.append(text[emitted:start])
        parts.append(plain)
        emitted = end
        match = _AT.search(text, end)
    parts.append(text[emitted:])
    return "".join(parts)


def _find_address(text, anchor, limit):
    """Return ``(start, end, obfuscated)`` for the address whose ``@`` is
    at ``anchor``, using nothing before ``limit``; None if there is none.
    """
    # Grown backwards one character at a time: it stops at the previous
    # '@' at the latest, so over a whole text each character is looked at
    # once, where a regex with a leading [\w.+-]+ would rescan long words
    # from every offset.
    start = anchor
    while start > limit and _is_local_char(text[start - 1]):
        start -= 1
    if start == anchor:
        return None
    domain = _DOMAIN.match(text, anchor + 1)
    if domain is None:
        return None
    plain = f"{text[start:anchor]} at {domain.group()}"
    if start - 7 >= limit and text[start - 7 : start].lower() == "mailto:":
        start -= 7
    return start, domain.end(), plain


def _is_local_char(char):
    # The class [\w.+-] (\w being isalnum() or '_') without a regex call
    # per character.
    return char.isalnum() or char in "_.+-"


def render_body(text, fold_patches=None, diff_url=None, patch_anchors=False):
    """Return the display HTML of a decoded plain-text mail body.

    The result is one ``<div class="body">`` holding, in order, blocks of:

    * ``<pre class="text">`` for ordinary lines;
    * ``<blockquote class="quote" data-depth="N">`` (a ``pre.text``
      inside) for runs of lines starting with optional spaces and ``>``,
      N being the deepest nesting in the run; runs of more than
      ``FOLD_QUOTES_OVER`` lines are wrapped in
      ``<details class="quote-fold"><summary>``;
    * ``<pre class="patch">`` for diffs, with ``span.add``, ``span.del``
      and ``span.hunk`` lines;
    * ``<div class="signature">`` (a ``pre.text`` inside) for the
      delimiter line ``"-- "`` and everything after it.

    Every character of the input is escaped; the only markup added is the
    above and ``<a href rel="nofollow ugc">`` around http, https and ftp
    URLs (``www.`` gets ``http://``).  Email addresses are obfuscated with
    :func:`obfuscate_address`; a URL containing ``@`` is obfuscated the
    same way and not linked.  Blank lines at the edges of blocks are
    dropped since the blocks themselves are visually separated.

    With ``fold_patches`` ``"closed"`` or ``"open"``, each ``pre.patch``
    is wrapped in ``<details class="patch-fold">`` (open or not) whose
    summary counts its files, added and deleted lines: on a thread page
    the commit message and diffstat of a patch read first, without a
    script, and the diff is one click away. With ``diff_url`` too (the
    path of the message's page, ending in "/"), a closed fold holds no
    diff, only a link to ``diff_url#diff-N`` and, for the script to
    load the diff in place, ``data-diff="diff_urldiff/N"``: a patch series
    is then a page of commit messages, not megabytes of diffs.
    ``patch_anchors`` gives the N-th ``pre.patch`` the id ``diff-N``
    (N counts from 1) for those links to land on. Quotes of more than
    ``LINK_QUOTES_OVER`` lines are linked the same way (``quote/N``,
    ``#quote-N``, N counting every quote run).

    Runs in time linear in the length of ``text``.
    """
    if not text:
        return Markup('<div class="body"></div>')
    blocks, signature = _blocks(text)
    parts = ['<div class="body">']
    patches = quotes = 0
    for block in blocks:
        kind = block[0]
        if kind == "text":
            parts.append(_pre("text", _text_html(block[1])))
        elif kind == "quote":
            quotes += 1
            if diff_url and fold_patches == "closed" and len(block[1]) > LINK_QUOTES_OVER:
                parts.append(_linked_quote_html(block[1], diff_url, quotes))
            else:
                parts.append(_quote(block[1], block[2], f"quote-{quotes}" if patch_anchors else None))
        else:
            patches += 1
            anchor = f"diff-{patches}" if patch_anchors else None
            if fold_patches == "closed" and diff_url:
                parts.append(_linked_patch_html(block[1], diff_url, patches))
            elif fold_patches:
                parts.append(_folded_patch_html(block[1], fold_patches == "open", anchor))
            else:
                parts.append(_patch_html(block[1], anchor))
    if signature is not None:
        while signature and not signature[-1].strip():
            signature.pop()
        parts.append(
            '<div class="signature">'
            + _pre("text", _inline("\n".join(signature)))
            + "</div>"
        )
    parts.append("</div>")
    return Markup("\n".join(parts))


def quote_html(text, number):
    """The ``blockquote.quote`` of the ``number``-th quote run (from 1) in ``text``, or None."""
    if not text:
        return None
    found = [block for block in _blocks(text)[0] if block[0] == "quote"]
    if not 1 <= number <= len(found):
        return None
    return Markup(_quote(found[number - 1][1], found[number - 1][2], fold=False))


def patch_html(text, number):
    """The ``pre.patch`` of the ``number``-th patch (from 1) in ``text``, or None when there is none."""
    if not text:
        return None
    patches = [block for block in _blocks(text)[0] if block[0] == "patch"]
    if not 1 <= number <= len(patches):
        return None
    return Markup(_patch_html(patches[number - 1][1]))


def _blocks(text):
    """``(blocks, signature lines or None)``: the body cut into text, quote and patch runs."""
    if "\r" in text:
        text = text.replace("\r\n", "\n").replace("\r", "\n")
    lines = text.split("\n")

    blocks = []
    signature = None
    patch = None
    for index, line in enumerate(lines):
        if patch is not None:
            # "-- " is also a deleted "- " line when a hunk still expects
            # deletions, and git format-patch ends with a "-- " signature
            # right after the last hunk: the hunk counts tell them apart.
            if line != _SIGNATURE_DELIMITER or patch.expects_deletion():
                if patch.feed(line):
                    continue
            patch.finish(blocks)
            patch = None
        if line == _SIGNATURE_DELIMITER:
            signature = lines[index:]
            break
        if line.startswith(PATCH_START):
            patch = _Patch()
            patch.feed(line)
            continue
        _add_line(blocks, line)
    if patch is not None:
        patch.finish(blocks)
    return list(_tidy(blocks)), signature


def _add_line(blocks, line):
    """Append ``line`` to the text or quote run it belongs to."""
    first = line[:1]
    if first == ">" or (first == " " and line.lstrip(" ").startswith(">")):
        kind = "quote"
        depth = _QUOTE_PREFIX.match(line).group().count(">")
    else:
        kind = "text"
        depth = 0
    if blocks and blocks[-1][0] == kind:
        last = blocks[-1]
        last[1].append(line)
        if depth > last[2]:
            last[2] = depth
    else:
        blocks.append([kind, [line], depth])


def _is_blank(lines):
    for line in lines:
        if line.strip():
            return False
    return True


def _tidy(blocks):
    """Yield the blocks with blank edges of text runs removed.

    Blank lines between two quote runs are part of the quoted message
    (paragraphs in the quoted text), so the three runs become one.
    """
    merged = []
    count = len(blocks)
    i = 0
    while i < count:
        block = blocks[i]
        if (
            block[0] == "text"
            and merged
            and merged[-1][0] == "quote"
            and i + 1 < count
            and blocks[i + 1][0] == "quote"
            and _is_blank(block[1])
        ):
            following = blocks[i + 1]
            merged[-1][1].extend(block[1])
            merged[-1][1].extend(following[1])
            merged[-1][2] = max(merged[-1][2], following[2])
            i += 2
            continue
        merged.append(block)
        i += 1

    for block in merged:
        if block[0] == "text":
            lines = block[1]
            start, end = 0, len(lines)
            while start < end and not lines[start].strip():
                start += 1
            while end > start and not lines[end - 1].strip():
                end -= 1
            if start == end:
                continue
            block[1] = lines[start:end]
        yield block


def _pre(css_class, content):
    # An HTML parser drops one newline right after <pre>, so a leading
    # blank line needs a second one to survive.
    if content.startswith("\n"):
        content = "\n" + content
    return f'<pre class="{css_class}">{content}</pre>'


# A paragraph whose longest line is shorter than this was not hard-wrapped:
# its line breaks are the author's (an address, a list, a poem).
WRAPPED_WIDTH = 60

# Aligned text: a run of three spaces, or two not after a sentence's end.
_ALIGNED = re.compile(r"\S(?: {3,}|(?<![.!?:;,]) {2})\S")
# Rules and box drawing of ASCII tables and diagrams.
_RULE = re.compile(r"[-=+_*#~]{4,}|\|.*\|")
_CODE_ENDS = (";", "{", "}", ")", "\\")


def _is_fixed(lines):
    """Whether a paragraph is code, a table or aligned text, which keep a fixed-width font and their lines."""
    code_ends = 0
    for line in lines:
        if line[:1] in (" ", "\t") or "\t" in line or _ALIGNED.search(line) or _RULE.search(line):
            return True
        if line.rstrip().endswith(_CODE_ENDS):
            code_ends += 1
    return code_ends * 2 > len(lines)


def _text_html(lines):
    """The HTML inside a ``pre.text``: the text itself, with markup that only changes how it flows.

    Prose keeps every character (so fixed-width reading and copying lose
    nothing), but the line breaks of hard-wrapped paragraphs sit in
    ``span.j``, which the stylesheet shows as spaces so the paragraph
    reflows to the screen. Code, tables and aligned text sit in
    ``span.fixed``, drawn in a fixed-width font with their line breaks.
    """
    contents = _inline("\n".join(lines)).split("\n")
    out = []
    start = 0
    count = len(lines)
    while start < count:
        if not lines[start].strip():
            out.append(contents[start])
            if start + 1 < count:
                out.append("\n")
            start += 1
            continue
        end = start
        while end < count and lines[end].strip():
            end += 1
        paragraph = lines[start:end]
        shown = contents[start:end]
        if _is_fixed(paragraph):
            out.append('<span class="fixed">' + "\n".join(shown) + "</span>")
        else:
            width = max(len(line) for line in paragraph)
            for offset, content in enumerate(shown):
                out.append(content)
                if offset + 1 < len(shown):
                    wrapped = width >= WRAPPED_WIDTH and len(paragraph[offset].rstrip()) >= width * 0.7
                    out.append('<span class="j">\n</span>' if wrapped else "\n")
        if end < count:
            out.append("\n")
        start = end
    return "".join(out)


def _quote_levels_html(lines):
    """The lines of a quote, each run of one nesting level in ``span.level-N`` (N from 1, then 4 for deeper)."""
    contents = _inline("\n".join(lines)).split("\n")
    out = []
    current = None
    for line, content in zip(lines, contents):
        level = _QUOTE_PREFIX.match(line).group().count(">") if line.strip() else current
        level = min(max(level or 1, 1), 4)
        if level != current:
            if current is not None:
                out.append("</span>\n")
            out.append(f'<span class="level-{level}">')
            current = level
        else:
            out.append("\n")
        out.append(content)
    if current is not None:
        out.append("</span>")
    return "".join(out)


def _quote(lines, depth, anchor=None, fold=True):
    attributes = f' id="{anchor}"' if anchor else ""
    html = (
        f'<blockquote class="quote"{attributes} data-depth="{int(depth)}">'
        + _pre("text", _quote_levels_html(lines))
        + "</blockquote>"
    )
    if fold and len(lines) > FOLD_QUOTES_OVER:
        html = (
            '<details class="quote-fold">'
            f"<summary>\u2026 {len(lines)} quoted lines</summary>"
            + html
            + "</details>"
        )
    return html


def _linked_quote_html(lines, diff_url, number):
    url = _escape(diff_url)
    return (
        f'<details class="quote-fold" data-quote="{url}quote/{number}">'
        f"<summary>\u2026 {len(lines)} quoted lines</summary>"
        f'<p class="quote-link"><a href="{url}#quote-{number}">Read the quote on the message\'s page</a></p>'
        "</details>"
    )


def _patch_html(lines, anchor=None):
    # One _inline call for the whole patch: URLs and addresses never span
    # a newline and escaping adds none, so the result splits back into the
    # same lines.
    contents = _inline("\n".join(line for _, line in lines)).split("\n")
    rendered = []
    for (css_class, _), content in zip(lines, contents):
        if css_class is None:
            rendered.append(content)
        else:
            rendered.append(f'<span class="{css_class}">{content}</span>')
    # Focusable, because it scrolls sideways: keyboard readers can scroll it.
    html = '<pre tabindex="0"' + _pre("patch", "\n".join(rendered))[4:]
    if anchor:
        html = f'<pre id="{anchor}"' + html[4:]
    return html


def _diff_summary(lines):
    files = added = deleted = 0
    for css_class, line in lines:
        if css_class == "add":
            added += 1
        elif css_class == "del":
            deleted += 1
        elif css_class is None and line.startswith("+++ "):
            files += 1
    if not files:
        # A diff without file headers still changes one file.
        files = 1
    return f"Diff: {files} file{'s' if files != 1 else ''}, +{added} \u2212{deleted}"


def _folded_patch_html(lines, is_open, anchor=None):
    return (
        f'<details class="patch-fold"{" open" if is_open else ""}><summary>{_diff_summary(lines)}</summary>'
        + _patch_html(lines, anchor)
        + "</details>"
    )


def _linked_patch_html(lines, diff_url, number):
    url = _escape(diff_url)
    return (
        f'<details class="patch-fold" data-diff="{url}diff/{number}"><summary>{_diff_summary(lines)}</summary>'
        f'<p class="diff-link"><a href="{url}#diff-{number}">Read the diff on the message\'s page</a></p>'
        "</details>"
    )


class _Patch:
    """The lines of one patch being collected, and where in it we are.

    Before the first hunk header, and inside hunks whose header cannot be
    parsed, any line that looks like a diff line continues the patch.
    Inside a ``@@ -a,b +c,d @@`` hunk, the counts decide: a blank line is
    a context line whose trailing space a mail client stripped, and once
    the counts are used up only file headers and further hunks continue
    the patch, so prose like "- item" or an indented line that follows a
    patch is not swallowed by it.
    """

    __slots__ = ("lines", "old_left", "new_left", "counted", "confirmed")

    def __init__(self):
        self.lines = []
        self.old_left = 0
        self.new_left = 0
        self.counted = False
        # A lone line starting with "diff " or "Index: " is prose; only a
        # parsable hunk header or a "+++" file header makes it a patch.
        self.confirmed = False

    def expects_deletion(self):
        return self.counted and self.old_left > 0

    def feed(self, line):
        """Take ``line`` into the patch and return True, or return False."""
        lines = self.lines
        if self.counted and (self.old_left > 0 or self.new_left > 0):
            first = line[:1]
            if first == "+":
                self.new_left -= 1
                lines.append(("add", line))
                return True
            if first == "-":
                self.old_left -= 1
                lines.append(("del", line))
                return True
            if first == " " or not line:
                self.old_left -= 1
                self.new_left -= 1
                lines.append((None, line))
                return True
            if first == "\\":
                lines.append((None, line))
                return True
            # The counts were wrong (a mangled hunk); fall back to headers.
            self.old_left = self.new_left = 0

        if line.startswith("@@"):
            match = _HUNK_HEADER.match(line)
            if match:
                old, new = match.groups()
                self.old_left = 1 if old is None else int(old)
                self.new_left = 1 if new is None else int(new)
                self.counted = True
                self.confirmed = True
            else:
                self.counted = False
            lines.append(("hunk", line))
            return True
        if line.startswith(PATCH_HEADERS):
            if line.startswith("+++"):
                self.confirmed = True
            lines.append((None, line))
            return True
        if not self.counted:
            first = line[:1]
            if first == "+":
                lines.append(("add", line))
                return True
            if first == "-":
                lines.append(("del", line))
                return True
            if first == " ":
                lines.append((None, line))
                return True
        return False

    def finish(self, blocks):
        """Append the collected lines to ``blocks`` as a patch block.

        An unconfirmed patch goes back as ordinary text and quote lines.
        """
        lines = self.lines
        while lines and not lines[-1][1].strip():
            lines.pop()
        if not lines:
            return
        if self.confirmed:
            blocks.append(["patch", lines, 0])
        else:
            for _, line in lines:
                _add_line(blocks, line)


def _inline(text):
    """Escape ``text``, linking URLs and obfuscating addresses in it."""
    search = _ANCHOR.search
    match = search(text)
    if match is None:
        return _escape(text)
    parts = []
    # Everything before ``emitted`` is already in ``parts``.
    emitted = 0
    while match is not None:
        anchor = match.start()
        if match.group() == "@":
            found = _find_address(text, anchor, emitted)
            if found is not None:
                start, end, plain = found
                found = start, end, _escape(plain)
        else:
            found = _find_url(text, anchor, match.group() == "://", emitted)
        if found is None:
            match = search(text, anchor + 1)
            continue
        start, end, html = found
        if start > emitted:
            parts.append(_escape(text[emitted:start]))
        parts.append(html)
        emitted = end
        match = search(text, end)
    parts.append(_escape(text[emitted:]))
    return "".join(parts)


def _find_url(text, anchor, after_scheme, limit):
    """Return ``(start, end, html)`` for the URL at ``anchor``, using
    nothing before ``limit``; None if there is none.

    ``anchor`` is the position of "://" when ``after_scheme``, else of
    "www.".
    """
    if after_scheme:
        for scheme in ("https", "http", "ftp"):
            start = anchor - len(scheme)
            if start >= limit and text[start:anchor].lower() == scheme:
                break
        else:
            return None
        prefix_end = anchor + 3
    else:
        start = anchor
        prefix_end = anchor + 4
    if start > limit and _is_url_neighbour(text[start - 1]):
        return None
    end = _URL_REST.match(text, prefix_end).end()
    url = text[start:end]
    if "@" in url:
        # Credentials or a list address in the URL: linking it would hand
        # the address to harvesters through the href.
        return start, end, _escape(url.replace("@", " at "))
    link, tail = _trim_url(url)
    if len(link) <= prefix_end - start:
        return None
    href = link if after_scheme else "http://" + link
    html = (
        f'<a href="{_escape(href)}" rel="nofollow ugc">{_escape(link)}</a>'
        + _escape(tail)
    )
    return start, end, html


def _is_url_neighbour(char):
    # A URL glued to a word, path or address ("xhttp://", "a/www.b") is
    # not one the author meant as a link.
    return char.isalnum() or char in "_.+@/-"


def _trim_url(url):
    """Split ``url`` into the link and trailing prose punctuation.

    A closing bracket stays in the link while it balances an opening one
    inside it, as in Wikipedia's ``/wiki/Foo_(bar)``.
    """
    end = len(url)
    unbalanced = None
    while end:
        char = url[end - 1]
        if char in _TRAILING_PUNCTUATION:
            end -= 1
            continue
        if char not in _CLOSERS:
            break
        if unbalanced is None:
            # Counted once over the whole URL; the trimmed tail holds only
            # punctuation and closers, so openers never need recounting.
            unbalanced = {
                closer: url.count(closer) - url.count(op)
                for closer, op in _CLOSERS.items()
            }
        if unbalanced[char] <= 0:
            break
        unbalanced[char] -= 1
        end -= 1
    return url[:end], url[end:]
