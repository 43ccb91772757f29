"""Beyond one process: importers and the web app sharing a real ZEO server."""

import json
import subprocess
import sys
import time
import urllib.request

import pytest

from tests.functional import (
    VENV_BIN,
    free_port,
    kittypyr,
    mbox_bytes,
    wait_for_port,
    write_config,
    zeo_server_in,
)
from tests.test_cli import LIST, corpus


@pytest.fixture(scope="session")
def zeo_server(tmp_path_factory):
    """One ZEO server (the ZEO package's runzeo) for the test session."""
    with zeo_server_in(tmp_path_factory.mktemp("zeo")) as port:
        yield port


def zeo_config(folder, port, web_port):
    blob_cache = folder / "blob-cache"
    uri = f"zeo://127.0.0.1:{port}?storage=1&blob_dir={blob_cache}&shared_blob_dir=false"
    return write_config(folder, uri=uri, port=web_port)


def test_two_importers_and_the_web_app_at_once(tmp_path, zeo_server):
    first = tmp_path / "first.mbox"
    second = tmp_path / "second.mbox"
    # Overlapping halves: 1,000 messages in both files.
    first.write_bytes(mbox_bytes(corpus(2000)))
    second.write_bytes(mbox_bytes(corpus(2000, offset=1000)))

    web_port = free_port()
    configs = []
    for name in ("web", "import-a", "import-b"):
        folder = tmp_path / name
        folder.mkdir()
        configs.append(zeo_config(folder, zeo_server, web_port))

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
        assert figures["messages"] == 3000
        assert figures["threads"] == 600
        archived = sum(int(out.split("archived ")[1].split(",")[0]) for out, _ in outputs)
        assert archived == 3000
        with urllib.request.urlopen(f"http://127.0.0.1:{web_port}/", timeout=30) as response:
            assert "3000 messages" in response.read().decode()
    finally:
        web.terminate()
        web.wait(timeout=30)
        web_log.close()
