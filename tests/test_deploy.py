"""deploy/: the nginx example passes ``nginx -t``, and kittypyr serves under /archives/ behind it.

waitress believes X-Forwarded-* from the trusted proxy only (deploy/kittypyr.ini).
"""

import http.client
import os
import re
import shutil
import ssl
import subprocess
from pathlib import Path
from urllib.parse import urlencode

import pytest

from tests.functional import VENV_BIN, free_port, kittypyr, mbox_bytes, wait_for_port
from tests.mailbuilder import make_message

DEPLOY = Path(__file__).resolve().parent.parent / "deploy"
NGINX = shutil.which("nginx") or "/usr/sbin/nginx"
SITE = "lists.example.org"
LIST = "dev@lists.example.org"
READER = ("dora@example.org", "doras-password")
# Where tests.fake_accounts is found by the processes the tests start.
TESTS_PATH = {"PYTHONPATH": str(Path(__file__).resolve().parent.parent)}

needs_nginx = pytest.mark.skipif(not Path(NGINX).exists(), reason="nginx is missing: `make test` installs it")


def adapted_ini(folder, port):
    """deploy/kittypyr.ini with the storage in ``folder``, waitress on ``port`` and no Mailman.

    One account (READER) may log in, through the test-only tests.fake_accounts.
    """
    text = (DEPLOY / "kittypyr.ini").read_text()
    text = text.replace("pyramid.includes =\n", "pyramid.includes = tests.fake_accounts\n"
                        f"tests.fake_accounts.users = {READER[0]}:{READER[1]}\n")
    text = re.sub(r"(?m)^zodbconn\.uri = .*$",
                  f"zodbconn.uri = file://{folder}/Data.fs?blobstorage_dir={folder}/blobs", text)
    text = text.replace("listen = 127.0.0.1:6543", f"listen = 127.0.0.1:{port}")
    text = re.sub(r"(?m)^kittypyr\.mailman_(url|user|password) = .*\n", "", text)
    text = text.replace("kittypyr.warm_up = true", "kittypyr.warm_up = false")
    path = folder / "kittypyr.ini"
    path.write_text(text)
    return path


def nginx_site(folder, upstream_port, http_port, https_port):
    """deploy/nginx/kittypyr.conf on free ports, a throw-away certificate, in a main nginx.conf of its own."""
    subprocess.run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1", "-subj", f"/CN={SITE}",
                    "-keyout", str(folder / "key.pem"), "-out", str(folder / "cert.pem")],
                   check=True, capture_output=True)
    site = (DEPLOY / "nginx" / "kittypyr.conf").read_text()
    site = site.replace("server 127.0.0.1:6543;", f"server 127.0.0.1:{upstream_port};")
    site = re.sub(r"(?m)^\s*listen \[::\].*\n", "", site)  # no IPv6 needed on loopback
    site = site.replace("listen 80;", f"listen 127.0.0.1:{http_port};")
    site = site.replace("listen 443 ssl http2;", f"listen 127.0.0.1:{https_port} ssl http2;")
    site = site.replace(f"/etc/letsencrypt/live/{SITE}/fullchain.pem", str(folder / "cert.pem"))
    site = site.replace(f"/etc/letsencrypt/live/{SITE}/privkey.pem", str(folder / "key.pem"))
    (folder / "site.conf").write_text(site)
    temp = "\n".join(f"    {kind}_temp_path {folder}/{kind};" for kind in
                     ("client_body", "proxy", "fastcgi", "uwsgi", "scgi"))
    main = folder / "nginx.conf"
    main.write_text(f"""pid {folder}/nginx.pid;
error_log {folder}/error.log;
events {{}}
http {{
    access_log {folder}/access.log;
{temp}
    include {folder}/site.conf;
}}
""")
    return main


@pytest.fixture(scope="module")
def served(tmp_path_factory):
    folder = tmp_path_factory.mktemp("deploy")
    (folder / "blobs").mkdir()
    port = free_port()
    config = adapted_ini(folder, port)
    mbox = folder / "dev.mbox"
    mbox.write_bytes(mbox_bytes([make_message(message_id="<dep1@example.org>", subject="Behind the proxy",
                                              to=LIST)]))
    kittypyr("import", config, LIST, mbox, "--quiet", "--policy", "public", check=True, env=TESTS_PATH)
    log = open(folder / "server.log", "ab")
    server = subprocess.Popen([str(VENV_BIN / "pserve"), str(config)], stdout=log, stderr=log,
                              env={**os.environ, **TESTS_PATH})
    try:
        wait_for_port(port, process=server)
        yield folder, port
    finally:
        server.terminate()
        server.wait(timeout=30)
        log.close()


def get(port, path, headers=(), source="127.0.0.1", tls=False):
    """``(status, Location, body)`` of a GET."""
    response, body = fetch(port, "GET", path, headers, source=source, tls=tls)
    return response.status, response.getheader("Location"), body


