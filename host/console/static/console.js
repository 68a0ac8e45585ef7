// capsaga console: the live pending-approvals badge (server-sent events).
// Loaded as /console/static/console.js (the CSP allows no inline script).
// It never writes HTML: only textContent and attributes.
"use strict";
(function () {
  var badge = document.getElementById("pending-badge");
  if (!badge || typeof EventSource === "undefined") {
    return;
  }
  var shown = document.getElementById("pending");
  var initial = shown ? shown.getAttribute("data-pending") : null;
  var events = new EventSource("/console/events");
  events.addEventListener("pending", function (e) {
    var n = String(parseInt(e.data, 10) || 0);
    badge.textContent = n + " pending";
    badge.hidden = n === "0";
    if (shown && initial !== null && n !== initial) {
      var note = document.getElementById("live-note");
      if (!note) {
        note = document.createElement("p");
        note.id = "live-note";
        note.className = "flash";
        shown.parentNode.insertBefore(note, shown.nextSibling);
      }
      note.textContent = "The queue changed (" + n + " pending): reload to see it.";
    }
  });
})();
