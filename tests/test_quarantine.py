"""``kittypyr quarantine``: the mail the archive could not read, listed, saved, tried again and dropped."""

import transaction
from pyramid.paster import get_app
from pyramid.scripting import prepare
from webtest import TestApp

from kittypyr.msgid import message_id_hash
from tests.functional import kittypyr, write_config
from tests.mailbuilder import make_message

LIST = "dev@lists.example.org"
GARBAGE = b"\x00\x01 no mail at all, not one header line\n"
# Readable mail, held as an older kittypyr that could not read it would have.
READABLE = make_message(message_id="<held@example.org>", subject="Held back", body="Salvaged words.\n")


def held_archive(folder):
    config = write_config(folder)
    app = get_app(str(config))
    with prepare(registry=app.registry) as env:
        quarantine = env["root"].quarantine
        quarantine.hold(LIST, GARBAGE, "no header line")
        quarantine.hold(LIST, READABLE, "could not be read by an older release")
        transaction.commit()
    app.registry._zodb_databases[""].close()
    return config


def test_held_mail_is_listed_saved_tried_again_and_dropped(tmp_path):
    config = held_archive(tmp_path)
    listed = kittypyr("quarantine", config, check=True).stdout
    assert "000001" in listed and "000002" in listed and "no header line" in listed and LIST in listed

    saved = tmp_path / "held"
    kittypyr("quarantine", config, "--save", saved, check=True)
    assert (saved / "000001.eml").read_bytes() == GARBAGE
    assert (saved / "000002.eml").read_bytes() == READABLE

    retried = kittypyr("quarantine", config, "--retry", check=True).stdout
    assert "000002: archived" in retried and "000001: still unreadable" in retried
    after = kittypyr("quarantine", config, check=True).stdout
    assert "000001" in after and "000002" not in after

    dropped = kittypyr("quarantine", config, "--drop", "000001", check=True).stdout
    assert "dropped 000001" in dropped
    assert "nothing is held" in kittypyr("quarantine", config, check=True).stdout

    app = get_app(str(config))
    try:
        page = TestApp(app).get(f"/list/{LIST}/message/{message_id_hash('<held@example.org>')}/")
        assert "Held back" in page.text and "Salvaged words." in page.text
    finally:
        app.registry._zodb_databases[""].close()


def test_what_is_dropped_is_not_tried_again_and_the_rest_is(tmp_path):
    config = held_archive(tmp_path)
    said = kittypyr("quarantine", config, "--retry", "--drop", "2", check=True).stdout
    assert "dropped 000002" in said and "000001: still unreadable" in said and "000002: archived" not in said
    listed = kittypyr("quarantine", config, check=True).stdout
    assert "000001" in listed and "000002" not in listed
    app = get_app(str(config))
    try:
        TestApp(app).get(f"/list/{LIST}/message/{message_id_hash('<held@example.org>')}/", status=404)
    finally:
        app.registry._zodb_databases[""].close()


def test_dropping_what_is_not_held_says_so_and_drops_nothing(tmp_path):
    config = held_archive(tmp_path)
    refused = kittypyr("quarantine", config, "--drop", "000009")
    assert refused.returncode == 1 and "000009 is not held" in refused.stderr
    listed = kittypyr("quarantine", config, check=True).stdout
    assert "000001" in listed and "000002" in listed


def test_a_held_mail_is_dropped_by_the_number_as_listed_or_without_its_zeros(tmp_path):
    config = held_archive(tmp_path)
    assert "dropped 000002" in kittypyr("quarantine", config, "--drop", "2", check=True).stdout
    listed = kittypyr("quarantine", config, check=True).stdout
    assert "000001" in listed and "000002" not in listed


def test_a_reason_quoting_binary_mail_is_listed_in_one_readable_line(tmp_path):
    config = write_config(tmp_path)
    app = get_app(str(config))
    with prepare(registry=app.registry) as env:
        env["root"].quarantine.hold(LIST, GARBAGE, "no header line: starts b'\x00\x01\x1b[2J\r\nend" + "z" * 500)
        transaction.commit()
    app.registry._zodb_databases[""].close()
    listed = kittypyr("quarantine", config, check=True).stdout
    line = listed.splitlines()[0]
    assert len(listed.splitlines()) == 1 and "\x1b" not in line and "\r" not in line and "\x00" not in line
    assert "no header line" in line and len(line) < 300


def test_saving_where_no_folder_can_be_made_says_so_and_drops_nothing(tmp_path):
    config = held_archive(tmp_path)
    a_file = tmp_path / "notes.txt"
    a_file.write_text("notes\n")
    for target in (a_file, a_file / "held"):
        refused = kittypyr("quarantine", config, "--save", target, "--drop", "000001")
        assert refused.returncode == 2, refused.stdout
        assert "Traceback" not in refused.stderr, refused.stderr
        assert f"kittypyr quarantine: cannot save into {target}" in refused.stderr
        assert "give a folder this user can write to" in refused.stderr
    listed = kittypyr("quarantine", config, check=True).stdout
    assert "000001" in listed and "000002" in listed