def fetch(port, method, path, headers=(), body=None, source="127.0.0.1", tls=False):
    """``(response, body text)`` of a request; the response's headers stay readable."""
    if tls:
        context = ssl.create_default_context()
        context.check_hostname = False
        context.verify_mode = ssl.CERT_NONE
        connection = http.client.HTTPSConnection("127.0.0.1", port, timeout=30, context=context)
    else:
        connection = http.client.HTTPConnection("127.0.0.1", port, timeout=30, source_address=(source, 0))
    connection.request(method, path, body=body, headers=dict(headers))
    response = connection.getresponse()
    text = response.read().decode("utf-8", "replace")
    connection.close()
    return response, text


def session_cookie(response):
    """The session cookie ``response`` sets (its Set-Cookie value), not one it ends."""
    return next(value for name, value in response.getheaders() if name.lower() == "set-cookie"
                and value.startswith("kittypyr_session=") and not value.startswith("kittypyr_session=;"))


def cookie_path(response):
    """The Path of the session cookie ``response`` sets."""
    return re.search(r"(?i);\s*path=([^;]*)", session_cookie(response)).group(1)


FORWARDED = {"Host": SITE, "X-Forwarded-Proto": "https", "X-Forwarded-Host": SITE, "X-Forwarded-For": "203.0.113.9"}


def test_links_and_redirects_carry_the_prefix_from_the_trusted_proxy(served):
    folder, port = served
    status, _, page = get(port, "/archives/", FORWARDED)
    assert status == 200
    assert f'href="https://{SITE}/archives/list/{LIST}/"' in page
    assert f'href="https://{SITE}/archives/static/kittypyr.css"' in page
    status, location, _ = get(port, "/archives/list/Dev@Lists.Example.org/", FORWARDED)
    assert (status, location) == (301, f"https://{SITE}/archives/list/{LIST}/")


def test_forwarded_headers_from_anyone_else_are_ignored(served):
    folder, port = served
    # 127.0.0.2 is this machine too, but not the trusted proxy's address.
    status, location, _ = get(port, "/archives/list/Dev@Lists.Example.org/",
                              {**FORWARDED, "Host": f"127.0.0.1:{port}", "X-Forwarded-Host": "evil.example"},
                              source="127.0.0.2")
    assert status == 301
    assert location == f"http://127.0.0.1:{port}/archives/list/{LIST}/"


def test_the_session_cookie_is_for_the_prefix_only(served):
    # Another application on the host (Postorius under /mailman3/) never receives it.
    folder, port = served
    form, page = fetch(port, "GET", "/archives/login", FORWARDED)
    assert form.status == 200 and cookie_path(form) == "/archives"
    session = session_cookie(form).split(";", 1)[0]
    token = re.search(r'name="csrf_token" value="([^"]+)"', page).group(1)
    answer, _ = fetch(port, "POST", "/archives/login", {
        **FORWARDED, "Cookie": session, "Origin": f"https://{SITE}",
        "Content-Type": "application/x-www-form-urlencoded"},
        body=urlencode({"address": READER[0], "password": READER[1], "csrf_token": token,
                        "came_from": "/archives/"}))
    assert answer.status == 303 and cookie_path(answer) == "/archives"
    # A cookie of the same name for the whole host, from before, would be read instead: it is ended.
    ended = [value for name, value in answer.getheaders() if name.lower() == "set-cookie"
             and value.startswith("kittypyr_session=;")]
    assert len(ended) == 1 and "Max-Age=0" in ended[0] and "Path=/;" in ended[0]
    logged_in = session_cookie(answer).split(";", 1)[0]
    status, _, page = get(port, "/archives/", {**FORWARDED, "Cookie": logged_in})
    assert status == 200 and "Dora" in page and "Log out" in page


@needs_nginx
def test_the_nginx_example_passes_nginx_t(tmp_path):
    main = nginx_site(tmp_path, free_port(), free_port(), free_port())
    result = subprocess.run([NGINX, "-t", "-c", str(main), "-p", str(tmp_path)], capture_output=True, text=True)
    assert result.returncode == 0, result.stderr
    assert "syntax is ok" in result.stderr


