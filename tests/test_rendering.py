import time

import pytest
from bs4 import BeautifulSoup
from markupsafe import Markup

from kittypyr.rendering import obfuscate_address, render_body

ALLOWED_TAGS = {"div", "pre", "blockquote", "details", "summary", "span", "a"}

PATCH = """\
Here is the fix:

diff --git a/foo/core.py b/foo/core.py
index 1234567..89abcde 100644
--- a/foo/core.py
+++ b/foo/core.py
@@ -10,3 +10,3 @@ def main():
     parser = make_parser()
-    run(args)
+    run(args, strict=True)
     return 0
"""


def soup(body):
    return BeautifulSoup(str(render_body(body)), "html.parser")


def texts(tree, selector):
    return [element.get_text() for element in tree.select(selector)]


# -- escaping and structure -------------------------------------------------


def test_returns_markup_in_a_body_div():
    html = render_body("Hello")
    assert isinstance(html, Markup)
    tree = BeautifulSoup(str(html), "html.parser")
    (wrapper,) = tree.find_all(recursive=False)
    assert wrapper.name == "div"
    assert wrapper["class"] == ["body"]
    assert texts(tree, "div.body > pre.text") == ["Hello"]


def test_empty_body_is_an_empty_wrapper():
    assert str(render_body("")) == '<div class="body"></div>'


def test_script_is_escaped():
    body = "Look: <script>alert(1)</script> & <b onclick=\"x()\">bold</b>"
    html = str(render_body(body))
    assert "<script" not in html
    assert "<b " not in html
    assert "&lt;script&gt;" in html
    tree = BeautifulSoup(html, "html.parser")
    assert tree.find("script") is None
    assert tree.find("b") is None
    assert texts(tree, "pre.text") == [body]


def test_html_lookalike_href_in_text_is_not_markup():
    tree = soup('<a href="javascript:alert(1)">click</a>')
    assert tree.find_all("a") == []
    assert texts(tree, "pre.text") == ['<a href="javascript:alert(1)">click</a>']


def test_indentation_and_line_structure_are_kept():
    body = "Try this:\n\n    def f():\n        return 1\n\n\tTabbed."
    tree = soup(body)
    assert texts(tree, "pre.text") == [body]


def test_windows_line_endings_are_normalised():
    tree = soup("one\r\ntwo\rthree\r\n")
    assert texts(tree, "pre.text") == ["one\ntwo\nthree"]


def test_blank_edges_are_dropped():
    tree = soup("\n\n  \nHello\n\n\n")
    assert texts(tree, "pre.text") == ["Hello"]


def test_only_styled_tags_are_produced():
    body = (
        "Hi http://example.org/ jdoe@example.com\n"
        + "> q\n" * 10
        + PATCH
        + "-- \nsig\n"
    )
    tree = soup(body)
    assert {tag.name for tag in tree.find_all(True)} <= ALLOWED_TAGS
    for anchor in tree.find_all("a"):
        assert set(anchor.attrs) == {"href", "rel"}


# -- quotes -----------------------------------------------------------------


def test_quoted_line_is_in_a_blockquote_with_its_marker():
    tree = soup("On Monday Jane wrote:\n> quoted\nMy answer.")
    assert texts(tree, "blockquote.quote pre") == ["> quoted"]
    assert texts(tree, "div.body > pre.text") == [
        "On Monday Jane wrote:",
        "My answer.",
    ]


def test_indented_quote_marker_counts():
    tree = soup("   > indented quote")
    assert texts(tree, "blockquote.quote") == ["   > indented quote"]


def test_nested_quotes_flatten_with_the_deepest_level():
    tree = soup("> a\n> > b\n>> > c\n> d")
    (quote,) = tree.select("blockquote.quote")
    assert quote["data-depth"] == "3"
    assert quote.get_text() == "> a\n> > b\n>> > c\n> d"


def test_blank_lines_inside_a_quote_keep_it_one_block():
    tree = soup("> first paragraph\n\n> second paragraph")
    assert texts(tree, "blockquote.quote") == [
        "> first paragraph\n\n> second paragraph"
    ]


