"""Mail that arrived but could not be read as a message: kept, for admins to see."""

from datetime import datetime, timezone

from persistent import Persistent

from kittypyr.resources.containers import Container
from kittypyr.resources.message import _blob_with, _read_blob


class Quarantine(Container):
    """Held mail, keyed by arrival order ('000001', ...)."""

    def hold(self, list_address, raw, reason):
        number = f"{len(self) + 1:06d}"
        while number in self:
            number = f"{int(number) + 1:06d}"
        return self.add(number, HeldMail(list_address, raw, reason))


class HeldMail(Persistent):
    def __init__(self, list_address, raw, reason):
        self.list_address = list_address
        self.reason = reason
        self.received = datetime.now(timezone.utc)
        self.size = len(raw)
        self.raw = _blob_with(raw)

    def raw_bytes(self):
        return _read_blob(self.raw)
