"""The kittypyr command as a list admin uses it: import, info, reindex, pack."""

import gzip
import json
import os
import signal
import subprocess
import time
from datetime import datetime, timedelta, timezone
from pathlib import Path

import pytest
import transaction

from tests.functional import VENV_BIN, kittypyr, mbox_bytes, write_config
from tests.mailbuilder import make_message

LIST = "dev@lists.example.org"
START = datetime(2019, 3, 14, 9, 26, tzinfo=timezone.utc)


def corpus(count, offset=0):
    """``count`` messages in threads of five: a starter and four replies."""
    raws = []
    for n in range(offset, offset + count):
        starter = n - n % 5
        raws.append(
            make_message(
                message_id=f"<cli{n}@example.org>",
                subject=f"Topic {starter}" if n == starter else f"Re: Topic {starter}",
                sender=(f"Person {n % 7}", f"person{n % 7}@example.org"),
                date=START + timedelta(hours=n),
                in_reply_to=None if n == starter else f"<cli{n - 1}@example.org>",
                references=[] if n == starter else [f"<cli{r}@example.org>" for r in range(starter, n)],
                body=f"Body of message {n}.\nFrom the start it was clear.\n",
            )
        )
    return raws


def info(config, *args):
    result = kittypyr("info", config, *args, "--json", check=True)
    return json.loads(result.stdout)


@pytest.fixture
def config(tmp_path):
    return write_config(tmp_path)


def test_import_info_and_idempotent_rerun(tmp_path, config):
    mbox = tmp_path / "dev.mbox.gz"
    nasty = [
        make_message(message_id=None, subject="no id", sender=("N", "n@example.org"), date=START, body="x\n"),
        make_message(message_id="<skip@example.org>", subject="private", sender=("S", "s@example.org"),
                     date=START, body="secret\n", headers={"X-No-Archive": "yes"}),
    ]
    mbox.write_bytes(gzip.compress(mbox_bytes(corpus(20) + nasty)))

    result = kittypyr("import", config, LIST, mbox, "--workers", "1")
    assert result.returncode == 0, result.stderr
    assert "read 22, archived 21, duplicates 0, skipped 1, failed 0" in result.stdout
    assert "asks not to be archived" in result.stdout

    figures = info(config, LIST)
    assert figures["messages"] == 21
    assert figures["threads"] == 5
    assert figures["first_date"].startswith("2019-03-14T09:26")
    assert figures["last_date"].startswith((START + timedelta(hours=19)).isoformat()[:16])

    again = kittypyr("import", config, LIST, mbox)
    assert again.returncode == 0, again.stderr
    assert "read 22, archived 0, duplicates 21, skipped 1, failed 0" in again.stdout
    assert info(config)["messages"] == 21
    assert info(config)["lists"] == 1


