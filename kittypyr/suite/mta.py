"""An SMTP server on loopback playing a site's MTA, for the suite and the tests.

It keeps every message it receives (what list members would get,
confirmation mail) and, given a relay, passes each on as Postfix would
pass list mail to Mailman over LMTP.
"""

import email.parser
import email.policy
import threading
import time
from dataclasses import dataclass, field

from aiosmtpd.controller import Controller

from kittypyr.suite.mailman_core import free_port


@dataclass
class ReceivedMessage:
    mail_from: str
    rcpt_tos: list
    data: bytes
    received_at: float = field(default_factory=time.monotonic)

    @property
    def message(self):
        return email.parser.BytesParser(policy=email.policy.default).parsebytes(
            self.data
        )


class _Handler:
    def __init__(self, sink):
        self.sink = sink

    async def handle_DATA(self, server, session, envelope):
        received = ReceivedMessage(
            mail_from=envelope.mail_from,
            rcpt_tos=list(envelope.rcpt_tos),
            data=bytes(envelope.original_content or envelope.content),
        )
        self.sink._add(received)
        if self.sink.relay is not None:
            # As a site's MTA would: mail for a list goes on to Mailman.
            # In a thread, so that Mailman may send mail here meanwhile.
            threading.Thread(target=self.sink.relay, args=(received,), daemon=True).start()
        return "250 OK"


class SMTPSink:
    """An SMTP server on loopback that accepts and keeps every message.

    Mailman's outgoing runner delivers here, so one can see what list
    members would have received.
    """

    def __init__(self, relay=None, port=None):
        """``relay``: called with each ReceivedMessage, in a thread of its own; ``port``: a free one if None."""
        self.host = "127.0.0.1"
        self.relay = relay
        self.port = port
        self._messages = []
        self._condition = threading.Condition()
        self._controller = None

    @property
    def messages(self):
        with self._condition:
            return list(self._messages)

    def _add(self, received):
        with self._condition:
            self._messages.append(received)
            self._condition.notify_all()

    def start(self):
        if self._controller is not None:
            return self
        # aiosmtpd 1.4 connects to its own port to confirm start-up, so it
        # cannot be given port 0 and asked afterwards.
        self.port = self.port or free_port()
        self._controller = Controller(
            _Handler(self), hostname=self.host, port=self.port
        )
        self._controller.start()
        return self

    def stop(self):
        controller, self._controller = self._controller, None
        if controller is not None:
            controller.stop()

    def clear(self):
        with self._condition:
            self._messages.clear()

    def wait_for(self, predicate=None, timeout=10.0):
        """The first message (received so far or later) matching predicate."""
        deadline = time.monotonic() + timeout
        with self._condition:
            while True:
                for received in self._messages:
                    if predicate is None or predicate(received):
                        return received
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    raise TimeoutError(
                        "no matching message within %.1f s; %d received"
                        % (timeout, len(self._messages))
                    )
                self._condition.wait(remaining)

    def __enter__(self):
        return self.start()

    def __exit__(self, *exc_info):
        self.stop()
