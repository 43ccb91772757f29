"""kittypyr with a real Mailman core: archiving, accounts, private lists, replying.

The stack (conftest.mailman_stack) runs pserve, Mailman core 3.3.10 with its
``mailman-hyperkitty`` plugin, and an SMTP server that hands list mail to
Mailman over LMTP.
"""

import email
import re
import sqlite3
from urllib.parse import unquote

import pytest
import requests

from kittypyr.msgid import message_id_hash
from tests.functional import kittypyr
from tests.mailbuilder import attachment, make_message, multipart, text_part
from tests.mailman_stack import SITE_ADMIN, wait_until

DOMAIN = "lists.example.org"
LIST = f"dev@{DOMAIN}"
PRIVATE = f"board@{DOMAIN}"
MODERATED = f"announce@{DOMAIN}"
MEMBER = "member@example.org"
OUTSIDER = "outsider@example.org"
PASSWORD = "member-password-1"


@pytest.fixture(scope="module")
def stack(mailman_stack):
    public = mailman_stack.create_list(DOMAIN, "dev", archive_policy="public",
                                       description="Where the developers talk")
    private = mailman_stack.create_list(DOMAIN, "board", archive_policy="private")
    moderated = mailman_stack.create_list(DOMAIN, "announce", archive_policy="public",
                                          default_member_action="hold", default_nonmember_action="hold")
    mailman_stack.create_user(MEMBER, "Member", PASSWORD, public, private)
    mailman_stack.create_user(OUTSIDER, "Outsider", PASSWORD, public)
    mailman_stack.create_user(SITE_ADMIN, "Site Admin", PASSWORD)
    del moderated
    return mailman_stack


def post(stack, n, subject, to=LIST, body=None, **kw):
    raw = make_message(message_id=f"<mm{n}@example.org>", subject=subject, sender=("Member", MEMBER),
                       to=to, body=body or f"Posted through Mailman, number {n}.\n", **kw)
    stack.core.deliver(to, raw)
    return f"list/{to}/message/{message_id_hash(f'<mm{n}@example.org>')}/"


def archived(stack, path):
    return wait_until(lambda: (lambda r: r if r[0] == 200 else None)(stack.archive.get(path)))


def test_a_new_list_has_its_archivers_recorded_before_its_first_post(stack):
    """Mailman core 3.3 records a list's archivers on its first use, in
    whichever runner gets there first: two at once record one twice, and
    from then on Mailman shunts every post to that list (MultipleResultsFound).
    The suite records them as it makes the list."""
    stack.create_list(DOMAIN, "fresh", archive_policy="public")
    with sqlite3.connect(stack.core.var_dir / "data" / "mailman.db") as db:
        recorded = db.execute(
            "SELECT a.name, count(*) FROM listarchiver a JOIN mailinglist l ON l.id = a.mailing_list_id"
            " WHERE l.list_id = ? GROUP BY a.name", ("fresh.lists.example.org",)).fetchall()
    counts = dict(recorded)
    assert "hyperkitty" in counts and set(counts.values()) == {1}


def test_mailman_archives_through_the_plugin_and_links_the_permalink(stack):
    archive, sink = stack.archive, stack.sink
    path = post(stack, 1, "Through the real plugin")
    status, page = archived(stack, path)
    # Mailman put the list's prefix before the subject; the archive leaves it out.
    assert "<h1>Through the real plugin</h1>" in page and "[Dev]" not in page
    delivered = sink.wait_for(lambda m: MEMBER in m.rcpt_tos and b"Through the real plugin" in m.data,
                              timeout=60)
    copy = email.message_from_bytes(delivered.data)
    assert "".join(copy["Archived-At"].split()).strip("<>") == archive.base_url + path
    # The list was created on its first message, with its details from Mailman.
    status, overview = archive.get(f"list/{LIST}/")
    assert status == 200 and "Where the developers talk" in overview


