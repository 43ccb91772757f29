"""Profiles, votes, tags, favourites and read marks: their pages and forms.

Every change is a POST carrying the session's CSRF token, allowed by the
list's ACL (``vote``, ``tag``, ``follow``: logged-in readers on public
lists, members on private ones). Forms answer with a redirect back to the
page they came from; the vote form also answers JSON, for kittypyr.js to
update the page without reloading it.

The helpers ``annotate_messages``, ``thread_community`` and ``thread_marks``
add what readers did to the entries the thread, message and list pages show.
"""

import hashlib

from pyramid.httpexceptions import (
    HTTPBadRequest,
    HTTPForbidden,
    HTTPMovedPermanently,
    HTTPNotFound,
    HTTPSeeOther,
)
from pyramid.renderers import render_to_response
from pyramid.view import view_config

from kittypyr import readers, tags, votes
from kittypyr.people import first_and_last_post, posts_page, posts_per_list, recent_threads
from kittypyr.resources import MailingList, Message, Thread
from kittypyr.resources.admin import AuditEntry
from kittypyr.resources.browsing import Tag, TagFolder
from kittypyr.resources.community import People, Person
from kittypyr.security import list_id_of
from kittypyr.stats import activity_of
from kittypyr.views.accounts import safe_came_from
from kittypyr.views.presentation import Page, avatar, display_name, format_date, page_number, set_validators

THREADS_PAGE_SIZE = 50
PROFILE_PAGE_SIZE = 25
SORTS = ("activity", "popularity")


def current_reader(request):
    """The logged-in reader's ``Reader`` record, or None (none yet, or anonymous)."""
    if request.user is None:
        return None
    return readers.reader_for(request.root, request.user.address)


def writable_reader(request):
    """The logged-in reader's record, made if need be (for a view that writes)."""
    reader = readers.reader_for(request.root, request.user.address, create=True)
    request.reader = reader
    return reader


def visible_addresses(request):
    return [mailing_list.address for mailing_list in request.visible_lists]


def fingerprint(*parts):
    """A short digest of what readers did that a page shows, for its ETag."""
    return hashlib.sha1(repr(parts).encode("utf-8")).hexdigest()[:16]


def profile_url(request, person_id):
    people = request.root.people
    return request.resource_url(people, person_id, "") if person_id in people.addresses else None


# What the thread, message and list pages show


def annotate_messages(request, entries, new=frozenset()):
    """Add to each message entry its score, the reader's vote, a link to the
    sender's profile with their reputation, and whether it is new to the reader."""
    archive = request.root
    people = archive.people
    visible = visible_addresses(request)
    reader = request.reader
    user = request.user
    may_vote = {}
    reputations = {}
    for entry in entries:
        message = entry["message"]
        mailing_list = message.mailing_list
        key = (mailing_list.address, message.__name__)
        tally = archive.votes.tallies.get(key)
        person_id = people.person_id(message.sender_address)
        if person_id not in reputations:
            reputations[person_id] = votes.reputation(archive, person_id, visible) if person_id else 0
        if mailing_list.address not in may_vote:
            may_vote[mailing_list.address] = bool(request.has_permission("vote", mailing_list))
        own = user is not None and (message.sender_address or "").strip().lower() == user.address
        entry.update(
            up=tally.up() if tally is not None else 0,
            down=tally.down() if tally is not None else 0,
            score=tally.score if tally is not None else 0,
            my_vote=votes.ballot(reader, tally, key),
            may_vote=may_vote[mailing_list.address] and not own,
            own=own,
            profile_url=profile_url(request, person_id) if person_id else None,
            reputation=reputations[person_id],
            is_new=message.__name__ in new,
        )
    return entries


def entries_fingerprint(entries):
    return fingerprint([(e["message"].__name__, e["up"], e["down"], e["my_vote"], e["reputation"],
                         e["is_new"]) for e in entries])


