"""An import whose storage fails midway (a full disk): it stops at once, says so, and keeps all it counted."""

import errno
import logging

import transaction

import kittypyr.resources.message
from kittypyr.importing import import_mail
from tests.functional import mbox_bytes
from tests.mailbuilder import attachment, make_message, multipart, text_part

LIST = "full@lists.example.org"


def test_a_disk_that_fills_as_attachments_are_written_stops_the_import_once(archive, tmp_path, monkeypatch, caplog):
    mails = [make_message(message_id=f"<full{n}@example.org>", subject=f"part {n}",
                          body=multipart("mixed", text_part(f"note {n}\n"),
                                         attachment(b"data %d" % n, filename=f"a{n}.bin")))
             for n in range(40)]
    mbox = tmp_path / "full.mbox"
    mbox.write_bytes(mbox_bytes(mails))
    written = []
    blob_with = kittypyr.resources.message._blob_with

    def filling_disk(data, jar):
        # Each message's one attachment is a blob file: the 16th finds the disk full.
        if len(written) >= 15:
            raise OSError(errno.ENOSPC, "No space left on device")
        written.append(data)
        return blob_with(data, jar)

    monkeypatch.setattr(kittypyr.resources.message, "_blob_with", filling_disk)
    with caplog.at_level(logging.ERROR, logger="kittypyr.importing"):
        report = import_mail(archive, LIST, [mbox], transaction.manager, batch_size=10, workers=0, progress=False)

    summary = report.summary()
    assert summary[0] == "read 20, archived 10, duplicates 0, skipped 0, failed 0"
    assert any(line.startswith("error: the storage could not be written (No space left on device): the import "
                               "stopped there; the last 10 messages read were not stored") for line in summary)
    assert not report.ok
    # The disk's trouble is said once, not as a failure of every message after it.
    assert not caplog.records
    transaction.abort()
    assert len(archive.lists[LIST].messages) == 10

    monkeypatch.setattr(kittypyr.resources.message, "_blob_with", blob_with)
    again = import_mail(archive, LIST, [mbox], transaction.manager, batch_size=10, workers=0, progress=False)
    assert again.summary()[0] == "read 40, archived 30, duplicates 10, skipped 0, failed 0"
    assert again.ok