def test_messages_wait_in_mailman_while_kittypyr_is_down(stack):
    archive, core = stack.archive, stack.core
    archive.stop()
    try:
        first = post(stack, 2, "Sent while the archive was down")
        wait_until(lambda: core.spool_files(), timeout=60)
    finally:
        archive.start()
    second = post(stack, 3, "Sent after it came back")
    for path in (first, second):
        assert wait_until(lambda p=path: archive.get(p)[0] == 200, timeout=60)
    assert wait_until(lambda: not core.spool_files(), timeout=30)


def test_login_with_the_mailman_password(stack):
    reader = stack.archive.reader()
    refused = reader.log_in(MEMBER, "not the password")
    assert refused.status_code == 403 and "not right" in refused.text
    assert reader.log_in("nobody@example.org", PASSWORD).status_code == 403
    answer = reader.log_in(MEMBER, PASSWORD)
    assert answer.status_code == 303
    assert "Log out" in reader.get("/").text
    reader.submit("/", "logout")
    assert "Log in" in reader.get("/").text


def test_an_address_spelled_another_way_gets_no_more_password_guesses(stack):
    # Mailman reads the address in a URL path, which undoes %-escapes and
    # stops at "?" or "#": each such spelling names the same account.
    guarded = "guarded@example.org"
    stack.create_user(guarded, "Guarded", PASSWORD)
    for n in range(5):
        assert stack.archive.reader().log_in(guarded, f"wrong password {n}").status_code == 403
    assert stack.archive.reader().log_in(guarded, PASSWORD).status_code == 429
    for spelling in ("guarded%40example.org", "%67uarded@example.org", "guarded@example.org?1",
                     "guarded@example.org#1", "guarded@example.org/x/.."):
        reader = stack.archive.reader()
        answer = reader.log_in(spelling, PASSWORD)
        assert answer.status_code == 403 and "not right" in answer.text, spelling
        assert "Log out" not in reader.get("/").text
    # A "%" that starts no escape is read as it is: that account logs in.
    stack.create_user("half%.half@example.org", "Half", PASSWORD)
    assert stack.archive.reader().log_in("half%.half@example.org", PASSWORD).status_code == 303


def test_sign_up_confirm_by_mail_then_log_in(stack):
    address = "newcomer@example.org"
    reader = stack.archive.reader()
    answer = reader.submit("/signup", "signup-form", address=address, display_name="New Comer",
                           password="newcomer-pass", password_again="newcomer-pass")
    assert answer.status_code == 200 and "We sent a mail to" in answer.text
    # Mailman knows the account now, with an address not yet proved.
    assert not stack.core.client().get_address(address).verified
    assert "not been confirmed" in reader.log_in(address, "newcomer-pass").text
    mail = stack.sink.wait_for(lambda m: address in m.rcpt_tos and b"Confirm your address" in m.data,
                               timeout=30).message
    link = re.search(r"http://\S+/confirm\?token=\S+", mail.get_content()).group(0)
    token = unquote(link.split("token=", 1)[1])
    page = reader.get("/confirm", params={"token": token})
    assert page.status_code == 200 and address in page.text  # a GET only shows the button
    assert not stack.core.client().get_address(address).verified
    # The link alone confirms nothing: anyone may sign up anyone's address,
    # and whoever clicks must know the password chosen, or a stranger would
    # hand the one who signed them up a confirmed account with their address.
    for password in ("", "not-the-one"):
        refused = reader.http.post(stack.archive.base_url + "confirm", data={"token": token, "password": password},
                                   timeout=30)
        assert refused.status_code == 403 and "not the password" in refused.text
        assert not stack.core.client().get_address(address).verified
    confirmed = reader.http.post(stack.archive.base_url + "confirm",
                                 data={"token": token, "password": "newcomer-pass"}, timeout=30)
    assert "is confirmed" in confirmed.text
    assert stack.core.client().get_address(address).verified
    assert reader.log_in(address, "newcomer-pass").status_code == 303
    # Signing up twice with one address is refused.
    again = stack.archive.reader().submit("/signup", "signup-form", address=address, display_name="X",
                                          password="another-pass", password_again="another-pass")
    assert again.status_code == 409


