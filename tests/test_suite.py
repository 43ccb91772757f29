"""``make suite`` and ``make suite-post``: the demo site starts, archives a post and stops on Ctrl-C."""

import queue
import re
import signal
import subprocess
import sys
import threading
import time

import pytest

from kittypyr.suite.mailman_core import _alive, free_port
from tests.mailman_stack import Reader

START_TIMEOUT = 120


def read_until(lines, marker, timeout):
    """The lines printed until one containing ``marker``."""
    seen = []
    deadline = time.monotonic() + timeout
    while True:
        try:
            line = lines.get(timeout=max(0.1, deadline - time.monotonic()))
        except queue.Empty:
            raise AssertionError("no %r within %d s; printed:\n%s" % (marker, timeout, "".join(seen)))
        if line is None:
            raise AssertionError("the suite exited; printed:\n" + "".join(seen))
        seen.append(line)
        if marker in line:
            return "".join(seen)


@pytest.fixture(scope="module")
def suite(tmp_path_factory):
    folder = tmp_path_factory.mktemp("suite")
    process = subprocess.Popen(
        [sys.executable, "-m", "kittypyr.suite.run", "--folder", str(folder),
         "--port", str(free_port()), "--smtp-port", str(free_port())],
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
        # The test's own Ctrl-C must not reach the suite before the test sends one.
        start_new_session=True,
    )
    lines = queue.Queue()

    def pump():
        for line in process.stdout:
            lines.put(line)
        lines.put(None)

    threading.Thread(target=pump, daemon=True).start()
    try:
        banner = read_until(lines, "suite ready", START_TIMEOUT)
        yield folder, process, lines, banner
    finally:
        if process.poll() is None:
            process.send_signal(signal.SIGINT)
            try:
                process.wait(timeout=60)
            except subprocess.TimeoutExpired:
                process.kill()


def post(folder, *args):
    return subprocess.run([sys.executable, "-m", "kittypyr.suite.post", "--folder", str(folder), *args],
                          capture_output=True, text=True, timeout=120)


def test_the_banner_says_what_to_open_and_how_to_log_in(suite):
    folder, process, lines, banner = suite
    assert "Ctrl-C stops all of it" in banner
    assert re.search(r"archive\s+http://127\.0\.0\.1:\d+/", banner)
    assert "as admin@example.org, password " in banner
    assert "demo@lists.example.org" in banner and "board@lists.example.org" in banner
    assert "make suite-post" in banner


def test_a_post_is_archived_and_readable(suite):
    folder, process, lines, banner = suite
    result = post(folder, "--subject", "Trying the suite")
    assert result.returncode == 0, result.stdout + result.stderr
    assert "posted 'Trying the suite' to demo@lists.example.org" in result.stdout
    url = re.search(r"archived in [\d.]+ s: (\S+)", result.stdout).group(1)
    base = re.search(r"archive\s+(http://\S+)", banner).group(1)
    page = Reader(base).get(url.removeprefix(base))
    assert page.status_code == 200
    assert "Trying the suite" in page.text
    # The MTA kept the copy Mailman sent the list's member, with kittypyr's permalink.
    copies = [path.read_bytes() for path in (folder / "mail").iterdir()]
    assert any(b"Trying the suite" in copy and b"Archived-At:" in copy for copy in copies)


def test_the_private_list_is_for_the_administrator(suite):
    folder, process, lines, banner = suite
    result = post(folder, "--private", "--subject", "Board business")
    assert result.returncode == 0, result.stdout + result.stderr
    url = re.search(r"log in to read it: (\S+)", result.stdout).group(1)
    base = re.search(r"archive\s+(http://\S+)", banner).group(1)
    password = re.search(r"as admin@example\.org, password (\S+)", banner).group(1)
    path = url.removeprefix(base)
    anonymous = Reader(base)
    admin = Reader(base)
    assert admin.log_in("admin@example.org", password).status_code == 303
    deadline = time.monotonic() + 60
    while admin.get(path).status_code != 200 and time.monotonic() < deadline:
        time.sleep(0.2)
    assert "Board business" in admin.get(path).text
    assert anonymous.get(path).status_code == 403


def test_a_second_suite_on_the_same_folder_leaves_the_running_one_alone(suite):
    """It says a suite runs there and touches nothing: it once rewrote the running one's configuration,
    removed its suite.json and stopped its archiving."""
    folder, process, lines, banner = suite
    before = {path: path.read_bytes() for path in folder.rglob("*.cfg")} | {folder / "suite.json": (
        folder / "suite.json").read_bytes()}
    second = subprocess.run([sys.executable, "-m", "kittypyr.suite.run", "--folder", str(folder)],
                            capture_output=True, text=True, timeout=120)
    assert second.returncode == 1
    assert "already running" in second.stderr and "Traceback" not in second.stderr, second.stderr
    assert {path: path.read_bytes() for path in before} == before
    assert process.poll() is None
    assert post(folder).returncode == 0


def test_ctrl_c_stops_everything(suite):
    folder, process, lines, banner = suite
    master = int((folder / "core" / "var" / "master.pid").read_text())
    process.send_signal(signal.SIGINT)
    assert process.wait(timeout=60) == 0
    printed = read_until(lines, "stopped", 5)
    assert "stopping" in printed
    assert not _alive(master)
    assert not (folder / "suite.json").exists()
    result = post(folder)
    assert result.returncode == 2
    assert "no suite is running" in result.stderr


def test_suite_post_without_a_suite_says_how_to_start_one(tmp_path):
    result = post(tmp_path)
    assert result.returncode == 2
    assert "start it with `make suite`" in result.stderr

