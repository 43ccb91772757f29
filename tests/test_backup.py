"""``kittypyr backup`` / ``kittypyr restore``: a restored archive serves the same pages as the original."""

import gzip
from pathlib import Path
import re
from datetime import datetime, timedelta, timezone

import pytest
import transaction
from pyramid.paster import get_app
from webtest import TestApp

from kittypyr.msgid import message_id_hash
from tests.functional import kittypyr, mbox_bytes, write_config
from tests.mailbuilder import attachment, make_message, multipart, text_part

LIST = "dev@lists.example.org"
START = datetime(2020, 2, 1, 12, 0, tzinfo=timezone.utc)


def mail(first, count):
    raws = []
    for n in range(first, first + count):
        body = f"Notes on the barometer, part {n}.\n"
        raws.append(make_message(
            message_id=f"<bk{n}@example.org>",
            subject="Barometer" if n == 0 else "Re: Barometer",
            sender=(f"Person {n % 3}", f"person{n % 3}@example.org"),
            date=START + timedelta(hours=n),
            in_reply_to=None if n == 0 else f"<bk{n - 1}@example.org>",
            body=multipart("mixed", text_part(body),
                           attachment(f"reading {n}\n".encode() * 50, "text/plain", f"reading-{n}.txt"))))
    return raws


def import_mail(folder, config, first, count):
    path = folder / f"mail-{first}.mbox"
    path.write_bytes(mbox_bytes(mail(first, count)))
    kittypyr("import", config, LIST, path, "--quiet", "--policy", "public", check=True)


PAGES = [
    "/",
    f"/list/{LIST}/",
    f"/list/{LIST}/2020/2/",
    f"/list/{LIST}/thread/{message_id_hash('<bk0@example.org>')}/",
    f"/list/{LIST}/message/{message_id_hash('<bk7@example.org>')}/",
    f"/list/{LIST}/message/{message_id_hash('<bk7@example.org>')}/raw",
    f"/list/{LIST}/message/{message_id_hash('<bk3@example.org>')}/attachment/2/reading-3.txt",
    "/search?q=barometer",
    f"/api/list/{LIST}/",
]


def pages(config):
    app = get_app(str(config))
    try:
        browser = TestApp(app)
        return {path: (response.status_code, response.body)
                for path in PAGES for response in [browser.get(path, status="*")]}
    finally:
        app.registry._zodb_databases[""].close()


@pytest.fixture
def original(tmp_path):
    folder = tmp_path / "original"
    folder.mkdir()
    return folder, write_config(folder)


def test_incremental_backups_restore_to_the_same_pages(tmp_path, original):
    folder, config = original
    backups = tmp_path / "backups"
    import_mail(folder, config, 0, 6)
    first = kittypyr("backup", config, backups, check=True)
    assert re.search(r"^full backup of .*Data\.fs in .*backups: [1-9]\d* new blob files$", first.stdout, re.M)

    import_mail(folder, config, 6, 4)
    second = kittypyr("backup", config, backups, check=True)
    assert "incremental backup" in second.stdout
    assert re.search(r": [1-9]\d* new blob files", second.stdout)
    unchanged = kittypyr("backup", config, backups, check=True)
    assert unchanged.stdout.startswith("nothing committed to ") and "since the last backup in" in unchanged.stdout
    assert unchanged.stdout.rstrip().endswith(": 0 new blob files")

    copy = tmp_path / "copy"
    copy.mkdir()
    copy_config = write_config(copy)
    restored = kittypyr("restore", copy_config, backups, check=True)
    assert "restored" in restored.stdout and "blob files" in restored.stdout

    expected = pages(config)
    assert all(status == 200 for status, _ in expected.values()), {p: s for p, (s, _) in expected.items()}
    assert b"reading 3" in expected[PAGES[6]][1]
    assert b"part 9" in expected[PAGES[3]][1]
    assert pages(copy_config) == expected
    info = kittypyr("info", copy_config, "--json", check=True)
    assert '"messages": 10' in info.stdout


def test_a_restore_never_overwrites_a_storage(tmp_path, original):
    folder, config = original
    import_mail(folder, config, 0, 2)
    kittypyr("backup", config, tmp_path / "backups", check=True)
    refused = kittypyr("restore", config, tmp_path / "backups")
    assert refused.returncode == 2
    assert "exists: move it away first" in refused.stderr


def test_restore_from_an_empty_folder_says_so(tmp_path, original):
    folder, config = original
    refused = kittypyr("restore", config, tmp_path / "nothing")
    assert refused.returncode == 2
    assert "there is no backup in" in refused.stderr