def thread_community(request, thread, entries, order, link):
    """What the thread page shows of readers: its total, tags, favourite mark, first new message.

    ``entries`` are the messages the page shows, annotated on the way;
    ``order`` is the thread's whole ``reading_order``, and ``link(name)``
    the link to a message of it (on this page or another). For a
    logged-in reader, opening the thread also marks it read (in their own
    record).
    """
    reader = request.reader
    seen = readers.last_seen(reader, thread)
    new = [name for name, _, stamp in order if stamp > seen] if seen is not None else []
    annotate_messages(request, entries, frozenset(new))
    user = request.user
    may_follow = user is not None and bool(request.has_permission("follow", thread))
    if may_follow:
        writable = writable_reader(request)
        readers.start_tracking(writable, thread.mailing_list)
        readers.mark_read(writable, thread)
    # A page of a longer thread shows some of its messages: the thread's
    # counter has the total of them all.
    whole = len(entries) == len(order)
    community = {
        "score": sum(entry["score"] for entry in entries) if whole else votes.thread_score(request.root, thread),
        "tags": tags.thread_tags(thread, user.address if user is not None else None),
        "may_tag": user is not None and bool(request.has_permission("tag", thread)),
        "may_follow": may_follow,
        "favourite": readers.is_favourite(reader, thread),
        # The link to the first message new to the reader, on whichever page.
        "first_new": link(new[0]) if new else None,
        "new_count": len(new),
        "key": f"{thread.mailing_list.address}/{thread.__name__}",
        "last": thread.last_date.timestamp(),
    }
    community["fingerprint"] = fingerprint(entries_fingerprint(entries), community["tags"],
                                           community["favourite"], community["score"], community["first_new"],
                                           community["new_count"])
    return community


def thread_marks(request, threads):
    """``{thread key: marks}``: tags, total score, unread and favourite marks of listed threads."""
    archive = request.root
    reader = request.reader
    watermarks = {}
    marks = {}
    for thread in threads:
        mailing_list = thread.mailing_list
        if mailing_list.address not in watermarks:
            # For browsers that keep read marks themselves: where a first visit starts.
            watermarks[mailing_list.address] = readers.list_watermark(mailing_list)
        marks[thread.__name__] = {
            "tags": [entry["tag"] for entry in tags.thread_tags(thread)],
            "score": votes.thread_score(archive, thread),
            "unread": readers.is_unread(reader, thread),
            "favourite": readers.is_favourite(reader, thread),
            "key": f"{thread.mailing_list.address}/{thread.__name__}",
            "last": thread.last_date.timestamp() if thread.last_date else 0,
            "watermark": watermarks[mailing_list.address],
        }
    return marks


def marks_fingerprint(marks):
    return fingerprint(sorted((key, m["tags"], m["score"], m["unread"], m["favourite"])
                              for key, m in marks.items()))


def track_list(request, mailing_list):
    """A logged-in reader's first visit to a list starts its read marks (one write, once)."""
    if request.user is not None and request.has_permission("follow", mailing_list):
        reader = request.reader
        if reader is None or mailing_list.address not in reader.since:
            readers.start_tracking(writable_reader(request), mailing_list)


# Votes


def _vote_value(request):
    try:
        value = int(request.POST.get("value", ""))
    except ValueError:
        raise HTTPBadRequest("a vote is 1, -1 or 0") from None
    if value not in votes.VALUES:
        raise HTTPBadRequest("a vote is 1, -1 or 0")
    return value


def _cast(context, request):
    try:
        tally = votes.cast_vote(request.root, writable_reader(request), context, _vote_value(request))
    except votes.OwnMessage:
        raise HTTPForbidden("Nobody votes on their own messages.") from None
    return tally


def _back(request, resource):
    """Back to the page the form was on (only ever a page of this site)."""
    came_from = request.POST.get("came_from") or request.resource_path(resource)
    return HTTPSeeOther(safe_came_from(request, came_from))


def wants_json(request):
    """True when the client asked for JSON before HTML (kittypyr.js does; browsers' forms do not)."""
    offers = request.accept.acceptable_offers(["text/html", "application/json"])
    return bool(offers) and offers[0][0] == "application/json"


@view_config(context=Message, name="vote", request_method="POST", permission="vote")
def vote(context, request):
    """Vote on a message: from a form, back to the page at the message; from kittypyr.js, the new figures."""
    if not wants_json(request):
        _cast(context, request)
        back = _back(request, context).location
        return HTTPSeeOther(back.split("#", 1)[0] + f"#m-{context.__name__}")
    try:
        tally = _cast(context, request)
    except (HTTPBadRequest, HTTPForbidden) as refusal:
        request.response.status = refusal.status
        return render_to_response("json", {"error": refusal.detail}, request=request,
                                  response=request.response)
    archive = request.root
    thread = context.mailing_list.threads.data.get(context.thread)
    key = (context.mailing_list.address, context.__name__)
    sender = tally.sender if tally is not None else archive.people.person_id(context.sender_address)
    return render_to_response("json", {
        "message": context.__name__,
        "score": tally.score if tally is not None else 0,
        "up": tally.up() if tally is not None else 0,
        "down": tally.down() if tally is not None else 0,
        "mine": votes.ballot(request.reader, tally, key),
        "thread_score": votes.thread_score(archive, thread) if thread is not None else 0,
        "reputation": votes.reputation(archive, sender, visible_addresses(request)) if sender else 0,
    }, request=request)


