"""Password guessing is slowed down without locking everyone else out.

Failures count against the account guessed (five in ten minutes, from any
address) and, with a much higher bar, against a client address that fails
across many accounts. They are kept in the archive, so that every process
counts them (see test_failures_count_across_processes_sharing_zeo). The
clock is the throttle's own, set by the tests.
"""

import threading

import pytest
import transaction
from pyramid.scripting import prepare
from waitress.proxy_headers import proxy_headers_middleware
from webtest import TestApp

from kittypyr import security
from kittypyr.archiving import ensure_mailing_list
from kittypyr.mailman import LoginRefused
from kittypyr.merging import AgeingCounts
from kittypyr.security import LoginThrottle
from kittypyr.views import accounts as account_views
from tests.accounts import FakeMailman, forget_login_failures, log_in
from tests.test_app import make_app

PRIVATE = "board@lists.example.org"
VICTIM = "victim@example.org"
READER = "reader@example.org"
PROXY = "127.0.0.1"
OFFICE = "203.0.113.7"
ELSEWHERE = "198.51.100.20"
# Enough accounts for an attacker to spread guesses over.
SPRAYED = [f"user{n}@example.org" for n in range(12)]


class Clock:
    def __init__(self):
        self.now = 1000.0

    def __call__(self):
        return self.now


@pytest.fixture(scope="module")
def site(tmp_path_factory):
    app = make_app(tmp_path_factory.mktemp("throttle"))
    with prepare(registry=app.registry) as env:
        ensure_mailing_list(env["root"], PRIVATE).archive_policy = "private"
        transaction.commit()
    yield app
    app.registry._zodb_databases[""].close()


@pytest.fixture
def clock(monkeypatch):
    clock = Clock()
    monkeypatch.setattr(security.login_throttle, "clock", clock)
    return clock


@pytest.fixture
def mailman(monkeypatch, clock, site):
    forget_login_failures(site)
    fake = FakeMailman(monkeypatch)
    for address in [VICTIM, READER, *SPRAYED]:
        fake.add_user(address, address.split("@")[0].title(), roles=[(PRIVATE, "member")])
    return fake


def browser(app, address, forwarded_for=None):
    """A reader's browser, connecting from ``address``."""
    environ = {"REMOTE_ADDR": address}
    if forwarded_for is not None:
        environ["HTTP_X_FORWARDED_FOR"] = forwarded_for
    return TestApp(app, extra_environ=environ)


def guess(app, address):
    answer = log_in(app, address, "wrong password")
    assert answer.status_int == 403 and "not right" in answer.text
    return answer


def spray(app_for_attempt, accounts=SPRAYED[:10], per_account=5):
    """Five wrong passwords for each of ten accounts: fifty failures."""
    attempt = 0
    for address in accounts:
        for _ in range(per_account):
            guess(app_for_attempt(attempt), address)
            attempt += 1


# The throttle on its own


def test_an_account_is_throttled_after_five_failures_from_any_addresses():
    clock = Clock()
    throttle, failures = LoginThrottle(clock=clock), AgeingCounts()
    for n in range(5):
        assert throttle.wait_seconds(failures, VICTIM, f"192.0.2.{n}") == 0
        throttle.failed(failures, VICTIM, f"192.0.2.{n}")
        clock.now += 10
    assert throttle.wait_seconds(failures, VICTIM, "192.0.2.99") == pytest.approx(600 - 50)
    assert throttle.wait_seconds(failures, READER, "192.0.2.1") == 0
    clock.now += 551
    assert throttle.wait_seconds(failures, VICTIM, "192.0.2.99") == 0


