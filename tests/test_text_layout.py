"""How mail text flows: prose reflows, code and tables keep their lines, quotes show their level."""

from bs4 import BeautifulSoup

from kittypyr.rendering import render_body

WRAPPED = """\
Hi all,

the flush must happen before the TLB is written, otherwise the old
lines come back from the cache and the kernel reads stale data when
it maps the page again.

Thanks,
Ada
"""

CODE = """\
Try this:

    for (i = 0; i < n; i++)
        flush(i);

Name      Size   Owner
cache.c   12 KB  ada
"""


def soup(text):
    return BeautifulSoup(str(render_body(text)), "html.parser")


def test_a_hard_wrapped_paragraph_reflows_and_keeps_its_text():
    tree = soup(WRAPPED)
    (pre,) = tree.select("pre.text")
    assert pre.get_text() == WRAPPED.strip()
    joins = pre.select("span.j")
    # The two breaks inside the wrapped paragraph, not "Hi all," nor "Thanks,\nAda".
    assert len(joins) == 2 and all(j.get_text() == "\n" for j in joins)
    assert pre.select("span.fixed") == []


def test_code_and_tables_keep_a_fixed_width_and_their_lines():
    tree = soup(CODE)
    fixed = [s.get_text() for s in tree.select("pre.text span.fixed")]
    assert fixed == ["    for (i = 0; i < n; i++)\n        flush(i);", "Name      Size   Owner\ncache.c   12 KB  ada"]
    assert tree.select("span.j") == []


def test_nested_quotes_are_told_apart_by_level():
    tree = soup("> a\n> > b\n> > > c\n> > > > > e\n> d\n\nMine.")
    (quote,) = tree.select("blockquote.quote")
    levels = [(s["class"][0], s.get_text()) for s in quote.select("span")]
    assert levels == [("level-1", "> a"), ("level-2", "> > b"), ("level-3", "> > > c"),
                      ("level-4", "> > > > > e"), ("level-1", "> d")]
    assert quote.get_text() == "> a\n> > b\n> > > c\n> > > > > e\n> d"
