"""HTML mail as text a reader can read: paragraphs, lists and quotes, links kept as addresses.

The text is stored as the body of HTML-only mail and shown by the plain
text renderer, which links the URLs it finds. Layout tables, spacer
cells and the whitespace of the source are not kept: a paragraph is one
line, and the page reflows it. What a browser would never show (scripts,
styles, frames, the head) is dropped with its content.

One pass of html5ever (through nh3), which reads the markup as a browser
does, then one of the standard library's tokenizer over what it wrote; no
recursion, whatever the nesting of the mail.
"""

import re
from html.parser import HTMLParser

import nh3

__all__ = ["text_of_html"]

# Dropped with everything inside them.
HIDDEN = frozenset({"script", "style", "iframe", "head", "title", "noscript", "template", "object",
                    "embed", "svg", "math", "select", "frameset", "frame"})

# Elements that end a paragraph: a blank line around them.
PARAGRAPHS = frozenset({"p", "h1", "h2", "h3", "h4", "h5", "h6", "table", "ul", "ol", "dl", "pre",
                        "blockquote", "hr", "form", "fieldset", "address", "figure", "center"})

# Elements that end a line.
LINES = frozenset({"br", "div", "tr", "li", "dt", "dd", "section", "article", "header", "footer",
                   "nav", "aside", "main", "caption", "figcaption", "details", "summary", "body", "html"})

# Tags with no end tag.
VOID = frozenset({"br", "hr", "img", "input", "meta", "link", "area", "base", "col", "wbr", "source",
                  "track", "param", "embed"})

LINKED_SCHEMES = ("http://", "https://", "ftp://")

_SPACES = re.compile(r"\s+")


class _TextMaker(HTMLParser):
    def __init__(self):
        super().__init__(convert_charrefs=True)
        self.lines = []  # finished lines, quote markers included
        self.words = []  # pieces of the line being made
        self.quote = 0
        self.pre = 0
        self.links = []  # (href, length of the line's text when the link opened)
        self.list_depth = 0

    # -- structure ---------------------------------------------------------

    def handle_starttag(self, tag, attrs):
        if tag in PARAGRAPHS:
            self.paragraph()
        elif tag in LINES:
            self.line()
        if tag == "blockquote":
            self.quote += 1
        elif tag == "pre":
            self.pre += 1
        elif tag in ("ul", "ol"):
            self.list_depth += 1
        elif tag == "li":
            self.words.append("  " * max(self.list_depth - 1, 0) + "- ")
        elif tag in ("td", "th"):
            self.words.append(" ")
        elif tag == "a":
            href = dict(attrs).get("href") or ""
            self.links.append((href.strip(), len(self._current())))
        elif tag == "img":
            alt = (dict(attrs).get("alt") or "").strip()
            if alt:
                self.words.append(f" {alt} ")

    def handle_startendtag(self, tag, attrs):
        self.handle_starttag(tag, attrs)
        if tag not in VOID:
            self.handle_endtag(tag)

    def handle_endtag(self, tag):
        if tag == "a" and self.links:
            href, start = self.links.pop()
            text = self._current()[start:].strip()
            if href.lower().startswith(LINKED_SCHEMES) and href not in text:
                # The address goes next to the words, where the renderer links it.
                self.words.append(f" <{href}>")
            return
        if tag == "blockquote":
            self.paragraph()
            self.quote = max(self.quote - 1, 0)
        elif tag == "pre":
            self.paragraph()
            self.pre = max(self.pre - 1, 0)
        elif tag in ("ul", "ol"):
            self.list_depth = max(self.list_depth - 1, 0)
            self.paragraph()
        elif tag in PARAGRAPHS:
            self.paragraph()
        elif tag in LINES:
            self.line()

    def handle_data(self, data):
        if self.pre:
            # Preformatted text keeps its lines and spaces.
            pieces = data.split("\n")
            self.words.append(pieces[0])
            for piece in pieces[1:]:
                self.line(keep_spaces=True)
                self.words.append(piece)
        else:
            self.words.append(data)

    # -- output ------------------------------------------------------------

    def _current(self):
        return _SPACES.sub(" ", "".join(self.words))

    def line(self, keep_spaces=False):
        text = "".join(self.words).rstrip() if keep_spaces else self._current().strip()
        self.words = []
        prefix = "> " * self.quote
        if text or keep_spaces:
            self.lines.append(prefix + text if text else prefix.rstrip())

    def paragraph(self):
        self.line()
        if self.lines and self.lines[-1].strip("> "):
            self.lines.append(("> " * self.quote).rstrip())

    def text(self):
        self.line()
        out = []
        for line in self.lines:
            # Runs of blank lines become one.
            if not line.strip("> ") and (not out or not out[-1].strip("> ")):
                continue
            out.append(line)
        while out and not out[-1].strip("> "):
            out.pop()
        return "\n".join(out)


# The standard library's tokenizer scans to the end of the document again
# for each tag, comment or section still open there (a post of 60 KB of
# "<a " took 30 s, one of 100 KB of "<a b='>' " 45 s), and fails an
# assertion on a marked section such as Word writes ("<![ if ... ]>").
# So it never reads mail's markup as it is: html5ever (nh3) reads it first,
# as a browser does, in one pass, and writes every tag whole, keeping the
# few the text maker reads.
_READ_TAGS = PARAGRAPHS | LINES | {"a", "img", "td", "th", "li", "ul", "ol", "pre", "blockquote"}


def _tokenizable(html):
    return nh3.clean(html, tags=_READ_TAGS - HIDDEN, clean_content_tags=HIDDEN - VOID,
                     attributes={"a": {"href"}, "img": {"alt"}}, link_rel=None, strip_comments=True)


def text_of_html(html):
    """The readable text of an HTML document or fragment, as described above."""
    maker = _TextMaker()
    maker.feed(_tokenizable(html))
    maker.close()
    return maker.text()