def test_an_address_mailman_refuses_is_said_to_be_refused_not_taken(stack):
    address = "dev@my_host.example.org"  # an underscore in the domain: Mailman's check refuses it
    reader = stack.archive.reader()
    answer = reader.submit("/signup", "signup-form", address=address, display_name="Under Score",
                           password="underscore-pass", password_again="underscore-pass")
    assert answer.status_code == 400, answer.text
    assert "Mailman does not accept this address" in answer.text and "exists already" not in answer.text


def test_an_address_signed_up_by_another_and_proved_to_mailman_otherwise_does_not_log_them_in(stack):
    address = "prey@example.org"
    intruder = stack.archive.reader()
    answer = intruder.submit("/signup", "signup-form", address=address, display_name="Prey",
                             password="intruder-pass", password_again="intruder-pass")
    assert "We sent a mail to" in answer.text
    # Its owner proves the address to Mailman without the archive (as
    # confirming a subscription by mail does): the intruder's password
    # logged in as them, to their lists.
    stack.core.client().get_address(address).verify()
    refused = intruder.log_in(address, "intruder-pass")
    assert refused.status_code == 403 and "not been confirmed" in refused.text


def test_a_private_list_is_closed_to_all_but_its_members(stack):
    path = post(stack, 10, "Board secret zanzibarium", to=PRIVATE, body=multipart(
        "mixed", text_part("The zanzibarium figures.\n"), attachment(b"a,b\n", "text/csv", "figures.csv")))
    thread = path.replace("/message/", "/thread/")
    urls = [f"list/{PRIVATE}/", thread, path, path + "raw", path + "attachment/2/figures.csv",
            f"api/list/{PRIVATE}/", f"api/list/{PRIVATE}/threads/",
            "api/" + path.replace("/message/", "/email/"), "api/" + thread]
    member = stack.archive.reader()
    member.log_in(MEMBER, PASSWORD)
    wait_until(lambda: member.get(path).status_code == 200)
    for url in urls:
        assert member.get(url).status_code == 200, url
    assert member.get("api/search", params={"q": "zanzibarium"}).json()["count"] == 1
    admin = stack.archive.reader()
    admin.log_in(SITE_ADMIN, PASSWORD)
    assert admin.get(path).status_code == 200
    outsider = stack.archive.reader()
    outsider.log_in(OUTSIDER, PASSWORD)
    anonymous = stack.archive.reader()
    for reader in (outsider, anonymous):
        for url in urls:
            page = reader.get(url)
            assert page.status_code == 403, url
            assert "zanzibarium" not in page.text
        assert "board" not in reader.get("/").text.lower()
        assert reader.get("api/search", params={"q": "zanzibarium"}).json()["count"] == 0


def test_an_address_that_is_a_pattern_to_mailman_gets_no_one_elses_roles(stack):
    """Mailman reads a subscriber with "*" as a pattern: "*@example.org" would find every member there."""
    path = post(stack, 12, "Board only", to=PRIVATE)
    member = stack.archive.reader()
    assert member.log_in(MEMBER, PASSWORD).status_code == 303
    wait_until(lambda: member.get(path).status_code == 200)
    stack.create_user("*@example.org", "Pattern", PASSWORD)
    pattern = stack.archive.reader()
    pattern.log_in("*@example.org", PASSWORD)
    assert "Pattern" in pattern.get("/").text  # logged in
    assert pattern.get(path).status_code == 403
    assert pattern.get(f"list/{PRIVATE}/").status_code == 403


def _member_reading(stack, number, address, name):
    """``(reader, path)``: a new member of the private list, logged in and reading a post ``number`` made there."""
    path = post(stack, number, f"Board only, post {number}", to=PRIVATE)
    stack.create_user(address, name, PASSWORD, stack.core.client().get_list(PRIVATE))
    reader = stack.archive.reader()
    assert reader.log_in(address, PASSWORD).status_code == 303
    wait_until(lambda: reader.get(path).status_code == 200)
    return reader, path


