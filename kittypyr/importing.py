"""Bulk import of mail archive files into a list, in batches, resumably.

Reading and parsing (the pure part) happen in parser processes, storing in
this process, which is the bottleneck: it gets each message parsed, its
original compressed and its words split, and only unpickles, stores and
indexes. Every message is accounted for: archived, duplicate, skipped or
failed, each failure with its file, position and reason. Batches are
committed whole; a batch that meets a write conflict (another process
writing the same list) is replayed, and a message that breaks while being
stored is set aside and the rest replayed, so one bad message never stops
the import.
"""

import collections
import contextlib
import errno
import gc
import logging
import multiprocessing
import os
import pickle
import queue
import random
import re
import signal
import sys
import threading
import time
from dataclasses import dataclass, field

from ZODB.POSException import ConflictError

from kittypyr import storage_unwritable
from kittypyr.archiving import ARCHIVED, DUPLICATE, ensure_mailing_list, store_parsed
from kittypyr.fulltext import prepare_zoned
from kittypyr.mail import IMPORT_TIME_NOTE, UnparseableMessage, parse_message
from kittypyr.mailboxes import MailSourceError, expand_sources, read_mail
from kittypyr.msgid import message_id_hash
from kittypyr.pipermail import folder_observers
from kittypyr.resources.message import compress_original, pack_text
from kittypyr.subjects import without_list_prefix
from kittypyr.wording import counted
from kittypyr.zones import message_zones

log = logging.getLogger(__name__)

# How the note of a message dated by the one before it ends (see Importer.date_undated).
DATED_BY_PREVIOUS_NOTE = "used the date of the message before it in its file"
CHUNK = 64
# Messages a parser process may run ahead of storing: at ~1,000 parsed a
# second, enough to keep parsing through a batch's commit of several seconds.
LEAD = 6000
# Room in a parser's pipe for two chunks or so (where the system allows it).
PIPE_BYTES = 1 << 20
# Messages per commit: larger batches rewrite each shared index bucket less often.
DEFAULT_BATCH = 5000
# Records (as pickled) an import's connection keeps from one batch to the
# next (kittypyr.import_cache_size_bytes), against a serving connection's
# 8 MB: each batch into a large list reads the same word records and tree
# buckets as the batch before it, and under the serving bound read them
# again from the storage (40,000 records a batch at ten times the mail,
# 16,000 with 128 MB).
DEFAULT_IMPORT_CACHE_BYTES = 128 << 20
# The cache's bound on records by number follows its bound in bytes, for
# records of this size and more (most of an import's are 0.5-2 KB).
_SMALL_RECORD_BYTES = 256
_BYTE_SIZE = re.compile(r"\s*(\d+)\s*([kmg]?)b?\s*$", re.I)


def byte_size(text):
    """``text`` ("128MB", "512kb", "1GB", "1048576") in bytes; ValueError if it is none of those."""
    match = _BYTE_SIZE.match(str(text))
    if match is None:
        raise ValueError(f"not a size in bytes: {text!r} (say 128MB, 512KB, 1GB or a number of bytes)")
    number, unit = match.groups()
    return int(number) << {"": 0, "k": 10, "m": 20, "g": 30}[unit.lower()]


