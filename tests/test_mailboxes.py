import bz2
import gzip
import lzma
import os
import pickle
import random
from datetime import datetime, timezone

import pytest

from kittypyr.mailboxes import MailSourceError, RawMail, detect_format, read_mail


def _message(n, body=b"Hello.\n"):
    return (
        b"From: user%d@example.com\n"
        b"To: list@example.org\n"
        b"Subject: message %d\n"
        b"Message-ID: <m%d@example.com>\n"
        b"\n" % (n, n, n)
    ) + body


def _mbox(*messages, envelope=b"From user@example.com Tue Mar  6 09:12:45 2007\n"):
    return b"".join(envelope + m + b"\n" for m in messages)


def _write(tmp_path, name, data):
    path = tmp_path / name
    path.write_bytes(data)
    return str(path)


def _maildir(tmp_path, files):
    root = tmp_path / "Maildir"
    for sub in ("cur", "new", "tmp"):
        (root / sub).mkdir(parents=True)
    for sub, name, data in files:
        (root / sub / name).write_bytes(data)
    return str(root)


# --- mbox ----------------------------------------------------------------


def test_mbox_positions_source_and_separator_stripping(tmp_path):
    messages = [_message(n) for n in range(1, 6)]
    path = _write(tmp_path, "list.mbox", _mbox(*messages))

    mails = list(read_mail(path))

    assert [m.raw for m in mails] == messages
    assert [m.position for m in mails] == [1, 2, 3, 4, 5]
    assert all(isinstance(m, RawMail) and m.source == path for m in mails)
    assert detect_format(path) == "mbox"


def test_mboxrd_unquoting(tmp_path):
    body = (
        b"First line\n"
        b"\n"
        b">From the start it was quoted once.\n"
        b">>From here it was quoted twice.\n"
        b"> From a reply, with a space: not a quoted From_.\n"
        b"x>From not at the line start.\n"
    )
    path = _write(tmp_path, "rd.mbox", _mbox(_message(1, body), _message(2)))

    mails = list(read_mail(path))

    assert len(mails) == 2
    assert mails[0].raw.endswith(
        b"\n"
        b"From the start it was quoted once.\n"
        b">From here it was quoted twice.\n"
        b"> From a reply, with a space: not a quoted From_.\n"
        b"x>From not at the line start.\n"
    )


def test_body_from_line_after_blank_line_does_not_split(tmp_path):
    body = (
        b"Some text.\n"
        b"\n"
        b"From my point of view, this is fine.\n"
        b"\n"
        b"From here on, at 10:30 we meet.\n"
    )
    path = _write(tmp_path, "o.mbox", _mbox(_message(1, body), _message(2)))

    mails = list(read_mail(path))

    assert [m.raw for m in mails] == [_message(1, body), _message(2)]


def test_mboxo_from_line_without_blank_line_before_does_not_split(tmp_path):
    body = b"text\nFrom someone@example.com Tue Mar  6 09:12:45 2007\nmore\n"
    path = _write(tmp_path, "o.mbox", _mbox(_message(1, body), _message(2)))

    assert [m.raw for m in read_mail(path)] == [_message(1, body), _message(2)]


def test_only_one_blank_line_is_stripped(tmp_path):
    data = (
        b"From a@example.com Tue Mar  6 09:12:45 2007\n" + _message(1) + b"\n\n"
        b"From b@example.com Tue Mar  6 09:12:46 2007\n" + _message(2) + b"\n\n"
    )
    path = _write(tmp_path, "x.mbox", data)

    assert [m.raw for m in read_mail(path)] == [_message(1) + b"\n", _message(2) + b"\n"]


def test_last_message_without_trailing_newline(tmp_path):
    envelope = b"From a@example.com Tue Mar  6 09:12:45 2007\n"
    data = _mbox(_message(1)) + envelope + _message(2, b"end")
    path = _write(tmp_path, "x.mbox", data)

    assert [m.raw for m in read_mail(path)] == [_message(1), _message(2, b"end")]


def test_leading_blank_lines_are_skipped(tmp_path):
    path = _write(tmp_path, "x.mbox", b"\n\r\n  \n" + _mbox(_message(1)))

    assert [m.raw for m in read_mail(path)] == [_message(1)]


def test_crlf_mbox(tmp_path):
    def crlf(data):
        return data.replace(b"\n", b"\r\n")

    body = b"Line\n\nFrom my point of view.\n>From quoted.\n"
    path = _write(tmp_path, "crlf.mbox", crlf(_mbox(_message(1, body), _message(2))))

    mails = list(read_mail(path))

    assert [m.raw for m in mails] == [
        crlf(_message(1, b"Line\n\nFrom my point of view.\nFrom quoted.\n")),
        crlf(_message(2)),
    ]
    assert mails[0].envelope_date == datetime(2007, 3, 6, 9, 12, 45, tzinfo=timezone.utc)


def test_separator_across_read_boundaries(tmp_path, monkeypatch):
    # Tiny reads put every possible split point between two reads.
    monkeypatch.setattr("kittypyr.mailboxes._CHUNK", 7)
    messages = [_message(n, b"x" * n + b"\n\nFrom me\n") for n in range(1, 30)]
    path = _write(tmp_path, "small-reads.mbox", _mbox(*messages))

    assert [m.raw for m in read_mail(path)] == messages


def test_large_message(tmp_path, monkeypatch):
    monkeypatch.setattr("kittypyr.mailboxes._CHUNK", 1024)
    big = _message(2, b"y" * 200_000 + b"\n")
    path = _write(tmp_path, "big.mbox", _mbox(_message(1), big, _message(3)))

    assert [m.raw for m in read_mail(path)] == [_message(1), big, _message(3)]


# mboxcl2 (Solaris mail, mutt with mbox_type=mmdf off...) quotes no "From "
# line of a body: each message's Content-Length says where it ends.
_BOUNCED = (
    b"This message was undeliverable.\n"
    b"\n"
    b"From someone@example.com Tue Mar  6 09:12:45 2007\n"
    b"From: someone@example.com\n"
    b"Subject: the original\n"
    b"Message-ID: <orig@example.com>\n"
    b"\n"
    b"Original text.\n"
)


def _with_length(n, body, length=None, newline=b"\n"):
    body = body.replace(b"\n", newline)
    header = (b"From: user%d@example.com\nSubject: message %d\nMessage-ID: <m%d@example.com>\n"
              b"Content-Length: %d\n\n" % (n, n, n, len(body) if length is None else length))
    return header.replace(b"\n", newline) + body


@pytest.mark.parametrize("chunk", [1 << 20, 7])
def test_mboxcl2_message_holding_a_whole_message_is_kept_whole_by_its_content_length(tmp_path, monkeypatch, chunk):
    monkeypatch.setattr("kittypyr.mailboxes._CHUNK", chunk)
    messages = [_with_length(1, _BOUNCED), _with_length(2, b"Hello.\n"), _with_length(3, _BOUNCED)]
    path = _write(tmp_path, "cl2.mbox", _mbox(*messages))

    mails = list(read_mail(path))

    assert [m.raw for m in mails] == messages
    assert not any(m.doubts for m in mails)


def test_mboxcl2_with_crlf_line_ends(tmp_path):
    messages = [_with_length(1, _BOUNCED, newline=b"\r\n"), _with_length(2, b"Hello.\n", newline=b"\r\n")]
    envelope = b"From user@example.com Tue Mar  6 09:12:45 2007\r\n"
    path = _write(tmp_path, "cl2.mbox", b"".join(envelope + m + b"\r\n" for m in messages))

    assert [m.raw for m in read_mail(path)] == messages


