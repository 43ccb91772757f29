"""Administration pages: confirm, then delete or re-thread; the audit log.

Each operation is a GET that shows exactly what will change and a POST
(with the form token) that does it through ``kittypyr.moderation``. The
permission is ``moderate`` on the list (its owners and moderators, and site
administrators), or ``admin`` for what spans every list.
"""

import hashlib

from pyramid.httpexceptions import HTTPSeeOther
from pyramid.renderers import render_to_response
from pyramid.view import view_config, view_defaults
from pyramid_zodbconn import get_connection

from kittypyr import moderation
from kittypyr.packing import note_packed, storage_packer
from kittypyr.resources import Message, Thread
from kittypyr.resources.admin import AuditEntry, ListAdmin, SiteAdmin
from kittypyr.resources.deleted import DeletedMessage, DeletedThread
from kittypyr.views.presentation import Page, display_name, format_date, page_number, subject_line
from kittypyr.views.threads import message_in_thread_url
from kittypyr.wording import counted

CONFIRM = "kittypyr.templates:moderate.pt"
LOG_PAGE_SIZE = 50
MAX_REASON = 2000
# Beyond this many, a confirmation page shows the count and the first ones.
MAX_LISTED = 1000


def reason_of(request):
    return request.POST.get("reason", "").strip()[:MAX_REASON]


def item(message, depth=0, with_list=False):
    """What a confirmation page shows of a message that will be deleted or moved."""
    return {
        "message": message,
        "depth": min(depth, 8),
        "sender": display_name(message.sender_name, message.sender_address),
        "date": format_date(message.date),
        "list": message.mailing_list if with_list else None,
    }


def confirmation(request, title, action_url, button, items=(), notes=(), hidden=(), error=None,
                 back=None, status=200):
    """The values of the confirmation page (``moderate.pt``)."""
    request.response.status = status
    items = list(items)
    return {
        "title": title,
        "action_url": action_url,
        "button": button,
        "items": items[:MAX_LISTED],
        "unlisted": max(0, len(items) - MAX_LISTED),
        "notes": notes,
        "hidden": hidden,
        "error": error,
        "back": back or request.resource_url(request.root),
        "csrf_token": request.session.get_csrf_token(),
    }


def done(request, message, location):
    request.session.flash(message)
    return HTTPSeeOther(location)


def thread_or_list(request, mailing_list, key):
    """Where to go after messages of the thread ``key`` were deleted."""
    thread = mailing_list.threads.data.get(key)
    return request.resource_url(thread if thread is not None else mailing_list)


@view_defaults(context=Message, permission="moderate")
class MessageModeration:
    def __init__(self, context, request):
        self.context = context
        self.request = request

    @view_config(name="delete", request_method="GET", renderer=CONFIRM)
    def confirm_delete(self):
        message = self.context
        replies = len(message.mailing_list.threads.data[message.thread].replies_to(message.__name__))
        notes = [("Its text, its original and its attachments leave the archive, the search and the "
                 "statistics. Its address will answer “410 Gone”.")]
        if replies:
            notes.append(("Its reply stays" if replies == 1 else f"Its {replies} replies stay")
                         + " in the thread, below the message it answered.")
        return confirmation(self.request, "Delete this message?", self.request.resource_url(message, "delete"),
                            "Delete the message", [item(message)], notes, back=self.request.resource_url(message))

    @view_config(name="delete", request_method="POST")
    def delete(self):
        message = self.context
        mailing_list, key = message.mailing_list, message.thread
        moderation.delete_messages(mailing_list, [message.__name__], self.request.user, reason_of(self.request))
        return done(self.request, "The message was deleted.", thread_or_list(self.request, mailing_list, key))

    @view_config(name="split", request_method="GET", renderer=CONFIRM)
    def confirm_split(self):
        message = self.context
        thread = message.mailing_list.threads.data[message.thread]
        refusal = moderation.split_refusal(message)
        moving = _subtree(thread, message.__name__)
        return confirmation(
            self.request, "Make a new thread of this message and its replies?",
            self.request.resource_url(message, "split"), "Split the thread",
            [item(m, depth) for m, depth in moving],
            [(f"These {counted(len(moving), 'message')} leave “{subject_line(thread.subject)}” "
             "and become a thread of their own. Every message keeps its address.")],
            error=refusal, back=self.request.resource_url(message), status=409 if refusal else 200)

    @view_config(name="split", request_method="POST")
    def split(self):
        try:
            entry = moderation.split_thread(self.context, self.request.user, reason_of(self.request))
        except moderation.ModerationRefused as refused:
            return _refused(self.request, str(refused), self.request.resource_url(self.context))
        new_thread = self.context.mailing_list.threads.data[entry.threads[1]]
        return done(self.request, "The thread was split.", self.request.resource_url(new_thread))


