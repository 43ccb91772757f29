"""Accounts for tests that run kittypyr in a process of its own (pserve).

``FakeMailman`` in tests/accounts.py patches the test's own process; a
server started by a test is another process, so it includes this package
through ``pyramid.includes`` instead. The addresses in
``tests.fake_accounts.users`` (``address:password`` pairs, whitespace
separated) may then log in, with no roles on any list. Never part of the
application: it lives with the tests only.
"""

from pyramid.settings import aslist

from kittypyr import security, standalone
from kittypyr.mailman import LoginRefused
from kittypyr.views import accounts


def includeme(config):
    passwords = dict(item.split(":", 1) for item in
                     aslist(config.registry.settings.get("tests.fake_accounts.users", "")))

    def check_login(registry, address, password):
        if passwords.get(address) != password:
            raise LoginRefused(address)
        return address, address.split("@", 1)[0].title(), f"id-{address}"

    accounts.check_login = check_login
    # Each account is told apart, as Mailman tells them (kittypyr.mailman.account_of).
    security.memberships.account = lambda registry, address: f"fake:{address}" if address in passwords else False
    # Accounts answer: pages offer logging in.
    standalone.presence.available = lambda registry: True
