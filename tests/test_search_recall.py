"""Search finds every word a reader sees: quotes, patch hunks, commit messages, text attachments."""

from datetime import datetime, timedelta, timezone

import pytest
import transaction
from pyramid.scripting import prepare
from repoze.catalog.query import Contains

from kittypyr import moderation
from kittypyr.archiving import archive_message, ensure_mailing_list
from kittypyr.catalog import make_text_index
from kittypyr.msgid import message_id_hash
from kittypyr.search import run_search
from kittypyr.security import User
from tests.mailbuilder import attachment, make_message, multipart, text_part
from tests.test_app import make_app

DEV = "dev@lists.example.org"
ADA = ("Ada Lovelace", "ada@example.org")
BOB = ("Bob Builder", "bob@example.org")
WHEN = datetime(2019, 3, 14, 9, 0, tzinfo=timezone.utc)

PATCH = """\
Make the boot cpu wait for its siblings.

Signed-off-by: Ada Lovelace <ada@example.org>
---
 arch/mips/kernel/smp.c | 3 ++-
 1 file changed, 2 insertions(+), 1 deletion(-)

diff --git a/arch/mips/kernel/smp.c b/arch/mips/kernel/smp.c
index 1111111..2222222 100644
--- a/arch/mips/kernel/smp.c
+++ b/arch/mips/kernel/smp.c
@@ -10,7 +10,8 @@ static void smp_boot_secondary(void)
 \tint ibexcontext = 0;
-\t/* the old wombatcomment about locking */
+\tCPU_ZEBRAMASK = cpumask_first(map); /* kestrel
+\t   osprey */
 \treturn 0;
-- 
2.1.4
"""

SIMILAR_PATCH = """\
Another file.

diff --git a/arch/mips/kernel/smpboot.c b/arch/mips/kernel/smpboot.c
--- a/arch/mips/kernel/smpboot.c
+++ b/arch/mips/kernel/smpboot.c
@@ -1,3 +1,3 @@
-old quaggaline
+new quaggaline
"""

ATTACHED_PATCH = b"""\
diff --git a/drivers/net/tulip.c b/drivers/net/tulip.c
--- a/drivers/net/tulip.c
+++ b/drivers/net/tulip.c
@@ -1,2 +1,2 @@
-tapirsetting = 1;
+tapirsetting = 2;
"""


def mail(n, body, subject="Note", sender=ADA, date=WHEN, reply_to=None):
    headers = {}
    if reply_to is not None:
        headers = {"In-Reply-To": f"<r{reply_to}@example.org>", "References": f"<r{reply_to}@example.org>"}
    return make_message(message_id=f"<r{n}@example.org>", subject=subject, sender=sender, date=date,
                        body=body, headers=headers)


NOW = datetime.now(timezone.utc)

CORPUS = [
    mail(1, PATCH, subject="[PATCH] MIPS: wait for siblings"),
    # A reply to a message the archive never got: its quote is all there is.
    mail(2, "On Monday, Carol wrote:\n> the lemurword driver leaks\n\nI agree.\n", sender=BOB,
         reply_to=99),
    mail(3, "The lemurword driver leaks, I measured it.\n", subject="Leak", sender=BOB),
    mail(4, SIMILAR_PATCH, subject="[PATCH] smpboot"),
    make_message(message_id="<r5@example.org>", subject="Tulip fix", sender=ADA, date=WHEN,
                 body=multipart("mixed", text_part("Patch attached.\n"),
                                attachment(ATTACHED_PATCH, "text/x-patch", "tulip.patch"))),
    # One thread of three messages that all say gnuword, and one other.
    mail(6, "gnuword starts here\n", subject="Gnu thread"),
    mail(7, "gnuword again\n", subject="Re: Gnu thread", sender=BOB, reply_to=6),
    mail(8, "gnuword once more\n", subject="Re: Gnu thread", reply_to=7),
    mail(9, "a lonely gnuword\n", subject="Other"),
    # Header-like lines only, then the word in the author's own sentence.
    mail(10, "Cc: okapiword <okapi@example.org>\n\nLooks right.\n\nSigned-off-by: Okapiword Person\n",
         subject="Review"),
    mail(11, "Cc: someone\n\nThe okapiword change looks right to me.\n", subject="Review 2"),
    mail(12, "Recent news about a marmotword.\n", subject="Recent", date=NOW - timedelta(days=3)),
    mail(13, "Older news about a marmotword.\n", subject="Old", date=NOW - timedelta(days=60)),
]


