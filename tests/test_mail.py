import base64
import pickle
import random
from datetime import datetime, timedelta, timezone

import pytest

from kittypyr.mail import (
    ParsedAttachment,
    ParsedMail,
    UnparseableMessage,
    decode_bytes,
    parse_message,
    searchable_text,
)
from tests.functional import answered_apart
from tests.mailbuilder import (
    Part,
    alternative,
    attachment,
    encode_word,
    flowed_part,
    forwarded,
    html_part,
    make_message,
    multipart,
    text_part,
)

UTC = timezone.utc
NOW = datetime(2024, 6, 1, 12, 0, tzinfo=UTC)
PNG = base64.b64decode(
    "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk+M9QDwADhgGAWjR9awAAAABJRU5ErkJggg=="
)
RUSSIAN = (
    "Привет всем! Это тестовое сообщение для списка рассылки. "
    "Пожалуйста, проверьте, правильно ли отображается этот текст."
)


def parse(raw, **kwargs):
    kwargs.setdefault("now", NOW)
    return parse_message(raw, **kwargs)


# --- headers -----------------------------------------------------------------


@pytest.mark.parametrize(
    "subject, expected",
    [
        (encode_word("Grüße aus Köln", "utf-8", "B"), "Grüße aus Köln"),
        (encode_word("Grüße aus Köln", "utf-8", "Q"), "Grüße aus Köln"),
        (encode_word("Café crème", "iso-8859-1", "Q"), "Café crème"),
        ("Re: " + encode_word("déjà", "utf-8", "Q") + " vu", "Re: déjà vu"),
        # Folded between two encoded words: the whitespace between them goes.
        (encode_word("Hello ", "utf-8", "B") + "\n " + encode_word("wörld", "utf-8", "B"), "Hello wörld"),
        # Adjacent without whitespace, as broken mailers write them.
        ("=?utf-8?Q?caf=C3=A9?==?utf-8?Q?_noir?=", "café noir"),
        # A multi-byte character split across two encoded words.
        ("=?utf-8?B?w6k=?= =?utf-8?B?w6k=?=", "éé"),
        ("=?utf-8?Q?=C3?= =?utf-8?Q?=A9t=C3=A9?=", "été"),
        # A bogus charset inside the encoded word.
        ("=?uft-8?Q?na=C3=AFve?=", "naïve"),
        ("=?x-unknown?Q?na=C3=AFve?=", "naïve"),
        # Long folded plain subject with a tab.
        ("A long subject\n\tthat was folded", "A long subject that was folded"),
        # Lower-case q, missing base64 padding.
        ("=?UTF-8?q?ni=C3=B1o?= / =?utf-8?b?bmnDsW8?=", "niño / niño"),
    ],
)
def test_rfc2047_subjects(subject, expected):
    mail = parse(make_message(subject=subject))
    assert mail.subject == expected


def test_raw_8bit_headers_utf8_then_latin1():
    utf8 = parse(make_message(headers={"Subject": "Grüße".encode("utf-8")}))
    latin = parse(make_message(headers={"Subject": "Grüße".encode("latin-1")}))
    assert utf8.subject == "Grüße"
    assert latin.subject == "Grüße"
    assert any("8-bit" in note for note in latin.defects)


def test_raw_utf8_with_a_stray_byte_is_still_read_as_utf8():
    """One broken byte must not turn a whole name into Latin-1 mojibake."""
    name = "Юникод запрещен".encode("utf-8") + b"\xf1"
    mail = parse(make_message(headers={"From": name + b" <u@example.org>", "Subject": b"Gr\xc3\xbc\xc3\x9fe \xff"}))
    assert mail.sender_name == "Юникод запрещен\ufffd"
    assert mail.subject == "Grüße \ufffd"
    # Latin-1 that happens to hold no UTF-8 sequence stays Latin-1.
    assert parse(make_message(headers={"Subject": "Müller à Zürich".encode("latin-1")})).subject == "Müller à Zürich"


def test_an_address_written_with_at_is_read_as_an_address():
    """Pipermail's way of hiding addresses, in a From that came back to a list (HyperKitty reads it so too)."""
    for value, name in (("user at example.com", ""), ("jdoe at example.com (John Doe)", "John Doe")):
        mail = parse(make_message(headers={"From": value}))
        assert (mail.sender_name, mail.sender_address) == (name, value.split()[0] + "@example.com")
    # Words that merely hold "at" stay a name.
    mail = parse(make_message(headers={"From": "Meet at noon"}))
    assert (mail.sender_name, mail.sender_address) == ("Meet at noon", "")


def test_a_utf16_body_does_not_decide_how_raw_8bit_headers_read():
    # The body's charset is the usual hint for raw header bytes, but a
    # wide one reads any two bytes as a character.
    raw = (b"From: a@example.org\nSubject: Gr\xfc\xdf\nMessage-ID: <w@example.org>\n"
           b"Content-Type: text/plain; charset=utf-16\n\n" + "Hallo.\n".encode("utf-16"))
    mail = parse(raw)
    assert mail.subject == "Grüß"
    assert mail.body_text == "Hallo."


def test_sender_name_and_address():
    mail = parse(make_message(sender=("Jörg Müller", "Joerg.Mueller@Example.ORG")))
    assert mail.sender_name == "Jörg Müller"
    assert mail.sender_address == "joerg.mueller@example.org"

    mail = parse(make_message(sender="=?iso-8859-1?Q?Ren=E9_Dupont?= <rene@example.org>"))
    assert mail.sender_name == "René Dupont"
    mail = parse(make_message(sender='"Doe, Jane" <JANE@example.org>'))
    assert (mail.sender_name, mail.sender_address) == ("Doe, Jane", "jane@example.org")
    mail = parse(make_message(sender="bob@example.org (Bob Smith)"))
    assert (mail.sender_name, mail.sender_address) == ("Bob Smith", "bob@example.org")
    mail = parse(make_message(sender="carol@example.org"))
    assert (mail.sender_name, mail.sender_address) == ("", "carol@example.org")


