"""Write a Mailman 2 Pipermail archive folder, as Pipermail lays it out, for tests.

``write_folder(folder, posts)`` writes each post into its month's
``YYYY-Month.txt`` (addresses written "x at y", the envelope in the
server's local time), its page ``YYYY-Month/NNNNNN.html`` (Mailman 2.1's
article template), its scrubbed attachments under ``attachments/`` and,
when asked, the ``database/YYYY-Month-article`` records (a marshal of
protocol-0 pickles, as Python 2 wrote them).

A scrubbed attachment leaves a notice in the body where the part was, in
the two forms Mailman 2.1's scrubber writes: an HTML part's ("An HTML
attachment was scrubbed...", its URL only) and any other's (name, type,
size, description and URL). ``rearchived=True`` writes each attachment a
second time as ``<name>-0001.<ext>``, linked by nothing, as ``bin/arch``
leaves a folder it rebuilt.
"""

import gzip
import html
import marshal
from dataclasses import dataclass
from datetime import datetime, timedelta, timezone
from email.utils import format_datetime
from pathlib import Path
from urllib.parse import quote

MONTHS = ("January", "February", "March", "April", "May", "June", "July", "August", "September",
          "October", "November", "December")
_DAYS = ("Mon", "Tue", "Wed", "Thu", "Fri", "Sat", "Sun")
_ABBR = ("Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec")

# The server's zone: Pipermail prints local times with its abbreviation.
ZONE_NAME, ZONE_HOURS = "MST", -7


@dataclass
class Post:
    number: int
    subject: str
    author: str
    email: str
    date: datetime  # Pipermail's date of the message (aware)
    message_id: str = None  # without brackets; None: the message has none
    in_reply_to: str = None
    body: str = "Hello there.\n"
    date_header: str = None  # the month file's Date: (default: ``date`` in RFC 5322 form)
    subject_header: str = None  # the month file's Subject: as written (default: ``subject``)
    page_subject: str = None  # the page's subject as written, unescaped (default: ``subject``)
    # (name, bytes) or (name, bytes, content type): scrubbed into attachments/
    attachments: tuple = ()
    page: bool = True
    in_month_file: bool = True


def _local(moment):
    return moment.astimezone(timezone(timedelta(hours=ZONE_HOURS))).replace(tzinfo=None)


def ctime(local):
    return f"{_DAYS[local.weekday()]} {_ABBR[local.month - 1]} {local.day:2d} {local:%H:%M:%S} {local.year}"


def volume_of(post, period="month"):
    """The volume Pipermail files the post in, for each archive period (by the server's local date)."""
    local = _local(post.date)
    if period == "year":
        return f"{local.year}"
    if period == "quarter":
        return f"{local.year}q{(local.month - 1) // 3 + 1}"
    if period == "week":
        return f"Week-of-Mon-{local - timedelta(days=local.weekday()):%Y%m%d}"
    if period == "day":
        return f"{local:%Y%m%d}"
    return f"{local.year}-{MONTHS[local.month - 1]}"


def obscured(address):
    return address.replace("@", " at ")


def attachment_path(post, index, name):
    return f"{_local(post.date):%Y%m%d}/{post.number:04x}{index:04x}/{name}"


def _parts(post):
    """``(index, name, data, content type)`` of each scrubbed attachment."""
    for index, part in enumerate(post.attachments):
        name, data, content_type = (*part, "application/octet-stream")[:3]
        yield index, name, data, content_type


def scrubbed_notice(name, data, content_type, url):
    """The text the scrubber put where the part was."""
    if content_type == "text/html":
        return f"-------------- next part --------------\nAn HTML attachment was scrubbed...\nURL: {url}\n"
    return ("-------------- next part --------------\n"
            "A non-text attachment was scrubbed...\n"
            f"Name: {name}\nType: {content_type}\nSize: {len(data)} bytes\n"
            f"Desc: not available\nUrl : {url}\n")


def _month_text(post, base_url):
    lines = [f"From {obscured(post.email)}  {ctime(_local(post.date))}",
             f"From: {obscured(post.email)} ({post.author})",
             f"Date: {post.date_header or format_datetime(post.date)}",
             f"Subject: {post.subject_header or post.subject}"]
    if post.in_reply_to:
        lines.append(f"In-Reply-To: <{post.in_reply_to}>")
    if post.message_id:
        lines.append(f"Message-ID: <{post.message_id}>")
    body = post.body
    for index, name, data, content_type in _parts(post):
        url = f"{base_url}attachments/{attachment_path(post, index, name)}"
        body += scrubbed_notice(name, data, content_type, url)
    return "\n".join(lines) + "\n\n" + body + "\n"


