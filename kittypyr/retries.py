"""Requests run again after a write conflict or a lost storage connection.

pyramid_retry runs such a request again on a fresh transaction; each retry
is logged here (at INFO), so an operator — and ``bench/archiver_load.py`` —
can see how often processes got in each other's way.
"""

import logging

from pyramid_retry import IBeforeRetry

log = logging.getLogger(__name__)


def log_retry(event):
    """Log one retry: the request, the attempt that failed and why."""
    environ = event.environ
    # str(), not repr(): a ConflictError names its record and class only there.
    log.info("retrying %s %s after attempt %s failed: %s: %s", environ.get("REQUEST_METHOD"),
             environ.get("PATH_INFO"), environ.get("pyramid_retry.attempt", 0) + 1,
             type(event.exception).__name__, event.exception)


def includeme(config):
    config.add_subscriber(log_retry, IBeforeRetry)
