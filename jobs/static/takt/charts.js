// What takt/timeline.js and takt/forecast.js share: loading their JSON
// (an error names the parameters the server refused), escaping text for
// ECharts' HTML tooltips, making a chart in the admin's light or dark
// theme, and starting one on each container, now or once the page is
// parsed. Needs ECharts (takt/vendor/echarts).
"use strict";
(function () {
  function getJson(url, params) {
    const query = new URLSearchParams(params);
    return fetch(url + "?" + query, { credentials: "same-origin", headers: { Accept: "application/json" } })
      .then(function (response) {
        return response.json().then(function (body) {
          if (response.ok) return body;
          const errors = body.errors || {};
          const words = Object.keys(errors).map(function (k) { return k + ": " + errors[k]; });
          throw new Error(words.join("; ") || response.statusText);
        });
      });
  }

  function escape(text) {
    const div = document.createElement("div");
    div.textContent = String(text);
    return div.innerHTML;
  }

  // ECharts' dark theme where the admin is dark (its theme switch, or
  // "auto" with a dark system setting); read when a chart starts.
  function theme() {
    const chosen = document.documentElement.dataset.theme;
    const systemDark = window.matchMedia && window.matchMedia("(prefers-color-scheme: dark)").matches;
    return chosen === "dark" || (chosen !== "light" && systemDark) ? "dark" : null;
  }

  // The page's month and day names for ECharts' time axis (its own build
  // knows only English and Chinese); none for an English page.
  function locale() {
    const language = window.Takt.i18n.language;
    if (/^en\b/i.test(language)) return null;
    const names = function (options, count, date) {
      const format = new Intl.DateTimeFormat(language, Object.assign({ timeZone: "UTC" }, options));
      return Array.from({ length: count }, function (_, i) { return format.format(date(i)); });
    };
    const month = function (i) { return new Date(Date.UTC(2026, i, 15)); };
    const day = function (i) { return new Date(Date.UTC(2026, 10, 1 + i)); }; // 1 Nov 2026: a Sunday
    return {
      time: {
        month: names({ month: "long" }, 12, month), monthAbbr: names({ month: "short" }, 12, month),
        dayOfWeek: names({ weekday: "long" }, 7, day), dayOfWeekAbbr: names({ weekday: "short" }, 7, day),
      },
    };
  }

  // An ECharts chart drawn as SVG in `el`, in the admin's theme and the page's language.
  function init(el) {
    const options = { renderer: "svg" };
    const names = locale();
    if (names) options.locale = names;
    return window.echarts.init(el, theme(), options);
  }

  // new Chart(el) for every `selector` element, once.
  function start(selector, Chart) {
    function run() {
      if (!window.echarts) return;
      document.querySelectorAll(selector).forEach(function (el) {
        if (!el.taktChart) el.taktChart = new Chart(el);
      });
    }
    if (document.readyState === "loading") document.addEventListener("DOMContentLoaded", run);
    else run();
  }

  window.Takt = Object.assign(window.Takt || {}, { charts: { getJson: getJson, escape: escape, init: init, start: start } });
})();