def _subtree(thread, root):
    """``(message, depth)`` of ``root`` and its replies, in reading order."""
    messages = thread.mailing_list.messages
    found = []
    inside_depth = None
    for name, depth in thread.walk():
        if inside_depth is not None and depth <= inside_depth:
            break
        if name == root:
            inside_depth = depth
        if inside_depth is not None:
            found.append((messages.data[name], depth - inside_depth))
    return found


def _refused(request, error, back):
    values = confirmation(request, "This cannot be done", None, None, error=error, back=back, status=409)
    return render_to_response(CONFIRM, values, request=request, response=request.response)


@view_defaults(context=Thread, permission="moderate")
class ThreadModeration:
    def __init__(self, context, request):
        self.context = context
        self.request = request

    def _all(self):
        messages = self.context.mailing_list.messages
        return [item(messages.data[name], depth) for name, depth in self.context.walk()]

    @view_config(name="delete", request_method="GET", renderer=CONFIRM)
    def confirm_delete(self, changed=False):
        thread = self.context
        shown = self._all()
        notes = [(f"All {counted(len(thread), 'message')} of “{subject_line(thread.subject)}” leave "
                  "the archive, the search and the statistics. The thread's address and theirs will answer "
                  "“410 Gone”.")]
        return confirmation(
            self.request, "Delete this whole thread?", self.request.resource_url(thread, "delete"),
            "Delete the thread", shown, _changed_note(changed) + notes,
            [("seen", seen_digest(e["message"].__name__ for e in shown))],
            back=self.request.resource_url(thread))

    @view_config(name="delete", request_method="POST")
    def delete(self):
        mailing_list = self.context.mailing_list
        if self.request.POST.get("seen") != seen_digest(name for name, _ in self.context.walk()):
            return _shown_again(self.confirm_delete(changed=True), self.request)
        moderation.delete_thread(self.context, self.request.user, reason_of(self.request))
        return done(self.request, "The thread was deleted.", self.request.resource_url(mailing_list))

    def _selected(self, params):
        members = self.context.members
        chosen = {name for name in params.getall("m") if name in members}
        # In reading order, not indented: a selection is not a tree.
        return [dict(entry, depth=0) for entry in self._all() if entry["message"].__name__ in chosen]

    @view_config(name="delete-selected", request_method="GET", renderer=CONFIRM)
    def confirm_delete_selected(self):
        thread = self.context
        chosen = self._selected(self.request.GET)
        error = None if chosen else "No message of this thread was selected. Tick the messages to delete first."
        notes = [(f"{counted(len(chosen), 'message')} of “{subject_line(thread.subject)}” leave "
                 "the archive, the search and the statistics; their addresses will answer “410 Gone”. "
                 "Their replies stay in the thread, below the message they answered, and the thread "
                 "keeps its address.")]
        return confirmation(
            self.request, "Delete the selected messages?", self.request.resource_url(thread, "delete-selected"),
            "Delete these messages", chosen, notes, [("m", e["message"].__name__) for e in chosen],
            error=error, back=self.request.resource_url(thread), status=200 if chosen else 400)

    @view_config(name="delete-selected", request_method="POST")
    def delete_selected(self):
        thread = self.context
        chosen = [e["message"].__name__ for e in self._selected(self.request.POST)]
        if not chosen:
            return _refused(self.request, "No message of this thread was selected.",
                            self.request.resource_url(thread))
        mailing_list, key = thread.mailing_list, thread.__name__
        moderation.delete_messages(mailing_list, chosen, self.request.user, reason_of(self.request))
        return done(self.request, f"{counted(len(chosen), 'message')} deleted.",
                    thread_or_list(self.request, mailing_list, key))

    @view_config(name="reattach", request_method="GET")
    def confirm_reattach(self):
        thread = self.context
        reference = self.request.GET.get("target", "").strip()
        target = moderation.find_message(thread.mailing_list, reference) if reference else None
        refusal = moderation.reattach_refusal(thread, target) if reference else None
        if not reference or refusal:
            values = {"thread": thread, "mailing_list": thread.mailing_list, "target": reference,
                      "error": refusal}
            self.request.response.status = 400 if refusal else 200
            return render_to_response("kittypyr.templates:reattach.pt", values, request=self.request,
                                      response=self.request.response)
        target_thread = thread.mailing_list.threads.data[target.thread]
        values = confirmation(
            self.request, "Attach this thread below another message?",
            self.request.resource_url(thread, "reattach"), "Attach the thread", self._all(),
            [(f"These {counted(len(thread), 'message')} move below “{subject_line(target.subject)}” "
             f"by {display_name(target.sender_name, target.sender_address)} ({format_date(target.date)}) in "
             f"the thread “{subject_line(target_thread.subject)}”. Every message keeps its address; the "
             "address of this thread will lead there.")],
            [("target", target.__name__)], back=self.request.resource_url(thread))
        return render_to_response(CONFIRM, values, request=self.request, response=self.request.response)

    @view_config(name="reattach", request_method="POST")
    def reattach(self):
        thread = self.context
        target = moderation.find_message(thread.mailing_list, self.request.POST.get("target", ""))
        try:
            moderation.reattach_thread(thread, target, self.request.user, reason_of(self.request))
        except moderation.ModerationRefused as refused:
            return _refused(self.request, str(refused), self.request.resource_url(thread))
        target_thread = target.mailing_list.threads.data[target.thread]
        return done(self.request, "The thread was attached.",
                    message_in_thread_url(self.request, target_thread, target.__name__))


