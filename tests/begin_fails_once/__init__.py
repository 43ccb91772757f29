"""An extension for the tests: the storage is away as the next transaction begins.

A connection left registered with the thread's transaction manager asks its
storage for news when any transaction begins there; with the storage away
(a ZEO or PostgreSQL server restarting) that fails inside pyramid_tm's
``begin()``, before the request's transaction exists, and pyramid_retry
runs the request again. ``armed`` says how many beginnings fail.
"""

import transaction
from ZEO.Exceptions import ClientDisconnected

armed = []


class StorageAwayAtBegin:
    def newTransaction(self, txn):
        if armed:
            armed.pop()
            raise ClientDisconnected("the storage server is restarting")

    def beforeCompletion(self, txn):
        pass

    def afterCompletion(self, txn):
        pass


# Kept here: a transaction manager holds its synchronizers weakly.
synchronizer = StorageAwayAtBegin()


def includeme(config):
    transaction.manager.registerSynch(synchronizer)