def sender_of(from_value):
    """``[name, address]`` of a message whose From header is ``from_value``."""
    mail = parse_message(f"From: {from_value}\nSubject: s\nMessage-ID: <m@example.org>\n\nbody\n".encode())
    return [mail.sender_name, mail.sender_address]


@pytest.mark.parametrize("from_value, sender", [
    ("Ann" + " " * 500_000 + "<ann@example.org>", ["Ann", "ann@example.org"]),
    ('"Ann"' + " " * 500_000 + "<ann@example.org>", ["Ann", "ann@example.org"]),
    ("ann@example.org" + " " * 500_000 + "(Ann)", ["Ann", "ann@example.org"]),
    # Neither form: read by the standard library, as before.
    ("x" + " " * 500_000 + "y", ["x y", ""]),
    ("ann@example.org" + "\t" * 500_000 + "x", ["", "ann@example.orgx"]),
])
def test_a_sender_of_many_spaces_is_read_once(from_value, sender):
    """A From header of half a million spaces between two words: the
    patterns of a name and of the spaces after it both took spaces, and
    were tried every way of sharing them out (minutes to hours of a
    process's time, for each message sent so)."""
    assert answered_apart("tests.test_mail:sender_of", from_value) == sender


def test_sender_falls_back_to_sender_and_reply_to():
    mail = parse(make_message(sender=None, headers={"Sender": "Owner <owner@example.org>"}))
    assert mail.sender_address == "owner@example.org"
    mail = parse(make_message(sender=None, headers={"Reply-To": "reply@example.org"}))
    assert mail.sender_address == "reply@example.org"
    mail = parse(make_message(sender=None))
    assert (mail.sender_name, mail.sender_address) == ("", "")


def test_ids_references_and_reply_to():
    mail = parse(
        make_message(
            message_id="< self@example.org >",
            in_reply_to="<parent@example.org> (Alice's message of Monday) <other@example.org>",
            references=[
                "<root@example.org>",
                "<parent@example.org>",
                "<root@example.org>",
                "<self@example.org>",
            ],
        )
    )
    assert mail.message_id == "self@example.org"
    assert not mail.message_id_derived
    assert mail.in_reply_to == "parent@example.org"
    assert mail.references == ("root@example.org", "parent@example.org")


def test_message_id_header_spelling_and_resent_fallback():
    raw = make_message(message_id=None, headers={"Message-Id": "<lower@example.org>"})
    assert parse(raw).message_id == "lower@example.org"
    raw = make_message(message_id=None, headers={"Resent-Message-ID": "<resent@example.org>"})
    assert parse(raw).message_id == "resent@example.org"


def test_missing_message_id_is_derived_deterministically():
    raw = make_message(message_id=None, body="first body\n")
    one, two = parse(raw), parse(raw)
    assert one.message_id_derived
    assert one.message_id == two.message_id
    assert one.message_id.endswith("@kittypyr.invalid")
    assert len(one.message_id.split("@")[0]) == 32
    other = parse(make_message(message_id=None, body="second body\n"))
    assert other.message_id != one.message_id
    # A header that names nothing is the empty id, as Mailman and HyperKitty
    # name it (Mailman asks for its permalink with msgid='').
    for header in ("  ", "<>"):
        blank = parse(make_message(message_id=header, body="first body\n"))
        assert not blank.message_id_derived and blank.message_id == ""


def test_fingerprint_ignores_headers_and_trailing_whitespace():
    plain = make_message(body="Line one\nLine two\n")
    delivered = make_message(
        body="Line one  \nLine two\n\n\n",
        headers={"List-Id": "<dev.example.org>", "Archived-At": "<https://example.org/x>", "X-Extra": "1"},
        crlf=True,
    )
    different = make_message(body="Line one\nLine 2\n")
    assert parse(plain).fingerprint == parse(delivered).fingerprint
    assert parse(plain).fingerprint != parse(different).fingerprint
    assert len(parse(plain).fingerprint) == 40


@pytest.mark.parametrize(
    "headers, expected",
    [
        ({"X-No-Archive": "yes"}, True),
        ({"X-No-Archive": "Yes "}, True),
        ({"X-Archive": "NO"}, True),
        ({"X-No-Archive": "no"}, False),
        ({"X-Archive": "yes"}, False),
        ({}, False),
    ],
)
def test_no_archive(headers, expected):
    assert parse(make_message(headers=headers)).no_archive is expected


# --- charsets ----------------------------------------------------------------


