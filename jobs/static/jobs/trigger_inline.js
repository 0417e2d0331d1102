// Show only the fields that belong to each trigger's kind (cron, interval,
// once, calendar, dependency, file) and, for a calendar preset, to its rule. A field with an
// error always stays visible, and a fieldset left without a visible field is
// hidden as a whole.
"use strict";
(function () {
  const RESTRICTIONS = ["timezone", "weekdays", "window_start", "window_end", "exclude_calendars"];
  // A dependency fires when another job's run ends: no clock, so no jitter
  // and no next run.
  const CLOCKED = ["jitter_seconds", "next_run"];
  const FIELDS = {
    cron: ["cron_expression"].concat(RESTRICTIONS, CLOCKED),
    interval: ["interval_seconds", "interval_anchor", "start_at"].concat(RESTRICTIONS, CLOCKED),
    once: ["run_at"].concat(CLOCKED),
    calendar: ["calendar_rule", "at_time", "day_of_month", "month"].concat(RESTRICTIONS, CLOCKED),
    dependency: ["upstream_job", "upstream_statuses"],
    file: ["watch_folder", "watch_pattern", "watch_recursive", "settle_seconds"],
  };
  // Calendar rules that use the day of the month, and the month.
  const RULE_FIELDS = {
    day_of_month: ["day_of_month"],
    date: ["day_of_month", "month"],
  };
  const ALL = Array.from(new Set(Object.values(FIELDS).flat()));

  function wantedFields(box) {
    const kind = box.querySelector("select[name$='-kind']");
    const wanted = kind && FIELDS[kind.value] ? FIELDS[kind.value].slice() : ALL.slice();
    const rule = box.querySelector("select[name$='-calendar_rule']");
    const ruleFields = (rule && RULE_FIELDS[rule.value]) || [];
    return wanted.filter(function (name) {
      return !(name === "day_of_month" || name === "month") || ruleFields.includes(name);
    });
  }

  function fieldNames(element) {
    return ALL.filter(function (name) { return element.classList.contains("field-" + name); });
  }

  function hasError(element) {
    return element.classList.contains("errors") || element.querySelector(".errorlist") !== null;
  }

  function show(element, visible) {
    element.style.display = visible || hasError(element) ? "" : "none";
  }

  function update(box) {
    const wanted = wantedFields(box);
    const isWanted = function (name) { return wanted.includes(name); };
    // A field in a row of several, then whole rows. The admin puts such a
    // field's errors and help text beside its box, in a wrapper around
    // both: hiding the box alone would leave its help text on show.
    box.querySelectorAll(".fieldBox").forEach(function (field) {
      const names = fieldNames(field);
      if (names.length) show(field.parentElement, names.some(isWanted));
    });
    box.querySelectorAll(".form-row").forEach(function (row) {
      const names = fieldNames(row);
      if (names.length) show(row, names.some(isWanted));
    });
    box.querySelectorAll("fieldset").forEach(function (fieldset) {
      const rows = Array.from(fieldset.querySelectorAll(".form-row"));
      fieldset.style.display = rows.some(function (row) { return row.style.display !== "none"; }) ? "" : "none";
    });
  }

  function updateFrom(element) {
    const box = element.closest(".inline-related");
    if (box) update(box);
  }

  document.addEventListener("change", function (event) {
    if (event.target.matches("select[name$='-kind'], select[name$='-calendar_rule']")) {
      updateFrom(event.target);
    }
  });
  document.addEventListener("formset:added", function (event) {
    event.target.querySelectorAll("select[name$='-kind']").forEach(updateFrom);
  });
  window.addEventListener("load", function () {
    document.querySelectorAll(".inline-related select[name$='-kind']").forEach(updateFrom);
  });
})();
