"""Beyond one process: importers and the web app sharing a real ZEO server, or RelStorage on PostgreSQL."""

import contextlib
import json
import subprocess
import sys
import time
import urllib.parse
import urllib.request

import pytest
import transaction

from tests.functional import (
    VENV_BIN,
    free_port,
    kittypyr,
    mbox_bytes,
    served,
    wait_for_port,
    write_config,
    zeo_server_in,
)
from tests.test_cli import LIST, corpus


def zeo_config(folder, port, web_port):
    blob_cache = folder / "blob-cache"
    uri = f"zeo://127.0.0.1:{port}?storage=1&blob_dir={blob_cache}&shared_blob_dir=false"
    return write_config(folder, uri=uri, port=web_port)


def test_two_importers_and_the_web_app_at_once(tmp_path, shared_storage):
    first = tmp_path / "first.mbox"
    second = tmp_path / "second.mbox"
    # Overlapping halves: 500 messages in both files.
    first.write_bytes(mbox_bytes(corpus(1000)))
    second.write_bytes(mbox_bytes(corpus(1000, offset=500)))

    web_port = free_port()
    configs = []
    for name in ("web", "import-a", "import-b"):
        folder = tmp_path / name
        folder.mkdir()
        configs.append(write_config(folder, uri=shared_storage.uri(folder), port=web_port))

    web_log = open(tmp_path / "web.log", "wb")
    web = subprocess.Popen([str(VENV_BIN / "pserve"), str(configs[0])], stdout=web_log, stderr=web_log)
    try:
        wait_for_port(web_port, process=web)
        importers = [
            subprocess.Popen(
                [str(VENV_BIN / "kittypyr"), "import", str(config), LIST, str(path),
                 "--batch-size", "50", "--workers", "0", "--quiet"],
                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
            )
            for config, path in ((configs[1], first), (configs[2], second))
        ]
        pages = 0
        while any(p.poll() is None for p in importers):
            with urllib.request.urlopen(f"http://127.0.0.1:{web_port}/", timeout=30) as response:
                assert response.status == 200
            pages += 1
            time.sleep(0.05)
        outputs = [p.communicate() for p in importers]
        for process, (out, err) in zip(importers, outputs):
            assert process.returncode == 0, out + err
        assert pages > 0

        figures = json.loads(kittypyr("info", configs[1], LIST, "--json", check=True).stdout)
        assert figures["messages"] == 1500
        assert figures["threads"] == 300
        archived = sum(int(out.split("archived ")[1].split(",")[0]) for out, _ in outputs)
        assert archived == 1500
        with urllib.request.urlopen(f"http://127.0.0.1:{web_port}/", timeout=30) as response:
            assert "1500 messages" in response.read().decode()
        # Either importer's messages are found by the web app's search.
        for phrase, subject in (("message 17", "Re: Topic 15"), ("message 1498", "Re: Topic 1495")):
            query = urllib.parse.urlencode({"q": f'"{phrase}"', "mlist": LIST})
            with urllib.request.urlopen(f"http://127.0.0.1:{web_port}/search?{query}", timeout=30) as response:
                assert subject in response.read().decode()
    finally:
        web.terminate()
        web.wait(timeout=30)
        web_log.close()