def test_decode_bytes():
    assert decode_bytes(b"plain", None) == "plain"
    assert decode_bytes("naïve".encode("utf-8"), "uft-8") == "naïve"
    assert decode_bytes("naïve".encode("utf-8"), '"UTF8"') == "naïve"
    assert decode_bytes("café".encode("latin-1"), "utf-8") == "café"
    # iso-8859-1 labels really mean windows-1252 ...
    assert decode_bytes(b"\x93quoted\x94", "iso-8859-1") == "\u201cquoted\u201d"
    # ... and UTF-8 mislabelled as Latin-1 is recognised.
    assert decode_bytes("“quoted”".encode("utf-8"), "iso-8859-1") == "“quoted”"
    assert decode_bytes("שלום".encode("iso-8859-8"), "iso-8859-8-i") == "שלום"
    assert decode_bytes("ok".encode("ascii"), "ANSI_X3.4-1968") == "ok"
    assert decode_bytes("naïve".encode("utf-8"), "us-ascii") == "naïve"
    for label in ("default", "x-unknown", "unknown-8bit", "base64", "rot13", "undefined", "no-such-charset"):
        assert decode_bytes("été".encode("utf-8"), label) == "été"
    assert decode_bytes(b"", "utf-8") == ""
    assert decode_bytes("hi".encode("utf-16"), "utf-16") == "hi"
    # Odd-length UTF-16 fails strictly and falls back instead of raising.
    assert isinstance(decode_bytes(b"\xff\xfeh\x00i", "utf-16"), str)


def test_decode_bytes_never_raises_on_random_bytes():
    rng = random.Random(7)
    labels = [None, "utf-8", "iso-2022-jp", "utf-16", "gb18030", "koi8-r", "", "x", "utf-7", "hz"]
    for _ in range(300):
        data = bytes(rng.randrange(256) for _ in range(rng.randrange(40)))
        assert isinstance(decode_bytes(data, rng.choice(labels)), str)


@pytest.mark.parametrize("charset", ["uft-8", "default", "x-unknown", "unknown-8bit"])
def test_bogus_body_charsets(charset):
    mail = parse(make_message(body="Ça marche très bien.\n".encode("utf-8"), charset=charset))
    assert mail.body_text == "Ça marche très bien."
    assert mail.defects


@pytest.mark.parametrize("charset", ["utf-16", "UTF-16BE", "utf-16-le", "utf_16_le", "utf-32", "utf-32-be"])
def test_ascii_or_utf8_body_declared_utf16_or_utf32_is_read_as_such(charset):
    text = "Please review the patch for the build failure on arm64."
    body = (text + "\n").encode("ascii")
    assert len(body) % 4 == 0  # a wide codec finds no odd byte to fail on
    mail = parse(make_message(body=body, charset=charset))
    assert mail.body_text == text
    assert "build failure" in mail.index_text
    assert any(charset.lower() in note for note in mail.defects)
    mail = parse(make_message(body="Grüße aus Köln, bis bald.\n".encode("utf-8"), charset=charset))
    assert mail.body_text == "Grüße aus Köln, bis bald."


@pytest.mark.parametrize("charset", ["utf-16", "utf-16-le", "utf-16-be", "utf-32"])
def test_genuine_utf16_and_utf32_bodies_are_decoded(charset):
    # "utf-16" and "utf-32" write a byte order mark; the -le/-be forms none.
    text = "Grüße aus Köln — 日本語のテキスト.\nZweite Zeile.\n"
    mail = parse(make_message(body=text_part(text, charset=charset, cte="base64")))
    assert mail.body_text == text.rstrip()
    assert "Zweite Zeile" in mail.index_text
    assert mail.defects == []


def test_latin1_body_declared_utf8():
    mail = parse(make_message(body="Voilà, ça coûte 5 €uros.\n".encode("cp1252"), charset="utf-8"))
    assert mail.body_text == "Voilà, ça coûte 5 €uros."
    assert any("utf-8" in note for note in mail.defects)


@pytest.mark.parametrize("charset", ["utf-8", None, "iso-8859-1"])
def test_a_utf8_body_with_one_stray_byte_is_read_as_utf8(charset):
    """One byte from another charset (a pasted curly quote) must not turn the whole body into mojibake."""
    text = "François a répondu déjà: “quoted” — voilà.\n"
    for stray in (b"That\x92s", b"That\x92s \xe9t\xe9"):
        body = text.encode("utf-8") + stray + b" all.\n"
        mail = parse(make_message(body=body, charset=charset))
        # The stray byte as Windows-1252 meant it.
        assert mail.body_text.startswith("François a répondu déjà: “quoted” — voilà.\nThat’s")
        assert "François" in mail.index_text
        assert any("utf-8" in note for note in mail.defects)


def test_undeclared_koi8r_is_detected():
    mail = parse(make_message(body=RUSSIAN.encode("koi8-r"), charset=None))
    assert mail.body_text == RUSSIAN


def test_undeclared_gb18030_does_not_crash():
    text = "大家好，这是一封测试邮件。请检查这段文字是否能够正确显示，谢谢大家的帮助。"
    mail = parse(make_message(body=text.encode("gb18030"), charset=None))
    assert isinstance(mail.body_text, str) and mail.body_text
    assert mail.body_text == text


def test_non_mime_body_uses_content_type_charset():
    raw = make_message(
        body="Grüße".encode("iso-8859-15"), headers={"MIME-Version": None}, charset="iso-8859-15"
    )
    assert parse(raw).body_text == "Grüße"


# --- dates -------------------------------------------------------------------


def test_date_with_offset():
    mail = parse(make_message(date="Tue, 02 Jan 2024 15:04:05 +0200"))
    assert mail.date == datetime(2024, 1, 2, 13, 4, 5, tzinfo=UTC)
    assert mail.date_offset == 120
    mail = parse(make_message(date="Tue, 02 Jan 2024 15:04:05 -0530"))
    assert mail.date == datetime(2024, 1, 2, 20, 34, 5, tzinfo=UTC)
    assert mail.date_offset == -330
    assert not mail.defects


def test_date_without_zone_is_utc():
    mail = parse(make_message(date="Tue, 02 Jan 2024 15:04:05 -0000"))
    assert mail.date == datetime(2024, 1, 2, 15, 4, 5, tzinfo=UTC)
    assert mail.date_offset == 0