def test_an_account_deleted_in_mailman_is_logged_out_of_the_archive(stack):
    leaving = "leaving@example.org"
    reader, path = _member_reading(stack, 13, leaving, "Leaving Member")
    assert "Leaving Member" in reader.get("/").text
    stack.core.client().get_user(leaving).delete()
    wait_until(lambda: reader.get(path).status_code == 403, timeout=30)
    front = reader.get("/").text
    assert "Leaving Member" not in front and "Log in" in front


def test_a_password_changed_in_mailman_ends_the_archives_sessions(stack):
    changing = "changing@example.org"
    reader, path = _member_reading(stack, 14, changing, "Changing Member")
    user = stack.core.client().get_user(changing)
    user.password = "another password, for a thief knew the first"
    user.save()
    wait_until(lambda: reader.get(path).status_code == 403, timeout=30)
    assert "Changing Member" not in reader.get("/").text
    assert reader.log_in(changing, "another password, for a thief knew the first").status_code == 303
    wait_until(lambda: reader.get(path).status_code == 200)


def test_a_reply_from_the_web_goes_through_mailman_into_the_same_thread(stack):
    parent = post(stack, 20, "Which compiler?")
    archived(stack, parent)
    member = stack.archive.reader()
    member.log_in(MEMBER, PASSWORD)
    answer = member.submit(parent + "reply", "compose-form", body="GCC 13, from the web.\n")
    assert answer.status_code == 303
    sent = stack.sink.wait_for(lambda m: LIST in m.rcpt_tos and b"GCC 13, from the web" in m.data, timeout=30)
    reply_hash = message_id_hash(sent.message["Message-ID"])
    reply_path = f"list/{LIST}/message/{reply_hash}/"
    status, page = archived(stack, reply_path)
    assert "GCC 13, from the web." in page and "Re: Which compiler?" in page
    thread = stack.archive.get(parent.replace("/message/", "/thread/"))[1]
    assert "GCC 13, from the web." in thread
    # Members received it from Mailman, with its permalink.
    copy = stack.sink.wait_for(lambda m: OUTSIDER in m.rcpt_tos and b"GCC 13, from the web" in m.data,
                               timeout=60).message
    assert "".join(copy["Archived-At"].split()).strip("<>") == stack.archive.base_url + reply_path


def test_a_non_member_subscribes_when_replying(stack):
    address = "joiner@example.org"
    stack.create_user(address, "Joiner", PASSWORD)
    parent = post(stack, 30, "Anyone using MIPS?")
    archived(stack, parent)
    reader = stack.archive.reader()
    reader.log_in(address, PASSWORD)
    form = reader.get(parent + "reply")
    assert "You are not subscribed to this list" in form.text
    answer = reader.submit(parent + "reply", "compose-form", body="I do.\n", subscribe="yes")
    assert answer.status_code == 303
    members = [m.email for m in stack.core.client().get_list(LIST).members]
    assert address in members
    sent = stack.sink.wait_for(lambda m: LIST in m.rcpt_tos and address == m.mail_from, timeout=30)
    archived(stack, f"list/{LIST}/message/{message_id_hash(sent.message['Message-ID'])}/")


def sync(stack):
    """``kittypyr sync``; the embedded storage is the server's while it runs."""
    stack.archive.stop()
    try:
        return kittypyr("sync", stack.archive.config, check=True)
    finally:
        stack.archive.start()


def test_a_moderated_list_says_the_post_waits_for_a_moderator(stack):
    reader = stack.archive.reader()
    reader.log_in(OUTSIDER, PASSWORD)
    assert stack.archive.get(f"list/{MODERATED}/")[0] == 404  # no mail yet, no sync yet
    sync(stack)
    page = reader.get(f"list/{MODERATED}/new")
    assert page.status_code == 200
    assert "wait for their approval" in page.text and 'name="subscribe"' not in page.text


