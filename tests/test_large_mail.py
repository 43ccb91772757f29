"""Large messages: read whole within a few times their size, exactly as smaller ones are read; oversized headers."""

import base64
import dataclasses
import json
import os
import subprocess
import sys
import textwrap
from datetime import datetime, timezone

import pytest
import transaction
from pyramid.scripting import prepare
from webtest import TestApp

import kittypyr.mail
from kittypyr.archiving import archive_message, ensure_mailing_list
from kittypyr.mail import parse_message
from kittypyr.msgid import message_id_hash
from tests.mailbuilder import make_message
from tests.test_app import make_app

NOW = datetime(2024, 6, 1, 12, 0, tzinfo=timezone.utc)
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

# The parse runs where its address space is the memory it had plus this
# many times the message's size: a small server's. The stdlib parser
# alone needs about nine.
ROOM = 5

CHILD = textwrap.dedent("""
    import base64, hashlib, json, os, resource, sys
    from kittypyr.mail import parse_message

    size = int(sys.argv[1])
    payload = bytes(range(256)) * (size * 3 // 4 // 256)
    raw = (b"From: Ann <ann@example.org>\\nSubject: the trace\\nDate: Mon, 1 Jan 2024 00:00:00 +0000\\n"
           b"Message-ID: <trace@example.org>\\nMIME-Version: 1.0\\nContent-Type: multipart/mixed; boundary=outer\\n\\n"
           b"--outer\\nContent-Type: multipart/alternative; boundary=inner\\n\\n"
           b"--inner\\nContent-Type: text/plain\\n\\nThe trace is attached.\\n"
           b"--inner\\nContent-Type: text/html\\n\\n<p>The trace is attached.</p>\\n--inner--\\n"
           b"--outer\\nContent-Type: application/octet-stream; name=trace.bin\\nContent-Transfer-Encoding: base64\\n\\n"
           + base64.encodebytes(payload) + b"--outer--\\n")

    def address_space():
        with open("/proc/self/status") as status:
            for line in status:
                if line.startswith("VmSize:"):
                    return int(line.split()[1]) * 1024

    limit = address_space() + int(sys.argv[2]) * len(raw)
    resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
    try:
        parsed = parse_message(raw)
    except MemoryError:
        print(json.dumps({"error": "MemoryError"}))
    else:
        print(json.dumps({
            "attachments": [[a.filename, a.content_type, hashlib.sha256(a.data).hexdigest()]
                            for a in parsed.attachments],
            "expected": hashlib.sha256(payload).hexdigest(),
            "body": parsed.body_text,
            "defects": parsed.defects,
        }))
""")


def test_a_large_attachment_is_kept_whole_where_memory_is_short():
    outcome = subprocess.run([sys.executable, "-c", CHILD, str(24 * 2**20), str(ROOM)], capture_output=True,
                             text=True, cwd=ROOT, env={**os.environ, "PYTHONPATH": ROOT}, timeout=300)
    assert outcome.returncode == 0, outcome.stderr
    parsed = json.loads(outcome.stdout)
    assert "error" not in parsed
    assert parsed["body"] == "The trace is attached."
    assert parsed["attachments"] == [["trace.bin", "application/octet-stream", parsed["expected"]]]
    assert parsed["defects"] == []


def _fields(parsed):
    return dataclasses.asdict(parsed)


def _message(body, content_type="multipart/mixed; boundary=b1", extra=b"", line_end=b"\n"):
    head = (b"From: Ann <ann@example.org>\nSubject: parts\nDate: Mon, 1 Jan 2024 00:00:00 +0000\n"
            b"Message-ID: <parts@example.org>\nMIME-Version: 1.0\nContent-Type: " + content_type.encode() + b"\n"
            + extra + b"\n")
    return (head + body).replace(b"\n", line_end)


