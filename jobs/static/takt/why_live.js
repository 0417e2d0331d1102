// "Why didn't it run?" in the job editor (admin/takt_jobs/job/change_form.html)
// refreshes together with the Latest run panel: whenever that panel's run
// changes status (takt/run_live.js fires "takt:run-status" on it, also when
// the run ends), the editor is fetched again and its "Why didn't it run?"
// panel replaces the shown one, with the form its "Cancel run #N" button
// posts. takt/admin.js shows the new panel's times in the browser's zone.
"use strict";
(function () {
  let asking = false; // one refresh at a time; a change meanwhile asks again
  let again = false;

  function swap(id, fresh, where) {
    const old = document.getElementById(id);
    const copy = fresh ? document.importNode(fresh, true) : null;
    if (old && copy) old.replaceWith(copy);
    else if (old) old.remove();
    else if (copy && where) where.appendChild(copy);
  }

  function refresh() {
    if (asking) { again = true; return; }
    asking = true;
    fetch(window.location.href, { credentials: "same-origin", cache: "no-store" })
      .then(function (response) {
        if (!response.ok) throw new Error("HTTP " + response.status);
        return response.text();
      })
      .then(function (html) {
        const page = new DOMParser().parseFromString(html, "text/html");
        const why = page.getElementById("takt-why");
        if (!why) return;
        const count = Number((document.getElementById("takt-why") || {}).dataset?.refreshed || 0);
        why.dataset.refreshed = String(count + 1); // how many times it was drawn again
        swap("takt-why", why, null);
        swap("takt-cancel-form", page.getElementById("takt-cancel-form"), document.getElementById("content"));
      })
      .catch(function () {}) // it keeps what it showed; the next change asks again
      .finally(function () {
        asking = false;
        if (again) { again = false; refresh(); }
      });
  }

  document.addEventListener("takt:run-status", function (event) {
    if (event.target.closest && event.target.closest("#takt-latest-run")) refresh();
  });
})();