# --- the administration pages -------------------------------------------------


def seen_digest(names):
    """What a confirmation page showed, as a digest its form sends back: names of messages, in any order."""
    return hashlib.sha256("\n".join(sorted(names)).encode()).hexdigest()[:32]


def _shown_again(values, request):
    """The confirmation page again, 409: what it would change is no longer what was confirmed."""
    response = render_to_response(CONFIRM, values, request)
    response.status = 409
    return response


def _changed_note(changed):
    # Mail archived while the page was read (or deleted by another) would
    # go unseen: only what was shown is deleted.
    return ["What this would delete changed since it was shown: new mail came, or some was deleted."
            " Here it is as it is now."] if changed else []


def _sender_confirmation(request, archive, mailing_list, action_url, back, changed=False):
    sender = (request.POST if changed else request.GET).get("address", "").strip().lower()
    if "@" not in sender:
        return confirmation(request, "Delete every message from a sender", None, None,
                            error="Give the sender's e-mail address.", back=back, status=400)
    found = moderation.messages_from(archive, sender, mailing_list)
    where = "this list" if mailing_list is not None else "every list of this site"
    if not found:
        return confirmation(request, f"Delete every message from {sender}", None, None,
                            error=f"There is no message from {sender} in {where}.", back=back)
    lists = {m.mailing_list.address for m in found}
    notes = [(f"All {counted(len(found), 'message')} from {sender} in {where} "
             f"({counted(len(lists), 'list')}) leave the archive, the search and the statistics; "
             "their addresses will answer “410 Gone”. Replies to them stay in their threads.")]
    return confirmation(request, f"Delete every message from {sender}?", action_url,
                        f"Delete {counted(len(found), 'message')}",
                        [item(m, with_list=mailing_list is None) for m in found], _changed_note(changed) + notes,
                        [("address", sender), ("seen", seen_digest(m.__name__ for m in found))], back=back)


def _delete_sender(request, archive, mailing_list, location, action_url):
    sender = request.POST.get("address", "").strip().lower()
    found = moderation.messages_from(archive, sender, mailing_list)
    if found and request.POST.get("seen") != seen_digest(m.__name__ for m in found):
        return _shown_again(_sender_confirmation(request, archive, mailing_list, action_url, location, changed=True),
                            request)
    try:
        entries = moderation.delete_sender(archive, sender, request.user, reason_of(request), mailing_list,
                                           found=found)
    except moderation.ModerationRefused as refused:
        return _refused(request, str(refused), location)
    deleted = sum(len(entry.messages) for entry in entries)
    return done(request, f"Deleted {counted(deleted, 'message')} from {sender}.", location)


def log_values(request, audit_log, list_address=None):
    total = len(audit_log) if list_address is None else audit_log.count_for(list_address)
    page = Page(page_number(request), total, LOG_PAGE_SIZE)
    entries = audit_log.newest(page.start, LOG_PAGE_SIZE, list_address)
    return {
        "entries": [
            {"entry": entry, "when": format_date(entry.when), "iso_when": entry.when.isoformat()}
            for entry in entries
        ],
        "page": page,
    }