RECEIVED = "from mx.example.org by lists.example.org; Wed, 03 Jan 2024 10:00:00 +0100"


def test_missing_date_uses_received():
    raw = make_message(
        date=None, headers={"Received": RECEIVED, "X-Later": "x"}
    ).replace(b"X-Later: x\n", b"Received: from a by b; Mon, 01 Jan 2024 00:00:00 +0000\n")
    mail = parse(raw)
    assert mail.date == datetime(2024, 1, 3, 9, 0, tzinfo=UTC)
    assert mail.date_offset == 60
    assert any("Received" in note for note in mail.defects)


def test_missing_date_uses_resent_date_first():
    resent = "Thu, 04 Jan 2024 08:00:00 +0000"
    mail = parse(make_message(date=None, headers={"Resent-Date": resent, "Received": RECEIVED}))
    assert mail.date == datetime(2024, 1, 4, 8, 0, tzinfo=UTC)


def test_missing_date_uses_envelope_then_now():
    envelope = datetime(2023, 12, 24, 18, 30)  # naive: taken as UTC
    mail = parse(make_message(date=None), envelope_date=envelope)
    assert mail.date == envelope.replace(tzinfo=UTC)
    assert any("envelope" in note for note in mail.defects)
    mail = parse(make_message(date=None))
    assert mail.date == NOW


@pytest.mark.parametrize(
    "date",
    [
        "Sat, 01 Jan 2050 00:00:00 +0000",
        "Thu, 01 Jan 1970 00:00:00 +0000",
        "not a date at all",
        "",
        "Mon, 32 Foo 2020",
        # Years of four digits, not two: not 2001 nor 2000.
        "Mon, 01 Jan 0001 10:00:00 +0000",
        "Sat, 01 Jan 0000 10:00:00 -0500",
        "Sun, 5 Jun 099 10:00:00 GMT",
    ],
)
def test_absurd_or_garbage_dates_fall_back(date):
    mail = parse(make_message(date=date, headers={"Received": RECEIVED}))
    assert mail.date == datetime(2024, 1, 3, 9, 0, tzinfo=UTC)
    assert mail.defects


def test_impossible_zone_keeps_the_date():
    mail = parse(make_message(date="Tue, 02 Jan 2024 15:04:05 +9999"))
    assert mail.date == datetime(2024, 1, 2, 15, 4, 5, tzinfo=UTC)


def test_an_impossible_zone_gives_way_to_a_received_or_envelope_date_close_to_it():
    """Its clock may be off by a day: a server's stamp on the way, or the envelope, tells the day (HyperKitty's test)."""
    raw = make_message(date="Tue, 30 Nov 1999 23:56:33 -3000 (CST)")
    by_envelope = parse(raw, envelope_date=datetime(1999, 12, 1, 0, 56, 19, tzinfo=UTC))
    assert by_envelope.date == datetime(1999, 12, 1, 0, 56, 19, tzinfo=UTC)
    assert any("impossible time zone" in note and "envelope" in note for note in by_envelope.defects)
    received = make_message(date="Tue, 30 Nov 1999 23:56:33 -3000 (CST)",
                             headers={"Received": "from a by b; Wed, 1 Dec 1999 01:00:00 +0100"})
    assert parse(received).date == datetime(1999, 12, 1, 0, 0, tzinfo=UTC)
    # Nothing close to it: the Date's clock, its zone dropped, as before.
    far = parse(raw, envelope_date=datetime(2005, 1, 1, tzinfo=UTC))
    assert far.date == datetime(1999, 11, 30, 23, 56, 33, tzinfo=UTC)


def test_dates_are_aware_utc():
    mail = parse(make_message(date=datetime(2022, 2, 2, 2, 2, tzinfo=timezone(timedelta(hours=-3)))))
    assert mail.date.tzinfo == UTC
    assert mail.date == datetime(2022, 2, 2, 5, 2, tzinfo=UTC)
    assert mail.date_offset == -180


# --- bodies ------------------------------------------------------------------


def test_alternative_prefers_plain():
    mail = parse(make_message(body=alternative("The plain text.\n", "<p>The <b>HTML</b> text.</p>")))
    assert mail.body_text == "The plain text."
    assert mail.attachments == []


def test_alternative_with_empty_plain_uses_html():
    mail = parse(make_message(body=alternative("\n", "<p>Only the HTML says something.</p>")))
    assert mail.body_text == "Only the HTML says something."


def test_html_only():
    html = (
        "<html><head><style>p { color: red }</style><script>alert('boo')</script></head>"
        "<body><p>Hello <b>list</b>!</p><ul><li>one</li><li>two</li></ul></body></html>"
    )
    mail = parse(make_message(body=html_part(html)))
    assert "Hello list!" in mail.body_text
    assert "one" in mail.body_text and "two" in mail.body_text
    assert "alert" not in mail.body_text and "color" not in mail.body_text
    assert len(mail.attachments) == 1
    (part,) = mail.attachments
    assert part.content_type == "text/html"
    assert part.data == html.encode("utf-8")
    assert part.filename == "attachment-0.html"