def test_short_quote_is_not_folded():
    tree = soup("\n".join(f"> line {n}" for n in range(6)))
    assert tree.select("details") == []
    assert len(tree.select("blockquote.quote")) == 1


def test_long_quote_folds_without_javascript():
    body = "Reply:\n" + "\n".join(f"> line {n}" for n in range(10)) + "\nMine."
    tree = soup(body)
    (fold,) = tree.select("details.quote-fold")
    assert "10 quoted lines" in fold.summary.get_text()
    (quote,) = fold.select("blockquote.quote")
    assert quote.get_text().splitlines()[0] == "> line 0"
    assert len(quote.get_text().splitlines()) == 10
    assert texts(tree, "div.body > pre.text") == ["Reply:", "Mine."]


# -- patches ----------------------------------------------------------------


def test_patch_is_highlighted():
    tree = soup(PATCH)
    (patch,) = tree.select("pre.patch")
    assert texts(patch, "span.add") == ["+    run(args, strict=True)"]
    assert texts(patch, "span.del") == ["-    run(args)"]
    assert texts(patch, "span.hunk") == ["@@ -10,3 +10,3 @@ def main():"]
    assert patch.get_text().startswith("diff --git a/foo/core.py")
    assert "     return 0" in patch.get_text()
    assert texts(tree, "pre.text") == ["Here is the fix:"]


def test_file_headers_are_not_marked_as_changes():
    tree = soup(PATCH)
    marked = texts(tree, "span.add") + texts(tree, "span.del")
    assert not any(line.startswith(("+++", "---")) for line in marked)


def test_bare_hunk_starts_a_patch():
    tree = soup("@@ -1 +1 @@\n-a\n+b")
    assert texts(tree, "pre.patch span.del") == ["-a"]
    assert texts(tree, "pre.patch span.add") == ["+b"]


def test_stripped_blank_context_line_does_not_split_a_hunk():
    body = "@@ -1,3 +1,3 @@\n-a\n+b\n\n c"
    tree = soup(body)
    (patch,) = tree.select("pre.patch")
    assert patch.get_text() == body
    assert tree.select("pre.text") == []


def test_prose_after_a_patch_is_not_swallowed():
    tree = soup(PATCH + "  Regards,\n- a list item\n")
    assert texts(tree, "pre.text")[-1] == "  Regards,\n- a list item"
    assert "Regards" not in tree.select_one("pre.patch").get_text()


def test_a_sentence_starting_with_diff_is_not_a_patch():
    tree = soup("diff is a tool.\n Indented.")
    assert tree.select("pre.patch") == []
    assert texts(tree, "pre.text") == ["diff is a tool.\n Indented."]


def test_format_patch_signature_follows_the_last_hunk():
    body = "@@ -1,2 +1,1 @@\n-- \n keep\n-- \n2.39.0\n"
    tree = soup(body)
    # The first "-- " is a deleted "- " line: the hunk still expects one.
    assert texts(tree, "pre.patch span.del") == ["-- "]
    assert texts(tree, "div.signature pre") == ["-- \n2.39.0"]


# -- signature --------------------------------------------------------------


def test_signature_after_delimiter():
    tree = soup("Body text.\n-- \nJane Doe\nCEO of Nothing\n")
    assert texts(tree, "div.signature > pre") == ["-- \nJane Doe\nCEO of Nothing"]
    assert texts(tree, "div.body > pre.text") == ["Body text."]


def test_double_dash_without_space_is_not_a_delimiter():
    tree = soup("Body\n--\nnot a signature")
    assert tree.select("div.signature") == []


# -- links ------------------------------------------------------------------


def test_http_url_is_linked_nofollow():
    html = str(render_body("See http://example.org/a?b=1&c=2 now"))
    assert 'rel="nofollow ugc"' in html
    (anchor,) = BeautifulSoup(html, "html.parser").find_all("a")
    assert anchor["href"] == "http://example.org/a?b=1&c=2"
    assert anchor.get_text() == "http://example.org/a?b=1&c=2"
    assert anchor["rel"] == ["nofollow", "ugc"]


