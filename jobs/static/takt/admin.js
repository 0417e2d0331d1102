// Times in the Takt admin (F-90, F-64): every <time class="takt-time"
// datetime="…Z"> is shown in the browser's own time zone with the zone's
// abbreviation ("2026-12-01 11:51:10 EST"), to the second unless
// data-precision="minute" (in lists, data-compact drops today's date); the
// tooltip keeps the UTC value. The server
// renders its own zone as the text, which stays where JavaScript is off.
// window.Takt.formatTime(date, zone) is shared with the other Takt scripts,
// and so is window.Takt.i18n: gettext, ngettext and interpolate for their
// texts, from Django's JavaScript catalogue where the page loads one
// (jobs/urls.py's takt-jsi18n, {% takt_js_catalog %}), else English.
"use strict";
(function () {
  // Looked up at each call: a catalogue loaded after this file counts too.
  const i18n = {
    gettext: function (text) { return window.gettext ? window.gettext(text) : text; },
    pgettext: function (context, text) { return window.pgettext ? window.pgettext(context, text) : text; },
    ngettext: function (one, many, count) {
      return window.ngettext ? window.ngettext(one, many, count) : count === 1 ? one : many;
    },
    // interpolate("%(n)s runs", {n: 3}): named placeholders, as in the catalogue.
    interpolate: function (text, values) {
      return text.replace(/%\((\w+)\)s/g, function (_, name) { return String(values[name]); });
    },
    // The page's language ("de", "en-us"), for Intl's number and date formats.
    language: document.documentElement.lang || "en-US",
  };
  const gettext = i18n.gettext, interpolate = i18n.interpolate;
  const formats = {};

  function formatter(zone, seconds) {
    const key = (zone || "") + (seconds ? "s" : "m");
    if (!formats[key]) {
      const options = {
        year: "numeric", month: "2-digit", day: "2-digit",
        hour: "2-digit", minute: "2-digit", hourCycle: "h23", timeZoneName: "short",
      };
      if (seconds) options.second = "2-digit";
      if (zone) options.timeZone = zone;
      formats[key] = new Intl.DateTimeFormat("en-US", options);
    }
    return formats[key];
  }

  // The zone's abbreviation ("EST", "CET"): English locales name different
  // zones (en-US the American ones, en-GB the European ones); where none
  // has a name, the offset ("GMT+5:30") stays.
  const NAMING = ["en-US", "en-GB", "en-AU", "en-NZ", "en-IN", "en-ZA"];
  const namers = {};
  function zoneName(date, zone, fallback) {
    for (const locale of NAMING) {
      const key = locale + (zone || "");
      if (!namers[key]) {
        const options = { timeZoneName: "short" };
        if (zone) options.timeZone = zone;
        namers[key] = new Intl.DateTimeFormat(locale, options);
      }
      const part = namers[key].formatToParts(date).find(function (p) { return p.type === "timeZoneName"; });
      if (part && !/^(GMT|UTC)[+-]/.test(part.value)) return part.value;
    }
    return fallback;
  }

  // "2026-12-01 11:51:10 EST" in `zone` (default: the browser's).
  function formatTime(date, zone, precision) {
    const seconds = precision !== "minute";
    const p = {};
    formatter(zone, seconds).formatToParts(date).forEach(function (part) { p[part.type] = part.value; });
    const clock = p.hour + ":" + p.minute + (seconds ? ":" + p.second : "");
    const name = zoneName(date, zone, p.timeZoneName);
    return p.year + "-" + p.month + "-" + p.day + " " + clock + " " + name;
  }

  function relative(date, now) {
    const diff = Math.round((date.getTime() - now) / 1000);
    const size = Math.abs(diff);
    let text;
    if (size < 60) text = interpolate(gettext("%(count)s s"), { count: size });
    else if (size < 3600) text = interpolate(gettext("%(count)s min"), { count: Math.round(size / 60) });
    else if (size < 86400) text = interpolate(gettext("%(count)s h"), { count: Math.round(size / 3600) });
    else text = interpolate(gettext("%(count)s d"), { count: Math.round(size / 86400) });
    return interpolate(diff >= 0 ? gettext("in %(time)s") : gettext("%(time)s ago"), { time: text });
  }

  // In lists (data-compact), a time of today drops its date.
  function compact(text, when) {
    const today = formatTime(new Date(), undefined, "minute").slice(0, 10);
    return text.slice(0, 10) === today ? text.slice(11) : text;
  }

  function localize(root) {
    const now = Date.now();
    (root || document).querySelectorAll("time.takt-time[datetime]").forEach(function (el) {
      const when = new Date(el.getAttribute("datetime"));
      if (isNaN(when)) return;
      let text = formatTime(when, undefined, el.dataset.precision);
      if (el.hasAttribute("data-compact")) text = compact(text, when);
      if (el.hasAttribute("data-relative")) text += " (" + relative(when, now) + ")";
      el.textContent = text;
      el.dataset.localized = "1";
    });
  }

  // The server reads a date-time typed in the admin in the zone this cookie
  // names (jobs/input_zone.py); each input says which zone it is.
  const browserZone = Intl.DateTimeFormat().resolvedOptions().timeZone;
  const zoneCookie = "takt_time_zone=" + browserZone;
  if (/^[\w+\-\/]+$/.test(browserZone || "") && document.cookie.split("; ").indexOf(zoneCookie) < 0) {
    document.cookie = zoneCookie + "; path=/; max-age=31536000; SameSite=Lax";
  }

  window.Takt = Object.assign(window.Takt || {}, {
    formatTime: formatTime,
    localize: localize,
    i18n: i18n,
    browserZone: browserZone,
  });

  document.addEventListener("DOMContentLoaded", function () {
    localize(document);
    // Times added later (live output, previews, panels) are localized too.
    new MutationObserver(function (changes) {
      changes.forEach(function (change) {
        change.addedNodes.forEach(function (node) {
          if (node.nodeType === 1) localize(node.parentNode || node);
        });
      });
    }).observe(document.body, { childList: true, subtree: true });
  });
})();
