"""Readers with accounts, for WebTest functional tests.

``FakeMailman`` stands in for Mailman core's two answers the archive needs
on every page: whether a password is right, and which roles an address has
on which lists. The integration tests in test_accounts_mailman.py and
test_mailman.py ask a real Mailman core instead.
"""

import transaction
from pyramid.scripting import prepare

from kittypyr import security, standalone
from kittypyr.mailman import LoginRefused
from kittypyr.views import accounts as account_views

PASSWORD = "correct horse battery"


class FakeMailman:
    def __init__(self, monkeypatch):
        self.passwords = {}
        self.names = {}
        self.roles = {}
        self.made = {}  # address -> how many accounts it has had
        monkeypatch.setattr(account_views, "check_login", self.check_login)
        monkeypatch.setattr(security.memberships, "_fetch", self.fetch)
        # It answers: pages offer logging in, replying and voting.
        monkeypatch.setattr(standalone.presence, "available", lambda registry: True)
        security.memberships.entries.clear()

    def add_user(self, address, name="", password=PASSWORD, roles=()):
        """``roles``: ``(list address, role)`` pairs, role one of member, owner, moderator."""
        if address not in self.passwords:
            self.made[address] = self.made.get(address, 0) + 1
        self.passwords[address] = password
        self.names[address] = name
        self.roles[address] = set(roles)
        security.memberships.forget(address)

    def change_password(self, address, password):
        self.passwords[address] = password
        security.memberships.forget(address)

    def check_login(self, registry, address, password):
        if self.passwords.get(address) != password:
            raise LoginRefused(address)
        return address, self.names[address], f"id-{address}"

    def remove_user(self, address):
        """Delete the account, as a Mailman administrator can."""
        del self.passwords[address], self.names[address], self.roles[address]
        security.memberships.forget(address)

    def fetch(self, registry, address):
        roles = self.roles.get(address, ())
        roles = frozenset((security.list_id_of(list_address), role) for list_address, role in roles)
        if address not in self.passwords:
            return roles, False, False
        # As kittypyr.mailman.account_of tells accounts apart: which one, and its password.
        return roles, f"id-{address}-{self.made[address]}:{self.passwords[address]}", False


def forget_login_failures(app):
    """Start counting wrong passwords afresh in ``app``'s archive, where every process counts them."""
    with prepare(registry=app.registry) as env:
        env["root"].login_failures.clear()
        transaction.commit()


def log_in(app, address, password=PASSWORD):
    """Log ``app`` (a WebTest TestApp) in through the login form; return the answer."""
    form = app.get("/login").forms["login-form"]
    form["address"] = address
    form["password"] = password
    return form.submit(expect_errors=True)


def log_out(app):
    app.get("/").forms["logout"].submit()


def csrf_token(app):
    """The reader's form token, as the pages carry it."""
    return app.get("/login").forms["login-form"]["csrf_token"].value