@pytest.mark.parametrize(
    "url",
    ["https://example.org/x", "ftp://ftp.example.org/pub/", "HTTPS://EXAMPLE.ORG/"],
)
def test_allowed_schemes_are_linked(url):
    (anchor,) = soup(f"at {url} ok").find_all("a")
    assert anchor["href"] == url


def test_www_gets_http():
    (anchor,) = soup("Visit www.python.org, please").find_all("a")
    assert anchor["href"] == "http://www.python.org"
    assert anchor.get_text() == "www.python.org"


@pytest.mark.parametrize(
    "body",
    [
        "javascript:alert(1)",
        "click javascript:alert(document.cookie) now",
        "data:text/html,<script>alert(1)</script>",
        "vbscript:msgbox(1)",
        "file:///etc/passwd",
    ],
)
def test_other_schemes_are_not_linked(body):
    html = str(render_body(body))
    tree = BeautifulSoup(html, "html.parser")
    assert tree.find_all("a") == []
    assert texts(tree, "pre.text") == [body]


def test_angle_brackets_and_trailing_period_stay_outside_the_link():
    tree = soup("<https://x.org/a>.")
    (anchor,) = tree.find_all("a")
    assert anchor["href"] == "https://x.org/a"
    assert anchor.get_text() == "https://x.org/a"
    assert texts(tree, "pre.text") == ["<https://x.org/a>."]


@pytest.mark.parametrize(
    "body, href",
    [
        ("(see https://x.org/a)", "https://x.org/a"),
        ("https://x.org/a, and", "https://x.org/a"),
        ("is it https://x.org/a?", "https://x.org/a"),
        ("'https://x.org/a'", "https://x.org/a"),
        ("https://w.org/wiki/Foo_(bar)", "https://w.org/wiki/Foo_(bar)"),
        ("(https://w.org/wiki/Foo_(bar))", "https://w.org/wiki/Foo_(bar)"),
        ('"https://x.org/a"', "https://x.org/a"),
    ],
)
def test_unbalanced_trailing_punctuation_is_not_linked(body, href):
    tree = soup(body)
    (anchor,) = tree.find_all("a")
    assert anchor["href"] == href
    assert texts(tree, "pre.text") == [body]


def test_quote_character_cannot_break_out_of_href():
    tree = soup('http://x.org/"onmouseover="alert(1)')
    for anchor in tree.find_all("a"):
        assert set(anchor.attrs) == {"href", "rel"}
        assert anchor["href"] == "http://x.org/"


def test_urls_are_linked_in_quotes_patches_and_signatures():
    body = (
        "> quoted https://q.example/\n"
        "@@ -1 +1 @@\n-old\n+new https://p.example/\n"
        "-- \nhttps://s.example/\n"
    )
    tree = soup(body)
    hrefs = {
        selector: [anchor["href"] for anchor in tree.select(selector)]
        for selector in ("blockquote.quote a", "pre.patch span.add a")
    }
    assert hrefs == {
        "blockquote.quote a": ["https://q.example/"],
        "pre.patch span.add a": ["https://p.example/"],
    }
    assert [a["href"] for a in tree.select("div.signature a")] == ["https://s.example/"]


def test_glued_scheme_is_not_linked():
    assert soup("xhttp://example.org/").find_all("a") == []


def test_bare_scheme_is_not_linked():
    assert soup("http://. and www.").find_all("a") == []


# -- addresses --------------------------------------------------------------


