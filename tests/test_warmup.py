"""kittypyr.warm_up: a process compiles its templates and answers each page kind before it serves."""

import logging

from pyramid.paster import get_appsettings
from webtest import TestApp

from kittypyr import main
from tests.test_app import fill

HERE_INI = __file__.rsplit("/tests/", 1)[0] + "/production.ini"


def settings_for(folder, **extra):
    (folder / "blobs").mkdir(exist_ok=True)
    return {
        "zodbconn.uri": f"file://{folder}/Data.fs?blobstorage_dir={folder}/blobs",
        "kittypyr.base_url": "http://localhost/",
        "pyramid.reload_templates": "false",
        **extra,
    }


def close(app):
    app.registry._zodb_databases[""].close()


def test_a_warm_process_has_answered_every_page_kind_without_writing(tmp_path, caplog):
    app = main({}, **settings_for(tmp_path))
    fill(app, "dev@lists.example.org", 4)
    close(app)
    size = (tmp_path / "Data.fs").stat().st_size

    with caplog.at_level(logging.INFO, logger="kittypyr.warmup"):
        app = main({}, **settings_for(tmp_path, **{"kittypyr.warm_up": "true",
                                                    "kittypyr.warm_up_connections": "2"}))
    try:
        messages = [record.getMessage() for record in caplog.records if record.name == "kittypyr.warmup"]
        assert len(messages) == 1, messages
        assert "templates, 18 pages on 2 connection(s)" in messages[0]
        assert (tmp_path / "Data.fs").stat().st_size == size
        page = TestApp(app).get("/list/dev@lists.example.org/")
        assert "Hello" in page.text
    finally:
        close(app)


def test_an_empty_archive_warms_up_too(tmp_path, caplog):
    with caplog.at_level(logging.INFO, logger="kittypyr.warmup"):
        app = main({}, **settings_for(tmp_path, **{"kittypyr.warm_up": "true"}))
    try:
        assert any("pages on 1 connection(s)" in r.getMessage() for r in caplog.records)
        assert not [r for r in caplog.records if r.levelno >= logging.WARNING and r.name == "kittypyr.warmup"]
        assert TestApp(app).get("/").status_code == 200
    finally:
        close(app)


def test_production_ini_is_the_fast_configuration():
    settings = get_appsettings(HERE_INI)
    assert settings["pyramid.reload_templates"] == "false"
    assert settings["kittypyr.warm_up"] == "true"
