"""Password guessing is slowed down without locking everyone else out.

Failures count against the account guessed (five in ten minutes, from any
address) and, with a much higher bar, against a client address that fails
across many accounts. The clock is the throttle's own, set by the tests.
"""

import pytest
import transaction
from pyramid.scripting import prepare
from waitress.proxy_headers import proxy_headers_middleware
from webtest import TestApp

from kittypyr import security
from kittypyr.archiving import ensure_mailing_list
from kittypyr.security import LoginThrottle
from tests.accounts import FakeMailman, log_in
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
def mailman(monkeypatch, clock):
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
    throttle = LoginThrottle(clock=clock)
    for n in range(5):
        assert throttle.wait_seconds(VICTIM, f"192.0.2.{n}") == 0
        throttle.failed(VICTIM, f"192.0.2.{n}")
        clock.now += 10
    assert throttle.wait_seconds(VICTIM, "192.0.2.99") == pytest.approx(600 - 50)
    assert throttle.wait_seconds(READER, "192.0.2.1") == 0
    clock.now += 551
    assert throttle.wait_seconds(VICTIM, "192.0.2.99") == 0


def test_a_client_is_throttled_only_for_failures_across_many_accounts():
    clock = Clock()
    throttle = LoginThrottle(clock=clock)
    # A hundred failures on one account close that account, not the client.
    for _ in range(100):
        throttle.failed(VICTIM, OFFICE)
    assert throttle.wait_seconds(VICTIM, OFFICE) > 0
    assert throttle.wait_seconds(READER, OFFICE) == 0

    throttle = LoginThrottle(clock=clock)
    # Forty-five failures over nine accounts stay under the bar...
    for address in SPRAYED[:9]:
        for _ in range(5):
            throttle.failed(address, OFFICE)
            clock.now += 1
    assert throttle.wait_seconds(READER, OFFICE) == 0
    # ... fifty over ten reach it, for that client only.
    for _ in range(5):
        throttle.failed(SPRAYED[9], OFFICE)
        clock.now += 1
    assert throttle.wait_seconds(READER, OFFICE) > 0
    assert throttle.wait_seconds(READER, ELSEWHERE) == 0


def test_a_throttled_client_opens_again_once_its_failures_age_out():
    clock = Clock()
    throttle = LoginThrottle(clock=clock)
    for address in SPRAYED[:10]:
        for _ in range(5):
            throttle.failed(address, OFFICE)
        clock.now += 50
    # The first account's failures are the oldest: when they are ten minutes
    # old only forty failures over nine accounts are left, under the bar.
    wait = throttle.wait_seconds(READER, OFFICE)
    assert wait == pytest.approx(600 - 500)
    clock.now += wait - 1
    assert throttle.wait_seconds(READER, OFFICE) > 0
    clock.now += wait
    assert throttle.wait_seconds(READER, OFFICE) == 0


def test_a_right_password_clears_the_account_but_not_the_client():
    clock = Clock()
    throttle = LoginThrottle(clock=clock)
    for address in SPRAYED[:10]:
        for _ in range(5):
            throttle.failed(address, OFFICE)
    throttle.succeeded(SPRAYED[0])
    assert throttle.wait_seconds(SPRAYED[0], ELSEWHERE) == 0
    assert throttle.wait_seconds(READER, OFFICE) > 0


def test_failures_older_than_the_window_are_forgotten():
    clock = Clock()
    throttle = LoginThrottle(clock=clock)
    for address in SPRAYED:
        throttle.failed(address, OFFICE)
    clock.now += 601
    throttle.failed(READER, ELSEWHERE)
    # Nothing is kept of accounts and clients nobody asked about since.
    assert len(throttle.failures) == 2


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