# Tags


@view_config(context=Thread, name="tag", request_method="POST", permission="tag")
def tag_thread(context, request):
    tag = tags.normalize_tag(request.POST.get("tag", ""))
    if tag is None:
        raise HTTPBadRequest(f"A tag is a word of up to {tags.MAX_TAG_LENGTH} letters, digits, "
                             "dashes, dots or plus signs.")
    try:
        tags.add_tag(context, tag, request.user.address, registry=request.registry)
    except tags.TooManyTags:
        raise HTTPBadRequest(f"You gave this thread at most {tags.MAX_TAGS_PER_READER} tags already: "
                             "take one back to give another.") from None
    return _back(request, context)


@view_config(context=Thread, name="untag", request_method="POST", permission="tag")
def untag_thread(context, request):
    tag = tags.normalize_tag(request.POST.get("tag", ""))
    if tag is not None:
        tags.remove_tag(context, tag, request.user.address, registry=request.registry)
    return _back(request, context)


@view_config(context=Thread, name="drop-tag", request_method="POST", permission="moderate")
def drop_thread_tag(context, request):
    """A list's owner or moderator takes a tag off the thread, whoever gave it; logged."""
    tag = tags.normalize_tag(request.POST.get("tag", ""))
    if tag is not None and tags.drop_tag(context, tag, registry=request.registry):
        user = request.user
        mailing_list = context.mailing_list
        request.root.audit_log.add(AuditEntry(
            "drop-tag", user.address, user.name, (mailing_list.address,),
            # Named by its key, as every entry names what it touched: the
            # log keeps no content of a thread deleted later.
            f"Took the tag {tag} off the thread {context.__name__}", threads=(context.__name__,)))
    return _back(request, context)


@view_config(context=TagFolder, renderer="kittypyr.templates:tags.pt")
def tag_folder(context, request):
    mailing_list = context.mailing_list
    found = tags.list_tags(mailing_list)
    set_validators(request, None, "tags", mailing_list.address, fingerprint(found))
    return {"mailing_list": mailing_list, "tags": found}


@view_config(context=Tag, renderer="kittypyr.templates:tag.pt")
def tag_page(context, request):
    wanted = tags.normalize_tag(context.tag)
    if wanted is None:
        raise HTTPNotFound()
    if wanted != context.tag:
        return HTTPMovedPermanently(location=request.resource_url(context.__parent__, wanted, ""))
    mailing_list = context.mailing_list
    number = max(1, page_number(request))
    total, threads = tags.tagged_threads(mailing_list, context.tag, (number - 1) * THREADS_PAGE_SIZE,
                                         THREADS_PAGE_SIZE)
    page = Page(number, total, THREADS_PAGE_SIZE)
    track_list(request, mailing_list)
    marks = thread_marks(request, threads)
    set_validators(request, None, "tag", mailing_list.address, context.tag, page.number, total,
                   marks_fingerprint(marks))
    return {"mailing_list": mailing_list, "tag": context.tag, "threads": threads, "page": page,
            "marks": marks}


# Favourites and read marks


@view_config(context=Thread, name="favourite", request_method="POST", permission="follow")
def favourite(context, request):
    readers.set_favourite(writable_reader(request), context, request.POST.get("favourite") == "1")
    return _back(request, context)


@view_config(context=MailingList, name="mark-read", request_method="POST", permission="follow")
def mark_list_read(context, request):
    readers.mark_list_read(writable_reader(request), context)
    return _back(request, context)


# A list's threads, by activity or popularity


@view_config(context=MailingList, name="threads", renderer="kittypyr.templates:threads.pt")
def list_threads(context, request):
    sort = request.params.get("sort", "activity")
    if sort not in SORTS:
        sort = "activity"
    # The list counts its threads: a page number past the end reads as the last page.
    total = context.thread_count
    page = Page(page_number(request), total, THREADS_PAGE_SIZE)
    if sort == "popularity":
        total, threads = votes.popular_threads(context, page.start, THREADS_PAGE_SIZE)
    else:
        threads = context.threads.named(activity_of(context).active_thread_keys(page.start, THREADS_PAGE_SIZE))
    track_list(request, context)
    marks = thread_marks(request, threads)
    set_validators(request, None, "threads", context.address, sort, page.number, total,
                   marks_fingerprint(marks))
    # Without Mailman nobody votes: the order by votes is offered where there are some.
    voted = request.mailman_available or sort == "popularity" or votes.thread_scores(context)
    sorts = SORTS if voted else ("activity",)
    return {"mailing_list": context, "threads": threads, "page": page, "sort": sort, "sorts": sorts,
            "marks": marks}


