"""An import keeps what one batch read cached for the next (kittypyr.import_cache_size_bytes).

A batch into a large list reads much of what the batch before it read: the
records of its common words and the buckets of the trees keyed by
Message-ID hash. Under a serving connection's bound (8 MB in production.ini)
they left the cache after each batch and were read again from the storage.
"""

from datetime import datetime, timedelta, timezone

import pytest
import transaction
from ZODB import DB
from ZODB.FileStorage import FileStorage

from kittypyr.bootstrap import bootstrap_archive
from kittypyr.importing import Importer, ImportReport, byte_size, parse_raw
from kittypyr.mailboxes import RawMail
from kittypyr.msgid import message_id_hash
from tests.functional import kittypyr, write_config
from tests.mailbuilder import make_message

# A serving connection's bounds, scaled down to these few messages.
SERVING_RECORDS = 100
SERVING_BYTES = 32 * 1024
WORDS = [f"word{n}" for n in range(400)]


def _mail(n):
    # Each message shares most of its words with the others, as a list's mail does.
    body = " ".join(WORDS[(n * 7 + k * 13) % len(WORDS)] for k in range(60)) + "\n"
    return make_message(
        message_id=f"<cache{n}@example.org>",
        subject=f"Cache {n}",
        sender=(f"Poster {n % 9}", f"poster{n % 9}@example.org"),
        date=datetime(2021, 1, 1, tzinfo=timezone.utc) + timedelta(hours=n),
        body=body,
    )


class ReadsPerBatch:
    """A progress bar that notes how many records the connection read from the storage for each batch."""

    def __init__(self, connection):
        self.connection = connection
        self.reads = []
        connection.getTransferCounts(clear=True)

    def update(self, count):
        self.reads.append(self.connection.getTransferCounts(clear=True)[0])


def _import_in_batches(tmp_path, config, cache_size_bytes):
    tmp_path.mkdir()
    db = DB(FileStorage(str(tmp_path / "Data.fs"), blob_dir=str(tmp_path / "blobs")),
            cache_size=SERVING_RECORDS, cache_size_bytes=SERVING_BYTES)
    connection = db.open()
    try:
        archive = bootstrap_archive(connection.root(), config.registry)
        transaction.commit()
        parsed = [parse_raw(RawMail(_mail(n), "x.mbox", n, None)) for n in range(1, 401)]
        reads = ReadsPerBatch(connection)
        report = ImportReport()
        Importer(archive, "dev@example.org", transaction.manager, report, batch_size=100, progress=reads,
                 cache_size_bytes=cache_size_bytes).run(parsed)
        messages = archive.lists["dev@example.org"].messages
        stored = sum(message_id_hash(f"<cache{n}@example.org>") in messages for n in range(1, 401))
        bounds = db.getCacheSize(), db.getCacheSizeBytes()
        return report, stored, reads.reads, bounds
    finally:
        transaction.abort()
        connection.close()
        db.close()


def test_later_batches_read_again_little_of_what_earlier_ones_read(tmp_path, config):
    bounded = _import_in_batches(tmp_path / "bounded", config, cache_size_bytes=None)
    cached = _import_in_batches(tmp_path / "cached", config, cache_size_bytes=64 << 20)
    for report, stored, _, bounds in (bounded, cached):
        assert report.total("archived") == 400 and stored == 400
        # The connection's own bounds are back once the import is over.
        assert bounds == (SERVING_RECORDS, SERVING_BYTES)
    bounded_reads, cached_reads = bounded[2], cached[2]
    assert len(bounded_reads) == len(cached_reads) == 4
    # Under the serving bound every batch reads again the records it shares with the one before.
    assert min(bounded_reads[1:]) > 100
    assert sum(cached_reads[1:]) * 4 < sum(bounded_reads[1:])


@pytest.mark.parametrize("text, size", [
    ("128MB", 128 << 20), ("512kb", 512 << 10), ("1 GB", 1 << 30), ("2g", 2 << 30), ("4096", 4096),
    (" 64M ", 64 << 20),
])
def test_sizes_in_bytes_kilobytes_megabytes_gigabytes(text, size):
    assert byte_size(text) == size


@pytest.mark.parametrize("text", ["", "lots", "12 TB", "-5MB", "1.5GB"])
def test_what_is_not_a_size_is_refused(text):
    with pytest.raises(ValueError, match="not a size in bytes"):
        byte_size(text)


def test_the_import_command_names_a_setting_that_is_not_a_size(tmp_path):
    config = write_config(tmp_path, extra="kittypyr.import_cache_size_bytes = lots\n")
    mbox = tmp_path / "one.mbox"
    mbox.write_bytes(b"From a@example.org Mon Jan  4 10:00:00 2021\n" + _mail(1) + b"\n")
    done = kittypyr("import", config, "dev@example.org", mbox, "--quiet")
    assert done.returncode == 2
    assert f"kittypyr import: kittypyr.import_cache_size_bytes in {config}: not a size in bytes: 'lots'" \
        in done.stderr
    assert "Traceback" not in done.stderr
    # Nothing was imported, and the list was not made.
    listed = kittypyr("info", config, "--json", check=True)
    assert "dev@example.org" not in listed.stdout


def test_the_import_command_imports_with_its_cache_setting(tmp_path):
    config = write_config(tmp_path, extra="kittypyr.import_cache_size_bytes = 16MB\n")
    mbox = tmp_path / "two.mbox"
    mbox.write_bytes(b"".join(b"From a@example.org Mon Jan  4 10:00:00 2021\n" + _mail(n) + b"\n" for n in (1, 2)))
    done = kittypyr("import", config, "dev@example.org", mbox, "--quiet", "--policy", "public", check=True)
    assert "archived 2" in done.stdout
