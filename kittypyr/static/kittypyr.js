// Enhancements only: every page works without this file.
(function () {
  "use strict";

  function messages() {
    return Array.prototype.slice.call(document.querySelectorAll("article.message"));
  }

  // j / k move between the messages of a thread.
  document.addEventListener("keydown", function (event) {
    if (event.altKey || event.ctrlKey || event.metaKey) { return; }
    var target = event.target;
    if (target && (target.isContentEditable || /^(INPUT|TEXTAREA|SELECT)$/.test(target.tagName))) { return; }
    if (event.key !== "j" && event.key !== "k") { return; }
    var all = messages();
    if (!all.length) { return; }
    var current = all.indexOf(document.activeElement);
    var next = event.key === "j" ? current + 1 : (current === -1 ? 0 : current - 1);
    next = Math.max(0, Math.min(all.length - 1, next));
    all[next].focus();
    all[next].scrollIntoView({block: "start"});
    event.preventDefault();
  });

  // Expand all / collapse all are links that reload the page with the
  // diffs open or folded; with a script they open or fold them in place.
  document.addEventListener("click", function (event) {
    var link = event.target.closest && event.target.closest("a.expand-all, a.collapse-all");
    if (!link) { return; }
    var open = link.classList.contains("expand-all");
    document.querySelectorAll(".messages details.patch-fold").forEach(function (fold) { fold.open = open; });
    event.preventDefault();
  });

  // A folded diff (or long quote) holds a link to the message's page;
  // opened, it loads the diff itself in place of the link.
  function loadDiff(fold) {
    var link = fold.querySelector(".diff-link, .quote-link");
    if (!link || fold.hasAttribute("data-loading") || !window.fetch) { return; }
    fold.setAttribute("data-loading", "");
    fetch(fold.getAttribute("data-diff") || fold.getAttribute("data-quote"), {credentials: "same-origin"})
      .then(function (response) {
        if (!response.ok) { throw new Error(response.statusText); }
        return response.text();
      })
      .then(function (html) {
        // The fragment is the archive's own HTML, escaped where the page's is.
        link.insertAdjacentHTML("afterend", html);
        link.remove();
      })
      .catch(function () { fold.removeAttribute("data-loading"); });
  }
  document.addEventListener("toggle", function (event) {
    var fold = event.target;
    if (fold.matches && fold.matches("details[data-diff], details[data-quote]") && fold.open) { loadDiff(fold); }
  }, true);

  // A Message-ID is copied whole with one click (it is also selected whole
  // on a click without the script, by the stylesheet).
  if (navigator.clipboard) {
    document.querySelectorAll("code.message-id").forEach(function (code) {
      var button = document.createElement("button");
      button.type = "button";
      button.className = "copy";
      button.textContent = "Copy";
      button.setAttribute("aria-label", "Copy the Message-ID");
      button.addEventListener("click", function () {
        navigator.clipboard.writeText(code.textContent).then(
          function () { button.textContent = "Copied"; },
          function () { button.textContent = "Select it to copy"; });
      });
      code.insertAdjacentElement("afterend", button);
    });
  }

  // Fixed-width text for every message, when the reader asks (remembered).
  var FIXED_KEY = "kittypyr-fixed-width";
  function storedFixed() {
    try { return localStorage.getItem(FIXED_KEY) === "1"; } catch (e) { return false; }
  }
  document.documentElement.classList.toggle("fixed-width", storedFixed());
  var firstMessages = document.querySelector(".messages");
  if (firstMessages && firstMessages.querySelector(".body")) {
    var style = document.createElement("p");
    style.className = "text-style";
    var fixed = document.createElement("button");
    fixed.type = "button";
    fixed.className = "fixed-width-switch";
    fixed.textContent = "Fixed-width text";
    fixed.setAttribute("aria-pressed", storedFixed() ? "true" : "false");
    fixed.addEventListener("click", function () {
      var on = !document.documentElement.classList.contains("fixed-width");
      document.documentElement.classList.toggle("fixed-width", on);
      fixed.setAttribute("aria-pressed", on ? "true" : "false");
      try { localStorage.setItem(FIXED_KEY, on ? "1" : "0"); } catch (e) { /* private mode */ }
    });
    style.appendChild(fixed);
    firstMessages.parentNode.insertBefore(style, firstMessages);
  }

  // Relative time as a hint next to the exact date.
  function relative(date) {
    var seconds = (Date.now() - date.getTime()) / 1000;
    var units = [["year", 31536000], ["month", 2592000], ["day", 86400], ["hour", 3600], ["minute", 60]];
    for (var i = 0; i < units.length; i++) {
      var n = Math.floor(seconds / units[i][1]);
      if (n >= 1) { return n + " " + units[i][0] + (n > 1 ? "s" : "") + " ago"; }
    }
    return "just now";
  }
  document.querySelectorAll("time[datetime]").forEach(function (node) {
    var date = new Date(node.getAttribute("datetime"));
    if (!isNaN(date.getTime())) { node.setAttribute("title", relative(date) + " (" + node.textContent + ")"); }
  });

  // Remember the reader's threaded / by-date choice.
  var leaving = false;
  var toggle = document.querySelector("nav.view-toggle");
  if (toggle) {
    toggle.querySelectorAll("a[data-view]").forEach(function (link) {
      link.addEventListener("click", function () {
        try { localStorage.setItem("kittypyr-view", link.getAttribute("data-view")); } catch (e) { /* private mode */ }
      });
    });
    var wanted = null;
    try { wanted = localStorage.getItem("kittypyr-view"); } catch (e) { /* private mode */ }
    var link = wanted && toggle.querySelector('a[data-view="' + wanted + '"]');
    if (link) {
      leaving = true;
      window.location.replace(link.href + window.location.hash);
    }
  }

  // Votes without reloading: the same form, its answer as JSON.
  var VOTE_TITLES = {"1": ["This message helped", "Take back your vote"],
                     "-1": ["This message did not help", "Take back your vote"]};

  function showVote(form, answer) {
    var score = form.querySelector(".score");
    score.textContent = answer.score;
    score.setAttribute("title", answer.up + " up, " + answer.down + " down");
    var ups = form.querySelector(".ups"), downs = form.querySelector(".downs");
    if (ups) { ups.textContent = answer.up; }
    if (downs) { downs.textContent = answer.down; }
    [["button.vote-up", 1], ["button.vote-down", -1]].forEach(function (pair) {
      var button = form.querySelector(pair[0]);
      var pressed = answer.mine === pair[1];
      button.value = pressed ? "0" : String(pair[1]);
      button.setAttribute("aria-pressed", pressed ? "true" : "false");
      button.setAttribute("title", VOTE_TITLES[String(pair[1])][pressed ? 1 : 0]);
    });
    var total = document.getElementById("thread-score");
    if (total) { total.textContent = answer.thread_score; }
    // Every name of the same sender on the page shows their new reputation.
    var article = form.closest("article.message");
    var link = article && article.querySelector(".sender a");
    if (link) {
      document.querySelectorAll(".sender a").forEach(function (other) {
        var badge = other.parentNode.querySelector(".reputation");
        if (other.getAttribute("href") === link.getAttribute("href") && badge) {
          badge.textContent = (answer.reputation >= 0 ? "+" : "") + answer.reputation;
          badge.hidden = answer.reputation === 0;  // +0 says nothing
        }
      });
    }
  }

  function voteProblem(form, text) {
    var problem = form.querySelector(".vote-problem");
    if (!problem) {
      problem = document.createElement("span");
      problem.className = "vote-problem";
      problem.setAttribute("role", "alert");
      form.appendChild(problem);
    }
    problem.textContent = text;
  }

  // A message is sent once: its Send button goes off as the form goes (the
  // server sends a form once too). Back on the page (Back), it works again.
  document.addEventListener("submit", function (event) {
    var form = event.target;
    if (form.id !== "compose-form" || event.defaultPrevented) { return; }
    var send = form.querySelector("button[type=submit]");
    if (send) { window.setTimeout(function () { send.disabled = true; }, 0); }
  });
  window.addEventListener("pageshow", function () {
    var send = document.querySelector("#compose-form button[type=submit]");
    if (send) { send.disabled = false; }
  });

  document.addEventListener("submit", function (event) {
    var form = event.target;
    var button = event.submitter;
    if (!form.matches("footer.votes form.vote") || !button || !window.fetch) { return; }
    event.preventDefault();
    var data = new FormData(form);
    data.append(button.name, button.value);
    form.setAttribute("aria-busy", "true");
    fetch(form.action, {method: "POST", body: data, credentials: "same-origin",
                        headers: {"Accept": "application/json"}})
      .then(function (response) {
        return response.json().then(function (answer) {
          if (!response.ok) { throw new Error(answer.error || response.statusText); }
          voteProblem(form, "");
          showVote(form, answer);
        });
      })
      .catch(function (error) { voteProblem(form, "Your vote was not counted: " + error.message); })
      .then(function () { form.removeAttribute("aria-busy"); });
  });

  // Read marks for readers who are not logged in, kept in this browser only
  // (the server keeps them for logged-in readers and writes them in the page).
  var READ_KEY = "kittypyr-read";
  var MAX_THREADS = 5000;

  function loadRead() {
    try {
      var stored = JSON.parse(localStorage.getItem(READ_KEY) || "{}");
      return {seen: stored.seen || {}, since: stored.since || {}};
    } catch (e) { return null; }
  }

  function saveRead(read) {
    var keys = Object.keys(read.seen);
    if (keys.length > MAX_THREADS) {
      // Forget the threads read longest ago.
      keys.sort(function (a, b) { return read.seen[a] - read.seen[b]; });
      keys.slice(0, keys.length - MAX_THREADS).forEach(function (key) { delete read.seen[key]; });
    }
    try { localStorage.setItem(READ_KEY, JSON.stringify(read)); } catch (e) { /* full or private mode */ }
  }

  function mark(className, text) {
    var node = document.createElement("strong");
    node.className = className;
    node.textContent = text;
    return node;
  }

  // Not on a page about to be replaced by the reader's preferred view: that one marks.
  var read = document.getElementById("logout") || leaving ? null : loadRead();
  if (read) {
    var thread = document.querySelector("section.thread-community[data-thread]");
    if (thread) {
      var key = thread.getAttribute("data-thread");
      var listAddress = key.split("/")[0];
      var seen = key in read.seen ? read.seen[key] : read.since[listAddress];
      var fresh = [];
      if (seen !== undefined) {
        messages().forEach(function (article) {
          var time = article.querySelector("time[datetime]");
          if (time && Date.parse(time.getAttribute("datetime")) / 1000 > seen) {
            article.classList.add("is-new");
            article.querySelector(".who").insertAdjacentElement("afterend", mark("new-mark", "new"));
            fresh.push(article);
          }
        });
      }
      if (fresh.length) {
        var jump = document.createElement("p");
        jump.className = "jump";
        var link = document.createElement("a");
        link.className = "first-unread";
        link.href = "#" + fresh[0].id;
        link.textContent = "Jump to the first unread message";
        var count = document.createElement("span");
        count.className = "meta";
        count.textContent = " (" + fresh.length + " new since your last visit)";
        jump.appendChild(link);
        jump.appendChild(count);
        thread.querySelector(".thread-votes").insertAdjacentElement("afterend", jump);
      }
      read.seen[key] = parseFloat(thread.getAttribute("data-last"));
      saveRead(read);
    }

    var listed = document.querySelectorAll(".thread-marks[data-thread]");
    listed.forEach(function (marks) {
      var key = marks.getAttribute("data-thread");
      var listAddress = key.split("/")[0];
      if (read.since[listAddress] === undefined) {
        // A first visit: what is there already counts as read.
        read.since[listAddress] = parseFloat(marks.getAttribute("data-watermark"));
      }
      var seen = key in read.seen ? read.seen[key] : read.since[listAddress];
      if (parseFloat(marks.getAttribute("data-last")) > seen && !marks.querySelector(".unread-mark")) {
        marks.insertBefore(mark("unread-mark", "unread"), marks.firstChild);
      }
    });
    if (listed.length) { saveRead(read); }

    var lists = document.querySelector("nav.thread-lists");
    if (lists && listed.length) {
      var everything = document.createElement("button");
      everything.type = "button";
      everything.className = "link mark-read";
      everything.textContent = "Mark everything read";
      everything.addEventListener("click", function () {
        var listAddress = listed[0].getAttribute("data-thread").split("/")[0];
        read.since[listAddress] = parseFloat(listed[0].getAttribute("data-watermark"));
        Object.keys(read.seen).forEach(function (key) {
          if (key.split("/")[0] === listAddress) { delete read.seen[key]; }
        });
        saveRead(read);
        document.querySelectorAll(".thread-marks .unread-mark").forEach(function (node) { node.remove(); });
      });
      lists.appendChild(everything);
    }
  }
})();
