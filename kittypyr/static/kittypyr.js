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
    if (link) { window.location.replace(link.href + window.location.hash); }
  }
})();