def test_restore_from_an_interrupted_backup_says_so_and_makes_nothing(tmp_path):
    # What a backup interrupted before its first storage file leaves; repozo
    # said "No files in repository", and a storage folder was left behind.
    (tmp_path / "backups" / "filestorage").mkdir(parents=True)
    (tmp_path / "backups" / "filestorage" / "2026-12-07-17-39-22.index").write_text("")
    (tmp_path / "backups" / "filestorage" / "tmp.tmp").write_text("")
    config = write_config(tmp_path, uri=f"file://{tmp_path}/restored/Data.fs?blobstorage_dir={tmp_path}/restored/blobs")
    refused = kittypyr("restore", config, tmp_path / "backups")
    assert refused.returncode == 2 and "holds no complete backup (an interrupted one?)" in refused.stderr
    assert not (tmp_path / "restored").exists()


def test_other_storages_are_pointed_to_their_own_tools(tmp_path):
    config = write_config(tmp_path, uri="zeo://127.0.0.1:8100?storage=1")
    refused = kittypyr("backup", config, tmp_path / "backups")
    assert refused.returncode == 2
    assert "zeo://" in refused.stderr and "repozo" in refused.stderr and "pg_dump" in refused.stderr


@pytest.mark.parametrize("command", ["backup", "restore"])
def test_a_storage_in_memory_is_said_to_have_nothing_to_back_up(tmp_path, command):
    # It was told to back up a ZEO server's FileStorage with repozo.
    config = write_config(tmp_path, uri="memory://")
    refused = kittypyr(command, config, tmp_path / "backups")
    assert refused.returncode == 2 and "memory only" in refused.stderr and "repozo" not in refused.stderr


def test_a_backup_into_a_file_or_where_no_folder_can_be_made_is_refused(tmp_path, original):
    folder, config = original
    import_mail(folder, config, 0, 1)
    a_file = tmp_path / "notes.txt"
    a_file.write_text("notes\n")
    for target, said in ((a_file, "notes.txt is a file: give a folder"),
                         (a_file / "backups", "cannot make")):
        refused = kittypyr("backup", config, target)
        assert refused.returncode == 2, refused.stdout
        assert "Traceback" not in refused.stderr, refused.stderr
        assert said in refused.stderr and "Traceback" not in refused.stderr
    assert "give a folder this user can write to" in refused.stderr


def test_a_backup_into_a_folder_of_other_files_is_refused(tmp_path, original):
    folder, config = original
    import_mail(folder, config, 0, 1)
    elsewhere = tmp_path / "home"
    elsewhere.mkdir()
    (elsewhere / "letter.txt").write_text("Dear ...\n")
    refused = kittypyr("backup", config, elsewhere)
    assert refused.returncode == 2
    assert "holds other files and no backup: back up into a new or empty folder" in refused.stderr
    assert sorted(p.name for p in elsewhere.iterdir()) == ["letter.txt"]


@pytest.mark.parametrize("date", ["yesterday", "2024-5-1", "2024-02-30"])
def test_a_restore_date_that_is_no_date_is_refused(tmp_path, original, date):
    folder, config = original
    import_mail(folder, config, 0, 1)
    kittypyr("backup", config, tmp_path / "backups", check=True)
    copy = tmp_path / "copy"
    copy.mkdir()
    refused = kittypyr("restore", write_config(copy), tmp_path / "backups", "--date", date)
    assert refused.returncode == 2
    assert "is no date: give a UTC time as yyyy-mm-dd[-hh[-mm[-ss]]]" in refused.stderr
    assert not (copy / "var" / "Data.fs").exists()


def test_a_restore_date_before_the_first_backup_names_the_first(tmp_path, original):
    folder, config = original
    import_mail(folder, config, 0, 1)
    kittypyr("backup", config, tmp_path / "backups", check=True)
    first = min(path.stem for path in (tmp_path / "backups" / "filestorage").glob("*.fsz"))
    copy = tmp_path / "copy"
    copy.mkdir()
    # The day of the first backup is before it, as repozo reads dates.
    for date in ("2001-01-01", first[:10]):
        refused = kittypyr("restore", write_config(copy), tmp_path / "backups", "--date", date)
        assert refused.returncode == 2
        assert f"the first backup in {tmp_path / 'backups'} was made at {first} (UTC" in refused.stderr
        assert f"give --date {first} or later" in refused.stderr
        assert "Traceback" not in refused.stderr
        assert not (copy / "var" / "Data.fs").exists()
    restored = kittypyr("restore", write_config(copy), tmp_path / "backups", "--date", first)
    assert restored.returncode == 0, restored.stderr
    assert (copy / "var" / "Data.fs").exists()


