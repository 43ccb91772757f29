"""What the command line prints to a newcomer: one line for a busy storage or a wrong configuration, no warnings, a real progress bar."""

import bz2
import gzip
import io
import lzma
import subprocess
import sys
from pathlib import Path

import pytest
from ZODB.FileStorage import FileStorage

from kittypyr.progress import estimate_messages, progress_bar
from tests.functional import kittypyr, mbox_bytes, write_config
from tests.mailbuilder import make_message

LIST = "dev@lists.example.org"
ROOT = Path(__file__).resolve().parent.parent


def mails(count):
    return [make_message(message_id=f"<pb{n}@example.org>", subject=f"Topic {n}",
                         body=f"Line one.\n\nFrom the start, a body line that is no envelope.\n") for n in range(count)]


@pytest.fixture
def config(tmp_path):
    return write_config(tmp_path)


@pytest.mark.parametrize("command", [("info",), ("reindex",), ("sync",), ("import", LIST, "PATH")])
def test_a_storage_the_server_holds_is_explained_in_one_line(tmp_path, config, command):
    mbox = tmp_path / "dev.mbox"
    mbox.write_bytes(mbox_bytes(mails(2)))
    FileStorage(str(tmp_path / "var" / "Data.fs")).close()  # an archive, as a first start makes it
    held = FileStorage(str(tmp_path / "var" / "Data.fs"))  # as a running server holds it
    try:
        args = [str(mbox) if a == "PATH" else a for a in command]
        result = kittypyr(args[0], config, *args[1:])
    finally:
        held.close()
    assert result.returncode == 2
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    assert "is in use by another process" in lines[0] and "Traceback" not in result.stderr


def test_commands_print_no_deprecation_warning(tmp_path, config):
    mbox = tmp_path / "dev.mbox"
    mbox.write_bytes(mbox_bytes(mails(3)))
    for args in (("import", config, LIST, mbox, "--workers", "1"), ("info", config), ("reindex", config)):
        result = kittypyr(*args, check=True)
        assert "Warning" not in result.stderr and "pkg_resources" not in result.stderr, (args, result.stderr)