ENCODED = base64.encodebytes(bytes(range(256)) * 40)
SHAPES = {
    "nested, with preamble and epilogue": _message(
        b"This is a multi-part message in MIME format.\n"
        b"--b1\nContent-Type: multipart/alternative; boundary=\"b2\"\n\n"
        b"--b2\nContent-Type: text/plain; charset=iso-8859-1\nContent-Transfer-Encoding: 8bit\n\nCaf\xe9 ol\xe9\n"
        b"--b2  \nContent-Type: text/html\n\n<p>Caf&eacute;</p>\n\n--b2--\n"
        b"--b1\nContent-Type: image/png; name=a.png\nContent-Transfer-Encoding: base64\n\n" + ENCODED
        + b"--b1\n\nA part without headers.\n--b1--\ntrailing words\n"),
    "CRLF line ends": _message(
        b"--b1\nContent-Type: text/plain\n\nfirst line\nsecond line\n\n"
        b"--b1\nContent-Type: application/pdf; name=x.pdf\nContent-Transfer-Encoding: base64\n\n" + ENCODED
        + b"--b1--\n", line_end=b"\r\n"),
    "quoted-printable and a text attachment": _message(
        b"--b1\nContent-Type: text/plain; charset=utf-8\nContent-Transfer-Encoding: quoted-printable\n\n"
        b"na=C3=AFve =\nline\n--b1\nContent-Type: text/x-diff; name=fix.patch\nContent-Disposition: attachment\n\n"
        b"--- a/x\n+++ b/x\n@@ -1 +1 @@\n-old\n+new\n--b1--\n"),
    "base64 with a stray character": _message(
        b"--b1\nContent-Type: text/plain\n\nhello\n--b1\nContent-Type: application/zip; name=z.zip\n"
        b"Content-Transfer-Encoding: base64\n\n" + ENCODED[:200] + b"*" + ENCODED[200:] + b"--b1--\n"),
    "base64 cut short": _message(
        b"--b1\nContent-Type: text/plain\n\nhello\n--b1\nContent-Type: application/zip; name=z.zip\n"
        b"Content-Transfer-Encoding: base64\n\n" + ENCODED[:-6] + b"\n--b1--\n"),
    "no closing delimiter": _message(
        b"--b1\nContent-Type: text/plain\n\nhello\n--b1\nContent-Type: text/plain\n\nnever closed\n"),
    "a forwarded message": _message(
        b"--b1\nContent-Type: text/plain\n\nsee below\n--b1\nContent-Type: message/rfc822\n\n"
        b"From: Bob <bob@example.org>\nSubject: inner\n\ninner words\n--b1--\n"),
    "a digest": _message(
        b"--b1\n\nFrom: Bob <bob@example.org>\nSubject: one\n\nfirst post\n"
        b"--b1\n\nFrom: Cy <cy@example.org>\nSubject: two\n\nsecond post\n--b1--\n",
        content_type="multipart/digest; boundary=b1"),
    "a multipart said to be base64": _message(
        b"--b1\nContent-Type: text/plain\n\nhello\n--b1--\n", extra=b"Content-Transfer-Encoding: base64\n"),
    "a part whose header section is damaged": _message(
        b"--b1\nContent-Type: text/plain\nthis line is no header\n\nhello\n--b1--\n"),
    "a multipart part without a boundary": _message(
        b"--b1\nContent-Type: multipart/related\n\nno boundary here\n--b1--\n"),
    "an empty part": _message(b"--b1\n--b1\nContent-Type: text/plain\n\nhello\n--b1--\n"),
    "a lone CR before a delimiter": _message(
        b"--b1\nContent-Type: text/plain\n\nfirst\r--b1\nContent-Type: application/zip; name=z.zip\n\nzip\n--b1--\n"),
}


@pytest.mark.parametrize("shape", sorted(SHAPES))
def test_a_large_message_reads_as_any_other(shape, monkeypatch):
    raw = SHAPES[shape]
    as_usual = _fields(parse_message(raw, now=NOW))
    # Every message counts as large: it is cut at its boundaries here.
    monkeypatch.setattr(kittypyr.mail, "LARGE_BODY_BYTES", 0)
    assert _fields(parse_message(raw, now=NOW)) == as_usual