def blob_files(folder):
    return sorted(path.name for path in (folder / "var" / "blobs").rglob("*.blob"))


@pytest.mark.parametrize("command", ["pack", "check", "info", "reindex", "import"])
def test_attachments_whose_storage_is_missing_are_not_given_a_new_empty_one(tmp_path, original, command):
    # What moving Data.fs away before a restore, or a slip in zodbconn.uri,
    # leaves: the blobs of an archive with no storage. A new, empty storage
    # there would delete them all at its first pack.
    folder, config = original
    import_mail(folder, config, 0, 4)
    kept = blob_files(folder)
    assert len(kept) == 4
    (folder / "var" / "Data.fs").rename(folder / "var" / "Data.fs.moved")

    arguments = [LIST, folder / "mail-0.mbox"] if command == "import" else []
    refused = kittypyr(command, config, *arguments)
    assert refused.returncode == 2, refused.stdout + refused.stderr
    assert "holds the attachments of an archive, but" in refused.stderr
    assert "Traceback" not in refused.stderr
    assert not (folder / "var" / "Data.fs").exists()
    assert blob_files(folder) == kept

    with pytest.raises(SystemExit, match="holds the attachments of an archive"):
        get_app(str(config))

    (folder / "var" / "Data.fs.moved").rename(folder / "var" / "Data.fs")
    assert pages(config)[PAGES[6]] == (200, b"reading 3\n" * 50)


@pytest.mark.parametrize("command", ["pack", "check", "info", "reindex", "quarantine", "remove-list"])
def test_commands_on_an_archive_ask_for_one_where_there_is_none(tmp_path, original, command):
    folder, config = original
    arguments = [LIST] if command == "remove-list" else []
    refused = kittypyr(command, config, *arguments)
    assert refused.returncode == 2, refused.stdout + refused.stderr
    assert "there is no archive at" in refused.stderr
    assert not (folder / "var" / "Data.fs").exists()


def three_backups(folder, config, backups):
    """A full backup and two increments, each of three more messages; the repository's files by kind, in order."""
    for first in (0, 3, 6):
        import_mail(folder, config, first, 3)
        kittypyr("backup", config, backups, check=True)
    files = sorted((backups / "filestorage").iterdir())
    return [path for path in files if path.suffix == ".fsz"], [path for path in files if path.suffix == ".deltafsz"]