def test_installing_warns_of_no_data_package(tmp_path):
    result = subprocess.run([sys.executable, "setup.py", "-q", "build_py", "--build-lib", str(tmp_path / "lib")],
                            cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr
    assert "kittypyr.static" not in result.stderr, result.stderr
    assert (tmp_path / "lib" / "kittypyr" / "static" / "kittypyr.css").is_file()


def test_the_count_of_messages_to_import_is_estimated_first(tmp_path):
    plain = tmp_path / "a.mbox"
    plain.write_bytes(mbox_bytes(mails(4)))
    packed = tmp_path / "b.mbox.gz"
    packed.write_bytes(gzip.compress(mbox_bytes(mails(3))))
    maildir = tmp_path / "md"
    for sub in ("cur", "new", "tmp"):
        (maildir / sub).mkdir(parents=True)
    for n, raw in enumerate(mails(2)):
        (maildir / "cur" / f"{n}.eml").write_bytes(raw)
    assert estimate_messages([plain, packed, maildir]) == 9
    bzipped = tmp_path / "c.mbox.bz2"
    bzipped.write_bytes(bz2.compress(mbox_bytes(mails(5))))
    xzipped = tmp_path / "d.mbox.xz"
    xzipped.write_bytes(lzma.compress(mbox_bytes(mails(6))))
    assert estimate_messages([bzipped, xzipped]) == 11


def test_the_progress_bar_shows_total_percentage_and_time_left():
    out = io.StringIO()
    bar = progress_bar("dev@lists.example.org", 200, file=out)
    bar.update(50)
    bar.refresh()
    shown = out.getvalue()
    bar.close()
    assert "50/200" in shown and "25%" in shown and "<" in shown  # elapsed<remaining


EVERY_COMMAND = [("import", LIST, "PATH"), ("reindex",), ("sync",), ("pack",), ("info",), ("check",),
                 ("quarantine",), ("backup", "FOLDER"), ("restore", "FOLDER"), ("import-hyperkitty", "PATH")]


def _run(command, config, tmp_path):
    mbox = tmp_path / "dev.mbox"
    if not mbox.exists():
        mbox.write_bytes(mbox_bytes(mails(1)))
    args = [str(mbox) if a == "PATH" else str(tmp_path / "backup") if a == "FOLDER" else a for a in command]
    return kittypyr(args[0], config, *args[1:])


@pytest.mark.parametrize("command", EVERY_COMMAND)
def test_a_configuration_that_is_not_there_is_named(tmp_path, command):
    result = _run(command, tmp_path / "developement.ini", tmp_path)
    assert result.returncode == 2
    assert "Traceback" not in result.stderr, result.stderr
    assert "there is no configuration file" in result.stderr and "developement.ini" in result.stderr


def test_a_folder_given_for_the_configuration_is_named_as_a_folder(tmp_path):
    (tmp_path / "var").mkdir()
    result = kittypyr("info", tmp_path / "var")
    assert result.returncode == 2
    assert f"{tmp_path / 'var'} is a folder, not a configuration file" in result.stderr, result.stderr


@pytest.mark.parametrize("text", ["just some notes\n", "[app:other]\nuse = egg:kittypyr\n"])
@pytest.mark.parametrize("name", ["notes.txt", "notes.ini"])
def test_a_file_that_is_no_kittypyr_configuration_is_refused(tmp_path, name, text):
    wrong = tmp_path / name
    wrong.write_text(text)
    result = kittypyr("info", wrong)
    assert result.returncode == 2
    assert "Traceback" not in result.stderr, result.stderr
    assert f"{name} is not a kittypyr configuration" in result.stderr and "[app:main]" in result.stderr


@pytest.mark.parametrize("command", [c for c in EVERY_COMMAND if c[0] not in ("backup", "restore")])
def test_a_storage_folder_that_does_not_exist_is_named_with_what_to_do(tmp_path, command):
    missing = tmp_path / "nowhere" / "var"
    config = write_config(tmp_path, uri=f"file://{missing}/Data.fs?blobstorage_dir={missing}/blobs")
    result = _run(command, config, tmp_path)
    assert result.returncode == 2
    assert "Traceback" not in result.stderr, result.stderr
    assert f"the storage folder {missing} does not exist: create it (mkdir -p {missing})" in result.stderr


def test_a_storage_folder_this_user_cannot_write_is_named(tmp_path, config, monkeypatch, capsys):
    from kittypyr import cli

    FileStorage(str(tmp_path / "var" / "Data.fs")).close()  # an archive, as a first start makes it
    folder = tmp_path / "var"
    monkeypatch.setattr(cli.os, "access", lambda path, mode: Path(path) != folder)  # as for another user
    assert cli.main(["info", str(config)]) == 2
    said = capsys.readouterr().err
    assert f"{folder} is not writable for this user" in said and "as the user the web server runs as" in said


def _children(pid):
    with open(f"/proc/{pid}/task/{pid}/children") as listed:
        return listed.read().split()


# Interrupted while its parser processes start, and while it reads; before
# its first commit, which a batch as large as the mbox puts off to its end.
@pytest.mark.parametrize("workers,moment", [("0", "reading"), ("2", "starting"), ("2", "reading")])
def test_ctrl_c_in_an_import_says_how_to_finish_it(tmp_path, config, workers, moment):
    import os
    import signal
    import time

    from tests.functional import VENV_BIN

    mbox = tmp_path / "dev.mbox"
    mbox.write_bytes(mbox_bytes(mails(4000)))
    # In a session of its own, so that Ctrl-C reaches every process of it, as from a terminal.
    process = subprocess.Popen([str(VENV_BIN / "kittypyr"), "import", str(config), LIST, str(mbox),
                                "--workers", workers, "--batch-size", "4000"],
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True)
    deadline = time.monotonic() + 60
    if moment == "starting":
        # Both started, still loading their modules.
        while len(_children(process.pid)) < 2 and process.poll() is None and time.monotonic() < deadline:
            time.sleep(0.01)
        time.sleep(0.05)
    else:
        lock = tmp_path / "var" / "Data.fs.lock"
        while not lock.exists() and process.poll() is None and time.monotonic() < deadline:
            time.sleep(0.05)
        time.sleep(1.5)
    assert process.poll() is None, "the import ended before it could be interrupted"
    os.killpg(process.pid, signal.SIGINT)
    out, err = process.communicate(timeout=120)
    assert process.returncode == 130, (out, err)
    assert "Traceback" not in err and "KeyboardInterrupt" not in err, err
    assert "kittypyr import: interrupted" in err and "run the same command again" in err
    again = kittypyr("import", config, LIST, mbox, "--quiet", check=True)
    assert "read 4000" in again.stdout and "failed 0" in again.stdout


def test_sync_without_mailman_says_what_to_set(tmp_path, config):
    result = kittypyr("sync", config)
    assert result.returncode == 2
    assert "no Mailman core is configured: set kittypyr.mailman_url" in result.stderr
    assert "could not reach" not in result.stderr


def test_sync_with_mailman_silent_or_refusing_says_why_and_what_to_check(tmp_path):
    import http.server
    import threading

    from tests.functional import free_port

    class Refusing(http.server.BaseHTTPRequestHandler):
        def do_GET(self):
            self.send_response(401)
            self.send_header("Content-Length", "0")
            self.end_headers()

        def log_message(self, *args):
            pass

    refusing = http.server.HTTPServer(("127.0.0.1", 0), Refusing)
    threading.Thread(target=refusing.serve_forever, daemon=True).start()
    try:
        for port, why in ((free_port(), "(Connection refused)"), (refusing.server_port, "(HTTP 401")):
            config = write_config(tmp_path, extra=f"kittypyr.mailman_url = http://127.0.0.1:{port}\n")
            result = kittypyr("sync", config)
            assert result.returncode == 1
            said = result.stderr.strip().splitlines()[-1]
            assert said.startswith(f"kittypyr sync: Mailman core at http://127.0.0.1:{port} gave no lists {why}")
            assert "check that it runs and that kittypyr.mailman_url" in said and "Error(" not in said
    finally:
        refusing.shutdown()


def test_commands_print_no_warning_meant_for_the_web_server(tmp_path, config):
    # The configuration sets no kittypyr.secret: a warning for a web server, whose sessions it signs.
    mbox = tmp_path / "dev.mbox"
    mbox.write_bytes(mbox_bytes(mails(2)))
    for args in (("import", config, LIST, mbox, "--quiet"), ("info", config), ("check", config),
                 ("quarantine", config)):
        result = kittypyr(*args, check=True)
        assert "kittypyr.secret" not in result.stderr, (args, result.stderr)


def test_each_command_leaves_the_storage_index_saved_for_the_next(tmp_path, config):
    mbox = tmp_path / "dev.mbox"
    mbox.write_bytes(mbox_bytes(mails(2)))
    for args in (("import", config, LIST, mbox, "--quiet"), ("check", config), ("info", config), ("check", config)):
        result = kittypyr(*args, check=True)
        # Without a current Data.fs.index the whole Data.fs is read again at every start.
        assert "Ignoring index" not in result.stderr and "WARNING" not in result.stderr, (args, result.stderr)
    from ZODB.fsIndex import fsIndex

    saved = fsIndex.load(str(tmp_path / "var" / "Data.fs.index"))
    assert saved["pos"] == (tmp_path / "var" / "Data.fs").stat().st_size


def test_import_hyperkitty_given_a_folder_or_nothing_says_what_to_give(tmp_path, config):
    (tmp_path / "web").mkdir()
    for given, said in ((tmp_path / "web", "is a folder"), (tmp_path / "web" / "mailman3web.db", "no such file")):
        result = kittypyr("import-hyperkitty", config, given)
        assert result.returncode == 2
        assert said in result.stderr and str(given) in result.stderr
        assert "give HyperKitty's SQLite file (such as mailman3web.db) or a postgresql:// URL" in result.stderr


def test_import_hyperkitty_of_a_database_it_cannot_read_says_so_without_the_password(tmp_path, config):
    from tests.functional import free_port

    mysql = kittypyr("import-hyperkitty", config, "mysql://web:secret-word@127.0.0.1/mailman3web")
    assert mysql.returncode == 2 and "MySQL" in mysql.stderr and "no such file" not in mysql.stderr, mysql.stderr
    assert "secret-word" not in mysql.stderr
    closed = kittypyr("import-hyperkitty", config, f"postgresql://web:secret-word@127.0.0.1:{free_port()}/mailman3web")
    assert closed.returncode == 2 and "cannot open" in closed.stderr, closed.stderr
    assert "secret-word" not in closed.stderr and "Traceback" not in closed.stderr


class PressesCtrlCWhileCommitting:
    """A transaction's resource whose commit is interrupted half-way, as Ctrl-C can interrupt any."""

    def __init__(self, on_ctrl_c):
        self.on_ctrl_c = on_ctrl_c

    def sortKey(self):
        return "~ last"  # after the storage has voted

    def tpc_finish(self, txn):
        import signal

        self.on_ctrl_c(signal.SIGINT, None)

    def abort(self, txn):
        pass

    tpc_begin = commit = tpc_vote = tpc_abort = abort


def test_ctrl_c_during_a_commit_stops_the_command_once_the_commit_is_done(tmp_path):
    import transaction
    from ZODB import DB

    from kittypyr.cli import CtrlCBetweenCommits

    db = DB(FileStorage(str(tmp_path / "Data.fs")))
    manager = transaction.TransactionManager()
    between_commits = CtrlCBetweenCommits()
    manager.registerSynch(between_commits)
    connection = db.open(manager)
    try:
        connection.root()["kept"] = 1
        manager.get().join(PressesCtrlCWhileCommitting(between_commits.on_ctrl_c))
        with pytest.raises(KeyboardInterrupt):
            manager.commit()
        manager.abort()
        with pytest.raises(KeyboardInterrupt):  # pressed between commits: at once
            between_commits.on_ctrl_c(None, None)
        connection.root()["after"] = 2
        manager.commit()  # the storage is still open
        other = db.open()
        assert other.root()["kept"] == 1 and other.root()["after"] == 2
        other.close()
    finally:
        connection.close()
        db.close()


def test_info_on_a_list_not_archived_names_the_archived_ones(tmp_path, config):
    mbox = tmp_path / "dev.mbox"
    mbox.write_bytes(mbox_bytes(mails(1)))
    kittypyr("import", config, LIST, mbox, "--quiet", check=True)
    result = kittypyr("info", config, "dev")
    assert result.returncode == 2
    assert result.stderr.strip() == (f"kittypyr info: no archived list 'dev': give a list's posting address "
                                     f"(archived here: {LIST})")


@pytest.mark.parametrize("config", ["#main", "settings.cfg"])
def test_a_configuration_argument_that_names_no_ini_file_is_said_in_one_line(tmp_path, config):
    result = kittypyr("info", config, cwd=tmp_path)
    assert result.returncode == 2
    assert result.stderr.strip().splitlines() == [
        f"kittypyr info: there is no configuration file {config}: give the .ini file the web server runs with "
        "(such as development.ini or production.ini)"]


@pytest.mark.parametrize("workers", ["0", "1"])
def test_a_file_that_cannot_be_read_is_reported_once(tmp_path, config, workers):
    # The summary names it with its reason; a log line saying the same
    # before it was one more thing to read for nothing.
    missing = tmp_path / "nofile.mbox"
    result = kittypyr("import", config, LIST, missing, "--workers", workers, "--quiet")
    assert result.returncode == 1
    output = result.stdout + result.stderr
    assert output.count(str(missing)) == 1, output
    assert f"error: {missing}: No such file or directory" in result.stdout


@pytest.mark.parametrize("layout", ["an unknown scheme", "Data.fs a folder", "Data.fs.lock a folder",
                                    "a file for the storage folder", "a file for the blob folder"])
def test_a_storage_that_cannot_be_what_the_uri_says_is_named_with_what_to_do(tmp_path, layout):
    # Each gave a traceback, or advice that could not work ("mkdir -p" a file).
    var = tmp_path / "store"
    uri = f"file://{var}/Data.fs?blobstorage_dir={var}/blobs"
    if layout == "an unknown scheme":
        uri, said = "bogus://x", "names no storage kittypyr can open"
    elif layout == "a file for the storage folder":
        var.write_text("")
        said = f"{var} is a file, where zodbconn.uri in"
    else:
        var.mkdir()
        path = {"Data.fs a folder": var / "Data.fs", "Data.fs.lock a folder": var / "Data.fs.lock",
                "a file for the blob folder": var / "blobs"}[layout]
        path.write_text("") if layout == "a file for the blob folder" else path.mkdir()
        said = f"{path} is a {'file' if layout == 'a file for the blob folder' else 'folder'}, where zodbconn.uri in"
    config = write_config(tmp_path, uri=uri)
    result = kittypyr("info", config)
    assert result.returncode == 2 and "Traceback" not in result.stderr, result.stderr
    assert said in result.stderr and "correct zodbconn.uri" in result.stderr