def archive_of(folder, corpus):
    """An application whose list DEV holds ``corpus``."""
    application = make_app(folder)
    with prepare(registry=application.registry) as env:
        for raw in corpus:
            archive_message(ensure_mailing_list(env["root"], DEV), raw)
        transaction.commit()
    return application


@pytest.fixture(scope="module")
def app(tmp_path_factory):
    application = archive_of(tmp_path_factory.mktemp("recall"), CORPUS)
    yield application
    application.registry._zodb_databases[""].close()


def number(message):
    return int(message.message_id.strip("<>")[1:].split("@")[0])


def found(app, query, sort="relevance", ordered=False, **options):
    with prepare(registry=app.registry) as env:
        results = run_search(env["root"], query, [DEV], sort=sort, size=100, **options)
        numbers = [number(h.message) for h in results.hits]
        return (numbers if ordered else sorted(numbers)), results


def test_a_word_only_in_an_added_line_is_found_by_added_and_not_by_removed(app):
    assert found(app, "cpu_zebramask")[0] == [1]
    assert found(app, "added:cpu_zebramask")[0] == [1]
    assert found(app, "patch:cpu_zebramask")[0] == [1]
    assert found(app, "removed:cpu_zebramask")[0] == []
    assert found(app, "own:cpu_zebramask")[0] == []


def test_a_word_only_in_a_removed_comment_or_a_context_line_is_found(app):
    assert found(app, "wombatcomment")[0] == [1]
    assert found(app, "removed:wombatcomment")[0] == [1]
    assert found(app, "added:wombatcomment")[0] == []
    assert found(app, "ibexcontext")[0] == [1]
    assert found(app, "patch:ibexcontext")[0] == [1]
    assert found(app, "added:ibexcontext")[0] == []


def test_a_word_only_in_a_quote_is_found_unprefixed_and_by_quoted_not_by_own(app):
    assert found(app, "lemurword")[0] == [2, 3]
    assert found(app, "quoted:lemurword")[0] == [2]
    assert found(app, "own:lemurword")[0] == [3]
    assert found(app, "agree -own:lemurword")[0] == [2]


def test_own_words_rank_above_a_match_only_in_quotes(app):
    assert found(app, "lemurword", ordered=True)[0] == [3, 2]


def test_a_phrase_running_over_two_lines_of_a_patch_is_found(app):
    assert found(app, '"kestrel osprey"')[0] == [1]
    assert found(app, '"osprey kestrel"')[0] == []


def test_commit_message_and_text_attachments_are_searched(app):
    assert found(app, "siblings")[0] == [1]
    assert found(app, "own:siblings")[0] == [1]
    assert found(app, "tapirsetting")[0] == [5]
    assert found(app, "removed:tapirsetting")[0] == [5]


def test_file_matches_the_path_its_folders_and_its_name_not_a_similar_path(app):
    assert found(app, "file:arch/mips/kernel/smp.c")[0] == [1]
    assert found(app, "file:smp.c")[0] == [1]
    assert found(app, "file:arch/mips/kernel/")[0] == [1, 4]
    assert found(app, "file:arch/mips")[0] == [1, 4]
    assert found(app, "file:arch/mips/kernel/smpboot.c")[0] == [4]
    assert found(app, "file:arch/mips/kernel/smp")[0] == []
    assert found(app, "file:drivers/net/tulip.c")[0] == [5]
    assert found(app, "file:tulip.c quaggaline")[0] == []


def test_is_patch_reply_and_first(app):
    assert found(app, "is:patch")[0] == [1, 4, 5]
    assert found(app, "is:reply gnuword")[0] == [7, 8]
    assert found(app, "is:first gnuword")[0] == [6, 9]
    ids, results = found(app, "is:nonsense")
    assert results.problems


