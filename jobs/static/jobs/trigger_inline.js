// Show only the fields that belong to each trigger's kind (cron, interval, once).
"use strict";
(function () {
  const FIELDS = {
    cron: ["cron_expression", "timezone"],
    interval: ["interval_seconds", "interval_anchor", "start_at"],
    once: ["run_at"],
  };
  const ALL = Object.values(FIELDS).flat();

  function update(select) {
    const box = select.closest(".inline-related");
    if (!box) return;
    const wanted = FIELDS[select.value] || ALL;
    box.querySelectorAll(".form-row").forEach(function (row) {
      const names = ALL.filter(function (n) { return row.classList.contains("field-" + n); });
      if (names.length) row.style.display = names.some(function (n) { return wanted.includes(n); }) ? "" : "none";
    });
  }

  document.addEventListener("change", function (event) {
    if (event.target.matches("select[name$='-kind']")) update(event.target);
  });
  document.addEventListener("formset:added", function (event) {
    event.target.querySelectorAll("select[name$='-kind']").forEach(update);
  });
  window.addEventListener("load", function () {
    document.querySelectorAll(".inline-related select[name$='-kind']").forEach(update);
  });
})();