def alter(path):
    """Change one byte of what the compressed ``path`` holds, compressed again as it was."""
    content = bytearray(gzip.decompress(path.read_bytes()))
    content[len(content) // 2] ^= 0xFF
    path.write_bytes(gzip.compress(bytes(content)))


@pytest.mark.parametrize("harm", ["the middle increment missing", "the last increment missing",
                                  "an increment altered"])
def test_a_restore_from_a_backup_missing_or_altering_a_file_is_refused_and_leaves_nothing(tmp_path, original,
                                                                                         harm):
    folder, config = original
    backups = tmp_path / "backups"
    _, increments = three_backups(folder, config, backups)
    assert len(increments) == 2
    if harm == "the middle increment missing":
        increments[0].unlink()
        said = f"{increments[0].name}, which the backup lists, is missing"
    elif harm == "the last increment missing":
        increments[1].unlink()
        said = f"{increments[1].name}, which the backup lists, is missing"
    else:
        alter(increments[0])
        said = "does not hold what the backup wrote"
    target = tmp_path / "restored"
    target.mkdir()
    copy_config = write_config(target)

    refused = kittypyr("restore", copy_config, backups)
    assert refused.returncode == 2, refused.stdout + refused.stderr
    assert said in refused.stderr and "Traceback" not in refused.stderr
    assert sorted(path.name for path in (target / "var").iterdir() if path.name.startswith("Data.fs")) == []


def test_a_restore_to_a_date_needs_only_the_files_up_to_it(tmp_path, original):
    folder, config = original
    backups = tmp_path / "backups"
    _, increments = three_backups(folder, config, backups)
    increments[1].unlink()
    (tmp_path / "restored").mkdir()
    copy_config = write_config(tmp_path / "restored")
    kittypyr("restore", copy_config, backups, "--date", increments[0].stem, check=True)
    assert '"messages": 6' in kittypyr("info", copy_config, "--json", check=True).stdout


def test_check_names_an_attachment_whose_file_is_gone(tmp_path, original):
    # What a backup or restore that lost a file leaves: the message, and no bytes for its attachment.
    folder, config = original
    import_mail(folder, config, 0, 3)
    assert kittypyr("check", config).returncode == 0
    lost = sorted((folder / "var" / "blobs").rglob("*.blob"))[1]
    lost.unlink()

    found = kittypyr("check", config)
    assert found.returncode == 1, found.stdout + found.stderr
    assert "its file is missing from the blob folder" in found.stdout
    assert "--repair` mends them" not in found.stdout and "restore it from a backup" in found.stdout
    # Nothing a repair can mend: it says so, and fails.
    repaired = kittypyr("check", config, "--repair")
    assert repaired.returncode == 1 and "1 problem found that no repair mends" in repaired.stdout


def test_a_backup_or_restore_that_would_leave_the_attachments_out_is_refused(tmp_path, original):
    folder, config = original
    import_mail(folder, config, 0, 2)
    kittypyr("backup", config, tmp_path / "backups", check=True)
    (tmp_path / "elsewhere").mkdir()
    (tmp_path / "mistyped").mkdir()
    without_blobs = write_config(tmp_path / "elsewhere", uri=f"file://{folder}/var/Data.fs")
    refused = kittypyr("backup", without_blobs, tmp_path / "other-backups")
    assert refused.returncode == 2 and "names no blob folder (blobstorage_dir)" in refused.stderr
    mistyped = write_config(tmp_path / "mistyped",
                            uri=f"file://{folder}/var/Data.fs?blobstorage_dir={folder}/var/blobz")
    refused = kittypyr("backup", mistyped, tmp_path / "other-backups")
    assert refused.returncode == 2 and f"the blob folder {folder}/var/blobz is not there" in refused.stderr

    target = tmp_path / "restored"
    target.mkdir()
    restored_without_blobs = write_config(target, uri=f"file://{target}/var/Data.fs")
    refused = kittypyr("restore", restored_without_blobs, tmp_path / "backups")
    assert refused.returncode == 2 and "they would not be restored" in refused.stderr
    assert not (target / "var" / "Data.fs").exists()


@pytest.mark.parametrize("inside", ["var/blobs", "var/blobs/backups"])
def test_a_backup_into_the_blob_folder_is_refused(tmp_path, original, inside):
    folder, config = original
    import_mail(folder, config, 0, 2)
    before = sorted((folder / "var" / "blobs").rglob("*"))
    refused = kittypyr("backup", config, folder / inside)
    assert refused.returncode == 2 and "is inside the blob folder" in refused.stderr
    assert sorted((folder / "var" / "blobs").rglob("*")) == before


def test_a_restore_brings_back_no_attachment_of_mail_deleted_before_its_backup(tmp_path, original):
    from pyramid.scripting import prepare

    from kittypyr import moderation
    from kittypyr.security import User

    folder, config = original
    backups = tmp_path / "backups"
    import_mail(folder, config, 0, 3)
    kittypyr("backup", config, backups, check=True)
    app = get_app(str(config))
    try:
        with prepare(registry=app.registry) as env:
            moderation.delete_messages(env["root"].lists[LIST], [message_id_hash("<bk1@example.org>")],
                                       User("admin@example.org", "Admin"), registry=app.registry)
            transaction.commit()
    finally:
        app.registry._zodb_databases[""].close()
    kittypyr("pack", config, check=True)
    kittypyr("backup", config, backups, check=True)
    # The backup folder keeps every blob it was given, the deleted one's too.
    assert any(b"reading 1\n" in path.read_bytes() for path in (backups / "blobs").rglob("*.blob"))

    target = tmp_path / "restored"
    target.mkdir()
    copy_config = write_config(target)
    kittypyr("restore", copy_config, backups, check=True)
    restored = [path.read_bytes() for path in (target / "var" / "blobs").rglob("*.blob")]
    assert not any(b"reading 1\n" in data for data in restored)
    assert any(b"reading 2\n" in data for data in restored)
    assert kittypyr("check", copy_config).returncode == 0


def test_a_relative_storage_path_is_read_as_zodburi_reads_it(tmp_path, monkeypatch):
    from kittypyr.backup import blobs_without_storage, file_storage_of

    monkeypatch.chdir(tmp_path)
    uri = "file://var/Data.fs?blobstorage_dir=var/blobs"
    (tmp_path / "var" / "blobs" / "0x01").mkdir(parents=True)
    (tmp_path / "var" / "blobs" / "0x01" / "0x03.blob").write_bytes(b"kept")
    (tmp_path / "var" / "Data.fs").write_bytes(b"FS21")
    assert file_storage_of(uri).data_fs == Path("var/Data.fs")
    assert blobs_without_storage(uri) is None
    (tmp_path / "var" / "Data.fs").unlink()
    assert "var/Data.fs does not exist" in blobs_without_storage(uri)