def test_relative_dates(app):
    assert found(app, "after:2w marmotword")[0] == [12]
    assert found(app, "before:2w marmotword")[0] == [13]
    assert found(app, "after:yesterday marmotword")[0] == []
    assert found(app, "date:last-month..today marmotword")[0] in ([12], [12, 13])
    ids, results = found(app, "after:soonish marmotword")
    assert results.problems


def test_snippets_come_from_the_authors_matching_words_not_from_header_lines(app):
    ids, results = found(app, "okapiword", ordered=True)
    snippets = {number(h.message): str(h.snippet) for h in results.hits}
    assert "<mark>okapiword</mark> change looks right" in snippets[11]
    assert "Cc:" not in snippets[11]
    # All that matched in 10 are header-like lines: the snippet shows one.
    assert "<mark>okapiword</mark>" in snippets[10].lower()
    ids, results = found(app, "lemurword")
    quoted = next(h for h in results.hits if number(h.message) == 2)
    assert "<mark>lemurword</mark>" in str(quoted.snippet)


def test_group_by_thread_gives_one_row_per_thread_with_its_count(app):
    from webtest import TestApp

    answer = TestApp(app).get("/api/search", {"q": "gnuword", "group": "thread"}).json
    rows = answer["results"]
    assert len(rows) == 2
    assert sorted(row["thread_matches"] for row in rows) == [1, 3]
    assert answer["count"] == 4 and answer["threads"] == 2
    page = TestApp(app).get("/search", {"q": "gnuword", "group": "thread"})
    assert page.text.count('class="subject"') == 2
    assert "2 more in this thread" in page.text


def test_deleting_a_message_forgets_its_quoted_patch_and_file_words(tmp_path):
    application = make_app(tmp_path)
    with prepare(registry=application.registry) as env:
        dev = ensure_mailing_list(env["root"], DEV)
        archive_message(dev, CORPUS[0])
        archive_message(dev, CORPUS[1])
        archive_message(dev, CORPUS[4])
        transaction.commit()
    queries = ["cpu_zebramask", "wombatcomment", "file:smp.c", "quoted:lemurword", "tapirsetting",
               "is:patch", "is:reply", '"kestrel osprey"']
    with prepare(registry=application.registry) as env:
        assert all(run_search(env["root"], q, [DEV]).total for q in queries)
        dev = env["root"].lists[DEV]
        moderation.delete_messages(dev, [message_id_hash(f"<r{n}@example.org>") for n in (1, 2, 5)],
                                   User("admin@example.org", "Admin"), registry=application.registry)
        transaction.commit()
    with prepare(registry=application.registry) as env:
        archive = env["root"]
        assert [q for q in queries if run_search(archive, q, [DEV]).total] == []
        lexicon = archive.catalog["text"].index._lexicon
        assert lexicon.get_wid("cpu_zebramask") == 0 and lexicon.get_wid("lemurword") == 0
    application.registry._zodb_databases[""].close()


def test_an_archive_made_before_is_upgraded_at_start_up(tmp_path):
    application = make_app(tmp_path)
    with prepare(registry=application.registry) as env:
        archive = env["root"]
        archive_message(ensure_mailing_list(archive, DEV), CORPUS[0])
        # As an older kittypyr left it: own words only, no file or is index.
        del archive.catalog["text"], archive.catalog["file"], archive.catalog["is"]
        archive.catalog["text"] = make_text_index()
        transaction.commit()
    with prepare(registry=application.registry) as env:
        archive = env["root"]  # upgraded by the root factory, as at start-up
        assert run_search(archive, "cpu_zebramask", [DEV]).total == 1
        assert run_search(archive, "file:smp.c", [DEV]).total == 1
        assert archive.catalog.query(Contains("text", "wombatcomment"))[0] == 1
        # Phrases asked through the catalog's own query parser (exports, feeds) too.
        assert archive.catalog.query(Contains("text", '"kestrel osprey"'))[0] == 1
        assert archive.catalog.query(Contains("text", '"osprey kestrel"'))[0] == 0
    application.registry._zodb_databases[""].close()


