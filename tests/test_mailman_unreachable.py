"""With Mailman core unreachable, the archive keeps serving what it has."""

import logging

import transaction
from pyramid.scripting import prepare
from webtest import TestApp

from kittypyr.archiving import archive_message, ensure_mailing_list
from tests.functional import free_port
from tests.mailbuilder import make_message
from tests.test_app import make_app

LIST = "dev@lists.example.org"


def test_pages_are_served_and_the_failure_logged(tmp_path, caplog):
    app = make_app(tmp_path)
    app.registry.settings.update({"kittypyr.mailman_url": f"http://127.0.0.1:{free_port()}",
                                  "kittypyr.mailman_sync_ttl": "0"})
    with prepare(registry=app.registry) as env:
        archive_message(ensure_mailing_list(env["root"], LIST),
                        make_message(message_id="<a@example.org>", subject="Still readable"))
        transaction.commit()
    browser = TestApp(app)
    with caplog.at_level(logging.WARNING, logger="kittypyr"):
        overview = browser.get(f"/list/{LIST}/")
        assert "Still readable" in overview.text
        assert "Still readable" in browser.get(f"/list/{LIST}/").text
    # Said once, not for every list at every page.
    silent = [r for r in caplog.records if "Mailman core at" in r.getMessage() and "does not answer" in r.getMessage()]
    assert len(silent) == 1
    assert not any("could not fetch the details" in r.getMessage() for r in caplog.records)
    # Logging in says plainly that accounts cannot be checked now.
    answer = browser.get("/login", status=503)
    assert "does not answer right now" in answer.text
    app.registry._zodb_databases[""].close()
