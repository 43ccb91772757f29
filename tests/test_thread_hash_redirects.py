"""A thread URL named by any message of the thread leads to the thread.

HyperKitty names a thread by the first message it saw of it and splits
threads at missing parents, so its thread links may name a reply.
"""

from webtest import TestApp

from kittypyr.msgid import message_id_hash
from tests.mailbuilder import make_message
from tests.test_archiver_api import LIST, app, post  # noqa: F401 (fixture)


def test_a_replys_hash_as_thread_key_answers_301_to_its_thread(app):  # noqa: F811
    browser = TestApp(app)
    post(browser, make_message(message_id="<start@example.org>", subject="Opening"))
    post(browser, make_message(message_id="<reply@example.org>", subject="Re: Opening",
                               in_reply_to="<start@example.org>"))
    post(browser, make_message(message_id="<deeper@example.org>", subject="Re: Opening",
                               in_reply_to="<reply@example.org>"))
    start = message_id_hash("start@example.org")
    for name in ("reply@example.org", "deeper@example.org"):
        answer = browser.get(f"/list/{LIST}/thread/{message_id_hash(name)}/", status=301)
        assert answer.location.endswith(f"/list/{LIST}/thread/{start}/")
        assert "Opening" in answer.follow().text
    # The thread's own key is the thread, and a hash of no message is still missing.
    assert browser.get(f"/list/{LIST}/thread/{start}/").status_int == 200
    browser.get(f"/list/{LIST}/thread/{message_id_hash('nothing@example.org')}/", status=404)


def test_a_replys_hash_as_thread_key_in_the_api_answers_301_to_the_threads_json(app):  # noqa: F811
    browser = TestApp(app)
    post(browser, make_message(message_id="<start@example.org>", subject="Opening"))
    post(browser, make_message(message_id="<reply@example.org>", subject="Re: Opening",
                               in_reply_to="<start@example.org>"))
    start = message_id_hash("start@example.org")
    answer = browser.get(f"/api/list/{LIST}/thread/{message_id_hash('reply@example.org')}/", status=301)
    assert answer.location.endswith(f"/api/list/{LIST}/thread/{start}/")
    thread = answer.follow().json
    assert thread["key"] == start and thread["subject"] == "Opening" and thread["messages"] == 2
    browser.get(f"/api/list/{LIST}/thread/{message_id_hash('nothing@example.org')}/", status=404)


def test_a_message_of_another_list_is_no_thread_of_this_one(app):  # noqa: F811
    browser = TestApp(app)
    post(browser, make_message(message_id="<elsewhere@example.org>"), mlist="other@lists.example.org")
    browser.get(f"/list/{LIST}/thread/{message_id_hash('elsewhere@example.org')}/", status=404)
