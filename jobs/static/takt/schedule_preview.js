// "Check schedule" as you type (F-19): every trigger form in the job
// editor shows its schedule in words and its next five fire times, in the
// trigger's zone and the browser's, from /api/v1/schedule/preview, which
// validates exactly as saving would (its address from the page, so it
// follows wherever a project mounts Takt's API). A wrong field gets its
// error beside it at once. Needs takt/admin.js (window.Takt.formatTime).
"use strict";
(function () {
  const { gettext, interpolate } = window.Takt.i18n;
  function previewUrl() {  // read when asked: this file loads before the page's body
    const where = document.getElementById("takt-schedule-preview-url");
    return where ? where.dataset.url : "/api/v1/schedule/preview";
  }
  const DELAY_MS = 300;
  const TEXT = ["kind", "cron_expression", "timezone", "interval_anchor", "calendar_rule",
    "at_time", "window_start", "window_end", "watch_folder", "watch_pattern"];
  const NUMBERS = ["interval_seconds", "day_of_month", "month", "jitter_seconds", "settle_seconds"];
  const SPLIT_TIMES = ["start_at", "run_at"];
  // Errors that only say a field is still empty go into the box, not beside the field.
  // (The server's German says "erforderlich für …": the same start, translated.)
  function isRequired(message) {
    return message.indexOf("required for ") === 0 || message.indexOf(gettext("required for ")) === 0;
  }
  // As jobs/admin/triggers.py's TriggerForm says it.
  function noStatus() { return gettext("tick at least one way its run ends"); }

  function csrfToken() {
    const input = document.querySelector("input[name=csrfmiddlewaretoken]");
    if (input) return input.value;
    const match = document.cookie.match(/(?:^|;\s*)csrftoken=([^;]+)/);
    return match ? decodeURIComponent(match[1]) : "";
  }

  function input(box, name) {
    return box.querySelector("[name='" + box.dataset.prefix + "-" + name + "']");
  }

  function payload(box) {
    const data = {};
    TEXT.forEach(function (name) {
      const el = input(box, name);
      if (el) data[name] = el.value.trim();
    });
    NUMBERS.forEach(function (name) {
      const el = input(box, name);
      if (el) data[name] = el.value.trim() === "" ? null : el.value.trim();
    });
    SPLIT_TIMES.forEach(function (name) {
      const day = input(box, name + "_0");
      const clock = input(box, name + "_1");
      const value = day && day.value.trim();
      data[name] = value ? value + "T" + ((clock && clock.value.trim()) || "00:00:00") : null;
    });
    const enabled = input(box, "enabled");
    if (enabled) data.enabled = enabled.checked;
    const recursive = input(box, "watch_recursive");
    if (recursive) data.watch_recursive = recursive.checked;
    const id = input(box, "id");
    if (id && id.value) data.id = Number(id.value);
    const days = box.querySelectorAll("input[type=checkbox][name='" + box.dataset.prefix + "-weekdays']");
    if (days.length) {
      data.weekdays = Array.from(days).filter(function (d) { return d.checked; })
        .map(function (d) { return d.value; }).join("");
    }
    // A dependency (F-33): the upstream job's id (the autocomplete's select)
    // and the ends of its runs that start this job.
    const upstream = input(box, "upstream_job");
    if (upstream) data.upstream_job = upstream.value ? Number(upstream.value) : null;
    const ends = box.querySelectorAll("input[type=checkbox][name='" + box.dataset.prefix + "-upstream_statuses']");
    if (ends.length) {
      data.upstream_statuses = Array.from(ends).filter(function (e) { return e.checked; })
        .map(function (e) { return e.value; });
    }
    const calendars = box.querySelectorAll("input[type=checkbox][name='" + box.dataset.prefix + "-exclude_calendars']");
    if (calendars.length) {
      data.exclude_calendars = Array.from(calendars).filter(function (c) { return c.checked; })
        .map(function (c) { return c.closest("label") ? c.closest("label").textContent.trim() : c.value; });
    }
    if (data.window_start === "") data.window_start = null;
    if (data.window_end === "") data.window_end = null;
    if (data.at_time === "") data.at_time = null;
    return data;
  }

  function clearErrors(box) {
    box.querySelectorAll(".takt-live-error").forEach(function (el) { el.remove(); });
  }

  function errorList(messages) {
    const list = document.createElement("ul");
    list.className = "errorlist takt-live-error";
    messages.forEach(function (message) {
      const item = document.createElement("li");
      item.textContent = message;
      list.appendChild(item);
    });
    return list;
  }

  function showFieldError(box, field, messages) {
    const row = box.querySelector(".field-" + field);
    if (!row || row.style.display === "none") return false;
    const target = row.querySelector(".fieldBox.field-" + field) || row;
    // The page came back from a refused save with this very error: shown once.
    const already = Array.from(row.querySelectorAll(".errorlist:not(.takt-live-error)"))
      .some(function (list) { return list.textContent.trim() === messages.join("").trim(); });
    if (!already) target.insertBefore(errorList(messages), target.firstChild);
    return true;
  }

  // Once the operator edits a trigger, the live check supersedes the errors
  // of the refused save the page came back with.
  // Except a dependency's refused upstream job (a cycle) while it is still
  // the one refused: the preview cannot tell a cycle, which needs the job.
  function dropServerErrors(box) {
    const upstream = input(box, "upstream_job");
    const kept = upstream && upstream.value === box.dataset.refusedUpstream
      ? box.querySelector(".form-row.field-upstream_job") : null;
    box.querySelectorAll(".errorlist:not(.takt-live-error)").forEach(function (list) {
      if (!list.closest(".takt-preview") && !(kept && kept.contains(list))) list.remove();
    });
    box.querySelectorAll(".form-row.errors, .fieldBox.errors").forEach(function (row) {
      if (row !== kept) row.classList.remove("errors");
    });
  }

  function render(box, state) {
    const panel = box.querySelector(".takt-preview");
    panel.replaceChildren();
    const heading = document.createElement("h4");
    heading.textContent = gettext("Check schedule");
    panel.appendChild(heading);
    if (state.note) {
      const note = document.createElement("p");
      note.className = "takt-preview-note";
      note.textContent = state.note;
      panel.appendChild(note);
    }
    if (!state.preview) return;
    const preview = state.preview;
    const words = document.createElement("p");
    words.className = "takt-preview-words";
    words.textContent = preview.enabled
      ? preview.description
      : interpolate(gettext("%(schedule)s (this trigger is disabled)"), { schedule: preview.description });
    panel.appendChild(words);
    if (!preview.fire_times.length) {
      const never = document.createElement("p");
      const kind = input(box, "kind");
      never.textContent = kind && kind.value === "dependency"
        ? gettext("No fire times: it starts each time a run of that job ends so.")
        : kind && kind.value === "file"
          ? gettext("No fire times: it starts once for each matching file that arrives or changes.")
          : gettext("Never fires again.");
      panel.appendChild(never);
      return;
    }
    const mine = window.Takt.browserZone;
    const table = document.createElement("table");
    table.className = "takt-preview-times";
    const head = table.createTHead().insertRow();
    const zones = [interpolate(gettext("in %(zone)s"), { zone: preview.timezone })];
    if (mine !== preview.timezone) zones.push(interpolate(gettext("in your zone (%(zone)s)"), { zone: mine }));
    [gettext("Next fire times")].concat(zones)
      .forEach(function (text) {
        const th = document.createElement("th");
        th.textContent = text;
        head.appendChild(th);
      });
    const body = table.createTBody();
    preview.fire_times.forEach(function (iso, index) {
      const when = new Date(iso);
      const row = body.insertRow();
      row.insertCell().textContent = String(index + 1);
      row.insertCell().textContent = window.Takt.formatTime(when, preview.timezone);
      if (mine !== preview.timezone) row.insertCell().textContent = window.Takt.formatTime(when);
    });
    panel.appendChild(table);
    if (preview.jitter_seconds) {
      const jitter = document.createElement("p");
      jitter.textContent = interpolate(gettext("Each run starts up to %(seconds)s s later (jitter)."), { seconds: preview.jitter_seconds });
      panel.appendChild(jitter);
    }
  }

  function update(box) {
    const deleted = input(box, "DELETE");
    if (deleted && deleted.checked) {
      clearErrors(box);
      render(box, { note: gettext("This trigger is deleted when you save.") });
      return;
    }
    const sent = ++box.takt_sequence;
    const data = payload(box);
    if (data.kind === "dependency" && data.upstream_statuses && !data.upstream_statuses.length) {
      // The API takes "none" for the default (succeeded); saving the form refuses it.
      clearErrors(box);
      box.dataset.previewState = "error";
      showFieldError(box, "upstream_statuses", [noStatus()]);
      render(box, { note: gettext("Fix the field marked above.") });
      return;
    }
    fetch(previewUrl(), {
      method: "POST",
      credentials: "same-origin",
      headers: { "Content-Type": "application/json", "X-CSRFToken": csrfToken(), "Accept": "application/json" },
      body: JSON.stringify(data),
    }).then(function (response) {
      return response.json().catch(function () { return {}; }).then(function (body) {
        return { status: response.status, body: body };
      });
    }).then(function (answer) {
      if (sent !== box.takt_sequence) return; // a newer request is on its way
      clearErrors(box);
      if (answer.status === 200) {
        box.dataset.previewState = "ok";
        render(box, { preview: answer.body });
        return;
      }
      if (answer.status !== 400) {
        box.dataset.previewState = "unavailable";
        render(box, { note: interpolate(gettext("The preview is not available (%(status)s)."), { status: answer.status }) });
        return;
      }
      box.dataset.previewState = "error";
      const hints = [];
      Object.keys(answer.body).forEach(function (field) {
        const messages = [].concat(answer.body[field]).map(String);
        const required = messages.every(function (m) { return isRequired(m); });
        if (required || !showFieldError(box, field, messages)) {
          hints.push((field === "detail" ? "" : field + ": ") + messages.join(" "));
        }
      });
      render(box, { note: hints.length ? hints.join("; ") : gettext("Fix the field marked above.") });
    }).catch(function () {
      if (sent === box.takt_sequence) render(box, { note: gettext("The preview is not available (no answer).") });
    });
  }

  function attach(box) {
    // Not the hidden template that "Add another Trigger" copies: a copy would
    // carry its data-prefix and panel, and never be attached itself.
    if (box.classList.contains("empty-form")) return;
    if (box.dataset.prefix || !box.id || box.id.indexOf("__prefix__") !== -1) return;
    const kind = box.querySelector("select[name$='-kind']");
    if (!kind) return;
    box.dataset.prefix = kind.name.slice(0, -"-kind".length);
    const upstream = input(box, "upstream_job");
    if (upstream && box.querySelector(".form-row.field-upstream_job .errorlist")) {
      box.dataset.refusedUpstream = upstream.value;
    }
    box.takt_sequence = 0;
    const panel = document.createElement("div");
    panel.className = "takt-preview module";
    panel.setAttribute("aria-live", "polite");
    box.appendChild(panel);
    let timer = null;
    const later = function () {
      clearTimeout(timer);
      timer = setTimeout(function () { dropServerErrors(box); update(box); }, DELAY_MS);
    };
    box.addEventListener("input", later);
    box.addEventListener("change", later);
    // The upstream job's autocomplete (select2) says "change" through jQuery
    // only, which listeners added with addEventListener never hear.
    if (window.django && window.django.jQuery) window.django.jQuery(box).on("change", "select", later);
    attached.push(later);
    // The server's list of the saved trigger's times is replaced by this one.
    box.querySelectorAll(".fieldBox.field-upcoming").forEach(function (el) { el.style.display = "none"; });
    update(box);
  }

  const attached = [];
  // The admin's calendar and clock pickers (and their "Today"/"Now" links)
  // set values without an input event; their pop-ups live outside the form.
  document.addEventListener("click", function (event) {
    if (event.target.closest(".calendarbox, .clockbox, .datetimeshortcuts")) {
      attached.forEach(function (later) { later(); });
    }
  });

  function attachAll(root) {
    root.querySelectorAll(".inline-related").forEach(attach);
  }

  document.addEventListener("formset:added", function (event) { attach(event.target); });
  window.addEventListener("load", function () { attachAll(document); });
})();