def test_attachments_bytes_names_and_indexes():
    body = multipart(
        "mixed",
        text_part("See the picture.\n"),
        attachment(PNG, "image/png", "pixel.png"),
        attachment(b"%PDF-1.4 fake", "application/pdf", "Rapport d'activité.pdf", rfc2231=True),
        attachment(b"\x00\x01\x02", "application/octet-stream"),
        text_part("diff --git a/x b/x\n", subtype="x-patch", filename="fix.patch"),
    )
    mail = parse(make_message(body=body))
    assert mail.body_text == "See the picture."
    names = [(a.index, a.filename, a.content_type) for a in mail.attachments]
    assert names == [
        (2, "pixel.png", "image/png"),
        (3, "Rapport d'activité.pdf", "application/pdf"),
        (4, "attachment-4.bin", "application/octet-stream"),
        (5, "fix.patch", "text/x-patch"),
    ]
    png = mail.attachments[0]
    assert png.data == PNG and png.size == len(PNG)
    assert mail.attachments[1].data == b"%PDF-1.4 fake"
    assert mail.attachments[3].data == b"diff --git a/x b/x\n"


QUILT_PATCH = "Fix the cache flush.\n\nSigned-off-by: Ann <ann@example.org>\n---\n" \
              "diff --git a/x b/x\n--- a/x\n+++ b/x\n@@ -1 +1 @@\n-old\n+new\n"


def test_text_shown_inline_is_the_body_even_with_a_file_name():
    """quilt mails each patch as its only part, "inline; filename=…": the reader must see the patch."""
    alone = parse(make_message(body=text_part(QUILT_PATCH, disposition="inline", filename="cache-fix.patch")))
    assert alone.body_text.startswith("Fix the cache flush.") and "+new" in alone.body_text
    assert alone.attachments == []
    beside = parse(make_message(body=multipart(
        "mixed", text_part("Here is the fix.\n"),
        text_part(QUILT_PATCH, disposition="inline", filename="0001-fix.patch"),
        text_part("notes\n", filename="notes.txt"))))
    assert beside.body_text.startswith("Here is the fix.") and "+new" in beside.body_text
    assert [a.filename for a in beside.attachments] == ["notes.txt"]
    page = parse(make_message(body=text_part("<html><body><p>Shown inline</p></body></html>", subtype="html",
                                             disposition="inline", filename="test.html")))
    assert page.body_text == "Shown inline"


def test_a_text_type_with_bad_syntax_is_read_as_plain_text():
    """RFC 2045: a Content-Type that cannot be read means text/plain; "text/plain>" is still text."""
    raw = b"From: a@example.org\nSubject: x\nContent-Type: text/plain>\n\nTest of a text section.\n"
    mail = parse(raw)
    assert mail.body_text == "Test of a text section." and mail.attachments == []


def test_rfc2047_filename_and_path_stripped():
    body = multipart(
        "mixed",
        "text\n",
        attachment(b"a", "text/plain", encode_word("Übersicht.txt")),
        attachment(b"b", "application/octet-stream", "..\\..\\windows\\evil.exe"),
    )
    mail = parse(make_message(body=body))
    assert [a.filename for a in mail.attachments] == ["Übersicht.txt", "evil.exe"]


def test_a_filename_cannot_turn_its_extension_around():
    # U+202E (right-to-left override) shows "invoice\u202egpj.exe" as "invoiceexe.jpg".
    body = multipart(
        "mixed",
        "text\n",
        attachment(b"a", "application/octet-stream", "invoice\u202egpj.exe", rfc2231=True),
        attachment(b"b", "application/octet-stream", "\u2066notes\u2069\u200f.txt", rfc2231=True),
    )
    mail = parse(make_message(body=body))
    assert [a.filename for a in mail.attachments] == ["invoicegpj.exe", "notes.txt"]


def test_rfc2231_continuations():
    part = Part(
        [
            ("Content-Type", "application/octet-stream"),
            ("Content-Transfer-Encoding", "base64"),
            (
                "Content-Disposition",
                "attachment;\n filename*0*=iso-8859-1''Fran%E7ais;\n filename*1*=%20r%E9sum%E9.txt",
            ),
        ],
        base64.encodebytes(b"x"),
    )
    mail = parse(make_message(body=multipart("mixed", "body\n", part)))
    assert mail.attachments[0].filename == "Français résumé.txt"


def test_forwarded_message_is_one_attachment():
    inner = make_message(message_id="<inner@example.org>", subject="Inner", body="Inner body text.\n")
    mail = parse(make_message(body=multipart("mixed", "Have a look.\n", forwarded(inner))))
    assert mail.body_text == "Have a look."
    assert len(mail.attachments) == 1
    (part,) = mail.attachments
    assert part.content_type == "message/rfc822"
    assert part.filename == "forwarded-2.eml"
    reparsed = parse(part.data)
    assert reparsed.subject == "Inner"
    assert reparsed.message_id == "inner@example.org"
    assert reparsed.body_text == "Inner body text."


def test_inline_text_parts_are_concatenated():
    footer = "_______________________________________________\ndev mailing list\n"
    mail = parse(make_message(body=multipart("mixed", "The message.\n", footer)))
    assert mail.body_text == "The message.\n\n" + footer.rstrip()


def test_signed_message_keeps_signature_as_attachment():
    signature = Part([("Content-Type", "application/pgp-signature")], b"-----BEGIN PGP SIGNATURE-----\nabc\n")
    mail = parse(make_message(body=multipart("signed", "Signed text.\n", signature)))
    assert mail.body_text == "Signed text."
    assert [a.content_type for a in mail.attachments] == ["application/pgp-signature"]
    assert mail.attachments[0].filename == "attachment-2.asc"


def test_base64_and_quoted_printable_text():
    mail = parse(make_message(body=text_part("Encodé en base64.\n", cte="base64")))
    assert mail.body_text == "Encodé en base64."
    long_line = "Encodé en QP, avec une très longue ligne. " * 5
    mail = parse(make_message(body=text_part(long_line, cte="quoted-printable")))
    assert mail.body_text == long_line.strip()


