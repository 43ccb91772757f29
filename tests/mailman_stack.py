"""The suite (``kittypyr.suite.stack``) as the integration tests use it.

Started once per test session (see the ``mailman_stack`` fixture in
conftest.py); each test module makes its own lists.
"""

import time
from urllib.parse import urljoin

import requests
from bs4 import BeautifulSoup

from kittypyr.suite import stack

ARCHIVER_KEY = "archiver-key-for-tests"
SITE_ADMIN = "siteadmin@example.org"


class ArchiveServer(stack.ArchiveServer):
    def reader(self):
        """A browser-like client with its own cookies."""
        return Reader(self.base_url)


class MailmanStack(stack.MailmanStack):
    def __init__(self, folder):
        super().__init__(folder, ARCHIVER_KEY, "a-secret-for-the-tests", admins=[SITE_ADMIN])
        self.archive = ArchiveServer(self.folder)


class Reader:
    """A reader's HTTP session: GET pages and submit their forms as a browser would."""

    def __init__(self, base_url):
        self.base_url = base_url
        self.http = requests.Session()

    def get(self, path, **kw):
        return self.http.get(urljoin(self.base_url, path.lstrip("/")), timeout=30, allow_redirects=False, **kw)

    def submit(self, path, form_id, **fields):
        """Fill the form ``form_id`` of the page at ``path`` and post it; return the answer."""
        page = self.get(path)
        form = BeautifulSoup(page.text, "html.parser").find("form", id=form_id)
        if form is None:
            raise AssertionError(f"no form {form_id!r} at {path} (status {page.status_code})")
        data = {field["name"]: field.get("value", "") for field in form.find_all("input")
                if field.get("name") and field.get("type") not in ("checkbox", "submit")}
        for textarea in form.find_all("textarea"):
            data[textarea["name"]] = textarea.text
        data.update(fields)
        return self.http.post(urljoin(page.url, form["action"]), data=data, timeout=30, allow_redirects=False)

    def log_in(self, address, password):
        return self.submit("/login", "login-form", address=address, password=password)


def wait_until(predicate, timeout=60, interval=0.2):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(interval)
    raise TimeoutError("the condition did not come true in time")