def test_a_client_is_throttled_only_for_failures_across_many_accounts():
    clock = Clock()
    throttle, failures = LoginThrottle(clock=clock), AgeingCounts()
    # A hundred failures on one account close that account, not the client.
    for _ in range(100):
        throttle.failed(failures, VICTIM, OFFICE)
    assert throttle.wait_seconds(failures, VICTIM, OFFICE) > 0
    assert throttle.wait_seconds(failures, READER, OFFICE) == 0

    throttle, failures = LoginThrottle(clock=clock), AgeingCounts()
    # Forty-five failures over nine accounts stay under the bar...
    for address in SPRAYED[:9]:
        for _ in range(5):
            throttle.failed(failures, address, OFFICE)
            clock.now += 1
    assert throttle.wait_seconds(failures, READER, OFFICE) == 0
    # ... fifty over ten reach it, for that client only.
    for _ in range(5):
        throttle.failed(failures, SPRAYED[9], OFFICE)
        clock.now += 1
    assert throttle.wait_seconds(failures, READER, OFFICE) > 0
    assert throttle.wait_seconds(failures, READER, ELSEWHERE) == 0


def test_a_throttled_client_opens_again_once_its_failures_age_out():
    clock = Clock()
    throttle, failures = LoginThrottle(clock=clock), AgeingCounts()
    for address in SPRAYED[:10]:
        for _ in range(5):
            throttle.failed(failures, address, OFFICE)
        clock.now += 50
    # The first account's failures are the oldest: when they are ten minutes
    # old only forty failures over nine accounts are left, under the bar.
    wait = throttle.wait_seconds(failures, READER, OFFICE)
    assert wait == pytest.approx(600 - 500)
    clock.now += wait - 1
    assert throttle.wait_seconds(failures, READER, OFFICE) > 0
    clock.now += wait
    assert throttle.wait_seconds(failures, READER, OFFICE) == 0


def test_a_right_password_clears_the_account_but_not_the_client():
    clock = Clock()
    throttle, failures = LoginThrottle(clock=clock), AgeingCounts()
    for address in SPRAYED[:10]:
        for _ in range(5):
            throttle.failed(failures, address, OFFICE)
    throttle.succeeded(failures, SPRAYED[0])
    assert throttle.wait_seconds(failures, SPRAYED[0], ELSEWHERE) == 0
    assert throttle.wait_seconds(failures, READER, OFFICE) > 0


def test_failures_older_than_two_windows_are_forgotten():
    clock = Clock()
    throttle, failures = LoginThrottle(clock=clock), AgeingCounts()
    for address in SPRAYED:
        throttle.failed(failures, address, OFFICE)
    clock.now += 601
    throttle.failed(failures, READER, ELSEWHERE)
    # Still kept for a while (and no longer counted) ...
    assert len(failures) == 2 * len(SPRAYED) + 2
    assert throttle.wait_seconds(failures, SPRAYED[0], OFFICE) == 0
    clock.now += 600
    throttle.failed(failures, READER, ELSEWHERE)
    # ... then nothing is kept of accounts and clients nobody asked about since.
    assert len(failures) == 4


def test_a_client_without_an_address_is_counted_beside_the_others():
    # A server that gives no REMOTE_ADDR: such clients count as one.
    clock = Clock()
    throttle, failures = LoginThrottle(clock=clock), AgeingCounts()
    for address in SPRAYED[:10]:
        for client in (None, OFFICE):
            for _ in range(5):
                throttle.failed(failures, address, client)
    assert throttle.wait_seconds(failures, READER, None) > 0
    assert throttle.wait_seconds(failures, READER, OFFICE) > 0
    assert throttle.wait_seconds(failures, READER, ELSEWHERE) == 0


def count_at_once_in_two_processes(first_db, second_db, catch_up=lambda db: None):
    """Wrong passwords for VICTIM counted at once through two databases; what a third reading sees."""
    clock = Clock()
    throttle = LoginThrottle(clock=clock)
    setup = first_db.open()
    setup.root()["failures"] = AgeingCounts()
    # The first failure of a window starts its generation: a change of the
    # record itself, which two processes cannot both make (one runs again).
    throttle.failed(setup.root()["failures"], READER, OFFICE)
    transaction.commit()
    setup.close()
    for _ in range(2):
        catch_up(second_db)
        managers = [transaction.TransactionManager() for _ in range(2)]
        connections = [db.open(transaction_manager=manager) for db, manager in zip((first_db, second_db), managers)]
        for n, connection in enumerate(connections):
            throttle.failed(connection.root()["failures"], VICTIM, f"192.0.2.{n}")
        # The second commit merges into the first instead of conflicting.
        for manager in managers:
            manager.commit()
        for connection in connections:
            connection.close()
        clock.now += 1
    catch_up(first_db)
    reader = first_db.open()
    failures = reader.root()["failures"]
    waits = [throttle.wait_seconds(failures, VICTIM, ELSEWHERE)]
    throttle.failed(failures, VICTIM, ELSEWHERE)
    waits.append(throttle.wait_seconds(failures, VICTIM, ELSEWHERE))
    transaction.abort()
    reader.close()
    return waits