def test_addresses_are_obfuscated_everywhere():
    body = (
        "Write to jdoe@example.com or <a.b+tag@sub.example.org>.\n"
        "mailto:list-owner@lists.example.net\n"
        "Archive: https://lists.example.org/archives/list/dev@lists.example.org/\n"
        "ftp://anonymous:guest@ftp.example.org/pub\n"
        "> Quoted: quoted@example.com\n"
        "diff --git a/AUTHORS b/AUTHORS\n--- a/AUTHORS\n+++ b/AUTHORS\n"
        "-Old <old@example.com>\n+New <new@example.com>\n"
        "-- \nsigned@example.com\n"
    )
    html = str(render_body(body))
    assert "@" not in html
    assert "mailto:" not in html
    tree = BeautifulSoup(html, "html.parser")
    visible = tree.get_text()
    for expected in (
        "jdoe at example.com",
        "<a.b+tag at sub.example.org>",
        "list-owner at lists.example.net",
        "quoted at example.com",
        "-Old <old at example.com>",
        "signed at example.com",
        "list/dev at lists.example.org/",
    ):
        assert expected in visible
    assert texts(tree, "pre.patch span.add") == ["+New <new at example.com>"]
    # A URL with an address in it must not carry the address in an href.
    assert tree.find_all("a") == []


def test_obfuscate_address():
    assert obfuscate_address("jdoe@example.com") == "jdoe at example.com"
    assert obfuscate_address("<jdoe@example.com>!") == "<jdoe at example.com>!"
    assert obfuscate_address("MAILTO:x.y+z@ex-ample.org.") == "x.y+z at ex-ample.org."
    assert obfuscate_address("a@b.cc, d@e.ff") == "a at b.cc, d at e.ff"


def test_obfuscate_address_leaves_non_addresses_alone():
    for text in ("@decorator", "a@b", "no address here", "x @ y.com", ""):
        assert obfuscate_address(text) == text


def test_obfuscate_address_returns_plain_text():
    result = obfuscate_address("<b>jdoe@example.com</b>")
    assert type(result) is str
    assert result == "<b>jdoe at example.com</b>"


# -- speed ------------------------------------------------------------------


def _timed(body):
    started = time.perf_counter()
    render_body(body)
    return time.perf_counter() - started


def test_a_twenty_thousand_line_body_renders_quickly():
    chunk = (
        "Hi jdoe@example.com, see https://example.org/issue/1.\n"
        "> quoted text from someone\n"
        "> > and someone else\n"
        "    indented code\n"
        "@@ -1,2 +1,2 @@\n-old\n+new\n keep\n"
        "plain prose line\n"
        "\n"
    )
    body = chunk * 2000
    assert body.count("\n") == 20000
    assert _timed(body) < 2.0


@pytest.mark.parametrize(
    "body",
    [
        "a" * 300_000,
        "a@" * 150_000,
        "x@" + "b" * 300_000,
        "." * 300_000 + "@",
        "http://x" + ")" * 300_000,
        "ahttp://" * 40_000,
        "://" * 100_000,
        "> " * 150_000,
        "diff x\n" * 40_000,
        "> a\n\n" * 50_000,
        "@@ -1,999999999 +1,999999999 @@\n" + "-x\n" * 100_000,
    ],
    ids=[
        "long-word",
        "at-chain",
        "long-domain",
        "long-local",
        "closers",
        "glued-schemes",
        "bare-schemes",
        "quote-markers",
        "diff-lines",
        "split-quotes",
        "huge-hunk",
    ],
)
def test_pathological_bodies_stay_linear(body):
    assert _timed(body) < 2.0


def test_the_cache_of_rendered_bodies_keeps_a_bounded_amount_of_html():
    """A quote line renders to some 35 times its size: 5,000 such bodies of 256 KB would be tens of GB kept."""
    from types import SimpleNamespace

    from kittypyr.views.threads import RenderedBodies

    cache = RenderedBodies(capacity=5000, max_chars=16_000_000)
    body = "a\n>\n" * 5_000  # 20,000 characters, some 700,000 of HTML
    for n in range(40):
        message = SimpleNamespace(_p_oid=b"%08d" % n, _p_serial=b"\0" * 8, body_text=body)
        assert "blockquote" in cache(message)
    assert 0 < cache.chars <= 16_000_000
    assert cache.chars == sum(len(html) for html in cache.entries.values())
    assert 0 < len(cache.entries) < 40
    # What would fill a sixteenth of it alone is rendered every time, not kept.
    huge = SimpleNamespace(_p_oid=b"huge", _p_serial=b"\0" * 8, body_text=body * 10)
    cache(huge)
    assert all(key[0] != b"huge" for key in cache.entries)
