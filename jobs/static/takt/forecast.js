// The Load forecast (F-95): runs per hour for the next days across all
// jobs as a heat map, one row per day and one column per hour of the
// browser's time zone (sent as ?tz=, so the server bins by it). Hours
// already past and hours that do not exist (the clocks go forward) are
// grey; an hour that occurs twice (the clocks go back) holds both copies.
// The colour follows the count, or its logarithm (the "Log scale" button,
// data-scale="log"), when a few dense triggers would drown the rest.
//
// Drawn with ECharts' SVG renderer. After drawing, the container
// (.takt-forecast) carries data-state="ready", data-zone, data-total,
// data-max (the busiest cell's count), data-cells (cells coloured by
// count) and data-busiest ("2026-12-02 03" for the busiest cell);
// data-state="error" with the message in .takt-forecast-summary otherwise.
"use strict";
(function () {
  const charts = window.Takt.charts, escape = charts.escape;
  const { gettext, ngettext, interpolate, language } = window.Takt.i18n;
  const SCALE = ["#f3f6fa", "#c6e0ff", "#6fa8dc", "#1a5fb4", "#0b2e59"];
  const HOURS = Array.from({ length: 24 }, function (_, h) { return (h < 10 ? "0" : "") + h; });
  const number = new Intl.NumberFormat(language);
  // Days as "Wed 2 Dec" in English (British order), as "Mi., 2. Dez." in German.
  const DAY_LOCALE = /^en\b/i.test(language) ? "en-GB" : language;


  function dayLabel(iso) {
    // The server's local dates, shown as dates (not moved to another zone).
    const [y, m, d] = iso.split("-").map(Number);
    return new Intl.DateTimeFormat(DAY_LOCALE, { weekday: "short", day: "numeric", month: "short", timeZone: "UTC" })
      .format(new Date(Date.UTC(y, m - 1, d)));
  }

  function Forecast(el) {
    this.el = el;
    this.summary = el.querySelector(".takt-forecast-summary");
    this.note = el.querySelector(".takt-forecast-note");
    this.chart = charts.init(el.querySelector(".takt-chart"));
    const self = this;
    window.addEventListener("resize", function () { self.chart.resize(); });
    const toggle = el.querySelector("button[data-scale]");
    if (toggle) {
      toggle.addEventListener("click", function () {
        el.dataset.scale = el.dataset.scale === "log" ? "linear" : "log";
        toggle.classList.toggle("takt-active", el.dataset.scale === "log");
        if (self.data) self.draw(self.data);
      });
    }
    this.load();
  }

  Forecast.prototype.load = function () {
    const self = this;
    const zone = (window.Takt && window.Takt.browserZone) || Intl.DateTimeFormat().resolvedOptions().timeZone;
    charts.getJson(this.el.dataset.url, { tz: zone, days: this.el.dataset.days || "7" })
      .then(function (data) { self.draw(data); })
      .catch(function (error) {
        self.el.dataset.state = "error";
        self.summary.textContent = interpolate(gettext("Could not load the forecast: %(error)s"), { error: error.message });
      });
  };

  Forecast.prototype.draw = function (data) {
    this.data = data;
    const log = this.el.dataset.scale === "log";
    const cells = [], grey = [];
    let max = 0, least = Infinity, busiest = null;
    data.counts.forEach(function (row, d) {
      row.forEach(function (count, h) {
        const past = d < data.now_cell[0] || (d === data.now_cell[0] && h < data.now_cell[1]);
        if (!data.hour_seconds[d][h] || past) {
          // A number in the value's place: ECharts' heatmap skips a cell whose value is not one.
          grey.push([h, d, 0, past ? "past" : "none"]);
          return;
        }
        cells.push([h, d, count, Math.log10(count + 1)]);
        if (count > max) { max = count; busiest = [d, h]; }
        if (count < least) least = count;
      });
    });
    const days = data.days.map(dayLabel);
    this.chart.setOption({
      animation: false,
      backgroundColor: "transparent",
      grid: { left: 8, right: 16, top: 8, bottom: 64, containLabel: true },
      tooltip: { confine: true, formatter: function (p) { return tooltip(data, days, p); } },
      xAxis: { type: "category", data: HOURS, name: gettext("hour"), nameLocation: "middle", nameGap: 24 },
      yAxis: { type: "category", data: days, inverse: true },
      visualMap: {
        // Colour by the count, or by its logarithm when a few dense triggers would drown the rest.
        type: "continuous", seriesIndex: 0, dimension: log ? 3 : 2,
        min: log && least < max ? Math.log10(least + 1) : 0,
        max: log ? Math.log10(max + 1) || 1 : Math.max(max, 1), calculable: true,
        orient: "horizontal", left: "center", bottom: 0, itemHeight: 220, text: [gettext("more runs"), gettext("none")],
        inRange: { color: SCALE },
        formatter: function (value) { return number.format(Math.round(log ? Math.pow(10, value) - 1 : value)); },
      },
      series: [
        { type: "heatmap", name: "runs", data: cells, emphasis: { itemStyle: { borderColor: "#333", borderWidth: 1 } } },
        { type: "heatmap", name: "grey", data: grey, itemStyle: { color: "rgba(128, 128, 128, 0.18)" } },
      ],
    }, true);

    Object.assign(this.el.dataset, {
      state: "ready", zone: data.zone, total: data.total, max: max, cells: cells.length,
      busiest: busiest ? data.days[busiest[0]] + " " + HOURS[busiest[1]] : "",
    });
    const said = {
      runs: number.format(data.total), triggers: number.format(data.triggers), first: days[0],
      last: days[days.length - 1], zone: data.zone, ms: data.elapsed_ms,
    };
    let text = interpolate(ngettext(
      "%(runs)s runs from %(triggers)s active trigger, %(first)s to %(last)s (%(zone)s)",
      "%(runs)s runs from %(triggers)s active triggers, %(first)s to %(last)s (%(zone)s)",
      data.triggers), said);
    if (busiest) {
      text = interpolate(gettext("%(summary)s; busiest hour: %(day)s %(hour)s:00 with %(count)s runs"), {
        summary: text, day: days[busiest[0]], hour: HOURS[busiest[1]], count: number.format(max),
      });
    }
    this.summary.textContent = interpolate(gettext("%(summary)s. Computed in %(ms)s ms."), Object.assign(said, { summary: text }));
    const notes = [];
    if (data.approximate) {
      notes.push(interpolate(ngettext(
        "%(count)s interval trigger counted from a run's start or end assumes runs that take no time.",
        "%(count)s interval triggers counted from a run's start or end assume runs that take no time.",
        data.approximate), { count: data.approximate }));
    }
    if (data.invalid.length) {
      const which = data.invalid.slice(0, 5).map(function (i) { return "#" + i.trigger + " (" + i.error + ")"; }).join(", ");
      notes.push(interpolate(ngettext(
        "%(count)s trigger could not be evaluated and is left out: %(triggers)s.",
        "%(count)s triggers could not be evaluated and are left out: %(triggers)s.",
        data.invalid.length), { count: data.invalid.length, triggers: which }));
    }
    this.note.textContent = notes.join(" ");
    this.note.hidden = !notes.length;
  };

  function tooltip(data, days, p) {
    const h = p.value[0], d = p.value[1];
    const head = "<b>" + escape(days[d]) + ", " + HOURS[h] + ":00–" + HOURS[(h + 1) % 24] + ":00</b><br>";
    if (p.seriesName === "grey") {
      return head + escape(p.value[3] === "past" ? gettext("Already past.") : gettext("This hour does not exist here (the clocks go forward)."));
    }
    const count = p.value[2];
    const lines = [head + escape(interpolate(ngettext("%(count)s run", "%(count)s runs", count), { count: number.format(count) }))];
    if (data.hour_seconds[d][h] > 3600) lines.push(escape(gettext("This hour occurs twice (the clocks go back): both are counted.")));
    data.busiest[d][h].forEach(function (b) {
      lines.push(escape(interpolate(gettext("%(job)s (trigger #%(id)s): %(count)s"), { job: b.job, id: b.trigger, count: number.format(b.count) })));
    });
    return lines.join("<br>");
  }

  charts.start(".takt-forecast[data-url]", Forecast);
})();