@view_config(context=Message, name="vote", request_method="GET")
@view_config(context=Thread, name="tag", request_method="GET")
@view_config(context=Thread, name="untag", request_method="GET")
@view_config(context=Thread, name="favourite", request_method="GET")
@view_config(context=MailingList, name="mark-read", request_method="GET")
def form_target(context, request):
    """Where a form posts, asked for by GET (after logging in, say): the page it belongs to."""
    return HTTPSeeOther(request.resource_url(context))


# Profiles


@view_config(context=People)
def people_folder(context, request):
    raise HTTPNotFound()


@view_config(context=Person, renderer="kittypyr.templates:profile.pt")
def profile(context, request):
    """A sender's page, showing only the lists the reader may see; 404 if that leaves nothing."""
    archive = request.root
    visible = request.visible_lists
    posts = posts_per_list(archive.people, context.person_id, visible)
    if not posts:
        raise HTTPNotFound()
    addresses = [mailing_list.address for mailing_list, _ in posts]
    first, last = first_and_last_post(archive, context.address, addresses)
    if last is None:
        raise HTTPNotFound()
    name = display_name(last.sender_name, last.sender_address)
    threads = recent_threads(archive, context.address, addresses)
    reputation = votes.reputation(archive, context.person_id, addresses)
    total = sum(count for _, count in posts)
    page = Page(page_number(request), total, PROFILE_PAGE_SIZE)
    _, page_posts = posts_page(archive, context.address, addresses, page.start, PROFILE_PAGE_SIZE)
    set_validators(request, last.date, "profile", context.person_id, total, page.number,
                   reputation, first.__name__, last.__name__)
    return {
        "person": context,
        "name": name,
        "avatar": avatar(last.sender_name, last.sender_address, size=80),
        "posts": posts,
        "total": total,
        "page": page,
        "page_posts": [{"message": message, "date": format_date(message.date)} for message in page_posts],
        # The part of the address before the "@", which the page shows anyway
        # ("ada at example.org"): the whole address would be written in the link.
        "search_word": context.address.split("@")[0],
        "first": first,
        "last": last,
        "first_date": format_date(first.date),
        "last_date": format_date(last.date),
        "threads": thread_items(threads),
        "reputation": reputation,
    }


@view_config(context=People, name="me", permission="personal", renderer="kittypyr.templates:me.pt")
def my_page(context, request):
    """The logged-in reader's own page: posts, votes, favourites, subscriptions."""
    archive = request.root
    user = request.user
    visible = request.visible_lists
    addresses = [mailing_list.address for mailing_list in visible]
    person_id = archive.people.person_id(user.address)
    posts = posts_per_list(archive.people, person_id, visible)
    threads = recent_threads(archive, user.address, [m.address for m, _ in posts]) if posts else []
    reader = request.reader
    voted = votes.voted_messages(archive, reader, addresses) if reader is not None else []
    favourites = readers.favourite_threads(archive, reader, addresses) if reader is not None else []
    # Private to the reader as every answer to a session is (kittypyr.security); asked again each time.
    request.response.cache_control.no_cache = True
    return {
        "user": user,
        "avatar": avatar(user.display_name, user.address, size=80),
        "profile_url": profile_url(request, person_id) if posts else None,
        "posts": posts,
        "reputation": votes.reputation(archive, person_id, addresses),
        "threads": thread_items(threads),
        "votes": [{"message": message, "value": value, "date": format_date(when),
                   "sender": display_name(message.sender_name, message.sender_address)}
                  for message, value, when in voted],
        "favourites": [{"thread": thread, "unread": readers.is_unread(reader, thread)}
                       for thread, _ in favourites],
        "subscriptions": subscriptions(request),
    }


def thread_items(threads):
    return [{"thread": thread, "message": message, "started": started, "date": format_date(message.date)}
            for thread, message, started in threads]


def subscriptions(request):
    """``[(list id, archived list or None, roles)]`` of the reader, from Mailman."""
    # A list Mailman said it has not is not the one of that id it has now
    # (list ids join name and domain with a dot: two addresses can share one).
    by_id = {list_id_of(address): mailing_list for address, mailing_list in request.root.lists.items()
             if mailing_list.in_mailman is not False}
    found = []
    for list_id, roles in sorted(request.user_roles.items()):
        found.append((list_id, by_id.get(list_id), sorted(roles)))
    return found