def test_an_mboxcl2_message_with_an_unquoted_from_line_keeps_its_quoted_looking_lines(tmp_path):
    # A body that holds an unquoted "From " line within its Content-Length
    # is mboxcl2's, which quotes nothing: its ">From " lines are the
    # writer's own, and lost their ">" as mboxrd's would.
    body = _BOUNCED + b">From the archive: a line the sender began so.\n"
    messages = [_with_length(1, body), _with_length(2, b">From here.\n")]
    path = _write(tmp_path, "cl2.mbox", _mbox(*messages))

    mails = list(read_mail(path))

    assert mails[0].raw == messages[0]
    # Nothing in the second says which writer it had: read as mboxrd's.
    assert mails[1].raw == _with_length(2, b">From here.\n").replace(b"\n>From", b"\nFrom")


@pytest.mark.parametrize("length", [5, len(_BOUNCED) + 40, 100_000, 10 ** 12])
def test_a_content_length_that_does_not_end_at_a_message_is_not_trusted(tmp_path, length):
    # Wrong (a message edited after it was written), or pointing past the
    # file: the envelope lines are read as they are without it.
    messages = [_with_length(1, _BOUNCED, length=length), _with_length(2, b"Hello.\n")]
    path = _write(tmp_path, "cl2.mbox", _mbox(*messages))

    mails = list(read_mail(path))

    assert len(mails) == 3
    assert mails[1].raw.startswith(b"From: someone@example.com\n")
    assert mails[2].raw == messages[1]


def test_empty_message_between_separators(tmp_path):
    data = (
        b"From a@example.com Tue Mar  6 09:12:45 2007\n\n"
        b"From b@example.com Tue Mar  6 09:12:46 2007\n" + _message(2)
    )
    path = _write(tmp_path, "x.mbox", data)

    assert [m.raw for m in read_mail(path)] == [b"", _message(2)]


# --- envelope dates ------------------------------------------------------


@pytest.mark.parametrize(
    "line, expected",
    [
        (b"From a@b.c Tue Mar  6 09:12:45 2007", datetime(2007, 3, 6, 9, 12, 45)),
        (b"From a@b.c  Wed Jun 3 18:57:07 2009", datetime(2009, 6, 3, 18, 57, 7)),
        (b"From a@b.c Tue Mar  6 09:12:45 2007 +0100", datetime(2007, 3, 6, 8, 12, 45)),
        (b"From a@b.c Tue Mar  6 09:12:45 PST 2007", datetime(2007, 3, 6, 17, 12, 45)),
        (b"From a@b.c Tue Mar  6 09:12 2007 remote from x", datetime(2007, 3, 6, 9, 12)),
        (b"From a@b.c Sat, 1 Jan 2005 13:40:56 -0500", datetime(2005, 1, 1, 18, 40, 56)),
        (b"From a@b.c Tue Feb 31 09:12:45 2007", None),
        (b"From a@b.c sometime 12:00 in 2007", None),
        (b"From MAILER-DAEMON Thu Jan  1 00:00:00 1970", None),
        (b"From 0123abcd Mon Sep 17 00:00:00 2001", None),
    ],
)
def test_envelope_date(tmp_path, line, expected):
    path = _write(tmp_path, "d.mbox", _mbox(_message(1), envelope=line + b"\n"))

    (mail,) = read_mail(path)

    if expected is not None:
        expected = expected.replace(tzinfo=timezone.utc)
    assert mail.envelope_date == expected
    assert mail.envelope_date is None or mail.envelope_date.tzinfo is not None


def test_weird_first_from_line_does_not_raise(tmp_path):
    path = _write(tmp_path, "w.mbox", b"From ???\n" + _message(1))

    (mail,) = read_mail(path)

    assert mail.raw == _message(1)
    assert mail.envelope_date is None


# --- single messages, empty and non-mail files --------------------------


def test_single_message_file(tmp_path):
    data = (
        b"Received: from x by y; Tue, 6 Mar 2007 09:12:45 +0000\n"
        b"\tcontinued\n" + _message(1, b"Body\n\nFrom 10:00 to 11:00 in 2007.\n")
    )
    path = _write(tmp_path, "one.eml", data)

    mails = list(read_mail(path))

    assert detect_format(path) == "mbox"
    assert [(m.raw, m.position, m.envelope_date) for m in mails] == [(data, 1, None)]


def test_empty_file(tmp_path):
    path = _write(tmp_path, "empty.mbox", b"")

    assert list(read_mail(path)) == []
    assert detect_format(path) == "mbox"


def test_empty_gzip_file(tmp_path):
    path = _write(tmp_path, "empty.mbox.gz", gzip.compress(b""))

    assert list(read_mail(path)) == []


@pytest.mark.parametrize(
    "data",
    [
        b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR\x00\x00\x00\x10" + bytes(range(256)),
        b"Just some notes.\nNothing to see here.\n",
        b"Note: a text file with one colon line\nthen prose.\n",
        b"From my point of view this is a letter, not a mailbox.\n",
    ],
    ids=["png", "text", "colon-text", "from-text"],
)
def test_not_mail(tmp_path, data):
    path = _write(tmp_path, "not-mail.mbox", data)

    with pytest.raises(MailSourceError) as detected:
        detect_format(path)
    with pytest.raises(MailSourceError) as read:
        list(read_mail(path))

    for exc in (detected.value, read.value):
        assert exc.path == path
        assert path in str(exc)
        assert exc.reason and exc.reason in str(exc)


def _tar_of(files, compression=""):
    """A tar archive (``compression``: "", "gz", "bz2" or "xz") holding ``files`` {name: bytes}."""
    import io
    import tarfile

    out = io.BytesIO()
    with tarfile.open(fileobj=out, mode="w:" + compression) as tar:
        for name, data in files.items():
            member = tarfile.TarInfo(name)
            member.size = len(data)
            tar.addfile(member, io.BytesIO(data))
    return out.getvalue()


def _zip_of(files):
    import io
    import zipfile

    out = io.BytesIO()
    with zipfile.ZipFile(out, "w") as archive:
        for name, data in files.items():
            archive.writestr(name, data)
    return out.getvalue()


# A Pipermail archive as sites hand it out: its month files beside its pages.
PACKED_MAIL = {
    "dev/2011-February.txt": b"From jane at example.org  Tue Feb  1 10:00:00 2011\nFrom: jane at example.org\n"
                             b"Subject: Hello\nMessage-ID: <a@example.org>\n\nHi.\n\n",
    "dev/2011-February/date.html": b"<!DOCTYPE HTML PUBLIC>\n<html>Messages sorted by date</html>\n",
}


@pytest.mark.parametrize("name, data, unpack", [
    ("dev.tar", _tar_of(PACKED_MAIL), "tar xf"),
    ("dev.tar.gz", _tar_of(PACKED_MAIL, "gz"), "tar xf"),
    ("dev.tar.xz", _tar_of(PACKED_MAIL, "xz"), "tar xf"),
    ("dev.zip", _zip_of(PACKED_MAIL), "unzip"),
], ids=["tar", "tar.gz", "tar.xz", "zip"])
def test_an_archive_of_files_is_refused_with_what_to_do(tmp_path, name, data, unpack):
    """Read as an mbox, a tar file's headers and pages would be stored as the text of its messages."""
    path = _write(tmp_path, name, data)

    for attempt in (lambda: detect_format(path), lambda: list(read_mail(path))):
        with pytest.raises(MailSourceError) as refused:
            attempt()
        assert "archive of files" in refused.value.reason and unpack in refused.value.reason