def test_wrong_passwords_counted_at_once_by_two_processes_add_up(zodb):
    # Two connections with transactions of their own stand for two processes.
    assert count_at_once_in_two_processes(zodb, zodb) == [0, pytest.approx(600 - 2)]


def test_wrong_passwords_counted_at_once_add_up_on_a_shared_storage(shared_storage, tmp_path):
    first, second = (shared_storage.open_db(tmp_path / name) for name in ("first", "second"))
    try:
        waits = count_at_once_in_two_processes(first, second, shared_storage.catch_up)
    finally:
        first.close()
        second.close()
    assert waits == [0, pytest.approx(600 - 2)]


# What readers see


def test_guessing_one_account_leaves_the_others_at_that_address_open(site, mailman):
    attacker = browser(site, OFFICE)
    for _ in range(5):
        guess(attacker, VICTIM)
    for _ in range(20):
        assert log_in(attacker, VICTIM, "still wrong").status_int == 429
    blocked = log_in(browser(site, ELSEWHERE), VICTIM)  # even the right password waits
    assert blocked.status_int == 429 and "Too many failed attempts" in blocked.text

    colleague = browser(site, OFFICE)
    assert log_in(colleague, READER).status_int == 303
    assert "Reader" in colleague.get("/").text
    assert colleague.get(f"/list/{PRIVATE}/").status_int == 200


def test_right_passwords_and_pages_write_nothing(site, mailman):
    database = site.registry._zodb_databases[""]
    reader = browser(site, OFFICE)
    reader.get("/")
    before = database.lastTransaction()
    assert log_in(reader, READER).status_int == 303
    assert reader.get(f"/list/{PRIVATE}/").status_int == 200
    assert log_in(browser(site, OFFICE), "nobody@example.org", "").status_int == 403
    # Only the wrong password wrote.
    assert database.lastTransaction() != before
    after_failure = database.lastTransaction()
    assert log_in(browser(site, OFFICE), READER).status_int == 303
    assert database.lastTransaction() == after_failure


def _mailman_slow_to_refuse_the_first_guess(monkeypatch):
    """``(asking, answer, asked)``: Mailman refuses every password, "guess 0" once ``answer`` is set
    (``asking`` says it is being asked); ``asked`` lists the passwords it was asked."""
    asking, answer = threading.Event(), threading.Event()
    asked = []

    def slow_mailman(registry, address, password):
        asked.append(password)
        if password == "guess 0":
            asking.set()
            answer.wait(10)
        raise LoginRefused(address)

    monkeypatch.setattr(account_views, "check_login", slow_mailman)
    return asking, answer, asked


def test_guesses_sent_at_once_are_checked_one_after_the_other(site, mailman, monkeypatch):
    # A count is read before Mailman is asked and written after: guesses
    # sent together would all read "no failures yet", and each be checked.
    asking, answer, asked = _mailman_slow_to_refuse_the_first_guess(monkeypatch)
    first = []
    thread = threading.Thread(target=lambda: first.append(log_in(browser(site, OFFICE), VICTIM, "guess 0")))
    thread.start()
    assert asking.wait(10)
    at_once = [log_in(browser(site, ELSEWHERE), VICTIM, f"guess {n}") for n in range(1, 20)]
    answer.set()
    thread.join(10)
    assert first[0].status_int == 403 and "not right" in first[0].text
    assert {a.status_int for a in at_once} == {429} and int(at_once[0].headers["Retry-After"]) > 0
    assert asked == ["guess 0"]
    # Once the first guess is answered, the next is checked, and counted, as usual.
    assert log_in(browser(site, ELSEWHERE), VICTIM, "guess 20").status_int == 403
    assert asked == ["guess 0", "guess 20"]