def _page(post, style, base_url, list_address):
    """The article page; ``style``: "own" (reply link names the message), "parent"
    (Mailman 2.1's early pages: the parent's id) or "none" (no reply link id)."""
    link_id = {"own": post.message_id, "parent": post.in_reply_to, "none": None}[style] or ""
    mailto = (f"mailto:{quote(list_address)}?Subject={quote('Re: ' + post.subject)}"
              f"&In-Reply-To={quote('<' + link_id + '>' if link_id else '')}")
    subject = html.escape(post.page_subject or post.subject)
    local = _local(post.date)
    shown_date = (f"{_DAYS[local.weekday()]} {_ABBR[local.month - 1]} {local.day:2d} {local:%H:%M:%S} "
                  f"{ZONE_NAME} {local.year}")
    body = html.escape(post.body)
    for index, name, data, content_type in _parts(post):
        url = f"{base_url}attachments/{attachment_path(post, index, name)}"
        notice = html.escape(scrubbed_notice(name, data, content_type, url))
        body += notice.replace(url, f'<A HREF="{url}">{url}</A>')
    return f"""<!DOCTYPE HTML PUBLIC "-//W3C//DTD HTML 4.01 Transitional//EN">
<HTML>
 <HEAD>
   <TITLE> {subject}
   </TITLE>
   <LINK REL="Index" HREF="index.html" >
   <LINK REL="made" HREF="{html.escape(mailto)}">
   <META NAME="robots" CONTENT="index,nofollow">
   <META http-equiv="Content-Type" content="text/html; charset=utf-8">
 </HEAD>
 <BODY BGCOLOR="#ffffff">
   <H1>{subject}</H1>
    <B>{html.escape(post.author)}</B> 
    <A HREF="{html.escape(mailto)}"
       TITLE="{subject}">{html.escape(obscured(post.email))}
       </A><BR>
    <I>{shown_date}</I>
    <P><UL>
         <LI> <B>Messages sorted by:</B> 
              <a href="date.html#{post.number}">[ date ]</a>
              <a href="thread.html#{post.number}">[ thread ]</a>
         </LI>
       </UL>
    <HR>  
<!--beginarticle-->
<PRE>{body}
</PRE>

<!--endarticle-->
    <HR>
</body></html>
"""


def _quoted(value):
    text = value.replace("\\", "\\\\").replace("'", "\\'")
    return ("'" + text + "'").encode("utf-8")


def article_pickle(fields):
    """A protocol-0 pickle of a Mailman 2 ``HyperArch.Article`` with these fields, as Python 2 wrote it."""
    out = [b"(iMailman.Archiver.HyperArch\nArticle\np0\n(dp1\n"]
    for key, value in fields.items():
        out.append(b"S" + _quoted(key) + b"\n")
        if isinstance(value, int):
            out.append(b"I%d\n" % value)
        elif value is None:
            out.append(b"N")
        else:
            out.append(b"S" + _quoted(value) + b"\n")
        out.append(b"s")
    out.append(b"b.")
    return b"".join(out)


def _article(post):
    return article_pickle({
        "sequence": post.number,
        "msgid": post.message_id or str(post.number),
        "_message_id": f"<{post.message_id}>" if post.message_id else None,
        "subject": post.subject,
        "author": post.author,
        "email": obscured(post.email),
        "date": "%011i" % int(post.date.timestamp()),
        "filename": f"{post.number:06d}.html",
    })


def write_folder(folder, posts, style="own", database=False, list_address="dev@lists.example.org",
                 base_url="http://lists.example.org/pipermail/dev/", rearchived=False, period="month",
                 compressed_only=False):
    """Write the Pipermail folder of ``posts`` into ``folder``; return its path.

    ``period``: the archive's volumes (``year``, ``quarter``, ``month``,
    ``week``, ``day``); ``compressed_only``: each volume file as
    ``<volume>.txt.gz`` alone.
    """
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    months = {}
    articles = {}
    for post in sorted(posts, key=lambda p: p.number):
        volume = volume_of(post, period)
        if post.in_month_file:
            months.setdefault(volume, []).append(_month_text(post, base_url))
        (folder / volume).mkdir(exist_ok=True)
        for name in ("date.html", "thread.html", "subject.html", "author.html"):
            (folder / volume / name).write_text("<html></html>\n")
        if post.page:
            (folder / volume / f"{post.number:06d}.html").write_text(
                _page(post, style, base_url, list_address), encoding="utf-8")
        for index, name, data, content_type in _parts(post):
            path = folder / "attachments" / attachment_path(post, index, name)
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_bytes(data)
            if rearchived:
                stem, dot, extension = name.rpartition(".")
                path.with_name(f"{stem}-0001{dot}{extension}").write_bytes(data)
        articles.setdefault(volume, {})[(post.message_id or str(post.number)).encode()] = _article(post)
    for volume, texts in months.items():
        text = "".join(texts).encode("utf-8")
        if compressed_only:
            (folder / f"{volume}.txt.gz").write_bytes(gzip.compress(text))
        else:
            (folder / f"{volume}.txt").write_bytes(text)
    if database:
        (folder / "database").mkdir(exist_ok=True)
        for volume, table in articles.items():
            # marshal version 2 is the format Python 2 wrote.
            (folder / "database" / f"{volume}-article").write_bytes(marshal.dumps(table, 2))
    (folder / "index.html").write_text("<html></html>\n")
    return folder
