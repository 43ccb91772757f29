"""Moving in from Mailman 2: a Pipermail folder's page numbers, and its old URLs answered.

``kittypyr import`` of a Pipermail archive folder reads its per-message
pages and ``database/`` articles (``pages``) and maps each page number to
the archived message (``mapping``, kept per list in
``mailing_list.pipermail``); ``views`` answers Mailman 2's URLs with
redirects to the same things here.
"""


def includeme(config):
    config.scan("kittypyr.pipermail.views")