# Chinese, Japanese and Korean are written without spaces between words.
CJK_CORPUS = [
    mail(31, "我们明天讨论内核补丁的问题。\n", subject="关于内核补丁"),
    # The same two words, far apart.
    mail(32, "内核的问题很多，我们以后再发补丁。\n", subject="问题"),
    mail(33, "Linuxカーネルのパッチを送りました。\n", subject="[PATCH] パッチ"),
    mail(34, "패치를 보냈습니다.\n", subject="보고"),
    mail(35, "The kernel patch, in plain English.\n", subject="Patch"),
    mail(36, "Notes from the meeting, in English first.\n" * 12 + "新的驱动程序已经发布。\n", subject="Notes"),
]


@pytest.fixture(scope="module")
def cjk_app(tmp_path_factory):
    application = archive_of(tmp_path_factory.mktemp("cjk"), CJK_CORPUS)
    yield application
    application.registry._zodb_databases[""].close()


def test_a_word_inside_a_chinese_sentence_is_found(cjk_app):
    assert found(cjk_app, "内核")[0] == [31, 32]
    assert found(cjk_app, "own:补丁")[0] == [31, 32]
    # Two words of a query: both anywhere.
    assert found(cjk_app, "内核 补丁")[0] == [31, 32]


def test_a_chinese_phrase_finds_the_sequence_not_its_words_apart(cjk_app):
    assert found(cjk_app, "内核补丁")[0] == [31]
    assert found(cjk_app, '"内核补丁"')[0] == [31]
    assert found(cjk_app, "补丁内核")[0] == []


def test_one_chinese_character_finds_the_messages_holding_it(cjk_app):
    assert found(cjk_app, "核")[0] == [31, 32]
    # At the end of a run of letters, too.
    assert found(cjk_app, "丁")[0] == [31, 32]
    assert found(cjk_app, "讨")[0] == [31]


def test_japanese_is_split_from_latin_letters_and_into_words(cjk_app):
    assert found(cjk_app, "linux")[0] == [33]
    assert found(cjk_app, "カーネル")[0] == [33]
    assert found(cjk_app, "パッチ")[0] == [33]
    assert found(cjk_app, "linuxカーネル")[0] == [33]
    assert found(cjk_app, "kernel")[0] == [35]


def test_a_korean_word_is_found_with_its_particle_attached(cjk_app):
    assert found(cjk_app, "패치")[0] == [34]


def test_subject_finds_a_word_inside_a_chinese_subject(cjk_app):
    assert found(cjk_app, "subject:补丁")[0] == [31]
    assert found(cjk_app, "subject:内核补丁")[0] == [31]
    assert found(cjk_app, "subject:补丁内核")[0] == []
    assert found(cjk_app, "subject:ッチ")[0] == [33]


def test_a_chinese_word_is_marked_in_the_snippet(cjk_app):
    ids, results = found(cjk_app, "补丁")
    snippets = {number(h.message): str(h.snippet) for h in results.hits}
    assert "讨论内核<mark>补丁</mark>的问题" in snippets[31]
    # Found past the beginning of a long message: the snippet is cut around it.
    ids, results = found(cjk_app, "驱动")
    assert ids == [36] and "新的<mark>驱动</mark>程序" in str(results.hits[0].snippet)
    # One character is a word of its own.
    ids, results = found(cjk_app, "驱")
    assert ids == [36] and "新的<mark>驱</mark>动程序" in str(results.hits[0].snippet)



def test_a_word_far_into_a_long_line_without_spaces_is_marked_in_the_snippet():
    from kittypyr.snippets import snippet

    line = "これは長い文章です。" * 36 + "カーネルのパッチ。" + "続きの文章です。" * 30
    shown = str(snippet(line, ["カーネル"]))
    assert "<mark>カーネル</mark>" in shown and shown.startswith("… ")