def test_a_list_that_discards_non_members_posts_asks_them_to_subscribe(stack):
    # Members' posts held, non-members' discarded: a non-member told that
    # the post waits for a moderator would have it thrown away.
    stack.create_list(DOMAIN, "release", archive_policy="public",
                      default_member_action="hold", default_nonmember_action="discard")
    sync(stack)
    reader = stack.archive.reader()
    reader.log_in(OUTSIDER, PASSWORD)
    page = reader.get(f"list/release@{DOMAIN}/new")
    assert page.status_code == 200
    assert 'name="subscribe"' in page.text and "To post, you subscribe to it" in page.text
    assert "wait for their approval before it reaches the list" not in page.text
    refused = reader.submit(f"list/release@{DOMAIN}/new", "compose-form", subject="Hi", body="Hello.\n")
    assert refused.status_code == 400 and "please confirm that you want to subscribe" in refused.text


def test_sync_brings_lists_owners_and_policies_from_mailman(stack):
    team = stack.create_list(DOMAIN, "team", archive_policy="public", description="The team")
    team.add_owner("olga@example.org")
    stack.create_list(DOMAIN, "quiet", archive_policy="never")
    result = sync(stack)
    assert f"created team@{DOMAIN}" in result.stdout and "quiet@" not in result.stdout
    status, page = stack.archive.get(f"list/team@{DOMAIN}/")
    assert status == 200 and "The team" in page
    assert stack.archive.get(f"list/quiet@{DOMAIN}/")[0] == 404
    # A policy changed in Mailman closes the list after the time-to-live (2 s here).
    team.settings["archive_policy"] = "private"
    team.settings.save()
    assert wait_until(lambda: stack.archive.get(f"list/team@{DOMAIN}/")[0] == 403, timeout=30)


def test_mail_mailman_hands_over_for_a_list_the_archive_knew_as_never_archived_is_archived(stack):
    # The archive kept the "never" a sync brought; Mailman's policy then
    # changed, and the mail it handed over was answered 200 and dropped
    # until a reader happened to open the list. Mailman hands mail over only
    # for lists it archives: the archive asks it again.
    later = stack.create_list(DOMAIN, "later", archive_policy="public", default_nonmember_action="accept")
    assert archived(stack, post(stack, 901, "Archived before", to=f"later@{DOMAIN}"))[0] == 200
    for policy in ("never", "public"):
        later.settings["archive_policy"] = policy
        later.settings.save()
        if policy == "never":
            sync(stack)
    status, page = archived(stack, post(stack, 902, "Archived at last", to=f"later@{DOMAIN}"))
    assert status == 200 and "Archived at last" in page