def test_format_flowed():
    flowed = (
        "This paragraph was \n"
        "wrapped by the \n"
        "client.\n"
        "\n"
        ">> Quoted text \n"
        ">> flows too.\n"
        " From a stuffed line.\n"
        "-- \n"
        "Signature\n"
    )
    mail = parse(make_message(body=flowed_part(flowed)))
    assert mail.body_text == (
        "This paragraph was wrapped by the client.\n"
        "\n"
        ">> Quoted text flows too.\n"
        "From a stuffed line.\n"
        "-- \n"
        "Signature"
    )


def test_format_flowed_delsp():
    mail = parse(make_message(body=flowed_part("Gesch \nwindigkeit and \nmore.\n", delsp=True)))
    assert mail.body_text == "Geschwindigkeit andmore."


def test_crlf_line_endings_are_normalized():
    mail = parse(make_message(body="one\ntwo\n", crlf=True))
    assert mail.body_text == "one\ntwo"


def _bare_cr(raw):
    """``raw`` with classic Mac OS line endings: CR alone."""
    return raw.replace(b"\n", b"\r")


@pytest.mark.parametrize("ending", [b"", b"\n", b"\r\n"])
def test_bare_cr_line_endings_keep_the_headers(ending):
    # An mbox reader hands over each message with a final LF.
    raw = _bare_cr(make_message(message_id="<mac@example.org>", subject="From a Mac",
                                body="Classic line endings.\nSecond line.\n")) + ending
    mail = parse(raw)
    assert (mail.message_id, mail.message_id_derived) == ("mac@example.org", False)
    assert mail.subject == "From a Mac"
    assert mail.date == datetime(2020, 1, 1, 12, 0, tzinfo=UTC)
    assert mail.body_text == "Classic line endings.\nSecond line."
    assert "Second line." in mail.index_text


def test_bare_cr_headers_with_a_crlf_blank_line_keep_the_headers():
    raw = b"Message-ID: <mixed@example.org>\rSubject: Mixed\rFrom: a@example.org\r\n\r\nThe body.\r\n"
    mail = parse(raw)
    assert (mail.message_id, mail.subject, mail.sender_address) == ("mixed@example.org", "Mixed", "a@example.org")
    assert mail.body_text == "The body."


def test_crlf_mail_whose_last_header_is_its_transfer_encoding_is_decoded():
    """The CR that ends the last header line of CRLF mail is part of its line ending, not of the value."""
    head = (b"From: a@example.com\r\nSubject: t\r\nMessage-ID: <q1@example.org>\r\nMIME-Version: 1.0\r\n")
    quoted = parse(head + b"Content-Type: text/plain; charset=utf-8\r\n"
                   b"Content-Transfer-Encoding: quoted-printable\r\n\r\ncaf=C3=A9 long=\r\nline\r\n")
    assert quoted.body_text == "caf\u00e9 longline"
    assert not any("stray CR" in note for note in quoted.defects)
    encoded = parse(head + b"Content-Type: text/plain; charset=utf-8\r\nContent-Transfer-Encoding: base64\r\n\r\n"
                    + base64.encodebytes("na\u00efve words\n".encode()).replace(b"\n", b"\r\n"))
    assert encoded.body_text == "na\u00efve words"
    png = b"\x89PNG\r\n\x1a\n" + bytes(range(256))
    image = parse(head + b"Content-Type: image/png; name=dot.png\r\nContent-Transfer-Encoding: base64\r\n\r\n"
                  + base64.encodebytes(png).replace(b"\n", b"\r\n"))
    assert [part.data for part in image.attachments] == [png]


def test_a_stray_cr_in_lf_or_crlf_headers_is_not_a_line_ending():
    for newline in (b"\n", b"\r\n"):
        raw = b"Subject: one\rtwo" + newline + b"From: a@example.org" + newline + newline + b"body" + newline
        mail = parse(raw)
        assert (mail.subject, mail.sender_address, mail.body_text) == ("one two", "a@example.org", "body")


def test_index_text_keeps_only_the_authors_words():
    body = (
        "I agree with this part.\n"
        "\n"
        "On Mon, 1 Jan 2024 at 10:00, Alice <alice@example.org> wrote:\n"
        "> The original point.\n"
        ">> Even older.\n"
        "\n"
        "But here is a patch:\n"
        "\n"
        "diff --git a/foo.c b/foo.c\n"
        "index 123..456 100644\n"
        "--- a/foo.c\n"
        "+++ b/foo.c\n"
        "@@ -1,3 +1,3 @@\n"
        " int main(void)\n"
        "-    return 1;\n"
        "+    return 0;\n"
        "\n"
        "It fixes the exit code.\n"
        "-- \n"
        "Bob, who signs everything\n"
    )
    mail = parse(make_message(body=body))
    assert mail.body_text == body.rstrip()
    assert mail.index_text == (
        "I agree with this part.\n\n\nBut here is a patch:\n\nIt fixes the exit code."
    )
    assert searchable_text(body) == mail.index_text


def test_index_text_two_line_attribution():
    body = "Yes.\n\nOn Mon, Jan 1, 2024 at 10:00 AM, Alice Example\n<alice@example.org> wrote:\n> quoted\nNo.\n"
    assert searchable_text(body) == "Yes.\n\nNo."


# --- structure and robustness --------------------------------------------------