@view_defaults(context=ListAdmin, permission="moderate")
class ListAdministration:
    def __init__(self, context, request):
        self.context = context
        self.request = request
        self.mailing_list = context.mailing_list

    @view_config(request_method="GET", renderer="kittypyr.templates:admin.pt")
    def overview(self):
        return {"mailing_list": self.mailing_list, "log_size": self.request.root.audit_log.count_for(
            self.mailing_list.address), "lists": ()}

    @view_config(name="log", request_method="GET", renderer="kittypyr.templates:admin_log.pt")
    def log(self):
        values = log_values(self.request, self.request.root.audit_log, self.mailing_list.address)
        values["mailing_list"] = self.mailing_list
        return values

    @view_config(name="delete-sender", request_method="GET", renderer=CONFIRM)
    def confirm_delete_sender(self):
        return _sender_confirmation(self.request, self.request.root, self.mailing_list,
                                    self.request.resource_url(self.context, "delete-sender"),
                                    self.request.resource_url(self.context))

    @view_config(name="delete-sender", request_method="POST")
    def delete_sender(self):
        return _delete_sender(self.request, self.request.root, self.mailing_list,
                              self.request.resource_url(self.context),
                              self.request.resource_url(self.context, "delete-sender"))


@view_defaults(context=SiteAdmin, permission="admin")
class SiteAdministration:
    def __init__(self, context, request):
        self.context = context
        self.request = request

    @view_config(request_method="GET", renderer="kittypyr.templates:admin.pt")
    def overview(self):
        lists = sorted(self.context.archive.lists.values(), key=lambda m: m.address)
        return {"mailing_list": None, "log_size": len(self.context.archive.audit_log), "lists": lists,
                "packing": _packing_state(storage_packer(self.request.registry))}

    @view_config(name="pack", request_method="POST")
    def pack(self):
        user = self.request.user
        # A retried request (a write conflict on the audit log) started its pack on its first attempt.
        environ = self.request.environ
        if not environ.get("kittypyr.pack_started"):
            if not storage_packer(self.request.registry).start(get_connection(self.request).db()):
                return done(self.request, "The storage is being packed already.",
                            self.request.resource_url(self.context))
            environ["kittypyr.pack_started"] = True
        note_packed(self.context.archive)
        self.context.archive.audit_log.add(AuditEntry(
            "pack", user.address, user.name, (), "Asked for the storage to be packed, so that its files keep no "
            "deleted mail"))
        return done(self.request, "Packing the storage: the archive serves meanwhile. Reload this page to see "
                    "when it is done.", self.request.resource_url(self.context))

    @view_config(name="log", request_method="GET", renderer="kittypyr.templates:admin_log.pt")
    def log(self):
        values = log_values(self.request, self.context.archive.audit_log)
        values["mailing_list"] = None
        return values

    @view_config(name="delete-sender", request_method="GET", renderer=CONFIRM)
    def confirm_delete_sender(self):
        return _sender_confirmation(self.request, self.context.archive, None,
                                    self.request.resource_url(self.context, "delete-sender"),
                                    self.request.resource_url(self.context))

    @view_config(name="delete-sender", request_method="POST")
    def delete_sender(self):
        return _delete_sender(self.request, self.context.archive, None, self.request.resource_url(self.context),
                              self.request.resource_url(self.context, "delete-sender"))


def _packing_state(packer):
    """What the administration page says of packing in this process."""
    last = packer.last
    return {
        "since": format_date(packer.started) if packer.started is not None else None,
        "last": last,
        "last_when": format_date(last.finished) if last is not None else None,
    }


# --- what deleted things answer -------------------------------------------------


@view_config(context=DeletedMessage, renderer="kittypyr.templates:gone.pt")
@view_config(context=DeletedMessage, name="raw", renderer="kittypyr.templates:gone.pt")
@view_config(context=DeletedMessage, name="attachment", renderer="kittypyr.templates:gone.pt")
@view_config(context=DeletedMessage, name="html", renderer="kittypyr.templates:gone.pt")
@view_config(context=DeletedMessage, name="diff", renderer="kittypyr.templates:gone.pt")
@view_config(context=DeletedMessage, name="quote", renderer="kittypyr.templates:gone.pt")
@view_config(context=DeletedMessage, name="reply", renderer="kittypyr.templates:gone.pt")
def message_gone(context, request):
    """410 Gone, with the way to the conversation it was part of.

    A reply sent to a message deleted while it was being written is not
    sent; what the reader wrote is shown back, not lost.
    """
    request.response.status = 410
    typed = request.POST.get("body", "") if request.method == "POST" and request.view_name == "reply" else ""
    return {"what": "message", "mailing_list": context.mailing_list, "thread": context.thread(),
            "deleted": format_date(context.deleted_at), "typed": typed}


@view_config(context=DeletedThread, renderer="kittypyr.templates:gone.pt")
@view_config(context=DeletedThread, name="t.atom", renderer="kittypyr.templates:gone.pt")
@view_config(context=DeletedThread, name="t.mbox.gz", renderer="kittypyr.templates:gone.pt")
def thread_gone(context, request):
    request.response.status = 410
    return {"what": "thread", "mailing_list": context.mailing_list, "thread": None,
            "deleted": format_date(context.deleted_at), "typed": ""}