def test_a_policy_changed_in_mailman_holds_for_every_url_family(stack):
    """Public -> private -> public in Mailman: within the TTL (2 s here) every
    kind of page follows, and stays so (no flipping between 403 and 200)."""
    team = stack.create_list(DOMAIN, "policy", archive_policy="public", default_nonmember_action="accept")
    address = f"policy@{DOMAIN}"
    word = "quetzalcoatlus"
    path = post(stack, 900, f"Flying {word}", to=address, body=multipart(
        "mixed", text_part(f"About the {word}.\n"), attachment(b"wingspan,11m\n", "text/csv", "wings.csv")))
    status, page = archived(stack, path)
    attachment_path = re.search(r'href="[^"]*/(list/[^"]*/attachment/\d+/[^"]+)"', page).group(1)
    profile_path = re.search(r'href="[^"]*/(users/[^"/]+/)"', page).group(1)
    thread_path = re.search(r'href="[^"]*/(list/[^"]*/thread/[^"/]+/)"', page).group(1)
    message_hash = message_id_hash("<mm900@example.org>")
    thread_key = thread_path.rstrip("/").rsplit("/", 1)[1]
    closed = {  # path: what must not be seen there once the list is private
        f"list/{address}/": 403, "list/{address}/2020/1/".format(address=address): 403,
        thread_path: 403, path: 403, path + "raw": 403, attachment_path: 403,
        f"api/list/{address}/": 403, f"api/list/{address}/thread/{thread_key}/": 403,
        f"api/list/{address}/email/{message_hash}/": 403, f"list/{address}/tag/": 403,
        f"list/{address}/export/policy.mbox.gz": 403, f"list/{address}/feed/": 403,
        f"list/{address}/feed/threads": 403, thread_path + "t.mbox.gz": 403, thread_path + "t.atom": 403,
    }
    hidden = [f"search?q={word}", f"api/search?q={word}", "", "api/lists/", profile_path,
              f"search.atom?q={word}"]

    def seen():
        answers = {p: stack.archive.get(p) for p in [*closed, *hidden]}
        # The subject or the list's address, not the word: a search page repeats its query.
        return {p: (status, f"Flying {word}" in text or address in text) for p, (status, text) in answers.items()}

    opened = seen()
    assert all(status == 200 for status, _ in opened.values()), opened
    assert all(shown for p, (_, shown) in opened.items() if p in hidden), opened

    team.settings["archive_policy"] = "private"
    team.settings.save()
    assert wait_until(lambda: stack.archive.get(f"list/{address}/raw")[0] == 403 or
                      stack.archive.get(path + "raw")[0] == 403, timeout=30)
    for _ in range(3):  # and it stays closed, on every family
        now = seen()
        for p, expected in closed.items():
            assert now[p][0] == expected, (p, now[p])
        for p in hidden:
            assert not now[p][1], (p, now[p])

    team.settings["archive_policy"] = "public"
    team.settings.save()
    assert wait_until(lambda: stack.archive.get(path + "raw")[0] == 200, timeout=30)
    reopened = seen()
    assert all(status == 200 for status, _ in reopened.values()), reopened
    assert all(shown for p, (_, shown) in reopened.items() if p in hidden), reopened


def test_mail_for_a_list_mailman_does_not_have_is_400_and_makes_no_list(stack):
    from tests.mailman_stack import ARCHIVER_KEY

    raw = make_message(message_id="<nosuch1@example.org>", subject="Nobody's list")
    answer = requests.post(stack.archive.base_url + "api/mailman/archive", data={"mlist": f"nosuch@{DOMAIN}"},
                           files={"message": ("message.txt", raw)},
                           headers={"Authorization": f"Token {ARCHIVER_KEY}"}, timeout=30)
    assert answer.status_code == 400 and "no list" in answer.json()["error"]
    assert stack.archive.get(f"list/nosuch@{DOMAIN}/")[0] == 404


def test_an_unconfirmed_account_is_taken_back_and_a_confirmed_one_never(stack):
    """What a sign-up whose mail failed asks of the real Mailman core: the account it made goes, so that
    signing up again works; an account whose address is verified is never removed this way."""
    from types import SimpleNamespace

    from kittypyr.mailman import create_account, remove_unconfirmed_account

    registry = SimpleNamespace(settings={"kittypyr.mailman_url": stack.core.rest_url,
                                         "kittypyr.mailman_user": stack.core.rest_user,
                                         "kittypyr.mailman_password": stack.core.rest_password})
    client = stack.core.client()
    create_account(registry, "unsent@example.org", "Unsent", "a long password")
    assert not client.get_address("unsent@example.org").verified
    remove_unconfirmed_account(registry, "unsent@example.org")
    with pytest.raises(Exception):
        client.get_user("unsent@example.org")
    create_account(registry, "unsent@example.org", "Unsent", "a long password")  # again, as a new sign-up
    remove_unconfirmed_account(registry, "nobody-at-all@example.org")  # nothing to take back
    remove_unconfirmed_account(registry, MEMBER)  # verified: stays
    assert client.get_user(MEMBER).addresses