def test_result_types_and_pickle():
    mail = parse(make_message(body=multipart("mixed", "x\n", attachment(PNG, "image/png", "p.png"))))
    assert isinstance(mail, ParsedMail)
    assert isinstance(mail.attachments[0], ParsedAttachment)
    assert isinstance(mail.references, tuple)
    clone = pickle.loads(pickle.dumps(mail))
    assert clone == mail
    assert mail.raw.startswith(b"Message-ID:")


@pytest.mark.parametrize(
    "raw",
    [b"", b"   \r\n\n", b"\x00\x01\x02\x03binary\xff\xfe", b"Just some text\nwith no headers at all\n"],
)
def test_unparseable(raw):
    with pytest.raises(UnparseableMessage) as info:
        parse(raw)
    assert str(info.value)


def test_headers_without_body_and_leading_junk():
    mail = parse(b"Subject: only headers\nFrom: a@example.org")
    assert mail.subject == "only headers" and mail.body_text == ""
    mail = parse(b"From someone@example.org Mon Jan  1 00:00:00 2024\nSubject: mbox\n\nbody\n")
    assert (mail.subject, mail.body_text) == ("mbox", "body")
    mail = parse(b"garbage line\nSubject: after junk\nFrom: a@example.org\n\nbody\n")
    assert (mail.subject, mail.sender_address, mail.body_text) == ("after junk", "a@example.org", "body")


def test_broken_header_lines_are_repaired():
    raw = (
        b"Subject: a subject folded\nwithout indentation\nFrom: a@example.org\n"
        b"Date : Tue, 02 Jan 2024 15:04:05 +0000\n\nbody\n"
    )
    mail = parse(raw)
    assert mail.subject == "a subject folded without indentation"
    assert mail.sender_address == "a@example.org"
    assert mail.date == datetime(2024, 1, 2, 15, 4, 5, tzinfo=UTC)
    assert mail.defects


def test_missing_boundary_and_bad_base64():
    raw = make_message(body=Part([("Content-Type", "multipart/mixed")], b"no boundary here\n"))
    assert parse(raw).body_text == "no boundary here"
    bad = Part(
        [("Content-Type", "image/png"), ("Content-Transfer-Encoding", "base64"), ("Content-Disposition", "attachment")],
        b"iVBORw0KGgo!!!===\n",
    )
    mail = parse(make_message(body=multipart("mixed", "x\n", bad)))
    assert len(mail.attachments) == 1 and isinstance(mail.attachments[0].data, bytes)