def test_missing_file(tmp_path):
    path = str(tmp_path / "nope.mbox")

    with pytest.raises(MailSourceError, match="nope.mbox"):
        detect_format(path)
    with pytest.raises(MailSourceError, match="nope.mbox"):
        list(read_mail(path))


def test_error_pickles():
    exc = pickle.loads(pickle.dumps(MailSourceError("/a/b.mbox", "broken")))

    assert (exc.path, exc.reason, str(exc)) == ("/a/b.mbox", "broken", "/a/b.mbox: broken")


# --- gzip ----------------------------------------------------------------


def test_gzip_detected_by_content(tmp_path):
    messages = [_message(n) for n in range(1, 4)]
    path = _write(tmp_path, "no-suffix", gzip.compress(_mbox(*messages)))

    assert detect_format(path) == "mbox"
    assert [m.raw for m in read_mail(path)] == messages


def test_truncated_gzip_yields_complete_messages_then_raises(tmp_path):
    messages = [_message(n, os.urandom(300).hex().encode() + b"\n") for n in range(1, 41)]
    compressed = gzip.compress(_mbox(*messages))
    path = _write(tmp_path, "cut.mbox.gz", compressed[: len(compressed) // 2])

    got = []
    with pytest.raises(MailSourceError) as caught:
        for mail in read_mail(path):
            got.append(mail)

    assert caught.value.path == path
    assert "cut.mbox.gz" in str(caught.value)
    assert 0 < len(got) < len(messages)
    assert [m.raw for m in got] == messages[: len(got)]
    assert [m.position for m in got] == list(range(1, len(got) + 1))


def test_truncated_gzip_missing_only_the_trailer(tmp_path):
    messages = [_message(1), _message(2)]
    path = _write(tmp_path, "t.mbox.gz", gzip.compress(_mbox(*messages))[:-8])

    got = []
    with pytest.raises(MailSourceError):
        for mail in read_mail(path):
            got.append(mail.raw)

    # The stream's end cannot be trusted, so the last message is not yielded.
    assert got == [messages[0]]


def test_a_gzip_file_damaged_near_its_start_gives_the_messages_before_the_damage(tmp_path):
    # Small files, a Pipermail month say, are damaged within the first
    # bytes read to tell what a file is.
    # Text that compresses little, the same at every run: damage to a
    # deflate stream may decode as other bytes for a while before it fails.
    noise = random.Random(20261207)
    messages = [_message(n, noise.randbytes(200).hex().encode() + b"\n") for n in range(1, 41)]
    compressed = bytearray(gzip.compress(_mbox(*messages), mtime=0))
    at = len(compressed) // 4
    compressed[at:at + 20] = bytes(20)
    path = _write(tmp_path, "damaged.mbox.gz", bytes(compressed))

    got = []
    with pytest.raises(MailSourceError, match="damaged.mbox.gz"):
        for mail in read_mail(path):
            got.append(mail.raw)

    assert 0 < len(got) < len(messages)
    assert got == messages[: len(got)]


def test_corrupt_gzip(tmp_path):
    path = _write(tmp_path, "bad.mbox.gz", b"\x1f\x8b" + b"\xff" * 64)

    with pytest.raises(MailSourceError, match="bad.mbox.gz"):
        list(read_mail(path))


def test_multi_member_gzip(tmp_path):
    data = gzip.compress(_mbox(_message(1))) + gzip.compress(_mbox(_message(2)))
    path = _write(tmp_path, "multi.mbox.gz", data)

    assert [m.raw for m in read_mail(path)] == [_message(1), _message(2)]




@pytest.mark.parametrize("after", [b"trailing garbage\n" * 3, b"\x1f\x8b\x08\x00" + b"\xff" * 40, b"\x1f\x8b"],
                         ids=["garbage", "corrupt-member", "cut-member"])
def test_every_message_of_a_whole_member_is_read_before_what_follows_fails(tmp_path, after):
    # What gzip(1) reads with "decompression OK, trailing garbage ignored":
    # the last message before the damage is whole, and is read too.
    messages = [_message(n) for n in range(1, 6)]
    path = _write(tmp_path, "list.mbox.gz", gzip.compress(_mbox(*messages)) + after)

    got = []
    with pytest.raises(MailSourceError, match="after 5 complete messages"):
        for mail in read_mail(path):
            got.append(mail.raw)

    assert got == messages


# --- bzip2 and xz ---------------------------------------------------------

_COMPRESSORS = {"bz2": bz2.compress, "xz": lzma.compress}


@pytest.mark.parametrize("suffix", sorted(_COMPRESSORS))
def test_bzip2_and_xz_files_are_read_in_every_stream(tmp_path, suffix):
    compress = _COMPRESSORS[suffix]
    messages = [_message(n) for n in range(1, 4)]
    # Joined with `cat`, as gzip files can be; by content, whatever the name.
    data = compress(_mbox(*messages[:2])) + compress(_mbox(messages[2]))
    path = _write(tmp_path, "list", data)

    assert detect_format(path) == "mbox"
    assert [m.raw for m in read_mail(path)] == messages


@pytest.mark.parametrize("suffix", sorted(_COMPRESSORS))
def test_truncated_bzip2_and_xz_yield_complete_messages_then_raise(tmp_path, suffix):
    # Several of bzip2's blocks of 900 KB.
    messages = [_message(n, os.urandom(3000).hex().encode() + b"\n") for n in range(1, 601)]
    compressed = _COMPRESSORS[suffix](_mbox(*messages))
    path = _write(tmp_path, f"cut.mbox.{suffix}", compressed[: len(compressed) // 2])

    got = []
    with pytest.raises(MailSourceError) as caught:
        for mail in read_mail(path):
            got.append(mail)

    assert "compressed data ends early" in str(caught.value)
    assert 0 < len(got) < len(messages)
    assert [m.raw for m in got] == messages[: len(got)]


@pytest.mark.parametrize("suffix", sorted(_COMPRESSORS))
def test_corrupt_bzip2_and_xz(tmp_path, suffix):
    compressed = _COMPRESSORS[suffix](_mbox(_message(1)))
    path = _write(tmp_path, f"bad.mbox.{suffix}", compressed[:12] + b"\xff" * 64)

    with pytest.raises(MailSourceError, match=f"bad.mbox.{suffix}: "):
        list(read_mail(path))

    messages = [_message(n, os.urandom(3000).hex().encode() + b"\n") for n in range(1, 601)]
    compressed = bytearray(_COMPRESSORS[suffix](_mbox(*messages)))
    middle = len(compressed) // 2
    compressed[middle:middle + 64] = bytes(64)
    path = _write(tmp_path, f"damaged.mbox.{suffix}", bytes(compressed))

    got = []
    with pytest.raises(MailSourceError, match=f"damaged.mbox.{suffix}: corrupt compressed data"):
        for mail in read_mail(path):
            got.append(mail.raw)

    assert 0 < len(got) < len(messages) and got == messages[: len(got)]



def test_a_bzip2_block_that_fails_its_check_gives_none_of_its_mail(tmp_path):
    """bzip2 checks a block once it has given all of it: what it gave is held until then.

    A damaged block can decode to other text and only then fail its check;
    that text must not reach the archive as mail.
    """
    noise = random.Random(7)
    # One block each (bzip2 -9 takes 900 kB), the damaged one given half
    # before a 1 MB read ends and half after.
    good = [_message(n, noise.randbytes(1750).hex().encode() + b"\n") for n in range(1, 201)]
    bad = [_message(n, noise.randbytes(2000).hex().encode() + b"\n") for n in range(201, 401)]
    second = bytearray(bz2.compress(_mbox(*bad)))
    # The block's start in its rotated text (its 24 bits end at bit 136):
    # moved by two, the block decodes to shuffled text, then fails its check.
    second[16] ^= 0x01
    with pytest.raises(OSError):
        bz2.decompress(bytes(second))
    path = _write(tmp_path, "joined.mbox.bz2", bz2.compress(_mbox(*good)) + bytes(second))

    got = []
    with pytest.raises(MailSourceError, match="joined.mbox.bz2: corrupt compressed data"):
        for mail in read_mail(path):
            got.append(mail.raw)

    assert got == good


# --- Pipermail -----------------------------------------------------------

_PIPERMAIL = (
    b"From jdoe at example.com  Tue Mar  6 09:12:45 2007\n"
    b"From: jdoe at example.com (John Doe)\n"
    b"Date: Tue, 06 Mar 2007 10:12:45 +0100\n"
    b"Subject: [list] Meeting\n"
    b"To: list at lists.example.org, \"Meet at noon\" <x at example.net>\n"
    b"Cc: other at example.net\n"
    b"\tthird at example.net\n"
    b"Message-ID: <123@example.com>\n"
    b"\n"
    b"Write to jdoe at example.com.\n"
    b"From: jdoe at example.com (quoted in the body)\n"
    b"\n"
    b"From my point of view, 10:00 is fine.\n"
    b"\n"
    b"From noname at example.org  Tue Mar  6 10:00:00 2007\n"
    b"From: noname at example.org (noname at example.org)\n"
    b"Subject: with attachment\n"
    b"\n"
    b"-------------- next part --------------\n"
    b"Url : http://example.org/pipermail/list/attachments/1.obj\n"
    b"From third at example.net  Wed Mar  7 10:00:00 2007\n"
    b"From: third at example.net (Third at Home)\n"
    b"\n"
    b"bye\n"
    b"\n"
)


def test_pipermail(tmp_path):
    path = _write(tmp_path, "2007-March.txt", _PIPERMAIL)

    mails = list(read_mail(path))

    assert detect_format(path) == "pipermail"
    assert [m.position for m in mails] == [1, 2, 3]
    first, second, third = (m.raw for m in mails)
    assert first == (
        b"From: jdoe@example.com (John Doe)\n"
        b"Date: Tue, 06 Mar 2007 10:12:45 +0100\n"
        b"Subject: [list] Meeting\n"
        b"To: list@lists.example.org, \"Meet at noon\" <x@example.net>\n"
        b"Cc: other@example.net\n"
        b"\tthird@example.net\n"
        b"Message-ID: <123@example.com>\n"
        b"\n"
        b"Write to jdoe at example.com.\n"
        b"From: jdoe at example.com (quoted in the body)\n"
        b"\n"
        b"From my point of view, 10:00 is fine.\n"
    )
    assert second.startswith(b"From: noname@example.org (noname@example.org)\n")
    assert second.endswith(b"Url : http://example.org/pipermail/list/attachments/1.obj\n")
    assert third == b"From: third@example.net (Third at Home)\n\nbye\n"
    assert mails[0].envelope_date == datetime(2007, 3, 6, 9, 12, 45, tzinfo=timezone.utc)


def test_pipermail_gzip_and_detection_by_content(tmp_path):
    gz = _write(tmp_path, "2007-March.txt.gz", gzip.compress(_PIPERMAIL))
    other = _write(tmp_path, "archive", _PIPERMAIL)

    assert detect_format(gz) == detect_format(other) == "pipermail"
    assert [m.raw for m in read_mail(gz)] == [m.raw for m in read_mail(other)]
    assert len(list(read_mail(gz))) == 3


def test_pipermail_keeps_mboxrd_like_lines(tmp_path):
    data = b"From a at b.org  Tue Mar  6 09:12:45 2007\nFrom: a at b.org (A)\n\n>From x\n"
    path = _write(tmp_path, "2007-March.txt", data)

    (mail,) = read_mail(path)

    assert mail.raw == b"From: a@b.org (A)\n\n>From x\n"


def test_an_envelope_line_not_in_pipermails_form_in_a_pipermail_file_is_a_doubtful_split(tmp_path):
    # Pipermail quotes no line of a body, and writes its own envelope lines
    # "From jdoe at example.com  date": a bounce pasted whole, envelope line
    # and header, cut the post there without a word. (It writes one other
    # form, for mail whose sender it could not read: no doubt there.)
    pasted = (b"Here is the bounce, verbatim:\n\n"
              b"From MAILER-DAEMON Tue Mar  6 09:10:00 2007\n"
              b"Return-Path: <>\nFrom: Mail Delivery System <MAILER-DAEMON@example.org>\nSubject: Undelivered\n\n"
              b"This is the mail system.\n")
    data = (b"From alice at example.org  Tue Mar  6 09:12:45 2007\n"
            b"From: alice at example.org (Alice)\nSubject: [dev] bounce?\nMessage-ID: <fwd1@example.org>\n\n"
            + pasted + b"\n"
            b"From bogus@does.not.exist.com  Tue Mar  6 09:50:00 2007\n"
            b"From: bogus@does.not.exist.com ()\nSubject: No subject\nMessage-ID: <mailman.1.x@example.org>\n\n"
            b"Lost sender.\n\n"
            b"From bob at example.org  Tue Mar  6 10:00:00 2007\n"
            b"From: bob at example.org (Bob)\nSubject: [dev] Re: bounce?\nMessage-ID: <r1@example.org>\n\nNo.\n")
    path = _write(tmp_path, "2007-March.txt", data)
    mails = list(read_mail(path))
    assert len(mails) == 4
    assert [m.raw.startswith(b"Return-Path: <>") for m in mails] == [False, True, False, False]
    assert len(mails[1].doubts) == 1 and "Pipermail" in mails[1].doubts[0]
    assert not mails[2].doubts and not mails[3].doubts
    assert mails[3].raw.startswith(b"From: bob@example.org (Bob)")


# --- Maildir -------------------------------------------------------------


def test_maildir(tmp_path):
    path = _maildir(
        tmp_path,
        [
            ("cur", "1200000002.M2.host:2,S", _message(2)),
            ("new", "1200000001.M1.host", _message(1)),
            ("cur", "1200000003.M3.host:2,", _message(3, b"From a line.\n>From b\n")),
            ("cur", ".hidden", b"junk"),
        ],
    )
    (tmp_path / "Maildir" / "tmp" / "1200000004.M4.host").write_bytes(_message(4))

    mails = []
    # A message left in tmp/ (being delivered) is not read, but named after the others.
    with pytest.raises(MailSourceError, match=r"not read: 1 file in tmp/ \(1200000004.M4.host\)"):
        for mail in read_mail(path):
            mails.append(mail)

    assert detect_format(path) == "maildir"
    assert [m.raw for m in mails] == [
        _message(1),
        _message(2),
        _message(3, b"From a line.\n>From b\n"),
    ]
    assert [m.position for m in mails] == [1, 2, 3]
    assert all(m.source == path and m.envelope_date is None for m in mails)


def test_empty_maildir(tmp_path):
    path = _maildir(tmp_path, [])

    assert list(read_mail(path)) == []


def test_directory_that_is_not_a_maildir(tmp_path):
    (tmp_path / "folder").mkdir()
    path = str(tmp_path / "folder")

    with pytest.raises(MailSourceError, match="folder"):
        detect_format(path)
    with pytest.raises(MailSourceError, match="folder"):
        list(read_mail(path))


def test_pathlike_accepted(tmp_path):
    path = tmp_path / "p.mbox"
    path.write_bytes(_mbox(_message(1)))

    (mail,) = read_mail(path)

    assert mail.source == str(path)
    assert detect_format(path) == "mbox"


def test_pipermail_folder_lists_each_month_once_in_order(tmp_path):
    from kittypyr.mailboxes import expand_sources

    for name in ("2007-March.txt", "2007-March.txt.gz", "2006-December.txt.gz", "2007-January.txt",
                 "index.html"):
        (tmp_path / name).write_bytes(b"")
    (tmp_path / "2007-March").mkdir()
    assert expand_sources([tmp_path]) == [
        str(tmp_path / "2006-December.txt.gz"),
        str(tmp_path / "2007-January.txt"),
        str(tmp_path / "2007-March.txt"),
    ]
    other = tmp_path / "2007-March"
    assert expand_sources([other]) == [str(other)]


def test_pipermail_month_files_compressed_otherwise_or_renamed_in_lower_case_are_imported(tmp_path):
    # Recompressed with bzip2 or xz, or renamed by hand: the reader reads
    # them, but the folder left them out without a word.
    from kittypyr.mailboxes import expand_sources

    for name in ("2007-May.txt.bz2", "2007-July.txt.xz", "2007-june.txt", "2007-June.txt.gz", "2007-April.txt.gz",
                 "2007-April.txt.xz"):
        (tmp_path / name).write_bytes(b"")
    assert expand_sources([tmp_path]) == [
        str(tmp_path / "2007-April.txt.gz"),
        str(tmp_path / "2007-May.txt.bz2"),
        str(tmp_path / "2007-june.txt"),
        str(tmp_path / "2007-July.txt.xz"),
    ]


# --- envelope lines recognised one by one -------------------------------


def _pipermail_message(n, last_line=b"bye"):
    """A Pipermail message whose body has no final newline, as Pipermail leaves it."""
    return (
        b"From: person%d at example.org (Person %d)\n"
        b"Date: Fri, 02 Apr 2004 15:52:00 +0000\n"
        b"Subject: [list] topic %d\n"
        b"Message-ID: <pm%d@example.org>\n"
        b"\n" % (n, n, n, n)
    ) + last_line


def test_joined_months_split_at_every_envelope_whatever_the_first_looks_like(tmp_path):
    # `cat 20*.txt > list.mbox` of a list whose early months have real
    # addresses in the envelope and whose later months are Pipermail's.
    early = b"".join(
        b"From jdoe@example.com  Thu Dec 11 05:57:05 2003\n" + _message(n) + b"\n" for n in (1, 2)
    )
    late = b"".join(
        b"From person%d at example.org  Fri Apr  2 15:52:%02d 2004\n" % (n, n)
        + _pipermail_message(n, b"Url : http://example.org/pipermail/list/attachments/%d.bin\n" % n)
        for n in (3, 4, 5)
    )
    path = _write(tmp_path, "list.mbox", early + late)

    mails = list(read_mail(path))

    assert len(mails) == 5
    assert [m.raw.split(b"\n", 1)[0] for m in mails] == [
        b"From: user1@example.com",
        b"From: user2@example.com",
        b"From: person3@example.org (Person 3)",
        b"From: person4@example.org (Person 4)",
        b"From: person5@example.org (Person 5)",
    ]
    assert mails[4].envelope_date == datetime(2004, 4, 2, 15, 52, 5, tzinfo=timezone.utc)
    # Pipermail writes its envelopes so: nothing doubtful about these splits.
    assert all(m.doubts == () for m in mails)


@pytest.mark.parametrize(
    "envelope, date",
    [
        (b"From jdoe at example.com  Fri Apr  2 15:52:00 2004", datetime(2004, 4, 2, 15, 52)),
        (b"From jdoe@example.com  Fri Apr  2 15:52:00 2004", datetime(2004, 4, 2, 15, 52)),
        (b"From - Fri Apr  2 15:52:00 2004", datetime(2004, 4, 2, 15, 52)),
        (b"From  Fri Apr  2 15:52:00 2004", datetime(2004, 4, 2, 15, 52)),
        (b"From Fri Apr  2 15:52:00 2004", datetime(2004, 4, 2, 15, 52)),
        (b"From jdoe@example.com Fri Apr  2 15:52 2004", datetime(2004, 4, 2, 15, 52)),
        (b"From jdoe@example.com Fri Apr  2 15:52:00 PST 2004", datetime(2004, 4, 2, 23, 52)),
        (b"From jdoe@example.com Fri Apr  2 15:52:00 2004 -0800", datetime(2004, 4, 2, 23, 52)),
        (b"From jdoe@example.com Fri Apr  2 15:52:00 PST 2004 -0800", datetime(2004, 4, 2, 23, 52)),
        (b"From jdoe@example.com Fri, 2 Apr 2004 15:52:00 +0000", datetime(2004, 4, 2, 15, 52)),
    ],
)
def test_envelope_forms_split_with_or_without_a_blank_line_before(tmp_path, envelope, date):
    date = date.replace(tzinfo=timezone.utc)
    for name in ("2004-April.txt", "list.mbox"):
        after_blank = _write(tmp_path, name, _mbox(_message(1), envelope=envelope + b"\n") * 2)
        mails = list(read_mail(after_blank))
        assert len(mails) == 2 and [m.envelope_date for m in mails] == [date, date]
        assert all(m.doubts == () for m in mails)

        no_blank = _write(tmp_path, name, b"".join(envelope + b"\n" + _pipermail_message(n) + b"\n"
                                                   for n in (1, 2)))
        mails = list(read_mail(no_blank))
        assert len(mails) == 2 and mails[1].envelope_date == date
        assert mails[1].raw.startswith(b"From: person2")


def test_from_lines_in_bodies_do_not_split(tmp_path):
    body = (
        b"Some text.\n"
        b"From what I saw yesterday, it works.\n"
        b"\n"
        b"From what I saw yesterday, it works.\n"
        b"From jdoe at example.com it came on Fri Apr  2, 15:52, I think.\n"
        b"From: not a header block after a sentence\n"
    )
    path = _write(tmp_path, "list.mbox", _mbox(_message(1, body), _message(2)))

    mails = list(read_mail(path))

    assert [m.raw for m in mails] == [_message(1, body), _message(2)]
    assert all(m.doubts == () for m in mails)


def test_a_doubtful_envelope_is_reported_with_its_line_and_byte(tmp_path, monkeypatch):
    # Tiny reads: the line and byte count must survive the buffer's re-slicing.
    monkeypatch.setattr("kittypyr.mailboxes._CHUNK", 7)
    quoted = b"From jdoe@example.com Fri Apr  2 15:52:00 2004\n"
    body = b"He pasted this:\n" + quoted + b"and nothing more.\n"
    first = _mbox(_message(1, body))
    # An envelope with no blank line before it and not in the form Pipermail
    # or Python's mailbox writes: split, since headers follow, but doubtful.
    unusual = b"From jdoe@example.com Fri, 2 Apr 2004 15:52:00 +0000\n"
    second = b"From person2 at example.org  Fri Apr  2 15:52:00 2004\n" + _pipermail_message(2, b"end")
    data = first + second + b"\n" + unusual + _pipermail_message(3)
    path = _write(tmp_path, "list.mbox", data)

    mails = list(read_mail(path))

    assert len(mails) == 3
    assert mails[0].raw == _message(1, body)
    kept_at = first.index(quoted)
    kept_line = first[:kept_at].count(b"\n") + 1
    split_at = data.index(unusual)
    split_line = data[:split_at].count(b"\n") + 1
    assert mails[0].doubts == (
        f"line {kept_line} (byte {kept_at}): an envelope line with no blank line before it"
        " and no header after it, kept in the message",
    )
    assert mails[2].doubts == (
        f"line {split_line} (byte {split_at}): a new message starts at an envelope line"
        " with no blank line before it",
    )


def test_unreadable_maildir_entries_are_failures_among_the_messages(tmp_path):
    path = _maildir(
        tmp_path,
        [("cur", "1200000001.M1.host:2,S", _message(1)), ("new", "1200000004.M4.host", _message(4))],
    )
    (tmp_path / "Maildir" / "cur" / "1200000002.M2.host:2,S").symlink_to(tmp_path / "gone")
    (tmp_path / "Maildir" / "new" / "1200000003.M3.host").mkdir()
    os.mkfifo(tmp_path / "Maildir" / "new" / "1200000003.M5.host")

    mails = list(read_mail(path))

    assert [(m.position, m.name, m.raw, m.failure) for m in mails] == [
        (1, "cur/1200000001.M1.host:2,S", _message(1), ""),
        (2, "cur/1200000002.M2.host:2,S", b"", "No such file or directory"),
        (3, "new/1200000003.M3.host", b"", "a directory, not a message file"),
        (4, "new/1200000003.M5.host", b"", "not a regular file"),
        (5, "new/1200000004.M4.host", _message(4), ""),
    ]


def test_a_maildir_folder_that_cannot_be_listed_is_an_error_after_the_others_messages(tmp_path):
    """Its messages cannot be read: said, never left out without a word."""
    path = _maildir(tmp_path, [("cur", "1200000001.M1.host:2,S", _message(1))])
    (tmp_path / "Maildir" / "new").rmdir()
    (tmp_path / "Maildir" / "new").write_bytes(b"a file where the folder should be\n")

    got = []
    with pytest.raises(MailSourceError, match="Maildir/new"):
        for mail in read_mail(path):
            got.append(mail.raw)

    assert got == [_message(1)]


def test_a_from_line_with_an_unusual_date_splits_only_before_headers(tmp_path):
    prose = b"From 10:30 to 11:00 in 2007 we met.\n"
    unusual = b"From jdoe@example.com 2007-03-06 09:12:45\n"
    data = _mbox(_message(1, b"Agenda:\n\n" + prose + b"\nBye.\n")) + unusual + _message(2)
    path = _write(tmp_path, "list.mbox", data)

    first, second = read_mail(path)

    assert first.raw == _message(1, b"Agenda:\n\n" + prose + b"\nBye.\n")
    assert second.raw == _message(2)
    assert first.doubts == (
        f"line 9 (byte {data.index(prose)}): a 'From ' line with a time and a year but no header"
        " after it, kept in the message",
    )
    assert second.doubts == (
        f"line 13 (byte {data.index(unusual)}): a new message starts at a 'From ' line whose date"
        " is not in a known form",
    )


def test_an_envelope_line_in_a_body_with_text_after_it_stays_in_the_message(tmp_path):
    """mboxo leaves a body's "From " line unquoted; followed by text, not a header, it starts no message:
    a message has a header. Split there, the first was cut short and the rest failed as no mail."""
    path = tmp_path / "log.mbox"
    path.write_bytes(
        b"From alice@example.org Mon Mar  3 10:00:00 2008\n"
        b"From: alice@example.org\nSubject: A log\nMessage-ID: <log@example.org>\n\n"
        b"Here is a log:\n\n"
        b"From bob@example.org Tue Mar  4 11:00:00 2008\n"
        b"it said this and that, and then it stopped.\n\n"
        b"From carol@example.org Wed Mar  5 12:00:00 2008\n"
        b"From: carol@example.org\nSubject: Next\nMessage-ID: <next@example.org>\n\nThe next one.\n")
    mails = list(read_mail(path))
    assert [mail.failure for mail in mails] == ["", ""]
    assert b"it said this and that" in mails[0].raw
    assert any("kept in the message" in doubt for doubt in mails[0].doubts)
    assert b"The next one." in mails[1].raw


@pytest.mark.parametrize("suffix", sorted(_COMPRESSORS))
def test_a_file_truncated_in_its_first_block_says_so(tmp_path, suffix):
    """One bzip2 block (or xz stream) cut short: nothing of it could be read, which is no
    'new compressed member' after whole ones, nor 'all read'."""
    messages = [_message(n) for n in range(1, 301)]
    compressed = _COMPRESSORS[suffix](_mbox(*messages))
    path = _write(tmp_path, f"cut.mbox.{suffix}", compressed[: len(compressed) * 3 // 4])

    got = []
    with pytest.raises(MailSourceError) as caught:
        for mail in read_mail(path):
            got.append(mail)
    assert "compressed data ends early" in str(caught.value)
    assert "new compressed member" not in str(caught.value) and "all read" not in str(caught.value)
    assert "after 0 complete messages" in str(caught.value) or got


def test_a_message_cut_where_a_damaged_compressed_member_starts_is_left_out_and_named(tmp_path):
    """Members as ``cat a.gz b.gz`` writes them; the second damaged at its start, the first ending in a body."""
    messages = [_message(n, b"line one of message %d\nline two, the end of it: tailword%d\n" % (n, n))
                for n in range(1, 7)]
    whole = _mbox(*messages)
    cut = whole.index(b"line two, the end of it: tailword4")
    path = _write(tmp_path, "cut.mbox.gz", gzip.compress(whole[:cut]) + gzip.compress(whole[cut:])[:12])

    got = []
    with pytest.raises(MailSourceError) as caught:
        for mail in read_mail(path):
            got.append(mail)
    # The fourth is cut short: not read, as where a single member ends early.
    assert [mail.raw for mail in got] == messages[:3]
    assert "after 3 complete messages" in str(caught.value) and "all read" not in str(caught.value)
    assert "where a new compressed member starts" in str(caught.value)


def test_members_that_end_between_messages_before_a_damaged_one_are_all_read(tmp_path):
    messages = [_message(n) for n in range(1, 7)]
    whole = _mbox(*messages)
    cut = whole.index(b"From user@example.com", len(_mbox(*messages[:3])) - 1)
    path = _write(tmp_path, "joined.mbox.gz", gzip.compress(whole[:cut]) + gzip.compress(whole[cut:])
                  + gzip.compress(whole)[:12])

    got = []
    with pytest.raises(MailSourceError) as caught:
        for mail in read_mail(path):
            got.append(mail)
    assert [mail.raw for mail in got] == messages
    assert "(after 6 complete messages, all read)" in str(caught.value)


@pytest.mark.parametrize("envelope", [b"From x@example.org Thu Jan  2 10:00:00 99\n", b"From x@example.org Thu Jan  2 2020\n",
                                      b"From x@example.org\n", b"From x@example.org 1577959200\n",
                                      b"From MAILER-DAEMON Thu Jan  2 10.00.00 2020\n"])
def test_envelope_lines_without_a_known_date_still_part_messages_with_a_header_after_them(tmp_path, envelope):
    # Each was taken for a body's own "From " line: three messages were read as one, and nothing said so.
    messages = [_message(n) for n in range(1, 4)]
    path = _write(tmp_path, "undated.mbox", _mbox(*messages, envelope=envelope))
    mails = list(read_mail(path))
    assert [mail.raw for mail in mails] == messages
    assert all(any("no date in a known form" in doubt for doubt in mail.doubts) for mail in mails[1:])


def test_a_body_line_starting_from_without_a_date_stays_in_its_message_unremarked(tmp_path):
    body = b"Hello.\n\nFrom the start it was clear.\nWe went on.\n"
    path = _write(tmp_path, "prose.mbox", _mbox(_message(1, body), _message(2)))
    mails = list(read_mail(path))
    assert [mail.raw for mail in mails] == [_message(1, body), _message(2)]
    assert not mails[0].doubts


def test_a_whole_envelope_line_in_a_body_with_a_blank_line_and_text_after_it_stays_in_its_message(tmp_path):
    # A forwarded mail pasted with its envelope line: mboxo leaves it
    # unquoted. It used to cut the message there, the rest becoming a
    # "message" of no header, and nothing said so.
    body = (b"Here is what I received:\n\n"
            b"From joe@example.net Mon Jan  1 10:00:00 2001\n\n"
            b"Hi, can you look at this?\n")
    path = _write(tmp_path, "forward.mbox", _mbox(_message(1, body), _message(2)))
    mails = list(read_mail(path))
    assert [mail.raw for mail in mails] == [_message(1, body), _message(2)]
    assert len(mails[0].doubts) == 1 and "kept in the message" in mails[0].doubts[0]
    assert mails[0].doubts[0].startswith("line 9 ")


def test_an_envelope_line_with_a_blank_line_then_a_header_block_still_starts_a_message(tmp_path):
    data = _mbox(_message(1)) + b"From user@example.com Tue Mar  6 09:12:45 2007\n\n" + _message(2) + b"\n"
    path = _write(tmp_path, "blank.mbox", data)
    mails = list(read_mail(path))
    assert len(mails) == 2 and mails[0].raw == _message(1)
    assert b"Message-ID: <m2@example.com>" in mails[1].raw


def test_a_maildir_file_named_with_a_dot_that_holds_mail_is_named_not_read(tmp_path):
    # The Maildir rules keep names starting with a dot for files that are
    # no message, and they are not read; one that holds a message (renamed
    # by hand, left by a synchronising tool) was left out without a word.
    path = _maildir(tmp_path, [
        ("cur", "1200000001.M1.host:2,S", _message(1)),
        ("cur", ".1200000002.M2.host:2,S", _message(2)),
        ("new", ".DS_Store", b"\x00\x00\x00\x01Bud1\x00\x00"),
    ])
    mails = list(read_mail(path))
    assert [(m.position, m.name, bool(m.raw)) for m in mails] == [
        (1, "cur/.1200000002.M2.host:2,S", False), (2, "cur/1200000001.M1.host:2,S", True)]
    assert "starts with a dot" in mails[0].failure and "by its path" in mails[0].failure


def test_a_maildir_file_named_with_a_dot_that_cannot_be_read_is_named_among_the_failures(tmp_path, monkeypatch):
    # Whether it held mail could not be told, and it was skipped unsaid;
    # a folder named so stays unsaid: it is no message.
    import kittypyr.mailboxes

    path = _maildir(tmp_path, [
        ("cur", "1200000001.M1.host:2,S", _message(1)),
        ("cur", ".1200000002.M2.host:2,S", _message(2)),
    ])
    os.mkdir(os.path.join(path, "cur", ".svn"))
    read = kittypyr.mailboxes.read_regular_file

    def unreadable(full):
        if full.endswith(".M2.host:2,S"):
            raise PermissionError(13, "Permission denied")
        return read(full)

    monkeypatch.setattr(kittypyr.mailboxes, "read_regular_file", unreadable)
    mails = list(read_mail(path))
    assert [(m.name, bool(m.raw)) for m in mails] == [("cur/.1200000002.M2.host:2,S", False),
                                                       ("cur/1200000001.M1.host:2,S", True)]
    assert "Permission denied" in mails[0].failure and "starts with a dot" in mails[0].failure


def test_a_mailbox_file_among_a_maildirs_messages_is_read_as_its_messages(tmp_path):
    # An mbox saved into cur/ was read as one message: the first, with
    # every other message of it in its body.
    path = _maildir(tmp_path, [
        ("cur", "1200000001.M1.host:2,S", _message(1)),
        ("cur", "1200000002.M2.host:2,S", _mbox(_message(2), _message(3, b"From here on.\n"), _message(4))),
        ("cur", "1200000003.M3.host:2,S", b"From user@example.com Tue Mar  6 09:12:45 2007\n" + _message(5)),
        ("cur", "1200000004.M4.host:2,S", b"\xef\xbb\xbf\n" + _mbox(_message(6), _message(7))),
    ])
    mails = list(read_mail(path))
    assert [m.position for m in mails] == [1, 2, 3, 4, 5, 6, 7]
    assert [m.raw for m in mails[5:]] == [_message(6), _message(7)]
    assert [m.raw for m in mails[1:4]] == [_message(2), _message(3, b"From here on.\n"), _message(4)]
    assert [m.name for m in mails[1:4]] == [f"cur/1200000002.M2.host:2,S, message {n}" for n in (1, 2, 3)]
    assert not mails[1].doubts and all("inside the Maildir file cur/1200000002.M2.host:2,S" in m.doubts[-1]
                                       for m in mails[2:4])
    assert all(m.envelope_date is not None for m in mails[1:4])
    assert mails[0].name == "cur/1200000001.M1.host:2,S" and mails[0].raw == _message(1)
    assert mails[4].name == "cur/1200000003.M3.host:2,S" and b"Message-ID: <m5@example.com>" in mails[4].raw


def test_an_mbox_of_lines_ending_in_a_return_alone_then_in_line_feeds_keeps_every_message(tmp_path):
    # Classic Mac OS mail joined with mail of another system: a single line
    # feed made the whole first part one "line", taken for the envelope
    # line of the message after it, and its messages were lost unsaid.
    mac = _mbox(_message(1), _message(2), _message(3)).replace(b"\n", b"\r")
    for tail in (_mbox(_message(4)).replace(b"\n", b"\r\n"), _mbox(_message(4))):
        path = _write(tmp_path, "joined.mbox", mac + tail)
        mails = list(read_mail(path))
        assert len(mails) == 4, [m.raw[:60] for m in mails]
        assert [m.raw for m in mails[:3]] == [_message(n) for n in (1, 2, 3)]
        assert b"Message-ID: <m4@example.com>" in mails[3].raw
        assert all(m.envelope_date is not None for m in mails)


@pytest.mark.parametrize("chunk", [1 << 20, 7, 4096])
def test_mail_of_returns_alone_joined_after_much_mail_of_line_feeds_keeps_every_message(tmp_path, monkeypatch,
                                                                                         chunk):
    # What a file's lines end with was judged on its first 64 KB: classic
    # Mac OS mail joined after more line-feed mail than that was one
    # "line", read as the envelope line of an empty message, and lost.
    monkeypatch.setattr("kittypyr.mailboxes._CHUNK", chunk)
    unix = _mbox(*(_message(n, b"Some text.\n" * 600) for n in range(1, 11)))
    assert len(unix) > 1 << 16
    mac = _mbox(_message(11), _message(12, b"Progress: 10%\r20%\n"), _message(13)).replace(b"\n", b"\r")
    for tail in (b"", _mbox(_message(14))):
        mails = list(read_mail(_write(tmp_path, "joined.mbox", unix + mac + tail)))
        assert len(mails) == 13 + bool(tail), [m.raw[:60] for m in mails]
        assert [m.raw for m in mails[:10]] == [_message(n, b"Some text.\n" * 600) for n in range(1, 11)]
        assert [m.raw for m in mails[10:13]] == [_message(11), _message(12, b"Progress: 10%\n20%\n"), _message(13)]
        assert all(m.envelope_date is not None and not m.doubts for m in mails)
        if tail:
            assert mails[13].raw == _message(14)


@pytest.mark.parametrize("chunk", [1 << 20, 7])
@pytest.mark.parametrize("newline", [b"\n", b"\r\n"])
def test_an_envelope_line_glued_to_the_last_line_of_a_file_joined_before_it_starts_a_message(tmp_path, monkeypatch,
                                                                                           chunk, newline):
    # `cat a.mbox b.mbox` where a.mbox does not end with a line end: the
    # next envelope line is on its last line, and its message was read as
    # part of that one's body, without a word.
    monkeypatch.setattr("kittypyr.mailboxes._CHUNK", chunk)
    envelope = b"From user@example.com Tue Mar  6 09:12:45 2007\n"
    data = (envelope + _message(1, b"Hello.\nbye") + envelope + _message(2) + b"\n"
            + envelope + _message(3, b"Said:\n-- \nsig") + b"From MAILER-DAEMON Tue Mar  6 09:12:45 2007\n" + _message(4))
    mails = list(read_mail(_write(tmp_path, "joined.mbox", data.replace(b"\n", newline))))
    assert [m.raw for m in mails] == [m.replace(b"\n", newline) for m in (
        _message(1, b"Hello.\nbye"), _message(2), _message(3, b"Said:\n-- \nsig"), _message(4))]
    assert [len(m.doubts) for m in mails] == [0, 1, 0, 1]
    assert mails[1].doubts[0].startswith("line 8 ") and "follows text on the line before" in mails[1].doubts[0]
    assert all(m.envelope_date is not None for m in mails)


def test_an_envelope_line_after_other_text_on_its_line_that_no_body_ends_with_stays_in_its_message(tmp_path):
    # Text that goes on, quoting, a header naming the envelope line it
    # replaced (as real mail has), a forwarded message's header.
    body = (b"He wrote From user@example.com Tue Mar  6 09:12:45 2007\nthat it works.\n"
            b"Text From user@example.com Tue Mar  6 09:12:45 2007\n\nThanks.\n"
            b"\n>>From user@example.com Tue Mar  6 09:12:45 2007\nFrom: user@example.com\n\n")
    first = b"X-Mailbox-Line:\tFrom user@example.com Tue Mar  6 09:12:45 2007\n" + _message(1, body)
    forwarded = (b"Received: by example.com;\n\tid 1; From user@example.com Tue Mar  6 09:12:45 2007\n"
                 + _message(2, b"Forwarded.\n"))
    mails = list(read_mail(_write(tmp_path, "text.mbox", _mbox(first, forwarded))))
    assert [(m.raw, m.doubts) for m in mails] == [(first.replace(b">>From", b">From"), ()), (forwarded, ())]


def test_a_return_alone_inside_a_message_of_line_feeds_stays_as_it_is(tmp_path):
    body = b"Progress: 10%\r20%\r100%\nDone.\n"
    path = _write(tmp_path, "progress.mbox", _mbox(_message(1, body), _message(2)))
    assert [m.raw for m in read_mail(path)] == [_message(1, body), _message(2)]


@pytest.mark.parametrize("line", [b"From u2@example.org Tue, 06 Mar 2007 09:13:45 +0100 (CET)\n",
                                  b"From u2@example.org 2007-03-06 09:13:45\n"])
def test_an_envelope_like_line_right_after_a_body_line_with_a_header_after_it_is_said_to_be_kept(tmp_path, line):
    # No blank line before it and a date in no form the reader knows: it
    # stays in the message, as it did, but no longer without a word.
    data = b"From u1@example.org Tue Mar  6 09:12:45 2007\n" + _message(1) + line + _message(2)
    mails = list(read_mail(_write(tmp_path, "odd.mbox", data)))
    assert len(mails) == 1 and len(mails[0].doubts) == 1
    assert mails[0].doubts[0].startswith("line 8 ") and "kept in the message" in mails[0].doubts[0]


@pytest.mark.parametrize("chunk", [1 << 20, 7])
@pytest.mark.parametrize("before", [b"\n", b""])
@pytest.mark.parametrize("newline", [b"\n", b"\r\n"])
def test_an_envelope_line_after_nul_bytes_a_crash_left_starts_a_message(tmp_path, monkeypatch, chunk, before,
                                                                          newline):
    # A crash while a message was appended leaves a run of NUL bytes, then
    # the next envelope line: it was read as part of the message before,
    # the message after it never stored, and nothing said so.
    monkeypatch.setattr("kittypyr.mailboxes._CHUNK", chunk)
    data = (_mbox(_message(1))[:-1] + before + b"\x00" * 512
            + _mbox(_message(2), _message(3))).replace(b"\n", newline)
    mails = list(read_mail(_write(tmp_path, "crashed.mbox", data)))
    assert [m.raw for m in mails] == [_message(n).replace(b"\n", newline) for n in (1, 2, 3)]
    assert mails[1].envelope_date is not None
    assert len(mails[1].doubts) == 1 and "after 512 NUL bytes" in mails[1].doubts[0]
    assert not mails[0].doubts and not mails[2].doubts


def test_nul_bytes_before_from_inside_a_line_of_a_body_split_nothing(tmp_path):
    body = b"binary junk \x00\x00From here on it is text.\n"
    mails = list(read_mail(_write(tmp_path, "junk.mbox", _mbox(_message(1, body), _message(2)))))
    assert [m.raw for m in mails] == [_message(1, body), _message(2)]


def test_a_message_of_line_feeds_full_of_lone_returns_keeps_them_however_many(tmp_path):
    # A progress meter pasted whole: more lone returns than lines in the
    # first 64 KB, and the whole file was read as classic Mac OS mail, every
    # lone return of every message turned into a line feed.
    meter = b"progress:\n" + b"".join(b"%d%%\r" % n for n in range(100)) * 200 + b"\ndone\n"
    path = _write(tmp_path, "meter.mbox", _mbox(_message(1, meter), _message(2, b"a\rb\n")))
    assert [m.raw for m in read_mail(path)] == [_message(1, meter), _message(2, b"a\rb\n")]


def test_an_mbox_ending_inside_a_line_says_its_last_message_may_be_cut_short(tmp_path):
    messages = [_message(n, b"First line.\nA second, longer line of the body.\n") for n in range(1, 4)]
    whole = _mbox(*messages)
    cut = _write(tmp_path, "cut.mbox", whole[:-20])

    got = list(read_mail(cut))
    assert [m.raw for m in got[:2]] == messages[:2]
    assert got[0].doubts == got[1].doubts == ()
    assert len(got[2].doubts) == 1 and "ends inside a line of this message" in got[2].doubts[0]
    assert "may be cut short" in got[2].doubts[0]

    # Whole, or without the blank line some writers leave off the last message: no doubt.
    for data in (whole, whole[:-1]):
        assert all(m.doubts == () for m in read_mail(_write(tmp_path, "whole.mbox", data)))