def archive_as_before_cjk_words_were_split(application, raws, monkeypatch):
    """``raws`` archived as kittypyr did before: each run of CJK letters one word, the schema of then."""
    from zope.index.text.lexicon import CaseNormalizer, Splitter, StopWordRemover

    from kittypyr import lexicon
    from kittypyr.bootstrap import EVOLVE_STEPS, split_cjk_words

    with monkeypatch.context() as before:
        before.setattr(lexicon, "split_cjk_runs", lambda words: words)
        with prepare(registry=application.registry) as env:
            archive = env["root"]
            for raw in raws:
                archive_message(ensure_mailing_list(archive, DEV), raw)
            for index in archive.catalog.values():
                words = getattr(getattr(index, "index", None), "_lexicon", None)
                if words is not None:
                    words._pipeline = (Splitter(), CaseNormalizer(), StopWordRemover())
            archive.schema_version = EVOLVE_STEPS.index(split_cjk_words)
            transaction.commit()


def test_an_archive_made_before_cjk_words_were_split_keeps_its_words_and_splits_new_mail(tmp_path, monkeypatch):
    application = make_app(tmp_path)
    archive_as_before_cjk_words_were_split(application, CJK_CORPUS[:1] + CJK_CORPUS[4:5], monkeypatch)
    try:
        with prepare(registry=application.registry) as env:
            archive = env["root"]  # upgraded by the root factory, as at start-up
            archive_message(archive.lists[DEV], mail(37, "新的内核版本。\n", subject="版本"))
            transaction.commit()
        # Latin words as they were; new mail split at once; the older
        # Chinese message waits for `kittypyr reindex --cjk` (tests/test_cli.py).
        assert found(application, "kernel")[0] == [35]
        assert found(application, "内核")[0] == [37]
        assert found(application, "subject:版本")[0] == [37]
        assert found(application, "我们明天讨论内核补丁的问题")[0] == []
    finally:
        application.registry._zodb_databases[""].close()


def test_an_archive_without_cjk_words_is_not_told_to_index_them_again(tmp_path, monkeypatch):
    application = make_app(tmp_path)
    archive_as_before_cjk_words_were_split(application, CJK_CORPUS[4:5], monkeypatch)
    try:
        with prepare(registry=application.registry) as env:
            assert not getattr(env["root"], "text_indexed_before_cjk_split", False)
        assert found(application, "kernel")[0] == [35]
    finally:
        application.registry._zodb_databases[""].close()


def test_a_word_holding_a_soft_hyphen_or_a_word_joiner_is_one_word(tmp_path):
    """Invisible marks that say "no break here" or "break here if need be" are inside a word, not between two.

    HTML newsletters hyphenate long words with &shy;; a reader pasting such a
    word from the page into the search box pastes the marks too.
    """
    application = archive_of(tmp_path, [mail(
        41, "Das Kran\u00adken\u00adhaus ist offen, sagt die Wort\u2060verbindung.\n", subject="Neu")])
    try:
        for query in ("krankenhaus", "Kran\u00adken\u00adhaus", "wortverbindung", '"krankenhaus ist offen"'):
            assert found(application, query)[0] == [41], query
        assert found(application, "kran")[0] == []
        assert "<mark>Krankenhaus</mark>" in str(found(application, "krankenhaus")[1].hits[0].snippet)
    finally:
        application.registry._zodb_databases[""].close()


def test_a_word_is_found_whether_its_accents_are_composed_or_not(tmp_path):
    """macOS writes "é" as "e" and a combining accent (NFD); a keyboard types it whole (NFC)."""
    import unicodedata

    decomposed = unicodedata.normalize("NFD", "Le café de Zoë, 패치를 보냈습니다.\n")
    application = archive_of(tmp_path, [mail(42, decomposed, subject="NFD")])
    try:
        for query in ("café", "zoë", "패치", unicodedata.normalize("NFD", "café")):
            assert found(application, query)[0] == [42], query
        assert found(application, "cafe")[0] == []
        assert "<mark>café</mark>" in str(found(application, "café")[1].hits[0].snippet)
    finally:
        application.registry._zodb_databases[""].close()