def test_truncated_base64_text_is_decoded_as_far_as_it_goes():
    text = "The sender's client cut this message off somewhere in the middle of a sentence.\n"
    encoded = base64.b64encode(text.encode("utf-8"))
    cut = encoded[: len(encoded) - 3]  # 1 mod 4: no padding can complete it
    assert len(cut) % 4 == 1
    body = Part([("Content-Type", "text/plain; charset=utf-8"), ("Content-Transfer-Encoding", "base64")], cut + b"\n")
    mail = parse(make_message(body=body))
    assert mail.body_text == text[: len(cut) // 4 * 3]
    assert "somewhere in the middle" in mail.index_text
    assert any("invalid length" in note for note in mail.defects)


def test_deeply_nested_multipart_does_not_raise():
    body = b"leaf\n"
    for level in range(3000):
        boundary = b"b%d" % level
        body = (
            b'Content-Type: multipart/mixed; boundary="' + boundary + b'"\n\n--' + boundary + b"\n"
            + body + b"\n--" + boundary + b"--\n"
        )
    mail = parse(b"From: a@example.org\nSubject: deep\n" + body)
    assert mail.subject == "deep"
    assert mail.defects


def test_unexpected_failure_still_gives_a_record(monkeypatch):
    import kittypyr.mail

    def broken(*args):
        raise RuntimeError("boom")

    monkeypatch.setattr(kittypyr.mail, "_walk_body", broken)
    raw = make_message(message_id=None, body="Still readable.\n")
    mail = parse(raw, envelope_date=datetime(2021, 5, 5, tzinfo=UTC))
    assert mail.body_text == "Still readable."
    assert mail.date == datetime(2021, 5, 5, tzinfo=UTC)
    assert mail.message_id_derived and mail.message_id.endswith("@kittypyr.invalid")
    assert any("boom" in note for note in mail.defects)


def _mutations(raw, rng):
    lines = raw.split(b"\n")
    choice = rng.randrange(7)
    if choice == 0:
        return raw[: rng.randrange(len(raw) + 1)]
    if choice == 1:
        data = bytearray(raw)
        for _ in range(rng.randrange(1, 20)):
            data[rng.randrange(len(data))] = rng.randrange(256)
        return bytes(data)
    if choice == 2:
        pos = rng.randrange(len(raw))
        return raw[:pos] + bytes(rng.randrange(256) for _ in range(rng.randrange(1, 50))) + raw[pos:]
    if choice == 3:
        del lines[rng.randrange(len(lines))]
        return b"\n".join(lines)
    if choice == 4:
        pos = rng.randrange(len(lines))
        lines.insert(pos, rng.choice([b"", b"--", b"Content-Type: multipart/mixed", b"=?utf-8?q?", b">", b"\r"]))
        return b"\n".join(lines)
    if choice == 5:
        return raw.replace(rng.choice([b"\n", b":", b"=", b"-", b'"', b";"]), rng.choice([b"", b"\r", b"\x00", b"::"]))
    return raw[rng.randrange(len(raw)) :]


def test_fuzzed_messages_never_raise():
    seeds = [
        make_message(body=multipart("mixed", alternative("plain\n", "<p>html</p>"), attachment(PNG, "image/png", "p.png"))),
        make_message(subject="Grüße " + encode_word("wörld"), body=flowed_part("a \nb\n", delsp=True)),
        make_message(message_id=None, date=None, body=RUSSIAN.encode("koi8-r"), charset=None),
        make_message(body=multipart("mixed", "x\n", forwarded(make_message(body=html_part("<b>x</b>"))))),
        make_message(body=text_part("Encodé\n" * 20, cte="quoted-printable"), crlf=True),
    ]
    rng = random.Random(20240601)
    accepted = 0
    for _ in range(600):
        raw = _mutations(rng.choice(seeds), rng)
        try:
            mail = parse(raw)
        except UnparseableMessage:
            continue
        accepted += 1
        assert isinstance(mail.body_text, str) and isinstance(mail.index_text, str)
        assert isinstance(mail.subject, str) and isinstance(mail.message_id, str) and mail.message_id
        assert mail.date.tzinfo is not None
        assert all(isinstance(a.data, bytes) for a in mail.attachments)
    assert accepted > 400


def test_a_zone_written_without_its_sign_is_no_early_year():
    mail = parse(make_message(date="Tue, 2 Jan 2024 15:04:05 0100"))
    assert mail.date == datetime(2024, 1, 2, 14, 4, 5, tzinfo=UTC)


def test_a_references_header_of_thousands_of_ids_is_read_in_linear_time():
    # A hostile (or looping) References header of 60,000 ids, some repeated:
    # a post must not hold up an import, or the archiver, for minutes.
    import time

    ids = [f"<r{n}@example.org>" for n in range(60000)]
    raw = make_message(message_id="<many@example.org>", subject="Many",
                       headers={"References": " ".join(ids + ids[:10] + ["<many@example.org>"])})
    started = time.process_time()
    mail = parse(raw)
    assert time.process_time() - started < 5
    assert mail.references == tuple(i.strip("<>") for i in ids)


@pytest.mark.parametrize("first", [b"Message-ID: <bom@example.org>\n", b"From: Ann <ann@example.org>\n"])
def test_a_byte_order_mark_before_the_headers_keeps_the_first_header(first):
    headers = [b"Message-ID: <bom@example.org>\n", b"From: Ann <ann@example.org>\n"]
    others = b"".join(header for header in headers if header != first)
    mail = parse_message(b"\xef\xbb\xbf" + first + others + b"Subject: Hello\nDate: Wed, 1 Jan 2020 12:00:00 +0000\n"
                         b"\nThe body.\n")
    assert mail.message_id == "bom@example.org" and not mail.message_id_derived
    assert (mail.sender_name, mail.sender_address) == ("Ann", "ann@example.org")
    assert mail.subject == "Hello" and mail.body_text == "The body."
    assert any("byte order mark" in note for note in mail.defects)


@pytest.mark.parametrize("encoding", [b"base64 ", b"base64\t", b"Base64 ; x", b"quoted-printable ", b"base64 (sent so)"])
def test_a_transfer_encoding_with_spaces_or_parameters_is_decoded(encoding):
    import quopri

    data = bytes(range(256)) * 4
    text = "zanzibarword in the body, café\n".encode("utf-8")

    def encoded(payload):
        return quopri.encodestring(payload) if encoding.strip().lower().startswith(b"quoted") \
            else base64.encodebytes(payload)

    raw = (b"From: Ann <ann@example.org>\nSubject: cte\nMessage-ID: <cte@example.org>\n"
           b"Date: Wed, 1 Jan 2020 12:00:00 +0000\nMIME-Version: 1.0\n"
           b"Content-Type: multipart/mixed; boundary=b\n\n"
           b"--b\nContent-Type: text/plain; charset=utf-8\nContent-Transfer-Encoding: %s\n\n%s\n"
           b"--b\nContent-Type: application/octet-stream; name=a.bin\nContent-Transfer-Encoding: %s\n\n%s\n--b--\n"
           % (encoding, encoded(text), encoding, encoded(data)))
    mail = parse_message(raw)
    assert mail.body_text == "zanzibarword in the body, café"
    assert [attachment.data for attachment in mail.attachments] == [data]
    assert any("Content-Transfer-Encoding" in note for note in mail.defects)


def test_a_mail_whose_body_cannot_be_read_keeps_its_header(monkeypatch):
    # A failure in reading a body (a bug, a structure nothing foresaw) kept
    # the mail as text with a made-up Message-ID, no subject, sender or
    # thread: its Archived-At led nowhere and its thread lost it.
    import kittypyr.htmltext

    def failing(html):
        raise AssertionError("unexpected markup")

    monkeypatch.setattr(kittypyr.htmltext, "text_of_html", failing)
    raw = (b"From: Ann <ann@example.org>\r\nSubject: Figures\r\nMessage-ID: <kept@example.org>\r\n"
           b"References: <root@example.org> <parent@example.org>\r\nDate: Wed, 01 Jan 2020 12:00:00 +0000\r\n"
           b"MIME-Version: 1.0\r\nContent-Type: text/html;\r\n charset=utf-8\r\nContent-Transfer-Encoding: 8bit\r\n"
           b"\r\n<p>The figures, \xe2\x82\xac 12.</p>\r\n")
    parsed = parse_message(raw)
    assert (parsed.message_id, parsed.subject, parsed.sender_name, parsed.sender_address) == (
        "kept@example.org", "Figures", "Ann", "ann@example.org")
    assert parsed.references == ("root@example.org", "parent@example.org")
    assert parsed.date.year == 2020 and parsed.raw == raw
    assert "The figures" in parsed.body_text
    assert any("could not be parsed (AssertionError: unexpected markup)" in d for d in parsed.defects)
