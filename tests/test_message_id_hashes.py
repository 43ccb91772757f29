"""A message's hash is HyperKitty's for every Message-ID header, odd ones included.

The expected hashes are the ones HyperKitty 1.3.12 gives (get_message_id on
the message parsed as hyperkitty_import parses it, then get_message_id_hash),
so a permalink an existing HyperKitty made leads to the same message here.
"""

import pytest
from webtest import TestApp

from kittypyr.mail import parse_message
from kittypyr.msgid import message_id_hash
from tests.test_archiver_api import AUTH, LIST, app, post  # noqa: F401 (fixture)


def mail_with_message_id(header):
    return (f"From: a@example.org\nSubject: odd id\nMessage-ID: {header}\n"
            "Date: Wed, 1 Jan 2020 12:00:00 +0000\n\nbody\n").encode()


HYPERKITTY = [
    # A space inside and no closing bracket: HyperKitty keeps what comes before the space.
    ("<spaced id@example.org", "<spaced", "POWJLKUFPWTTZU44R5H3RFU5ZNPH3F36"),
    # A comma at the end inside the brackets is dropped, with or without a space before >.
    ("<comma@example.org,>", "comma@example.org", "B6663JTL4NHWXJILV6LVNJUWHTDDTR5P"),
    ("<two@example.org, >", "two@example.org", "CD7ZL2UQVWELG4CELGTIIVDAWREUDFYO"),
    # Nothing inside the brackets: the empty id.
    ("<>", "", "3I42H3S6NNFQ2MSVX7XZKYAYSCX5QBYJ"),
    # Quotes instead of brackets are taken off like brackets.
    ('"quoted@example.org"', "quoted@example.org", "BCRD22GNN5KIU6O4ZXCL4WAIXWBKNMQO"),
    # A comment after the id stays part of it.
    ("<c@example.org> (comment)", "<c@example.org>(comment)", "AGWOJG7NZEYASGN4UQWF5AMZG3RTDTPK"),
    ("<first@example.org> <second@example.org>", "first@example.org", "MGYTF6UD3ZGCEDQJK7YJRN4MZEXJL57S"),
    ("< spaced @example.org >", "spaced@example.org", "66VENX3VZG4VORIFOMLQDSS4ZX7DUCZB"),
    ("<a<inner>@example.org>", "<a", "OYSJWSVBWEYBFSH6B3IRTGO34ODRAWGL"),
    ('<"quoted local"@example.org>', '"quotedlocal"@example.org', "LQN5QBI25WV6PYAK56YVH2VWQVU4W7OM"),
    ("bare@example.org", "bare@example.org", "CDKISEOQIZSMNZTZ6FKHJOZX7NZAOVPU"),
    # HyperKitty's column holds 254 characters: longer ids are cut there.
    ("<" + "x" * 300 + "@example.org>", "x" * 254, "52E674H55BL46OHMYHS4PHROXQ6IIIAN"),
]


@pytest.mark.parametrize("header, message_id, expected", HYPERKITTY)
def test_message_id_and_hash_are_hyperkittys(header, message_id, expected):
    parsed = parse_message(mail_with_message_id(header))
    assert parsed.message_id == message_id
    assert message_id_hash(parsed.message_id) == expected


@pytest.mark.parametrize("header, message_id, expected", HYPERKITTY)
def test_hyperkittys_permalink_opens_the_message(app, header, message_id, expected):  # noqa: F811
    browser = TestApp(app)
    answered = post(browser, mail_with_message_id(header)).json["url"]
    assert answered.endswith(f"/list/{LIST}/message/{expected}/")
    page = browser.get(f"/list/{LIST}/message/{expected}/")
    assert "odd id" in page.text
    # Mailman asks for the permalink with the header stripped of its <>.
    asked = browser.get("/api/mailman/urls", {"mlist": LIST, "msgid": header.strip().strip("<>")},
                        headers=AUTH).json["url"]
    assert asked == answered


@pytest.mark.parametrize("parent_id", ["<comma@example.org,>", "<spaced id@example.org", "<two@example.org, >"])
def test_a_reply_naming_an_odd_message_id_finds_its_parent(app, parent_id):  # noqa: F811
    browser = TestApp(app)
    post(browser, mail_with_message_id(parent_id))
    reply = (f"From: b@example.org\nSubject: Re: odd id\nMessage-ID: <answer@example.org>\n"
             f"In-Reply-To: {parent_id}\nReferences: {parent_id}\n"
             "Date: Wed, 1 Jan 2020 13:00:00 +0000\n\nanswer\n").encode()
    post(browser, reply)
    parent = message_id_hash(parse_message(mail_with_message_id(parent_id)).message_id)
    answer = browser.get(f"/list/{LIST}/thread/{message_id_hash('answer@example.org')}/", status=301)
    assert answer.location.endswith(f"/list/{LIST}/thread/{parent}/")