def test_pack_through_zeo_while_the_web_app_serves(tmp_path):
    from pyramid.paster import bootstrap
    from pyramid_zodbconn import get_connection

    from kittypyr import moderation
    from kittypyr.msgid import message_id_hash
    from kittypyr.security import User
    from tests.mailbuilder import make_message
    from tests.test_cli import START, _files_containing

    # A server of its own, configured as the README says for deletions.
    port, web_port = free_port(), free_port()
    (tmp_path / "zeo.conf").write_text(
        f"<zeo>\n  address 127.0.0.1:{port}\n</zeo>\n<filestorage 1>\n  path {tmp_path}/Data.fs\n"
        f"  blob-dir {tmp_path}/blobs\n  pack-keep-old false\n</filestorage>\n")
    zeo_log = open(tmp_path / "zeo.log", "wb")
    server = subprocess.Popen([str(VENV_BIN / "runzeo"), "-C", str(tmp_path / "zeo.conf")],
                              stdout=zeo_log, stderr=zeo_log)
    web = None
    try:
        wait_for_port(port, process=server)
        folder = tmp_path / "web"
        folder.mkdir()
        config = zeo_config(folder, port, web_port)
        leak = make_message(message_id="<zeoleak@example.org>", subject="oops", sender=("L", "l@example.org"),
                            date=START, body="the password is swordfish4711\n")
        mbox = tmp_path / "dev.mbox"
        mbox.write_bytes(mbox_bytes(corpus(5) + [leak]))
        kittypyr("import", config, LIST, mbox, "--workers", "0", check=True)
        web = subprocess.Popen([str(VENV_BIN / "pserve"), str(config)],
                               stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        wait_for_port(web_port, process=web)

        env = bootstrap(str(config))
        try:
            moderation.delete_messages(env["root"].lists[LIST], [message_id_hash("<zeoleak@example.org>")],
                                       User("admin@example.org"), "leaked password")
            transaction.commit()
        finally:
            db = get_connection(env["request"]).db()
            env["closer"]()
            db.close()
        assert _files_containing(tmp_path, b"swordfish4711")
        result = kittypyr("pack", config)
        assert result.returncode == 0, result.stderr
        # The server's scratch file may keep the bytes of a recent commit ...
        assert {p.name for p in _files_containing(tmp_path, b"swordfish4711") if p != mbox} <= {"Data.fs.tmp"}
        with urllib.request.urlopen(f"http://127.0.0.1:{web_port}/list/{LIST}/", timeout=30) as response:
            assert "5 messages" in response.read().decode()
        # ... until it starts again (the README says so).
        server.terminate()
        server.wait(timeout=30)
        server = subprocess.Popen([str(VENV_BIN / "runzeo"), "-C", str(tmp_path / "zeo.conf")],
                                  stdout=zeo_log, stderr=zeo_log)
        wait_for_port(port, process=server)
        assert [p for p in _files_containing(tmp_path, b"swordfish4711") if p != mbox] == []
    finally:
        if web is not None:
            web.terminate()
            web.wait(timeout=30)
        server.terminate()
        server.wait(timeout=30)
        zeo_log.close()


def test_wrong_passwords_count_across_processes_sharing_zeo(tmp_path, mailman_stack):
    """Two waitress processes on one ZEO server, logins checked by the real Mailman core."""
    from tests.mailman_stack import Reader

    address, password = "guessed@example.org", "guessed-password-1"
    mailman_stack.create_user(address, "Guessed", password)
    core = mailman_stack.core
    mailman_settings = (f"kittypyr.secret = one-secret-for-both\nkittypyr.mailman_url = {core.rest_url}\n"
                        f"kittypyr.mailman_user = {core.rest_user}\nkittypyr.mailman_password = {core.rest_password}")
    zeo_folder = tmp_path / "zeo-server"
    zeo_folder.mkdir()
    with zeo_server_in(zeo_folder) as zeo_port, contextlib.ExitStack() as processes:
        readers = []
        for name in ("web-a", "web-b"):
            folder = tmp_path / name
            folder.mkdir()
            web_port = free_port()
            uri = f"zeo://127.0.0.1:{zeo_port}?storage=1&blob_dir={folder}/blob-cache&shared_blob_dir=false"
            config = write_config(folder, uri=uri, port=web_port, extra=mailman_settings)
            readers.append(Reader(processes.enter_context(served(config, web_port)) + "/"))

        # Five wrong passwords, sent to either process in turn, reach the account's limit ...
        for attempt in range(5):
            answer = readers[attempt % 2].log_in(address, "not the password")
            assert answer.status_code == 403 and "not right" in answer.text
        # ... in both: neither has counted only its own.
        for reader in readers:
            refused = reader.log_in(address, password)
            assert refused.status_code == 429 and "Too many failed attempts" in refused.text
            assert int(refused.headers["Retry-After"]) > 500


def test_zeo_restarts_under_archiver_and_page_requests_answer_200_or_503_and_lose_no_mail(tmp_path):
    from tests.functional import assert_faults_answered_503_and_no_mail_lost

    # pserve on ZEO as production runs it, while the ZEO server restarts
    # twice and is stopped once for longer than a client waits for it. A ZEO
    # client waits for its server (30 s unless wait_timeout says otherwise)
    # and rides out a quick restart unseen; the test's clients wait 2 s, and
    # a request tries retry.attempts (5) times, so the 12 s stop outlasts
    # every try of a request made as it begins, which is answered 503 (or
    # waits for the server with every server thread busy likewise).
    port = free_port()
    (tmp_path / "zeo.conf").write_text(
        f"<zeo>\n  address 127.0.0.1:{port}\n</zeo>\n<filestorage 1>\n  path {tmp_path}/Data.fs\n"
        f"  blob-dir {tmp_path}/blobs\n</filestorage>\n")
    zeo_log = open(tmp_path / "zeo.log", "wb")

    def start():
        server = subprocess.Popen([str(VENV_BIN / "runzeo"), "-C", str(tmp_path / "zeo.conf")],
                                  stdout=zeo_log, stderr=zeo_log)
        wait_for_port(port, process=server)
        return server

    def stop(server):
        server.terminate()
        try:
            server.wait(timeout=10)
        except subprocess.TimeoutExpired:  # busy with a client: stopped as a crash would
            server.kill()
            server.wait(timeout=10)

    servers = [start()]

    def restarts():
        outages = []
        for pause in (0, 12.0, 0):
            time.sleep(1.5)
            stop(servers[0])
            away = time.monotonic()
            time.sleep(pause)
            outages.append((away, time.monotonic()))
            servers[0] = start()
        return outages

    def uri_of(folder):
        return (f"zeo://127.0.0.1:{port}?storage=1&blob_dir={folder / 'blob-cache'}"
                "&shared_blob_dir=false&wait_timeout=2")

    try:
        assert_faults_answered_503_and_no_mail_lost(tmp_path, uri_of, restarts, LIST)
    finally:
        stop(servers[0])
        zeo_log.close()