@needs_nginx
def test_served_under_archives_through_nginx(served, tmp_path):
    folder, port = served
    http_port, https_port = free_port(), free_port()
    main = nginx_site(tmp_path, port, http_port, https_port)
    proxy = subprocess.Popen([NGINX, "-c", str(main), "-p", str(tmp_path), "-g", "daemon off;"],
                             stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        wait_for_port(https_port, process=proxy)
        host = {"Host": SITE}
        assert get(http_port, "/archives/", host)[:2] == (301, f"https://{SITE}/archives/")
        assert get(https_port, "/archives", host, tls=True)[:2] == (301, f"https://{SITE}/archives/")
        status, _, page = get(https_port, "/archives/", {**host, "X-Forwarded-Host": "evil.example"}, tls=True)
        assert status == 200, page
        # nginx passes the port the reader reached: 443 in production, the site's own and left out of
        # URLs. Any other (this test's) is not the site's, and its links are on kittypyr.base_url.
        site = f"https://{SITE}/archives/"
        assert f'href="{site}list/{LIST}/"' in page, re.findall(r'href="[^"]*"', page)
        assert "evil.example" not in page
        status, location, _ = get(https_port, "/archives/list/Dev@Lists.Example.org/", host, tls=True)
        assert (status, location) == (301, f"{site}list/{LIST}/")
        status, _, page = get(https_port, f"/archives/list/{LIST}/", host, tls=True)
        assert status == 200 and "Behind the proxy" in page
        form, _ = fetch(https_port, "GET", "/archives/login", host, tls=True)
        assert form.status == 200 and cookie_path(form) == "/archives"
        # The archiver API is for Mailman on loopback, never through the proxy.
        assert get(https_port, f"/archives/api/mailman/urls?mlist={LIST}", host, tls=True)[0] == 403
        # Mailman 2's archive links, outside /archives/, reach kittypyr's answers to them.
        assert get(https_port, "/pipermail/dev/", host, tls=True)[:2] == (301, f"{site}list/{LIST}/")
        assert get(https_port, "/mailman/listinfo/dev", host, tls=True)[:2] == (301, f"{site}list/{LIST}/")
        assert get(https_port, "/mailman/private/dev/", host, tls=True)[:2] == (301, f"{site}list/{LIST}/")
        assert get(https_port, "/cgi-bin/mailman/listinfo/dev", host, tls=True)[:2] == (301, f"{site}list/{LIST}/")
        # Redirects name the site, whatever Host a client sent, and keep the query.
        evil = {"Host": "evil.example"}
        assert get(http_port, "/archives/search?q=x", evil)[:2] == (301, f"https://{SITE}/archives/search?q=x")
        assert get(https_port, "/archives?page=2", evil, tls=True)[:2] == (301, f"https://{SITE}/archives/?page=2")
    finally:
        proxy.terminate()
        proxy.wait(timeout=30)


def test_a_server_stopped_by_sigterm_saves_the_storage_index(tmp_path):
    # systemd, Docker and most supervisors stop a service with SIGTERM.
    # FileStorage saves its index of where each record lies only when it is
    # closed: a server that died of the signal left the next start to read
    # every transaction written since the index was last saved, the whole
    # file at worst ("Ignoring index").
    from ZODB.fsIndex import fsIndex

    from tests.functional import write_config

    port = free_port()
    config = write_config(tmp_path, port=port)
    data = tmp_path / "var" / "Data.fs"
    for start in range(2):
        server = subprocess.Popen([str(VENV_BIN / "pserve"), str(config)], stdout=subprocess.PIPE,
                                  stderr=subprocess.STDOUT)
        try:
            wait_for_port(port, process=server, timeout=60)
            assert get(port, "/")[0] == 200
        finally:
            server.terminate()
            output = server.communicate(timeout=30)[0].decode()
        assert "Traceback" not in output and "Ignoring index" not in output, output
        saved = fsIndex.load(str(data) + ".index")
        assert saved["pos"] == data.stat().st_size


def test_a_second_server_on_the_same_storage_says_why_it_cannot_start(tmp_path):
    from tests.functional import write_config

    port = free_port()
    config = write_config(tmp_path, port=port)
    first = subprocess.Popen([str(VENV_BIN / "pserve"), str(config)], stdout=subprocess.DEVNULL,
                             stderr=subprocess.DEVNULL)
    try:
        wait_for_port(port, process=first, timeout=60)
        second = subprocess.run([str(VENV_BIN / "pserve"), str(config)], capture_output=True, text=True,
                                timeout=60)
        output = second.stdout + second.stderr
        assert second.returncode != 0
        assert "Traceback" not in output, output
        assert "in use by another process" in output and "ZEO" in output
        assert get(port, "/")[0] == 200  # the first one serves on
    finally:
        first.terminate()
        first.wait(timeout=30)


def test_a_server_whose_storage_folder_is_missing_says_what_to_do(tmp_path):
    from tests.functional import write_config

    port = free_port()
    config = write_config(tmp_path, port=port, uri=f"file://{tmp_path}/nowhere/Data.fs")
    started = subprocess.run([str(VENV_BIN / "pserve"), str(config)], capture_output=True, text=True, timeout=60)
    output = started.stdout + started.stderr
    assert started.returncode != 0
    assert "Traceback" not in output, output
    assert f"{tmp_path}/nowhere" in output and "mkdir" in output