def test_bad_files_are_named_and_do_not_stop_the_import(tmp_path, config):
    good = tmp_path / "good.mbox"
    good.write_bytes(mbox_bytes(corpus(5)))
    truncated = tmp_path / "truncated.mbox.gz"
    whole = gzip.compress(mbox_bytes(corpus(200, offset=100)))
    truncated.write_bytes(whole[: len(whole) // 2])
    picture = tmp_path / "picture.png"
    picture.write_bytes(b"\x89PNG\r\n\x1a\n" + bytes(range(256)) * 4)

    result = kittypyr("import", config, LIST, good, truncated, picture, "--workers", "0")
    assert result.returncode != 0
    assert "truncated.mbox.gz" in result.stdout and "picture.png" in result.stdout
    figures = info(config, LIST)
    # Everything before the truncation point was archived.
    assert 5 < figures["messages"] < 205


def pipermail_month(count):
    """A Pipermail YYYY-Month.txt: obfuscated addresses, no Content-Type."""
    parts = []
    for n in range(count):
        reply = f"In-Reply-To: <pm{n - 1}@example.org>\nReferences: <pm{n - 1}@example.org>\n" if n else ""
        parts.append(
            f"From person{n} at example.org  Thu Mar 14 09:{26 + n}:00 2019\n"
            f"From: person{n} at example.org (Person {n})\n"
            f"Date: Thu, 14 Mar 2019 09:{26 + n}:00 +0000\n"
            f"Subject: [Dev] {'Re: ' if n else ''}Topic\n"
            f"{reply}"
            f"Message-ID: <pm{n}@example.org>\n\n"
            f"Message {n} from person{n} at example.org.\n\n"
        )
    return "".join(parts)


def test_pipermail_month_with_repeated_messages(tmp_path, config):
    month = tmp_path / "2019-March.txt"
    month.write_text(pipermail_month(4) * 2)  # Pipermail sometimes holds a month twice
    result = kittypyr("import", config, LIST, month)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "archived 4, duplicates 4" in result.stdout
    figures = info(config, LIST)
    assert figures["messages"] == 4 and figures["threads"] == 1


def import_under_way(tmp_path, config, count, workers, committed_bytes, **popen):
    """``kittypyr import`` of ``count`` messages in batches of 100, running still once Data.fs holds ``committed_bytes``.

    Returns the process and the mbox.
    """
    mbox = tmp_path / "big.mbox"
    mbox.write_bytes(mbox_bytes(corpus(count)))
    data_fs = tmp_path / "var" / "Data.fs"
    process = subprocess.Popen(
        [str(VENV_BIN / "kittypyr"), "import", str(config), LIST, str(mbox),
         "--batch-size", "100", "--workers", str(workers), "--quiet"], **popen)
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline and process.poll() is None:
        if data_fs.exists() and data_fs.stat().st_size > committed_bytes:
            break
        time.sleep(0.05)
    return process, mbox


def test_kill_minus_nine_then_resume(tmp_path, config):
    count = 3000
    # Let a few batches commit, then kill it without warning.
    process, mbox = import_under_way(tmp_path, config, count, 0, 2_000_000,
                                     stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    assert process.poll() is None, "the import finished before it could be killed"
    os.kill(process.pid, signal.SIGKILL)
    process.wait()
    partial = info(config, LIST)["messages"]
    assert 0 < partial < count

    result = kittypyr("import", config, LIST, mbox)
    assert result.returncode == 0, result.stderr
    assert f"archived {count - partial}, duplicates {partial}" in result.stdout
    figures = info(config, LIST)
    assert figures["messages"] == count
    assert figures["threads"] == count // 5


def test_reindex_rebuilds_the_catalog(tmp_path, config):
    mbox = tmp_path / "dev.mbox"
    mbox.write_bytes(mbox_bytes(corpus(10)))
    kittypyr("import", config, LIST, mbox, check=True)
    result = kittypyr("reindex", config, check=True)
    assert "indexed 12 messages and threads" in result.stdout  # 10 messages + 2 threads
    assert info(config, LIST)["first_date"].startswith("2019-03-14T09:26")


def test_reindex_on_a_terminal_shows_how_far_it_is(tmp_path, config):
    """A reindex of a large archive runs for minutes: on a terminal it shows its progress, as the import does."""
    import fcntl
    import pty
    import struct
    import termios

    mbox = tmp_path / "dev.mbox"
    mbox.write_bytes(mbox_bytes(corpus(10)))
    kittypyr("import", config, LIST, mbox, check=True)
    leader, follower = pty.openpty()
    # A terminal 80 columns wide, as a window gives it (a new pty has none).
    fcntl.ioctl(follower, termios.TIOCSWINSZ, struct.pack("HHHH", 24, 80, 0, 0))
    try:
        result = subprocess.run([str(VENV_BIN / "kittypyr"), "reindex", str(config)], stdout=subprocess.PIPE,
                                stderr=follower, timeout=300, text=True)
        os.close(follower)
        shown = b""
        while True:
            try:
                chunk = os.read(leader, 65536)
            except OSError:  # the terminal's other end is closed: all of it was read
                break
            if not chunk:
                break
            shown += chunk
    finally:
        os.close(leader)
    assert result.returncode == 0 and "indexed 12 messages and threads" in result.stdout
    assert b"12/12" in shown and b"100%" in shown, shown


def _files_containing(folder, needle):
    return [path for path in Path(folder).rglob("*") if path.is_file() and needle in path.read_bytes()]


def test_pack_removes_deleted_mail_from_the_storage_files(tmp_path, config):
    from pyramid.paster import bootstrap
    from pyramid_zodbconn import get_connection

    from kittypyr import moderation
    from kittypyr.msgid import message_id_hash
    from kittypyr.security import User
    from tests.mailbuilder import attachment, multipart, text_part

    secret, figures = "hunter2xyzzy", b"secret,figures,4711-0815\n"
    leaked = make_message(
        message_id="<leak@example.org>", subject="Re: Topic 0", sender=("Leaky", "leaky@example.org"),
        date=START + timedelta(minutes=30), in_reply_to="<cli0@example.org>", references=["<cli0@example.org>"],
        body=multipart("mixed", text_part(f"my password is {secret}\n"),
                       attachment(figures, "text/csv", "figures.csv")))
    mbox = tmp_path / "dev.mbox"
    mbox.write_bytes(mbox_bytes(corpus(10) + [leaked]))
    kittypyr("import", config, LIST, mbox, "--workers", "0", check=True)

    env = bootstrap(str(config))
    try:
        mailing_list = env["root"].lists[LIST]
        moderation.delete_messages(mailing_list, [message_id_hash("<leak@example.org>")],
                                   User("admin@example.org", "Ada Admin"), "leaked password")
        transaction.commit()
        # While the storage is open here, packing is refused with a reason.
        busy = kittypyr("pack", config)
        assert busy.returncode == 2 and "in use" in busy.stderr
    finally:
        db = get_connection(env["request"]).db()
        env["closer"]()
        db.close()

    var = tmp_path / "var"
    # Deleted, but still in the file's history until it is packed.
    assert _files_containing(var, secret.encode()) and _files_containing(var / "blobs", figures)
    result = kittypyr("pack", config)
    assert result.returncode == 0, result.stderr
    assert result.stdout.startswith("packed: ")
    assert _files_containing(var, secret.encode()) == []
    assert _files_containing(var, b"Leaky") == []
    assert _files_containing(var, figures) == []
    assert not (var / "Data.fs.old").exists() and not (var / "blobs.old").exists()
    # The rest of the archive is intact.
    figures_now = info(config, LIST)
    assert figures_now["messages"] == 10 and figures_now["attachments"] == 0
    # Importing the same mailbox again does not bring the deleted message back.
    again = kittypyr("import", config, LIST, mbox, "--workers", "0", check=True)
    assert "read 11, archived 0, duplicates 10, skipped 1, failed 0" in again.stdout
    assert "deleted from the archive by its administrators" in again.stdout
    assert info(config, LIST)["messages"] == 10


def test_pack_of_a_storage_in_use_says_what_can_be_done_on_this_site(tmp_path):
    """The administration page packs while serving, where there is one: a stand-alone archive has none."""
    from ZODB.FileStorage import FileStorage

    for name, extra, admin_page in (("alone", "", False),
                                    ("wired", "kittypyr.mailman_url = http://127.0.0.1:9/", True)):
        (tmp_path / name).mkdir()
        config = write_config(tmp_path / name, extra=extra)
        held = FileStorage(str(tmp_path / name / "var" / "Data.fs"))  # as a running server holds it
        try:
            result = kittypyr("pack", config)
        finally:
            held.close()
        assert result.returncode == 2
        assert result.stderr.startswith("kittypyr pack: the storage is in use"), result.stderr
        assert ("/admin/" in result.stderr) is admin_page, result.stderr
        assert "INFO" not in result.stderr and "Traceback" not in result.stderr


def test_pack_leaves_no_old_copy_of_a_filestorage_with_its_own_blobs(zodb, tmp_path):
    from ZODB.blob import Blob

    from kittypyr.packing import pack_storage

    connection = zodb.open()
    root = connection.root()
    root["kept"], root["deleted"] = Blob(b"kept bytes"), Blob(b"deleted bytes 4711")
    transaction.commit()
    del root["deleted"]
    transaction.commit()
    before, after = pack_storage(zodb)
    assert after < before
    assert not (tmp_path / "Data.fs.old").exists() and not (tmp_path / "blobs.old").exists()
    assert _files_containing(tmp_path, b"deleted bytes 4711") == []
    assert _files_containing(tmp_path / "blobs", b"kept bytes")
    connection.close()


def test_a_pack_while_serving_keeps_the_blob_of_a_commit_under_way(tmp_path):
    """The web server packs while Mailman archives: a commit that has written its blob file, not yet finished."""
    import threading

    from ZODB import DB
    from ZODB.blob import Blob, BlobStorage
    from ZODB.Connection import TransactionMetaData
    from ZODB.FileStorage import FileStorage
    from ZODB.utils import p64

    from kittypyr.packing import pack_storage

    # As zodburi makes a file:// storage with blobstorage_dir.
    storage = BlobStorage(str(tmp_path / "blobs"), FileStorage(str(tmp_path / "Data.fs")))
    db = DB(storage)
    connection = db.open()
    connection.root()["old"] = Blob(b"old bytes")
    transaction.commit()
    connection.close()

    walking, stored, walked = threading.Event(), threading.Event(), threading.Event()
    walk = storage.fshelper.listOIDs

    def slow_walk():
        walking.set()
        stored.wait(timeout=2)  # the commit below, if it can store meanwhile
        yield from walk()
        walked.set()

    storage.fshelper.listOIDs = slow_walk
    packing = threading.Thread(target=pack_storage, args=(db,))
    packing.start()
    assert walking.wait(timeout=60)

    # A commit of a new blob, by hand: its file is written at store, its record at finish.
    oid = storage.new_oid()
    blob_file = tmp_path / "new.blob"
    blob_file.write_bytes(b"archived during the pack")
    meta = TransactionMetaData()

    def commit():
        storage.tpc_begin(meta)
        storage.storeBlob(oid, p64(0), _blob_record(), str(blob_file), "", meta)
        stored.set()
        walked.wait(timeout=5)  # finished only once the pack has looked at the blob folder
        storage.tpc_vote(meta)
        return storage.tpc_finish(meta)

    committing = threading.Thread(target=commit)
    committing.start()
    packing.join(timeout=60)
    committing.join(timeout=60)
    assert not packing.is_alive() and not committing.is_alive()
    with open(storage.loadBlob(oid, storage.lastTransaction()), "rb") as kept:
        assert kept.read() == b"archived during the pack"
    db.close()


def _blob_record():
    """The pickle of an empty Blob's state, as a Connection stores it."""
    import io
    import pickle

    from ZODB.blob import Blob

    out = io.BytesIO()
    pickler = pickle.Pickler(out, 3)
    pickler.dump((Blob, None))
    pickler.dump(None)
    return out.getvalue()


def test_joined_months_import_every_message_and_report_doubtful_splits(tmp_path, config):
    # `cat 20*.txt > dev.mbox`: the early months have real addresses in their
    # envelope lines, the later ones are Pipermail's, whose envelope follows
    # a body without a final newline directly.
    early = pipermail_month(3).replace(" at example.org  ", "@example.org  ", 3)
    late = pipermail_month(6)[len(pipermail_month(3)):].replace(".\n\nFrom person", ".\nFrom person")
    # One envelope written by neither Pipermail nor an mbox writer, glued to
    # the line before it: split, and said so.
    late += "Url : http://example.org/a.bin\nFrom person6@example.org Thu, 14 Mar 2019 09:40:00 +0000\n"
    late += "From: person6 at example.org (Person 6)\nMessage-ID: <pm6@example.org>\n\nLast.\n"
    mbox = tmp_path / "dev.mbox"
    mbox.write_text(early + late)
    glued_line = (early + late).splitlines().index(
        "From person6@example.org Thu, 14 Mar 2019 09:40:00 +0000") + 1

    result = kittypyr("import", config, LIST, mbox, "--workers", "1")

    assert result.returncode == 0, result.stdout + result.stderr
    assert "read 7, archived 7, duplicates 0, skipped 0, failed 0" in result.stdout
    # Pipermail's own glued envelopes are no doubt; the other one is.
    assert result.stdout.count("doubtful split") == 1
    assert f"doubtful split: {mbox}, message 7, line {glued_line} (byte " in result.stdout
    assert info(config, LIST)["messages"] == 7


def test_unreadable_maildir_entries_fail_and_the_rest_is_imported(tmp_path, config):
    maildir = tmp_path / "Maildir"
    for sub in ("cur", "new", "tmp"):
        (maildir / sub).mkdir(parents=True)
    for n, raw in enumerate(corpus(4)):
        (maildir / "cur" / f"12000000{n}0.M{n}.host:2,S").write_bytes(raw)
    (maildir / "cur" / "1200000015.M9.host:2,S").symlink_to(tmp_path / "moved-away")
    (maildir / "new" / "1200000016.M8.host").mkdir()

    result = kittypyr("import", config, LIST, maildir, "--workers", "0")

    assert result.returncode == 1
    assert "read 6, archived 4, duplicates 0, skipped 0, failed 2" in result.stdout
    assert (f"failed: {maildir}, message 3 (cur/1200000015.M9.host:2,S): No such file or directory"
            in result.stdout)
    assert (f"failed: {maildir}, message 4 (new/1200000016.M8.host): a directory, not a message file"
            in result.stdout)
    assert info(config, LIST)["messages"] == 4


def test_a_maildir_names_the_file_of_each_message_it_reports_and_its_subfolders(tmp_path, config):
    """"message 3" of a folder is no file one can open: the summary names it; a Maildir++ subfolder
    (.2007/) is mail of its own, which the import does not take along without a word."""
    maildir = tmp_path / "Maildir"
    for sub in ("cur", "new", "tmp", ".2007/cur", ".2007/new"):
        (maildir / sub).mkdir(parents=True)
    for n, raw in enumerate(corpus(2)):
        (maildir / "cur" / f"12000000{n}0.M{n}.host:2,S").write_bytes(raw)
    (maildir / "new" / "notes.txt").write_bytes(b"just some text file")
    (maildir / "new" / "quiet").write_bytes(b"X-No-Archive: yes\nMessage-ID: <q@example.org>\nSubject: q\n\nq\n")
    (maildir / ".2007" / "cur" / "1100000000.M1.host:2,S").write_bytes(corpus(3)[2])

    result = kittypyr("import", config, LIST, maildir, "--workers", "0")

    assert f"failed: {maildir}, message 3 (new/notes.txt): not parseable" in result.stdout, result.stdout
    assert "(message 4 (new/quiet))" in result.stdout, result.stdout
    assert f"{maildir}/.2007" in result.stdout and "not read" in result.stdout, result.stdout
    assert result.returncode == 1


def test_import_says_which_policy_a_new_list_got_and_why(tmp_path, config):
    mbox = tmp_path / "dev.mbox"
    mbox.write_bytes(mbox_bytes(corpus(5)))
    result = kittypyr("import", config, LIST, mbox, "--workers", "0", check=True)
    assert f"new list {LIST}: public, no Mailman core is configured" in result.stdout
    assert f"list {LIST}: public" in kittypyr("import", config, LIST, mbox, "--workers", "0").stdout
    result = kittypyr("import", config, LIST, mbox, "--workers", "0", "--policy", "private", check=True)
    assert f"list {LIST}: now private, as given by --policy" in result.stdout
    # Without Mailman nobody logs in: a private list is one nobody reads, which the summary says.
    assert "nobody can read it" in result.stdout and "kittypyr.mailman_url" in result.stdout
    # Said again by the next import, which gave none.
    result = kittypyr("import", config, LIST, mbox, "--workers", "0", check=True)
    assert f"list {LIST}: private, as an earlier import's --policy gave it" in result.stdout


def test_a_new_list_is_private_while_mailman_cannot_say(tmp_path):
    from tests.functional import free_port, served

    port = free_port()
    config = write_config(tmp_path, port=port, extra=f"kittypyr.mailman_url = http://127.0.0.1:{free_port()}")
    mbox = tmp_path / "dev.mbox"
    mbox.write_bytes(mbox_bytes(corpus(5)))
    result = kittypyr("import", config, LIST, mbox, "--workers", "0", check=True)
    assert f"new list {LIST}: private, Mailman core could not be reached" in result.stdout
    other = "ops@lists.example.org"
    result = kittypyr("import", config, other, mbox, "--workers", "0", "--policy", "public", check=True)
    assert f"new list {other}: public, as given by --policy" in result.stdout
    import urllib.error
    import urllib.request

    with served(config, port) as url:
        with pytest.raises(urllib.error.HTTPError) as refused:
            urllib.request.urlopen(f"{url}/list/{LIST}/", timeout=30)
        assert refused.value.code == 403
        with urllib.request.urlopen(f"{url}/list/{other}/", timeout=30) as page:
            assert page.status == 200
        with urllib.request.urlopen(f"{url}/api/lists/", timeout=30) as page:
            listed = page.read().decode()
        assert other in listed and LIST not in listed


def test_import_refuses_what_is_no_list_address(tmp_path, config):
    mbox = tmp_path / "dev.mbox"
    mbox.write_bytes(mbox_bytes(corpus(1)))
    result = kittypyr("import", config, "../x@y", mbox)
    assert result.returncode == 2 and "is not a list's posting address" in result.stderr
    assert "Traceback" not in result.stderr


def test_an_importer_whose_new_list_another_importer_made_first_imports_into_it(tmp_path, config, monkeypatch,
                                                                                   capsys):
    # Two importers of one new list started at once: both make the list, and
    # the one that commits second conflicts. It must start over and find the
    # list made, not stop with a ConflictError.
    from kittypyr import cli
    from kittypyr.archiving import ensure_mailing_list
    from kittypyr.bootstrap import ROOT_KEY

    mbox = tmp_path / "dev.mbox"
    mbox.write_bytes(mbox_bytes(corpus(10)))
    prepare = cli.prepare_list
    raced = []

    def other_importer_first(archive, registry, list_address, policy=None, subject_prefix=None):
        line = prepare(archive, registry, list_address, policy, subject_prefix)
        if not raced:
            raced.append(archive._p_jar.db())
            manager = transaction.TransactionManager()
            other = archive._p_jar.db().open(transaction_manager=manager)
            try:
                ensure_mailing_list(other.root()[ROOT_KEY], list_address)
                manager.commit()
            finally:
                other.close()
        return line

    monkeypatch.setattr(cli, "prepare_list", other_importer_first)
    assert cli.main(["import", str(config), LIST, str(mbox), "--workers", "0", "--quiet"]) == 0
    raced[0].close()  # the command leaves its database to the process
    assert "read 10, archived 10, duplicates 0" in capsys.readouterr().out
    assert info(config, LIST)["messages"] == 10


def test_a_pipe_or_fifo_given_as_a_file_is_refused_and_nothing_is_lost(tmp_path, config):
    # `kittypyr import CONFIG LIST <(zcat old.mbox.gz)` names a pipe: what
    # one reading of it takes is gone for the next, and the import reads a
    # file more than once (to see what it is, then to split it).
    import threading

    data = mbox_bytes(corpus(400))  # more than the first look at a file reads
    reader, writer = os.pipe()

    def feed():
        with open(writer, "wb") as pipe:
            try:
                pipe.write(data)
            except BrokenPipeError:
                pass

    feeding = threading.Thread(target=feed)
    feeding.start()
    try:
        process = subprocess.Popen(
            [str(VENV_BIN / "kittypyr"), "import", str(config), LIST, f"/dev/fd/{reader}", "--workers", "0",
             "--quiet"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, pass_fds=(reader,))
    finally:
        os.close(reader)
    out, err = process.communicate(timeout=300)
    feeding.join(timeout=60)
    assert process.returncode == 1, out + err
    assert f"error: /dev/fd/{reader}: not a regular file" in out
    assert "save it to a file" in out and "Traceback" not in err

    # A FIFO nobody writes to: refused at once, not waited on forever.
    fifo = tmp_path / "dev.mbox"
    os.mkfifo(fifo)
    result = kittypyr("import", config, LIST, fifo, "--workers", "1", timeout=120)
    assert result.returncode == 1
    assert f"error: {fifo}: not a regular file" in result.stdout


def test_an_mbox_whose_first_envelope_line_is_missing_is_split_and_says_so(tmp_path, config):
    # The first line cut off (by hand, by a tool that saved a message, then
    # appended others): the file starts like a single message, yet holds five.
    data = mbox_bytes(corpus(5))
    mbox = tmp_path / "dev.mbox"
    mbox.write_bytes(data.split(b"\n", 1)[1])
    second = data.split(b"\n", 1)[1].splitlines().index(b"From someone@example.org Thu Jan  1 00:00:00 2020") + 1

    result = kittypyr("import", config, LIST, mbox, "--workers", "0")

    assert result.returncode == 0, result.stdout + result.stderr
    assert "read 5, archived 5, duplicates 0, skipped 0, failed 0" in result.stdout
    assert (f"doubtful split: {mbox}, message 2, line {second} (byte " in result.stdout
            and "starts without an envelope line" in result.stdout)
    assert info(config, LIST)["messages"] == 5


def test_bzip2_and_xz_archives_are_imported_and_a_cut_one_is_named(tmp_path, config):
    import bz2
    import lzma

    whole = tmp_path / "dev.mbox.bz2"
    whole.write_bytes(bz2.compress(mbox_bytes(corpus(10))))
    packed = lzma.compress(mbox_bytes(corpus(10, offset=10)))
    cut = tmp_path / "dev.mbox.xz"
    cut.write_bytes(packed[:-40])

    result = kittypyr("import", config, LIST, whole, cut, "--workers", "1")

    assert result.returncode == 1, result.stdout + result.stderr
    assert "not mail" not in result.stdout and "Traceback" not in result.stderr
    assert f"error: {cut}: compressed data ends early (truncated file?) (after " in result.stdout
    messages = info(config, LIST)["messages"]
    assert 10 < messages < 20
    assert f"read {messages}, archived {messages}, duplicates 0, skipped 0, failed 0" in result.stdout


def test_each_skipped_message_is_named_by_its_place_in_the_file(tmp_path, config):
    quiet = {"X-No-Archive": "yes"}
    raws = corpus(5)
    for n in (1, 4):
        raws[n] = make_message(message_id=f"<quiet{n}@example.org>", subject="off the record",
                               sender=("Q", "q@example.org"), date=START, body="secret\n", headers=quiet)
    mbox = tmp_path / "dev.mbox"
    mbox.write_bytes(mbox_bytes(raws))

    result = kittypyr("import", config, LIST, mbox, "--workers", "1")

    assert result.returncode == 0, result.stdout + result.stderr
    assert "read 5, archived 3, duplicates 0, skipped 2, failed 0" in result.stdout
    assert f"skipped 2 in {mbox}: the message asks not to be archived (messages 2, 5)" in result.stdout


def test_a_file_name_that_is_not_utf8_is_printed_as_it_is(tmp_path, config):
    # Old archives keep names in Latin-1; stdout of a UTF-8 locale (here
    # as PYTHONIOENCODING says it) is strict.
    folder = os.fsencode(tmp_path)
    quiet = folder + b"/caf\xe9.mbox"
    with open(quiet, "wb") as f:
        f.write(mbox_bytes([make_message(message_id="<quiet@example.org>", headers={"X-No-Archive": "yes"})]))
    broken = folder + b"/r\xe9sum\xe9.mbox"
    with open(broken, "wb") as f:
        f.write(b"not mail at all\n")

    result = subprocess.run([str(VENV_BIN / "kittypyr"), "import", str(config), LIST, quiet, broken,
                             "--workers", "0"], capture_output=True, timeout=300,
                            env={**os.environ, "PYTHONIOENCODING": "utf-8"})

    assert result.returncode == 1, result.stdout + result.stderr
    assert b"Traceback" not in result.stderr, result.stderr.decode(errors="replace")
    assert b"skipped 1 in " + quiet + b": the message asks not to be archived" in result.stdout
    assert b"error: " + broken + b": not mail" in result.stdout
    assert f"new list {LIST}".encode() in result.stdout


def test_an_import_that_reads_nothing_makes_no_list(tmp_path, config):
    """A mistyped path, or a file with no mail in it, must not leave an empty list on the archive's index."""
    garbage = tmp_path / "garbage.mbox"
    garbage.write_bytes(bytes(range(256)) * 8)
    for address, paths in (("typo@lists.example.org", [tmp_path / "nonexistent.mbox"]),
                           ("junk@lists.example.org", [garbage, tmp_path / "empty"])):
        (tmp_path / "empty").write_bytes(b"")
        result = kittypyr("import", config, address, *paths, "--workers", "0")
        assert result.returncode == 1, result.stdout + result.stderr
        assert f"no list made: nothing was read for {address}" in result.stdout
        assert f"new list {address}" not in result.stdout
    assert info(config)["mailing_lists"] == []
    # A list that was there stays, read or not.
    mbox = tmp_path / "dev.mbox"
    mbox.write_bytes(mbox_bytes(corpus(3)))
    kittypyr("import", config, LIST, mbox, "--workers", "0", check=True)
    again = kittypyr("import", config, LIST, tmp_path / "nonexistent.mbox", "--workers", "0")
    assert again.returncode == 1 and f"list {LIST}: " in again.stdout
    assert info(config)["mailing_lists"] == [LIST]
    assert f"\nmailing_lists: {LIST}\n" in kittypyr("info", config, check=True).stdout


def test_mail_without_a_date_takes_the_date_of_the_message_before_it(tmp_path, config):
    """Not the time of the import: an old list's undated mail would show as its newest."""
    undated = [make_message(message_id=f"<undated{n}@example.org>", subject=f"Undated {n}", date=None)
               for n in range(2)]
    mail = [corpus(1)[0], undated[0], corpus(2)[1], undated[1]]
    # Envelope lines of 1970, as mailers without a clock wrote them: no date either.
    mbox = tmp_path / "old.mbox"
    mbox.write_bytes(mbox_bytes(mail).replace(b"Thu Jan  1 00:00:00 2020", b"Thu Jan  1 00:00:00 1970"))

    result = kittypyr("import", config, LIST, mbox, "--workers", "1", check=True)

    assert f"dated 2 messages in {mbox} by the message before them: no usable Date, Received or envelope date" \
        in result.stdout
    dates = info(config, LIST)
    assert dates["first_date"].startswith("2019-03-14T09:26") and dates["last_date"].startswith("2019-03-14T10:26")


def test_the_summary_counts_what_was_repaired_and_the_page_says_how(tmp_path, config):
    """Archived as well as it could be, each repair noted: the import counts them, the message's page lists them."""
    bad_date = make_message(message_id="<baddate@example.org>", subject="Bad date", date="someday soon",
                            headers={"Received": "from a by b; Thu, 14 Mar 2019 11:00:00 +0000"})
    stray = make_message(message_id="<stray@example.org>", subject="Stray byte",
                         body="Déjà vu, François.\n".encode() + b"That\x92s all.\n", charset="utf-8")
    mbox = tmp_path / "repairs.mbox"
    mbox.write_bytes(mbox_bytes([corpus(1)[0], bad_date, stray]))

    result = kittypyr("import", config, LIST, mbox, "--workers", "1", check=True)

    assert f"repaired 2 messages in {mbox} while reading them (each message's page lists how)" in result.stdout
    assert f"dated 1 message in {mbox} by its Received or envelope date: no usable Date header" in result.stdout
    from pyramid.paster import bootstrap
    from webtest import TestApp

    from kittypyr.msgid import message_id_hash

    env = bootstrap(str(config))
    try:
        assert env["root"].lists[LIST].messages[message_id_hash("<baddate@example.org>")].date.hour == 11
        page = TestApp(env["app"]).get(f"/list/{LIST}/message/{message_id_hash('<stray@example.org>')}/")
        repairs = page.html.select_one("details.repairs")
        assert "text is not valid utf-8; read as utf-8, 1 byte of another charset read as windows-1252" in repairs.text
        plain = TestApp(env["app"]).get(f"/list/{LIST}/message/{message_id_hash('<cli0@example.org>')}/")
        assert plain.html.select_one("details.repairs") is None
    finally:
        env["closer"]()


def test_bytes_after_the_last_gzip_member_cost_no_message(tmp_path, config):
    # zcat reads it ("decompression OK, trailing garbage ignored"): so does the import, and says what it left.
    mbox = tmp_path / "dev.mbox.gz"
    mbox.write_bytes(gzip.compress(mbox_bytes(corpus(5))) + b"trailing garbage\n")

    result = kittypyr("import", config, LIST, mbox, "--workers", "0")

    assert result.returncode == 1
    assert "read 5, archived 5, duplicates 0, skipped 0, failed 0" in result.stdout
    assert (f"error: {mbox}: corrupt compressed data (Error -3 while decompressing data: incorrect header check)"
            " where a new compressed member starts (after 5 complete messages, all read)") in result.stdout


def test_a_byte_order_mark_before_the_first_line_is_no_reason_to_refuse_a_file(tmp_path, config):
    # Saved by an editor that puts a UTF-8 byte-order mark first.
    bom = b"\xef\xbb\xbf"
    mbox = tmp_path / "dev.mbox"
    mbox.write_bytes(bom + mbox_bytes(corpus(5)))
    single = tmp_path / "one.eml"
    single.write_bytes(bom + corpus(6)[5])

    result = kittypyr("import", config, LIST, mbox, single, "--workers", "0")

    assert result.returncode == 0, result.stdout + result.stderr
    assert "read 6, archived 6, duplicates 0, skipped 0, failed 0" in result.stdout
    assert info(config, LIST)["threads"] == 2  # the single message replies to the fifth


def test_a_file_that_starts_inside_a_message_is_read_from_its_first_envelope_line(tmp_path, config):
    # `split -b` of a large mbox: the second part starts in the middle of a message.
    data = mbox_bytes(corpus(10))
    cut = data.index(b"Body of message 3.") + 5
    first, second = tmp_path / "dev.mbox.aa", tmp_path / "dev.mbox.ab"
    first.write_bytes(data[:cut])
    second.write_bytes(data[cut:])
    envelope = data[cut:].index(b"\nFrom someone@example.org") + 1
    line = data[cut:][:envelope].count(b"\n") + 1

    result = kittypyr("import", config, LIST, first, second, "--workers", "1")

    assert result.returncode == 1, result.stdout + result.stderr
    assert "read 11, archived 10, duplicates 0, skipped 0, failed 1" in result.stdout
    assert (f"failed: {second}, message 1: the file starts inside a message: what comes before its first"
            f" envelope line, at line {line} (byte {envelope}), is not imported") in result.stdout
    assert info(config, LIST)["messages"] == 10


def test_a_parser_process_killed_midway_stops_the_import_with_a_summary_that_adds_up(tmp_path, config):
    # As the system's out-of-memory killer would (a gzip bomb, say).
    import re

    count = 3000
    process, mbox = import_under_way(tmp_path, config, count, 1, 1_000_000,
                                     stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    children = Path(f"/proc/{process.pid}/task/{process.pid}/children").read_text().split()
    parsers = [int(c) for c in children
               if b"spawn_main" in Path(f"/proc/{c}/cmdline").read_bytes()
               and b"resource_tracker" not in Path(f"/proc/{c}/cmdline").read_bytes()]
    assert len(parsers) == 1, children
    os.kill(parsers[0], signal.SIGKILL)
    out, err = process.communicate(timeout=300)

    assert process.returncode == 1, out + err
    assert "Traceback" not in err, err
    assert "error: parser process kittypyr-parser-0 died (killed by signal 9): the import stopped there" in out
    read, archived, duplicates, skipped, failed = map(int, re.search(
        r"read (\d+), archived (\d+), duplicates (\d+), skipped (\d+), failed (\d+)", out).groups())
    assert 0 < read < count and read == archived + duplicates + skipped + failed
    assert info(config, LIST)["messages"] == archived

    again = kittypyr("import", config, LIST, mbox, "--workers", "1")
    assert again.returncode == 0, again.stdout + again.stderr
    assert f"archived {count - archived}, duplicates {archived}" in again.stdout
    assert info(config, LIST)["messages"] == count


def test_maildir_messages_compressed_as_dovecot_keeps_them_are_read(tmp_path, config):
    import bz2

    maildir = tmp_path / "Maildir"
    for sub in ("cur", "new", "tmp"):
        (maildir / sub).mkdir(parents=True)
    raws = corpus(4)
    (maildir / "cur" / "1200000000.M1.host,S=1:2,S").write_bytes(raws[0])
    (maildir / "cur" / "1200000001.M2.host,S=1:2,SZ").write_bytes(gzip.compress(raws[1]))
    (maildir / "cur" / "1200000002.M3.host,S=1:2,SZ").write_bytes(bz2.compress(raws[2]))
    (maildir / "cur" / "1200000003.M4.host,S=1:2,SZ").write_bytes(gzip.compress(raws[3])[:-20])

    result = kittypyr("import", config, LIST, maildir, "--workers", "0")

    assert result.returncode == 1
    assert "read 4, archived 3, duplicates 0, skipped 0, failed 1" in result.stdout
    assert (f"failed: {maildir}, message 4 (cur/1200000003.M4.host,S=1:2,SZ): compressed data ends early"
            in result.stdout)
    assert info(config, LIST)["threads"] == 1


def test_an_mbox_whose_lines_end_in_a_carriage_return_alone_is_read(tmp_path, config):
    # As classic Mac OS mail programs wrote it.
    mbox = tmp_path / "dev.mbox"
    mbox.write_bytes(mbox_bytes(corpus(5)).replace(b"\n", b"\r"))

    result = kittypyr("import", config, LIST, mbox, "--workers", "0")

    assert result.returncode == 0, result.stdout + result.stderr
    assert "read 5, archived 5, duplicates 0, skipped 0, failed 0" in result.stdout
    assert info(config, LIST)["threads"] == 1


def test_a_storage_that_cannot_grow_stops_the_import_with_a_summary_and_a_second_run_finishes(tmp_path, config):
    # A disk that fills as the storage grows. A limit on the size of a file
    # stands in for it: writing past it fails as writing to a full disk does.
    import re
    import resource

    count = 1200
    mbox = tmp_path / "dev.mbox"
    mbox.write_bytes(mbox_bytes(corpus(count)))

    def small_files():
        resource.setrlimit(resource.RLIMIT_FSIZE, (600_000, 600_000))

    stopped = kittypyr("import", config, LIST, mbox, "--batch-size", "100", "--workers", "1",
                       preexec_fn=small_files)
    assert stopped.returncode == 1, stopped.stdout + stopped.stderr
    assert "Traceback" not in stopped.stderr, stopped.stderr
    assert "error: the storage could not be written (File too large" in stopped.stdout
    assert "the import stopped there; the last 100 messages read were not stored" in stopped.stdout
    read, archived, duplicates, skipped, failed = map(int, re.search(
        r"read (\d+), archived (\d+), duplicates (\d+), skipped (\d+), failed (\d+)", stopped.stdout).groups())
    assert 0 < archived < count and failed == 0 and read == archived + 100
    assert info(config, LIST)["messages"] == archived

    again = kittypyr("import", config, LIST, mbox)
    assert again.returncode == 0, again.stdout + again.stderr
    assert f"archived {count - archived}, duplicates {archived}, skipped 0, failed 0" in again.stdout
    assert info(config, LIST)["messages"] == count
    assert "everything agrees" in kittypyr("check", config, check=True).stdout


def test_any_command_that_finds_no_room_to_write_says_so_in_one_line(tmp_path, config):
    import resource

    mbox = tmp_path / "dev.mbox"
    mbox.write_bytes(mbox_bytes(corpus(200)))
    kittypyr("import", config, LIST, mbox, check=True)
    size = (tmp_path / "var" / "Data.fs").stat().st_size

    def no_room():
        # As a full disk would: the storage cannot grow past a few kilobytes more.
        resource.setrlimit(resource.RLIMIT_FSIZE, (size + 20_000, size + 20_000))

    result = kittypyr("reindex", config, preexec_fn=no_room)
    assert result.returncode == 1
    assert result.stderr.strip() == ("kittypyr reindex: the storage could not be written (File too large): what "
                                     "the command had committed is kept; free space on that disk and run the "
                                     "same command again")
    assert kittypyr("reindex", config).returncode == 0
    assert info(config, LIST)["messages"] == 200


def _archived_before_cjk_words_were_split(tmp_path, monkeypatch):
    from pyramid.scripting import prepare

    from tests.test_app import make_app
    from tests.test_search_recall import CJK_CORPUS, archive_as_before_cjk_words_were_split

    application = make_app(tmp_path / "var")  # the storage the configuration names
    archive_as_before_cjk_words_were_split(application, CJK_CORPUS, monkeypatch)
    with prepare(registry=application.registry):
        transaction.commit()  # upgraded by the root factory, as at start-up
    application.registry._zodb_databases[""].close()


@pytest.mark.parametrize("cjk_only", [True, False])
def test_reindex_indexes_again_the_mail_archived_before_cjk_words_were_split(tmp_path, config, monkeypatch,
                                                                               cjk_only):
    from tests.test_app import make_app
    from tests.test_search_recall import found

    _archived_before_cjk_words_were_split(tmp_path, monkeypatch)
    advice = f"kittypyr reindex {config} --cjk"
    assert advice in kittypyr("info", config, check=True).stdout
    if cjk_only:
        result = kittypyr("reindex", config, "--cjk", check=True)
        assert "indexed again 5 messages" in result.stdout  # the Chinese, Japanese and Korean ones
    else:
        kittypyr("reindex", config, check=True)
    assert advice not in kittypyr("info", config, check=True).stdout

    application = make_app(tmp_path / "var")
    try:
        assert found(application, "内核")[0] == [31, 32]
        assert found(application, "内核补丁")[0] == [31]
        assert found(application, "核")[0] == [31, 32]
        assert found(application, "カーネル")[0] == [33]
        assert found(application, "패치")[0] == [34]
        assert found(application, "subject:补丁")[0] == [31]
        assert found(application, "kernel")[0] == [35]
    finally:
        application.registry._zodb_databases[""].close()


@pytest.mark.parametrize("uri", [
    "zeo://127.0.0.1:{port}?storage=1&wait_timeout=1&blob_dir={folder}/blob-cache&shared_blob_dir=false",
    "postgres://kittypyr:secret-word@127.0.0.1:{port}/kittypyr?blob_dir={folder}/blob-cache&shared_blob_dir=false",
    "postgres://x",
])
def test_a_storage_server_that_cannot_be_reached_is_one_line_not_a_traceback(tmp_path, uri):
    """The README's ZEO and PostgreSQL URIs with no server behind them: what to check, no traceback,
    and no password printed."""
    from tests.functional import free_port

    config = write_config(tmp_path, uri=uri.format(port=free_port(), folder=tmp_path))
    result = kittypyr("info", config)
    assert result.returncode != 0
    assert "Traceback" not in result.stderr + result.stdout, result.stderr
    assert "cannot open the storage" in result.stderr and "server" in result.stderr, result.stderr
    assert "secret-word" not in result.stderr
    # The storage library may log its own line first; the last says what to do.
    assert "cannot open the storage" in result.stderr.strip().splitlines()[-1], result.stderr


def test_output_cut_short_by_its_reader_is_no_traceback(tmp_path, config):
    """``kittypyr info … | head``: the reader goes away; nothing went wrong for the archive."""
    mbox = tmp_path / "dev.mbox"
    mbox.write_bytes(mbox_bytes(corpus(3)))
    kittypyr("import", config, LIST, mbox, "--workers", "0", check=True)
    # The reading end closed before anything is written: as certain as a reader gone.
    process = subprocess.Popen([str(VENV_BIN / "kittypyr"), "info", str(config), "--json"],
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    process.stdout.close()
    _, errors = process.communicate(timeout=120)
    assert b"Traceback" not in errors and b"BrokenPipe" not in errors, errors.decode()


def test_ctrl_c_in_the_middle_of_a_load_or_a_pack_is_not_logged_with_its_traceback(capsys):
    """ZODB logs the exception that went through a pack or a record's load; Ctrl-C is told in one line."""
    import logging

    from kittypyr import cli

    cli._quiet_about_ctrl_c()
    handler = logging.StreamHandler()
    logging.getLogger().addHandler(handler)
    try:
        for name in ("ZODB.DB", "ZODB.Connection"):
            try:
                raise KeyboardInterrupt
            except KeyboardInterrupt:
                logging.getLogger(name).exception("packing")
        try:
            raise ValueError("a real failure")
        except ValueError:
            logging.getLogger("ZODB.DB").exception("packing")
    finally:
        logging.getLogger().removeHandler(handler)
    errors = capsys.readouterr().err
    assert "KeyboardInterrupt" not in errors
    assert "a real failure" in errors


def test_a_pack_on_a_full_disk_is_told_in_one_line_and_counts_as_no_pack(tmp_path, config, monkeypatch, capsys):
    import errno
    import logging

    from ZODB.blob import BlobStorage
    from ZODB.DB import DB
    from ZODB.FileStorage import FileStorage

    from kittypyr import cli
    from kittypyr.bootstrap import ROOT_KEY

    mbox = tmp_path / "dev.mbox"
    mbox.write_bytes(mbox_bytes(corpus(5)))
    kittypyr("import", config, LIST, mbox, "--workers", "0", check=True)

    def full(self, *args):
        raise OSError(errno.ENOSPC, "No space left on device", str(tmp_path / "var" / "Data.fs.pack"))

    monkeypatch.setattr(BlobStorage, "pack", full)
    handler = logging.StreamHandler()
    logging.getLogger().addHandler(handler)
    try:
        assert cli.main(["pack", str(config)]) == 1
    finally:
        logging.getLogger().removeHandler(handler)
    said = capsys.readouterr().err
    assert "kittypyr pack: the storage could not be written (No space left on device" in said
    assert "Traceback" not in said and "packing" not in said

    db = DB(FileStorage(str(tmp_path / "var" / "Data.fs"), read_only=True))
    try:
        assert db.open().root()[ROOT_KEY].packed_at is None
    finally:
        db.close()


def test_make_serve_says_when_its_port_is_taken(tmp_path):
    """Another program on the port: one line naming it and what to change, not pserve's traceback."""
    import socket

    from tests.functional import free_port

    port = free_port()
    config = write_config(tmp_path, port=port)
    check = [str(VENV_BIN / "python"), "-m", "kittypyr.listen_check", str(config)]
    assert subprocess.run(check, capture_output=True, timeout=60).returncode == 0
    with socket.socket() as holder:
        holder.bind(("127.0.0.1", port))
        holder.listen()
        result = subprocess.run(check, capture_output=True, text=True, timeout=60)
    assert result.returncode == 1
    assert f"127.0.0.1:{port}" in result.stderr and "in use by another program" in result.stderr
    assert "Traceback" not in result.stderr


def test_remove_list_asks_for_yes_then_removes_the_list_and_all_it_holds(tmp_path, config):
    """A list made by a mistyped address in ``kittypyr import`` can be taken off the archive again."""
    from ZODB import DB
    from ZODB.FileStorage import FileStorage

    from kittypyr.bootstrap import ROOT_KEY

    typo = "dve@lists.example.org"
    mbox = tmp_path / "dev.mbox"
    mbox.write_bytes(mbox_bytes(corpus(10)))
    kittypyr("import", config, LIST, mbox, "--workers", "0", check=True)
    other = tmp_path / "more.mbox"
    other.write_bytes(mbox_bytes(corpus(10, offset=100)))  # the same senders
    kittypyr("import", config, typo, other, "--workers", "0", check=True)
    assert sorted(info(config)["mailing_lists"]) == [LIST, typo]

    asked = kittypyr("remove-list", config, typo)
    assert asked.returncode == 1
    assert f"{typo} holds 10 messages in 2 threads; nothing removed" in asked.stdout
    assert "--yes" in asked.stdout
    assert sorted(info(config)["mailing_lists"]) == [LIST, typo]

    missing = kittypyr("remove-list", config, "nosuch@lists.example.org", "--yes")
    assert missing.returncode == 2
    assert "no list nosuch@lists.example.org" in missing.stderr and LIST in missing.stderr

    removed = kittypyr("remove-list", config, typo, "--yes", "--reason", "mistyped address")
    assert removed.returncode == 0, removed.stdout + removed.stderr
    assert f"removed {typo}: 10 messages in 2 threads" in removed.stdout
    assert info(config)["mailing_lists"] == [LIST]
    assert info(config, LIST)["messages"] == 10
    # Catalog, people and aggregates agree with what is left.
    checked = kittypyr("check", config)
    assert checked.returncode == 0 and "everything agrees" in checked.stdout, checked.stdout

    db = DB(FileStorage(str(tmp_path / "var" / "Data.fs"), read_only=True))
    try:
        archive = db.open().root()[ROOT_KEY]
        assert typo not in archive.lists
        entry = archive.audit_log.newest(size=1)[0]
        assert entry.action == "remove-list" and entry.lists == (typo,)
        assert entry.reason == "mistyped address" and "10 messages" in entry.summary
        # Its mail is in no index.
        found = [path for path in archive.document_map.docid_to_address.values() if typo in path]
        assert found == []
    finally:
        db.close()


def test_what_was_deleted_from_a_removed_list_stays_deleted_when_the_list_is_made_again(tmp_path, config):
    from pyramid.paster import get_app
    from pyramid.scripting import prepare
    from webtest import TestApp

    from kittypyr import moderation
    from kittypyr.msgid import message_id_hash
    from kittypyr.security import User

    mbox = tmp_path / "dev.mbox"
    mbox.write_bytes(mbox_bytes(corpus(10)))
    kittypyr("import", config, LIST, mbox, "--workers", "0", "--policy", "public", check=True)
    deleted = message_id_hash("<cli3@example.org>")
    app = get_app(str(config))
    try:
        with prepare(registry=app.registry) as env:
            moderation.delete_messages(env["root"].lists[LIST], [deleted], User("admin@example.org", "Admin"),
                                       registry=app.registry)
            env["root"].quarantine.hold(LIST, b"not mail at all", "unreadable")
            transaction.commit()
    finally:
        app.registry._zodb_databases[""].close()

    removed = kittypyr("remove-list", config, LIST, "--yes")
    assert "and 1 message held in the quarantine" in removed.stdout, removed.stdout
    # The list made again from the same mailbox, by an import or by Mailman.
    again = kittypyr("import", config, LIST, mbox, "--workers", "0", "--policy", "public", check=True)
    assert "read 10, archived 9" in again.stdout and "deleted from the archive by its administrators" in again.stdout
    app = get_app(str(config))
    try:
        browser = TestApp(app)
        browser.get(f"/list/{LIST}/message/{deleted}/", status=410)
        assert "Body of message 3." not in browser.get("/search", params={"q": "message"}).text
        with prepare(registry=app.registry) as env:
            assert len(env["root"].quarantine) == 0
    finally:
        app.registry._zodb_databases[""].close()
    assert kittypyr("check", config).returncode == 0


def test_a_file_with_a_doubt_on_every_line_names_twenty_and_the_report_every_one(tmp_path, config):
    # A message whose body a damaged copy filled with bare envelope lines:
    # each one a doubtful split, kept in the message.
    stray = b"From nobody@example.org Thu Jan  1 00:00:00 2020\n"
    mbox = tmp_path / "damaged.mbox"
    mbox.write_bytes(mbox_bytes(corpus(2)).rstrip(b"\n") + b"\n" + stray * 45)
    report = tmp_path / "report.txt"

    result = kittypyr("import", config, LIST, mbox, "--workers", "0", "--report", report)

    assert result.returncode == 0, result.stdout + result.stderr
    assert "read 2, archived 2" in result.stdout
    assert result.stdout.count(f"doubtful split: {mbox}, message 2, line ") == 20
    assert f"doubtful split: 25 more in {mbox}" in result.stdout
    assert f"every one is named in {report}" in result.stdout
    assert report.read_text().count(f"doubtful split: {mbox}, message 2, line ") == 45
    # Without --report, the screen says how to have every one.
    again = kittypyr("import", config, LIST, mbox, "--workers", "0")
    assert again.stdout.count("doubtful split: ") == 21 and "--report FILE names every one" in again.stdout
    assert info(config, LIST)["messages"] == 2


def test_a_summary_names_so_many_of_each_kind_and_counts_the_rest():
    from kittypyr.importing import ImportReport

    report = ImportReport()
    file_report = report.file("a.mbox")
    file_report.read = 6
    file_report.failed = [(1, "bad"), (2, "bad"), (3, "bad")]
    file_report.skipped["asked not to be archived"] = 3
    file_report.skipped_at["asked not to be archived"] = [4, 5, 6]

    shown = report.summary(listed=2)

    assert "failed: a.mbox, message 2: bad" in shown and "failed: a.mbox, message 3: bad" not in shown
    assert "failed: 1 more message in a.mbox" in shown
    assert "skipped 3 in a.mbox: asked not to be archived (messages 4, 5 and 1 more)" in shown
    every = report.summary()
    assert "failed: a.mbox, message 3: bad" in every
    assert "skipped 3 in a.mbox: asked not to be archived (messages 4, 5, 6)" in every


def test_an_interrupted_reindex_closes_the_archive_until_it_is_run_to_its_end(tmp_path, config):
    # Interrupted, it left a catalog of part of the archive, and every page
    # answered from it without a word: an export of no message, a feed of
    # none, searches missing most mail.
    from pyramid.paster import bootstrap, get_app
    from webtest import TestApp

    from kittypyr.catalog import reindex_archive

    mbox = tmp_path / "dev.mbox"
    mbox.write_bytes(mbox_bytes(corpus(10)))
    kittypyr("import", config, LIST, mbox, check=True)
    env = bootstrap(str(config))
    commits = []

    def commit_then_stop():
        commits.append(1)
        if len(commits) > 1:
            raise KeyboardInterrupt
        transaction.commit()

    try:
        with pytest.raises(KeyboardInterrupt):
            reindex_archive(env["root"], env["registry"], commit=commit_then_stop, every=3)
        transaction.abort()
    finally:
        env["closer"]()
        env["registry"]._zodb_databases[""].close()
    said = kittypyr("info", config, check=True).stdout
    assert "reindex: unfinished" in said and f"kittypyr reindex {config}" in said
    checked = kittypyr("check", config)
    assert checked.returncode == 1 and f"run kittypyr reindex {config}" in checked.stderr

    def answers():
        app = get_app(str(config))
        try:
            browser = TestApp(app)
            return [browser.get(path, status="*").status_int
                    for path in (f"/list/{LIST}/", f"/list/{LIST}/export/dev.mbox.gz", "/search?q=message")]
        finally:
            app.registry._zodb_databases[""].close()

    assert answers() == [503, 503, 503]
    kittypyr("reindex", config, check=True)
    assert "reindex" not in kittypyr("info", config, check=True).stdout
    assert answers() == [200, 200, 200]


def test_an_import_whose_report_cannot_be_written_still_shows_its_summary(tmp_path, config):
    # The whole import done, then a traceback and no summary at all.
    mbox = tmp_path / "dev.mbox"
    mbox.write_bytes(mbox_bytes(corpus(10)))
    result = kittypyr("import", config, LIST, mbox, "--report", tmp_path)  # a folder
    assert result.returncode == 1 and "Traceback" not in result.stderr
    assert "archived 10" in result.stdout
    assert f"the report could not be written to {tmp_path}" in result.stderr
    assert info(config, LIST)["messages"] == 10


@pytest.mark.parametrize("arguments", [["pack", "--days", "nan"], ["pack", "--days", "inf"], ["pack", "--days", "-3"],
                                       ["import", LIST, "x.mbox", "--batch-size", "0"],
                                       ["import", LIST, "x.mbox", "--workers", "-3"]])
def test_numbers_no_command_can_use_are_refused_before_it_starts(config, arguments):
    result = kittypyr(arguments[0], config, *arguments[1:])
    assert result.returncode == 2 and "Traceback" not in result.stderr
    assert "argument" in result.stderr


def test_an_import_interrupted_before_its_first_batch_leaves_no_empty_list(tmp_path, config, monkeypatch):
    from kittypyr import cli, importing

    def interrupted(*args, **kwargs):
        raise KeyboardInterrupt

    monkeypatch.setattr(importing, "import_mail", interrupted)
    assert cli.main(["import", str(config), "new@lists.example.org", str(tmp_path / "x.mbox"), "--quiet"]) == 130
    assert "new@lists.example.org" not in kittypyr("info", config, check=True).stdout


def test_a_pack_keeping_more_days_than_there_is_history_packs(tmp_path, config):
    # 50,000 days reach before 1900, which no storage can name: a traceback.
    mbox = tmp_path / "dev.mbox"
    mbox.write_bytes(mbox_bytes(corpus(3)))
    kittypyr("import", config, LIST, mbox, check=True)
    packed = kittypyr("pack", config, "--days", "50000")
    assert packed.returncode == 0 and "Traceback" not in packed.stderr, packed.stderr
    assert info(config, LIST)["messages"] == 3