def test_a_guessed_account_opens_again_after_ten_minutes(site, mailman, clock):
    attacker = browser(site, OFFICE)
    for _ in range(5):
        guess(attacker, VICTIM)
    clock.now += 599
    assert log_in(browser(site, OFFICE), VICTIM).status_int == 429
    clock.now += 2
    assert log_in(browser(site, OFFICE), VICTIM).status_int == 303


def test_guessing_across_many_accounts_closes_that_client_only(site, mailman, clock):
    attacker = browser(site, OFFICE)
    spray(lambda attempt: attacker)
    blocked = log_in(browser(site, OFFICE), READER)
    assert blocked.status_int == 429 and int(blocked.headers["Retry-After"]) > 0
    assert log_in(browser(site, ELSEWHERE), VICTIM).status_int == 303
    clock.now += 601
    assert log_in(browser(site, OFFICE), READER).status_int == 303


def test_one_ipv6_network_is_one_client_whatever_address_of_it_guesses_from(site, mailman, clock):
    # A host is given a whole /64: counted by address, it could send each
    # guess from a new one and never be slowed down.
    spray(lambda attempt: browser(site, f"2001:db8:7:9::{attempt + 1:x}"))
    assert log_in(browser(site, "2001:db8:7:9:ffff::1"), READER).status_int == 429
    assert log_in(browser(site, "2001:db8:7:a::1"), READER).status_int == 303


def test_x_forwarded_for_from_the_client_itself_is_not_believed(site, mailman):
    # Without a trusted proxy in front, a client naming a new address in
    # every attempt is still one client.
    spray(lambda attempt: browser(site, OFFICE, forwarded_for=f"192.0.2.{attempt}"))
    assert log_in(browser(site, OFFICE, forwarded_for="192.0.2.200"), READER).status_int == 429


def test_behind_a_trusted_proxy_each_forwarded_client_counts_on_its_own(site, mailman):
    # What waitress does with trusted_proxy, trusted_proxy_headers and
    # clear_untrusted_proxy_headers set as production.ini shows.
    proxied = proxy_headers_middleware(site, trusted_proxy=PROXY, trusted_proxy_headers={"x-forwarded-for"},
                                       clear_untrusted=True)
    attacker = browser(proxied, PROXY, forwarded_for=OFFICE)
    spray(lambda attempt: attacker)
    assert log_in(browser(proxied, PROXY, forwarded_for=OFFICE), READER).status_int == 429
    reader = browser(proxied, PROXY, forwarded_for=ELSEWHERE)
    assert log_in(reader, READER).status_int == 303
    assert reader.get(f"/list/{PRIVATE}/").status_int == 200
    # A client that talks to waitress directly cannot pose as another one.
    direct = browser(proxied, OFFICE, forwarded_for=ELSEWHERE)
    assert log_in(direct, VICTIM).status_int == 429


def test_guesses_at_a_confirmation_link_sent_at_once_are_checked_one_after_the_other(site, mailman, monkeypatch):
    # Confirming a sign-up asks for the password chosen, and counts wrong
    # ones as the login does; but it did not take the account in turn, so
    # guesses sent together each read "no failures yet" and were checked.
    from kittypyr.security import sign

    asking, answer, asked = _mailman_slow_to_refuse_the_first_guess(monkeypatch)
    token = sign(site.registry, "confirm", VICTIM, account_views.CONFIRMATION_MAX_AGE)

    def confirm_with(client, n):
        return browser(site, client).post("/confirm", {"token": token, "password": f"guess {n}"}, status="*")

    first = []
    thread = threading.Thread(target=lambda: first.append(confirm_with(OFFICE, 0)))
    thread.start()
    assert asking.wait(10)
    at_once = [confirm_with(ELSEWHERE, n) for n in range(1, 10)]
    answer.set()
    thread.join(10)
    assert first[0].status_int == 403
    assert {a.status_int for a in at_once} == {429}
    assert asked == ["guess 0"]
    assert confirm_with(ELSEWHERE, 10).status_int == 403 and asked == ["guess 0", "guess 10"]