def test_a_large_message_is_cut_at_its_boundaries(monkeypatch):
    """The shapes above are not all read by the stdlib's parser whatever the size."""
    monkeypatch.setattr(kittypyr.mail, "LARGE_BODY_BYTES", 0)
    cut = []
    split_large = kittypyr.mail._split_large
    monkeypatch.setattr(kittypyr.mail, "_split_large",
                        lambda *args: cut.append(args[0].get_content_type()) or split_large(*args))
    parsed = parse_message(SHAPES["nested, with preamble and epilogue"], now=NOW)
    assert cut == ["multipart/mixed", "multipart/alternative"]
    assert parsed.body_text.startswith("Café olé")
    assert [a.filename for a in parsed.attachments] == ["a.png"]


def _words(prefix, count):
    return " ".join(f"{prefix}{n}" for n in range(count))


def test_a_subject_or_name_of_a_megabyte_is_shortened_and_said_so():
    raw = make_message(subject=_words("s", 100_000), sender=(_words("n", 50_000), "ann@example.org"))
    parsed = parse_message(raw, now=NOW)
    assert len(parsed.subject) == 512 and parsed.subject.startswith("s0 s1 s2 ") and parsed.subject.endswith("…")
    assert len(parsed.sender_name) <= 255 and parsed.sender_name.endswith("…")
    assert any("subject of" in note and "shortened to 512" in note for note in parsed.defects)
    assert any("sender's name of" in note and "shortened to 255" in note for note in parsed.defects)
    # The original keeps them whole.
    assert _words("s", 100_000).encode() in parsed.raw.replace(b"\n ", b" ")


def test_one_post_with_a_huge_subject_does_not_swell_every_list_page(tmp_path):
    app = make_app(tmp_path)
    address = "big@lists.example.org"
    with prepare(registry=app.registry) as env:
        mailing_list = ensure_mailing_list(env["root"], address)
        archive_message(mailing_list, make_message(message_id="<huge@example.org>", subject=_words("s", 100_000),
                                                   sender=(_words("n", 50_000), "ann@example.org")))
        transaction.commit()
    browser = TestApp(app)
    for path in (f"/list/{address}/", f"/list/{address}/threads", f"/search?q=s1&mlist={address}",
                 f"/list/{address}/message/{message_id_hash('huge@example.org')}/"):
        page = browser.get(path).text
        assert "s0 s1 s2" in page, path
        assert "s600 " not in page and "n300 " not in page, path
    assert "n0 n1 n2" in page


def test_a_post_of_countless_parts_keeps_the_first_attachments_and_says_where_the_rest_are(tmp_path):
    parts = b"".join(b"--B\nContent-Type: application/octet-stream; name=p%d.bin\n\nx\n" % n for n in range(3000))
    raw = (b"From: Ann <ann@example.org>\nSubject: parts\nDate: Mon, 1 Jan 2024 00:00:00 +0000\n"
           b"Message-ID: <parts@example.org>\nMIME-Version: 1.0\nContent-Type: multipart/mixed; boundary=B\n\n"
           + parts + b"--B--\n")
    app = make_app(tmp_path)
    address = "parts@lists.example.org"
    with prepare(registry=app.registry) as env:
        stored = archive_message(ensure_mailing_list(env["root"], address), raw)
        assert [a.filename for a in stored.attachments][:2] == ["p0.bin", "p1.bin"]
        assert len(stored.attachments) == kittypyr.mail.MAX_ATTACHMENTS
        transaction.commit()
    page = TestApp(app).get(f"/list/{address}/message/{message_id_hash('parts@example.org')}/").text
    assert "p249.bin" in page and "p250.bin" not in page
    assert "And\n    2,750 more attachments, kept in the" in page
    original = TestApp(app).get(f"/list/{address}/message/{message_id_hash('parts@example.org')}/raw").body
    assert b"name=p2999.bin" in original
