/* cairn's pages: live feed cards and job pages (SSE, with polling when the stream fails),
   line comments, and repository onboarding's window and resume marker. No inline script: the CSP forbids it. */
(function () {
  "use strict";

  var POLL_MS = 10000;
  var MARKER = "cairn.onboarding";
  var body = document.body;

  function count(name) {
    body.dataset[name] = String(Number(body.dataset[name] || "0") + 1);
  }

  /* A progress stream with its fallback: while the stream fails, `refreshAll` runs every 10 s
     and the stream is tried again; once it opens, polling stops and one refresh catches up. */
  function liveStream(url, state, liveText, onEvent, refreshAll) {
    var after = body.dataset.after || "0";
    var source = null;
    var timer = null;

    function say(mode, text) {
      body.dataset.live = mode;
      if (state) state.textContent = text;
    }

    function connect() {
      var opening = new EventSource(url + "?after=" + after);
      source = opening;
      opening.onopen = function () {
        if (source !== opening) return;
        count("streamOpens");
        var wasPolling = timer !== null;
        if (timer !== null) { clearInterval(timer); timer = null; }
        say("stream", liveText);
        if (wasPolling) refreshAll();
      };
      opening.onmessage = function (message) {
        var event;
        try { event = JSON.parse(message.data); } catch (e) { return; }
        if (message.lastEventId) after = message.lastEventId;
        onEvent(event);
      };
      opening.onerror = function () {
        if (source !== opening) return;
        opening.close();
        source = null;
        fallBack();
      };
    }

    function fallBack() {
      say("polling", "Live updates are interrupted; checking every 10 seconds.");
      if (timer !== null) return;
      timer = setInterval(function () {
        count("polls");
        refreshAll();
        if (source === null) connect();
      }, POLL_MS);
    }

    connect();
  }

  /* The feed: the room's progress stream says which job moved; its card re-fetches itself. */
  function liveFeed(roomId) {
    var feed = document.getElementById("feed");

    function refreshAll() {
      htmx.trigger(feed, "cairn:refresh");
    }

    liveStream("/rooms/" + roomId + "/events", document.getElementById("live-state"),
      "Live: cards update as jobs move.", function (event) {
        var card = document.getElementById("job-" + event.job);
        count("streamRefreshes");
        if (card) {
          htmx.trigger(card, "cairn:refresh");
        } else {
          refreshAll();
        }
      }, refreshAll);
  }

  /* The job page: each progress event (or poll) re-fetches the stage, gate and timeline. */
  function liveJob(jobId) {
    function refresh() {
      var progress = document.getElementById("progress");
      if (progress) htmx.trigger(progress, "cairn:refresh");
    }

    liveStream("/jobs/" + jobId + "/events", document.getElementById("live-state"),
      "Live: this page updates as the job moves.", function () { count("streamRefreshes"); refresh(); }, refresh);
  }

  /* Line comments: each + button adds one labelled comment field to the review form. */
  function lineComments() {
    var list = document.getElementById("line-comments");
    if (!list) return;
    document.querySelectorAll("button.comment-line").forEach(function (button) {
      button.addEventListener("click", function () {
        var name = "comment:" + button.dataset.path + ":" + button.dataset.side + button.dataset.line;
        var existing = list.querySelector('textarea[name="' + CSS.escape(name) + '"]');
        if (existing) { existing.focus(); return; }
        var id = "c" + list.children.length;
        var wrap = document.createElement("div");
        wrap.className = "line-comment";
        var label = document.createElement("label");
        label.htmlFor = id;
        label.textContent = (button.dataset.side === "a" ? "Removed line " : "Line ") +
          button.dataset.line + " of " + button.dataset.path;
        var area = document.createElement("textarea");
        area.id = id;
        area.name = name;
        area.rows = 2;
        area.maxLength = Number(list.dataset.limit || "1000");
        wrap.appendChild(label);
        wrap.appendChild(area);
        list.appendChild(wrap);
        button.closest("tr").classList.add("commented");
        area.focus();
      });
    });
  }

  /* Onboarding's resume marker: the group id and when each stage was reached, nothing else. */
  var STAGES = ["group", "authorize", "repository", "check"];
  var WORDS = { group: "choose the group", authorize: "authorize at the forge",
    repository: "choose the repository", check: "the runner check" };

  function readMarker() {
    try {
      var raw = JSON.parse(localStorage.getItem(MARKER) || "null");
      if (!raw || typeof raw.group !== "number" || typeof raw.stages !== "object") return null;
      return { group: raw.group, stages: raw.stages };
    } catch (e) { return null; }
  }

  function writeMarker(group, stage) {
    var marker = readMarker();
    if (!marker || marker.group !== group) marker = { group: group, stages: {} };
    var stages = {};
    var now = new Date().toISOString();
    STAGES.slice(0, STAGES.indexOf(stage) + 1).forEach(function (name) {
      stages[name] = typeof marker.stages[name] === "string" ? marker.stages[name] : now;
    });
    localStorage.setItem(MARKER, JSON.stringify({ group: group, stages: stages }));
  }

  function latestStage(marker) {
    var found = "group";
    STAGES.forEach(function (name) { if (marker.stages[name]) found = name; });
    return found;
  }

  function onboarding() {
    var group = Number(body.dataset.onboarding || "0");
    if (group) {
      writeMarker(group, body.dataset.stage || "group");
      body.dataset.marked = body.dataset.stage || "group";
    } else {
      var marker = readMarker();
      var box = document.getElementById("resume");
      if (marker && box) {
        var stage = latestStage(marker);
        document.getElementById("resume-text").textContent =
          "You were connecting a repository: continue from \u201c" + WORDS[stage] +
          "\u201d (reached " + new Date(marker.stages[stage]).toLocaleString() +
          "). cairn checks again where it really stands.";
        document.getElementById("resume-link").href = "/onboarding?group=" + marker.group;
        box.hidden = false;
      }
    }
    var oauth = document.getElementById("oauth");
    if (oauth) authorizeWindow(oauth);
  }

  /* The forge's window: never left "connecting" once it is closed, whatever happened in it. */
  function authorizeWindow(box) {
    var button = document.getElementById("authorize-button");
    var retry = document.getElementById("oauth-retry");
    var message = document.getElementById("oauth-message");
    var watcher = null;

    function show(state, text) {
      box.dataset.state = state;
      message.textContent = text;
      retry.hidden = state !== "closed" && state !== "blocked";
      button.hidden = state !== "idle";
    }

    function connected() {
      return fetch(box.dataset.status, { credentials: "same-origin", headers: { Accept: "application/json" } })
        .then(function (answer) { return answer.ok ? answer.json() : { connected: false }; })
        .then(function (data) { return data.connected === true; })
        .catch(function () { return false; });
    }

    function start() {
      var opened = window.open(box.dataset.authorize, "cairn-forge", "popup,width=640,height=720");
      if (!opened) {
        show("blocked", "The browser blocked the forge's window; allow pop-ups for cairn, then try again.");
        return;
      }
      show("connecting", "Waiting for the forge: finish in the window that opened.");
      if (watcher !== null) clearInterval(watcher);
      watcher = setInterval(function () {
        var closed = opened.closed;
        connected().then(function (ok) {
          if (ok) {
            clearInterval(watcher);
            watcher = null;
            window.location.reload();
          } else if (closed && box.dataset.state === "connecting") {
            clearInterval(watcher);
            watcher = null;
            show("closed", "The forge's window was closed before cairn was authorized.");
          }
        });
      }, 500);
    }

    button.addEventListener("click", start);
    retry.addEventListener("click", start);
  }

  /* The authorization window closes itself once the forge has sent it back. */
  function oauthDone() {
    if (window.opener && !window.opener.closed) {
      setTimeout(function () { window.close(); }, 300);
    }
  }

  document.addEventListener("DOMContentLoaded", function () {
    if (body.dataset.feed) liveFeed(body.dataset.feed);
    if (body.dataset.jobPage) liveJob(body.dataset.jobPage);
    lineComments();
    if (document.querySelector("[data-onboarding]") === body) onboarding();
    if (body.dataset.oauthDone) oauthDone();
  });
})();