@contextlib.contextmanager
def import_cache(connection, size_bytes):
    """The connection's cache bound raised to ``size_bytes`` within the ``with`` (None: left as it is).

    The bound is the database's, for each of its connections: a command
    has one. It is put back, and the cache brought down to it, at the end.
    """
    database = connection.db()
    saved = database.getCacheSize(), database.getCacheSizeBytes()
    # A byte bound of 0 is none: the cache was bounded by number alone.
    if size_bytes is None or (saved[1] and saved[1] >= size_bytes):
        yield
        return
    database.setCacheSizeBytes(size_bytes)
    database.setCacheSize(max(saved[0], size_bytes // _SMALL_RECORD_BYTES))
    try:
        yield
    finally:
        database.setCacheSize(saved[0])
        database.setCacheSizeBytes(saved[1])
        connection.cacheGC()


@dataclass
class FileReport:
    path: str
    read: int = 0
    archived: int = 0
    duplicates: int = 0
    skipped: collections.Counter = field(default_factory=collections.Counter)
    # reason -> positions of the messages skipped for it, so each is named
    skipped_at: dict = field(default_factory=dict)
    failed: list = field(default_factory=list)  # (position, reason)
    doubtful: list = field(default_factory=list)  # (position, where and why), see RawMail.doubts
    # Duplicates whose bytes differ from the archived post's: (position, its Message-ID).
    other_text: list = field(default_factory=list)
    error: str = ""
    # Messages with no date of their own, dated by the message before them, or at the import.
    dated_by_previous: int = 0
    dated_at_import: int = 0
    # Messages archived with a repair noted (kept in their defects), and of them
    # those dated by a Resent-Date, Received or envelope date for want of a usable Date.
    repaired: int = 0
    dated_otherwise: int = 0
    # position -> the message's own file, of the messages named in the summary (a Maildir's)
    names: dict = field(default_factory=dict)

    def message(self, position):
        """How the summary names the message at ``position``: "3", or "3 (new/notes.txt)"."""
        name = self.names.get(position)
        return f"{position} ({name})" if name else str(position)


@dataclass
class ImportReport:
    files: list = field(default_factory=list)
    # Lines from what ran beside the import (a Pipermail folder's page mapping).
    notes: list = field(default_factory=list)
    # What went wrong beside the import (a scrubbed attachment not read): fails it.
    errors: list = field(default_factory=list)

    def file(self, path):
        for report in self.files:
            if report.path == path:
                return report
        report = FileReport(path)
        self.files.append(report)
        return report

    def total(self, attribute):
        values = [getattr(f, attribute) for f in self.files]
        if attribute == "skipped":
            return sum((sum(v.values()) for v in values), 0)
        if attribute == "failed":
            return sum(len(v) for v in values)
        return sum(values)

    @property
    def ok(self):
        return not self.errors and not any(f.error or f.failed for f in self.files)

    def summary(self, listed=None):
        """Human-readable lines: totals, then every reason, every failure and every doubtful split.

        ``listed``: at most so many of each file's failures, doubtful splits
        and messages skipped for one reason are named, and how many more
        there are said (a damaged file can hold a doubt on every line).
        """
        def named(items):
            """``(the first listed of items, how many more)``."""
            shown = items if listed is None else items[:listed]
            return shown, len(items) - len(shown)

        lines = [
            "read {}, archived {}, duplicates {}, skipped {}, failed {}".format(
                *(self.total(a) for a in ("read", "archived", "duplicates", "skipped", "failed"))
            )
        ]
        for report in self.files:
            for reason, count in sorted(report.skipped.items()):
                positions = sorted(report.skipped_at.get(reason, ()))
                shown, more = named(positions)
                which = (f" (message{'s' if len(positions) > 1 else ''} "
                         f"{', '.join(map(report.message, shown))}"
                         f"{f' and {more} more' if more else ''})") if positions else ""
                lines.append(f"skipped {count} in {report.path}: {reason}{which}")
            shown, more = named(report.failed)
            for position, reason in shown:
                lines.append(f"failed: {report.path}, message {report.message(position)}: {reason}")
            if more:
                lines.append(f"failed: {counted(more, 'more message')} in {report.path}")
            shown, more = named(report.doubtful)
            for position, doubt in shown:
                lines.append(f"doubtful split: {report.path}, message {position}, {doubt}")
            if more:
                lines.append(f"doubtful split: {more} more in {report.path}")
            if report.other_text:
                shown, more = named(report.other_text)
                which = ", ".join(f"message {report.message(position)}: {message_id}" for position, message_id in shown)
                lines.append(f"duplicates: {len(report.other_text)} in {report.path} with other text than the post"
                             " archived under its Message-ID, Date, sender and subject, taken for another archive's"
                             f" copy of it ({which}{f' and {more} more' if more else ''})")
            undated = "no usable Date, Received or envelope date"
            if report.dated_by_previous:
                count = report.dated_by_previous
                lines.append(f"dated {count} message{'s' if count > 1 else ''} in {report.path} by the message"
                             f" before {'them' if count > 1 else 'it'}: {undated}")
            if report.dated_otherwise:
                count = report.dated_otherwise
                lines.append(f"dated {count} message{'s' if count > 1 else ''} in {report.path} by"
                             f" {'their' if count > 1 else 'its'} Received or envelope date: no usable Date header")
            if report.repaired:
                count = report.repaired
                lines.append(f"repaired {count} message{'s' if count > 1 else ''} in {report.path} while reading"
                             f" {'them' if count > 1 else 'it'} (each message's page lists how)")
            if report.dated_at_import:
                count = report.dated_at_import
                lines.append(f"dated {count} message{'s' if count > 1 else ''} in {report.path} at the import: "
                             f"{undated}, and none before {'them' if count > 1 else 'it'} in the file")
            if report.error:
                lines.append(f"error: {report.error}")
        return lines + self.notes + [f"error: {error}" for error in self.errors]


def _count_repairs(file_report, mail):
    if not mail.defects:
        return
    file_report.repaired += 1
    # The undated (no date anywhere) are counted apart, by date_undated.
    if not mail.dated_by_header and not any(note.endswith((IMPORT_TIME_NOTE, DATED_BY_PREVIOUS_NOTE))
                                            for note in mail.defects):
        file_report.dated_otherwise += 1


@dataclass
class Parsed:
    """A message as it comes back from a parser process."""

    source: str
    position: int
    mail: object = None  # kittypyr.mail.ParsedMail
    failure: str = ""
    envelope_date: object = None  # RawMail.envelope_date
    name: str = ""  # RawMail.name
    exported: bool = False  # RawMail.exported


def parse_raw(raw_mail, subject_prefix=""):
    """Parse one ``RawMail`` of a list whose subject prefix is ``subject_prefix``; never raises."""
    def parsed(**outcome):
        return Parsed(raw_mail.source, raw_mail.position, name=raw_mail.name, exported=raw_mail.exported, **outcome)

    if raw_mail.failure:
        return parsed(failure=raw_mail.failure)
    try:
        mail = parse_message(raw_mail.raw, envelope_date=raw_mail.envelope_date)
        _prepare_for_storing(mail, subject_prefix)
        return parsed(mail=mail, envelope_date=raw_mail.envelope_date)
    except UnparseableMessage as exc:
        return parsed(failure=f"not parseable: {exc}")
    except Exception as exc:  # a bug must cost one message, not the import
        log.exception("parsing %s message %s", raw_mail.source, raw_mail.position)
        return parsed(failure=f"parser error: {exc!r}")


def _prepare_for_storing(mail, subject_prefix=""):
    """Do here, in a parser process, the pure work the storing process would do.

    The storing process is the import's bottleneck: it gets the original
    already compressed (and not the original itself, which it never needs
    then), the Message-ID hashes it looks messages up by, and the words of
    the message's searchable text, ready for the full-text index, and
    its body text packed. ``subject_prefix``: the list's, which its
    subject is stored and indexed without.
    """
    mail.raw_gzip = compress_original(mail)
    mail.body_packed = pack_text(mail.body_text)
    mail.raw_size = len(mail.raw)
    mail.raw = None
    # The parent is nearly always the first candidate looked up; the
    # storing process hashes any further one itself.
    mail.id_hashes = {
        message_id: message_id_hash(message_id)
        for message_id in (mail.message_id, mail.in_reply_to, *mail.references[-1:])
        if message_id
    }
    mail.prepared_text = prepare_zoned(message_zones(without_list_prefix(mail.subject, subject_prefix),
                                                     mail.sender_name, mail.body_text, mail.attachments))


def read_sources(paths, report):
    """Yield every ``RawMail`` of ``paths``; record unreadable files in ``report``.

    Not logged as well: the report carries each with its reason, and the
    command's summary prints it.
    """
    for path in paths:
        file_report = report.file(str(path))
        try:
            for raw_mail in read_mail(path):
                file_report.read += 1
                file_report.doubtful.extend((raw_mail.position, doubt) for doubt in raw_mail.doubts)
                # Reported per file given, even for a Maildir's many files.
                raw_mail.source = file_report.path
                yield raw_mail
        except MailSourceError as exc:
            file_report.error = str(exc)
        except OSError as exc:
            file_report.error = f"{path}: {exc.strerror or exc}"


def _chunks(iterable, size):
    chunk = []
    for item in iterable:
        chunk.append(item)
        if len(chunk) >= size:
            yield chunk
            chunk = []
    if chunk:
        yield chunk


def parse_all(paths, report, workers, subject_prefix=""):
    """Yield a ``Parsed`` for every message of ``paths``, in order (see ``parse_raw``).

    With ``workers`` > 0, parser processes read and parse, so that this
    process, which stores, only unpickles what they send. Each reads every
    source and parses every ``workers``-th chunk of it; chunks are taken
    from them in turn, which restores the order. Each runs up to ``LEAD``
    messages ahead, enough to go on while a batch commits, and holds them,
    so memory here stays flat however large the source is.
    """
    if workers <= 0:
        for raw_mail in read_sources(paths, report):
            yield parse_raw(raw_mail, subject_prefix)
        return
    context = multiprocessing.get_context("spawn")
    depth = max(2, LEAD // CHUNK // workers)
    pipes = [context.Pipe(duplex=False) for _ in range(workers)]
    processes = [
        context.Process(target=_parser_process,
                        args=(paths, number, workers, depth, pipes[number][1], subject_prefix),
                        name=f"kittypyr-parser-{number}", daemon=True)
        for number in range(workers)
    ]
    with _ctrl_c_ignored():
        for process in processes:
            process.start()
    channels = []
    for reader, writer in pipes:
        writer.close()  # the parser's end: closed here, so its death reads as EOF
        channels.append(reader)
    # Each message is counted as read when it arrives, so that the summary
    # adds up even if a parser dies before it reports its files (listed
    # first in the order of ``paths``, as reading them inline would).
    reports = {str(path): report.file(str(path)) for path in paths}
    try:
        turn = 0
        while True:
            kind, payload = _receive(channels[turn % workers], processes[turn % workers])
            if kind == _DONE:
                break
            for parsed in payload:
                file_report = reports.get(parsed.source)
                if file_report is None:
                    file_report = reports[parsed.source] = report.file(parsed.source)
                file_report.read += 1
                yield parsed
            turn += 1
        # Every other parser is done too: its next chunk would follow this one.
        files = {turn % workers: payload}
        for number in range(workers):
            if number not in files:
                files[number] = _receive(channels[number], processes[number])[1]
        for path, read, error, doubtful in files[0]:
            file_report = report.file(path)
            file_report.read = read
            file_report.doubtful = doubtful
            if error:
                file_report.error = error
    finally:
        for channel in channels:
            channel.close()
        for process in processes:
            if process.is_alive():
                process.terminate()
            process.join()


@contextlib.contextmanager
def _ctrl_c_ignored():
    """Ctrl-C ignored while parser processes start, and so in them from their first instruction on.

    Ctrl-C in a terminal reaches every process of it: the importing process
    answers it and ends the parsers, which stay silent. An ignored signal
    stays ignored in a process started from this one, even while it is still
    loading its modules. (One pressed in the instant the parsers start is
    lost: a second one stops the import.)
    """
    if threading.current_thread() is not threading.main_thread():
        yield  # only the main thread may set signal handlers
        return
    previous = signal.signal(signal.SIGINT, signal.SIG_IGN)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous)


_CHUNK, _DONE = "chunk", "done"


class StorageFailed(RuntimeError):
    """The storage could not be written (a full disk, say): no message after could be stored either."""

    def __init__(self, error, unstored):
        super().__init__(storage_unwritable(error))
        self.unstored = unstored


class ParserDied(RuntimeError):
    """A parser process ended before it sent all it read (killed by the system when out of memory, say)."""


def _receive(channel, process):
    """The next item a parser process sent; raise ParserDied if it died instead."""
    try:
        return pickle.loads(channel.recv_bytes())
    except (EOFError, OSError):  # OSError: it died in the middle of sending
        process.join()
        code = process.exitcode
        how = f"killed by signal {-code}" if code is not None and code < 0 else f"exit code {code}"
        raise ParserDied(f"parser process {process.name} died ({how})") from None


def _widen(connection):
    """Let the pipe hold a few whole chunks, where the system allows it.

    The storing process then finds the next chunk there, rather than half
    written by a sender thread waiting for its own process's interpreter
    lock while that process parses.
    """
    try:
        import fcntl

        fcntl.fcntl(connection.fileno(), fcntl.F_SETPIPE_SZ, PIPE_BYTES)
    except (ImportError, AttributeError, OSError):
        pass


def _parser_process(paths, number, count, depth, channel, subject_prefix=""):
    """Body of a parser process: parse chunk ``number``, ``number + count``... and send them.

    Up to ``depth`` pickled chunks wait here for the pipe; a thread sends
    them, so that parsing goes on while the storing process is busy.
    """
    _widen(channel)
    parent = multiprocessing.parent_process()
    waiting = queue.Queue(depth)
    failed = []

    def send_all():
        try:
            while True:
                data = waiting.get()
                if data is None:
                    return
                channel.send_bytes(data)
        except OSError as exc:  # the storing process is gone
            failed.append(exc)

    sender = threading.Thread(target=send_all, daemon=True)
    sender.start()

    def put(data):
        while True:
            try:
                waiting.put(data, timeout=1)
                return
            except queue.Full:
                if failed or (parent is not None and not parent.is_alive()):
                    raise SystemExit(1) from None

    def send(item):
        put(pickle.dumps(item, protocol=pickle.HIGHEST_PROTOCOL))

    report = ImportReport()
    for index, chunk in enumerate(_chunks(read_sources(paths, report), CHUNK)):
        if index % count == number:
            send((_CHUNK, [parse_raw(raw_mail, subject_prefix) for raw_mail in chunk]))
    # Reading is the same in every parser process; one reports it.
    files = [(f.path, f.read, f.error, f.doubtful) for f in report.files] if number == 0 else None
    send((_DONE, files))
    put(None)
    sender.join()
    channel.close()


def default_workers():
    return max(1, min(4, (os.cpu_count() or 2) - 1))


class Importer:
    """Stores parsed messages into one list in committed batches.

    Each of ``observers`` has ``stored(mailing_list, parsed, result)``,
    called in the batch's transaction for every message stored or found
    stored already (again when a batch is replayed), and
    ``finish(archive, mailing_list)``, called once all batches are in and
    committed with what it changed; its ``errors``, if it has any, are
    lines that fail the import.

    Between batches the connection keeps up to ``cache_size_bytes`` of the
    records read (see DEFAULT_IMPORT_CACHE_BYTES; None: its own bound).
    """

    def __init__(self, archive, list_address, transaction_manager, report,
                 batch_size=DEFAULT_BATCH, conflict_attempts=20, progress=None, observers=(),
                 cache_size_bytes=None):
        self.archive = archive
        self.list_address = list_address
        self.tm = transaction_manager
        self.report = report
        self.batch_size = batch_size
        self.conflict_attempts = conflict_attempts
        self.progress = progress
        self.observers = observers
        self.cache_size_bytes = cache_size_bytes

    def run(self, parsed_stream):
        with import_cache(self.archive._p_jar, self.cache_size_bytes):
            self._run(parsed_stream)

    def _run(self, parsed_stream):
        batch = []
        dates = {}  # source -> (date, offset) of its latest message with a date of its own
        try:
            for parsed in parsed_stream:
                self.date_undated(parsed, dates)
                batch.append(parsed)
                if len(batch) >= self.batch_size:
                    self.flush(batch)
                    batch = []
        except ParserDied:
            # What arrived before is stored: a run again starts after it.
            if batch:
                self.flush(batch)
            raise
        if batch:
            self.flush(batch)
        if self.observers:
            self.finish_observers()

    def date_undated(self, parsed, dates):
        """Give a message with no date of its own (Date, Received, envelope) the date of the one before it.

        The parser dated it at the import: an old list's undated mail would
        show as its newest, in its overview and its last 30 days. A file
        holds its mail in the order it came, so the message before it is
        the nearest date known.
        """
        mail = parsed.mail
        if mail is None:
            return
        note = next((note for note in mail.defects if note.endswith(IMPORT_TIME_NOTE)), None)
        if note is None:
            dates[parsed.source] = (mail.date, mail.date_offset)
        elif parsed.source in dates:
            mail.date, mail.date_offset = dates[parsed.source]
            mail.defects[mail.defects.index(note)] = note[:-len(IMPORT_TIME_NOTE)] + DATED_BY_PREVIOUS_NOTE
            self.report.file(parsed.source).dated_by_previous += 1
        else:
            self.report.file(parsed.source).dated_at_import += 1

    def finish_observers(self):
        for attempt in range(self.conflict_attempts):
            try:
                mailing_list = ensure_mailing_list(self.archive, self.list_address)
                for observer in self.observers:
                    observer.finish(self.archive, mailing_list)
                self.tm.commit()
                return
            except OSError as error:
                self.tm.abort()
                raise StorageFailed(error, 0) from None
            except ConflictError:
                self.tm.abort()
                if attempt == self.conflict_attempts - 1:
                    raise
                time.sleep(random.uniform(0, 0.05 * 2 ** min(attempt, 6)))

    def flush(self, batch):
        """Store and commit ``batch``; account for every message in it.

        On a write conflict the batch is replayed after a random pause; when
        conflicts persist (another process is writing the same list) it is
        split in halves, whose smaller transactions get through.
        """
        broken = {}  # index in batch -> reason
        attempts = 0
        while True:
            try:
                outcomes = self._store(batch, broken)
                if outcomes is None:
                    continue  # a message broke and is now in ``broken``: replay the rest
                self.tm.commit()
                break
            except OSError as error:
                # Raised by the storage, not by a message (see _store).
                self.tm.abort()
                raise StorageFailed(error, len(batch) - len(broken)) from None
            except ConflictError:
                self.tm.abort()
                attempts += 1
                if attempts >= self.conflict_attempts:
                    raise
                log.info("write conflict %d on a batch of %d", attempts, len(batch))
                time.sleep(random.uniform(0, 0.05 * 2 ** min(attempts, 6)))
                if attempts >= 2 and len(batch) > 1:
                    half = len(batch) // 2
                    self.flush(batch[:half])
                    self.flush(batch[half:])
                    return
        self.archive._p_jar.cacheGC()
        for index, parsed in enumerate(batch):
            file_report = self.report.file(parsed.source)
            if index in broken:
                file_report.failed.append((parsed.position, broken[index]))
            elif parsed.failure:
                file_report.failed.append((parsed.position, parsed.failure))
            else:
                outcome, reason = outcomes[index]
                if outcome == ARCHIVED:
                    file_report.archived += 1
                    _count_repairs(file_report, parsed.mail)
                    continue
                if outcome == DUPLICATE:
                    file_report.duplicates += 1
                    if reason:
                        file_report.other_text.append((parsed.position, reason))
                    continue
                file_report.skipped[reason] += 1
                file_report.skipped_at.setdefault(reason, []).append(parsed.position)
            # Named in the summary: by its own file too, where it has one.
            if parsed.name:
                file_report.names[parsed.position] = parsed.name
        if self.progress is not None:
            self.progress.update(len(batch))

    def _store(self, batch, broken):
        """Store the batch in the open transaction; None if a message broke."""
        mailing_list = ensure_mailing_list(self.archive, self.list_address)
        outcomes = {}
        for index, parsed in enumerate(batch):
            if parsed.failure or index in broken:
                continue
            try:
                result = store_parsed(mailing_list, parsed.mail, originals=True, distinct=parsed.exported)
            except ConflictError:
                raise
            except Exception as exc:
                if isinstance(exc, OSError) and exc.errno != errno.EFBIG:
                    # The storage's trouble (a full disk, a lost mount), not the
                    # message's, unless it is one file too large: every message
                    # after it would fail alike.
                    raise
                log.exception("storing %s message %s", parsed.source, parsed.position)
                broken[index] = f"could not be stored: {exc!r}"
                self.tm.abort()
                return None
            reason = result.reason
            if result.outcome == DUPLICATE and result.message is not None \
                    and result.message.fingerprint != parsed.mail.fingerprint:
                # Said in the summary: it may be another post after all.
                reason = result.message.message_id
            outcomes[index] = (result.outcome, reason)
            for observer in self.observers:
                observer.stored(mailing_list, parsed, result)
        return outcomes


def import_mail(archive, list_address, paths, transaction_manager, batch_size=DEFAULT_BATCH,
                workers=None, progress=True, cache_size_bytes=DEFAULT_IMPORT_CACHE_BYTES):
    """Import every message of ``paths`` into the list ``list_address``.

    A path may be an mbox (plain, gzip, bzip2 or xz), a Maildir, a Pipermail month
    file or a whole Pipermail archive folder, whose per-message pages are
    then mapped to the messages (``kittypyr.pipermail.mapping``) and whose
    scrubbed attachments are kept with them (``kittypyr.pipermail.attachments``).
    ``cache_size_bytes``: what the connection's cache may hold while the
    import runs (see DEFAULT_IMPORT_CACHE_BYTES).

    Returns an ``ImportReport``. Raises nothing for bad input: unreadable
    files and bad messages are in the report.
    """
    report = ImportReport()
    observers = folder_observers(paths)
    paths = expand_sources(paths)
    for path in paths:
        report.file(str(path))
    if workers is None:
        workers = default_workers()
    bar = None
    if progress and sys.stderr.isatty():
        from kittypyr.progress import estimate_messages, progress_bar

        bar = progress_bar(list_address, estimate_messages(paths))
    # The cyclic collector would rescan every cached persistent object again
    # and again while millions of index entries are allocated; nothing the
    # import makes is cyclic garbage worth chasing that often.
    thresholds = gc.get_threshold()
    gc.collect()
    gc.freeze()
    gc.set_threshold(100_000, 50, 1000)
    try:
        importer = Importer(archive, list_address, transaction_manager, report,
                            batch_size=batch_size, progress=bar, observers=observers,
                            cache_size_bytes=cache_size_bytes)
        known = archive.lists.get(list_address)
        parsed = parse_all(paths, report, workers, known.subject_prefix if known is not None else "")
        try:
            importer.run(parsed)
        except ParserDied as exc:
            report.errors.append(f"{exc}: the import stopped there; every message read before is in"
                                 " the summary, and running the import again finishes it")
            return report
        except StorageFailed as exc:
            parsed.close()  # the parser processes end now
            unstored = (f"the last {counted(exc.unstored, 'message')} read {'was' if exc.unstored == 1 else 'were'}"
                        " not stored, nor any after them"
                        if exc.unstored else "nothing after was stored")
            report.errors.append(f"{exc}: the import stopped there; {unstored}. Every message the summary"
                                 " counts as archived is stored: mend the storage (free space on its disk)"
                                 " and run the import again, which skips what is stored and finishes")
            return report
        for observer in observers:
            report.notes.extend(observer.summary())
            report.errors.extend(getattr(observer, "errors", ()))
    finally:
        gc.set_threshold(*thresholds)
        gc.unfreeze()
        if bar is not None:
            bar.close()
    return report
