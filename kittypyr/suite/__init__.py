"""The whole Mailman 3 suite on loopback: Mailman core, an MTA and kittypyr, wired together.

``python -m kittypyr.suite.run`` (``make suite``) starts a demo site,
``python -m kittypyr.suite.post`` (``make suite-post``) posts to it;
``kittypyr.suite.stack`` is what both and the integration tests start.
"""
