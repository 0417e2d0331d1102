// A run's live panel (F-93; admin/takt_runs/run/live_panel.html): polls the
// run's live JSON (runs/admin/live.py) about once a second while the run is
// queued or running, and shows its status badge, progress bar, percentage
// and note, times, duration and output; the output follows new lines
// unless the reader scrolled up. Fires "takt:run-status" (detail: the JSON)
// on the panel when the run's status changes (takt/why_live.js refreshes
// "Why didn't it run?" on it); stops when the run ends and fires a
// "takt:run-ended" event (detail: the JSON) on the panel. Times come as
// <time class="takt-time"> from the server; takt/admin.js localizes them.
"use strict";
(function () {
  const { gettext, interpolate } = window.Takt.i18n; // takt/admin.js, loaded first by the page
  const POLL_MS = 1000;
  const RETRY_MS = 5000;
  const shown = new WeakMap(); // element -> the server HTML it shows

  function part(panel, name) {
    return panel.querySelector('[data-live="' + name + '"]');
  }

  function progressText(p) {
    if (!p) return "";
    if (p.percent === null) return interpolate(gettext("%(done)s done"), { done: p.done });
    return interpolate(gettext("%(percent)s % (%(done)s of %(total)s)"), p);
  }

  function showOutput(pre, text) {
    if (pre.textContent === text) return;
    // Follow new lines only if the reader is at the bottom already.
    const atBottom = pre.scrollHeight - pre.scrollTop - pre.clientHeight < 24;
    pre.textContent = text;
    if (atBottom) pre.scrollTop = pre.scrollHeight;
  }

  function render(panel, data) {
    const p = data.progress;
    const bar = part(panel, "bar");
    part(panel, "status").innerHTML = data.html.status;
    part(panel, "percent").textContent = progressText(p);
    part(panel, "note").textContent = p ? p.note : "";
    if (p && p.percent !== null) {
      bar.hidden = false;
      bar.value = p.percent;
      bar.textContent = interpolate(gettext("%(percent)s %"), p);
    } else {
      bar.removeAttribute("value"); // no total: an indeterminate bar while it runs
      bar.hidden = !data.active;
    }
    part(panel, "notice").textContent = data.notice || (data.active ? "" : data.message);
    ["started_at", "finished_at", "duration"].forEach(function (name) {
      // Replaced only when the server's text changes: admin.js rewrote the
      // shown time into the browser's zone, which must not flicker back.
      const el = part(panel, name);
      if (el && shown.get(el) !== data.html[name]) {
        el.innerHTML = data.html[name];
        shown.set(el, data.html[name]);
      }
    });
    // An ended run's page shows its whole output; the JSON has only its tail.
    if (data.active || !data.output_truncated) showOutput(part(panel, "output"), data.output);
    panel.dataset.active = data.active ? "1" : "0";
    panel.dataset.status = data.status; // set once it has polled
    const changed = panel.dataset.shownStatus !== data.status; // the page came with one
    panel.dataset.shownStatus = data.status;
    if (changed) panel.dispatchEvent(new CustomEvent("takt:run-status", { detail: data, bubbles: true }));
  }

  function poll(panel) {
    fetch(panel.dataset.taktLiveUrl, {
      credentials: "same-origin",
      cache: "no-store",
      headers: { Accept: "application/json" },
    })
      .then(function (response) {
        if (response.status === 403 || response.status === 404) {
          throw Object.assign(new Error("HTTP " + response.status), { final: true });
        }
        if (!response.ok) throw new Error("HTTP " + response.status);
        return response.json();
      })
      .then(function (data) {
        render(panel, data);
        if (data.active) {
          setTimeout(poll, POLL_MS, panel);
        } else {
          panel.dispatchEvent(new CustomEvent("takt:run-ended", { detail: data, bubbles: true }));
        }
      })
      .catch(function (error) {
        const notice = part(panel, "notice");
        if (error.final) {
          notice.textContent = interpolate(gettext("live view stopped: %(error)s"), { error: error.message });
          return;
        }
        notice.textContent = interpolate(gettext("live view interrupted (%(error)s); retrying"), { error: error.message });
        setTimeout(poll, RETRY_MS, panel);
      });
  }

  function start() {
    document.querySelectorAll("[data-takt-live-url]").forEach(function (panel) {
      if (panel.dataset.liveStarted) return; // the snippet (and this script) may come twice
      panel.dataset.liveStarted = "1";
      poll(panel); // once even for a finished run: the same view as while it ran
    });
  }

  if (document.readyState === "loading") document.addEventListener("DOMContentLoaded", start);
  else start();
})();
