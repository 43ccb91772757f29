"""What the command line prints to a newcomer: one line for a busy storage, no warnings, a real progress bar."""

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
    kittypyr("info", config, check=True)  # creates the storage
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


@pytest.mark.parametrize("command", [("info",), ("import", LIST, "PATH")])
def test_a_configuration_file_that_is_not_there_is_said_in_one_line(tmp_path, command):
    mbox = tmp_path / "dev.mbox"
    mbox.write_bytes(mbox_bytes(mails(1)))
    missing = tmp_path / "developmnet.ini"
    args = [str(mbox) if a == "PATH" else a for a in command]
    result = kittypyr(args[0], missing, *args[1:])
    assert result.returncode == 2
    assert result.stderr.strip().splitlines() == [
        f"kittypyr {command[0]}: no configuration file {str(missing)!r} (an .ini file such as development.ini)"]


def test_after_an_import_the_next_command_finds_the_storage_index_saved(tmp_path, config):
    # Else the next process (the web server) reads the whole Data.fs again to
    # rebuild it, and says "Ignoring index".
    mbox = tmp_path / "dev.mbox"
    mbox.write_bytes(mbox_bytes(mails(3)))
    kittypyr("import", config, LIST, mbox, "--workers", "0", check=True)
    for command in ("info", "reindex", "info"):
        result = kittypyr(command, config, check=True)
        assert "Ignoring index" not in result.stderr, (command, result.stderr)


@pytest.mark.parametrize("config", ["#main", "settings.cfg"])
def test_a_configuration_argument_that_names_no_ini_file_is_said_in_one_line(tmp_path, config):
    result = kittypyr("info", config, cwd=tmp_path)
    assert result.returncode == 2
    assert result.stderr.strip().splitlines() == [
        f"kittypyr info: no configuration file {config!r} (an .ini file such as development.ini)"]
