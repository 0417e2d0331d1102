// The Timeline (F-94): past runs as bars from start to end, coloured by
// status with the badge colours of takt/admin.css; queued and skipped runs
// (and runs that ended without starting) as points; upcoming fire times of
// the active triggers as ticks; one row per job, on one time axis in the
// browser's zone. Range buttons fetch 1 h, 6 h, 24 h or 7 d around now;
// the slider and the mouse wheel zoom within it (when a cap cut the runs,
// a zoom fetches the narrower range again). Clicking a run opens it.
//
// Drawn with ECharts' SVG renderer. After each draw the container
// (.takt-timeline) carries data-state="ready" and what it drew:
// data-rows, data-bars, data-points, data-ticks, data-range and
// data-truncated ("runs", "ticks" or "runs ticks" when a cap cut some);
// data-state="error" with the message in .takt-timeline-status otherwise.
"use strict";
(function () {
  const charts = window.Takt.charts, escape = charts.escape;
  const { gettext, pgettext, interpolate } = window.Takt.i18n;
  // The tooltip's words for the JSON's status and trigger codes (no code is
  // both); an unknown code is shown as it is.
  function word(code) {
    const words = {
      succeeded: pgettext("run status", "succeeded"), failed: pgettext("run status", "failed"),
      timed_out: pgettext("run status", "timed out"), lost: pgettext("run status", "lost"),
      running: pgettext("run status", "running"), queued: pgettext("run status", "queued"),
      skipped: pgettext("run status", "skipped"), cancelled: pgettext("run status", "cancelled"),
      schedule: pgettext("run trigger", "schedule"), retry: pgettext("run trigger", "retry"),
      manual: pgettext("run trigger", "manual"), api: pgettext("run trigger", "api"),
      catchup: pgettext("run trigger", "catchup"), file: pgettext("run trigger", "file"),
      dependency: pgettext("run trigger", "dependency"), parent: pgettext("run trigger", "parent"),
    };
    return words[code] || code.replace("_", " ");
  }

  const RANGES = { // [before now, after now] in ms
    "1h": [45 * 60e3, 15 * 60e3],
    "6h": [5 * 3600e3, 3600e3],
    "24h": [20 * 3600e3, 4 * 3600e3],
    "7d": [6 * 86400e3, 86400e3],
  };
  const STATUSES = ["succeeded", "failed", "timed_out", "lost", "running", "queued", "skipped", "cancelled"];
  const MIN_SPAN = 60e3;

  function badgeColours() {
    // The badges' own colours (light or dark theme), read from the page's CSS.
    const probe = document.createElement("span");
    probe.style.cssText = "position:absolute;visibility:hidden";
    document.body.appendChild(probe);
    const colours = {};
    STATUSES.forEach(function (status) {
      probe.className = "takt-badge takt-status-" + status;
      colours[status] = getComputedStyle(probe).backgroundColor;
    });
    probe.remove();
    return colours;
  }

  function when(ms) {
    const date = new Date(ms);
    return window.Takt && window.Takt.formatTime ? window.Takt.formatTime(date) : date.toLocaleString();
  }


  function Timeline(el) {
    this.el = el;
    this.chart = charts.init(el.querySelector(".takt-chart"));
    this.status = el.querySelector(".takt-timeline-status");
    this.note = el.querySelector(".takt-timeline-note");
    this.colours = badgeColours();
    this.data = null;
    this.zoomTimer = null;
    const self = this;
    el.querySelectorAll("button[data-range]").forEach(function (button) {
      button.addEventListener("click", function () { self.show(button.dataset.range); });
    });
    this.chart.on("click", function (p) { self.open(p); });
    this.chart.on("datazoom", function () { self.zoomed(); });
    window.addEventListener("resize", function () { self.chart.resize(); });
    this.show(el.dataset.range || "24h");
  }

  Timeline.prototype.show = function (range) {
    const around = RANGES[range] || RANGES["24h"];
    const now = Date.now();
    this.el.dataset.range = range;
    this.el.querySelectorAll("button[data-range]").forEach(function (button) {
      button.classList.toggle("takt-active", button.dataset.range === range);
    });
    this.load(now - around[0], now + around[1]);
  };

  Timeline.prototype.load = function (start, end) {
    const self = this;
    const params = { start: new Date(start).toISOString(), end: new Date(end).toISOString() };
    if (this.el.dataset.job) params.job = this.el.dataset.job;
    this.el.dataset.state = "loading";
    this.status.textContent = gettext("Loading…");
    charts.getJson(this.el.dataset.url, params)
      .then(function (data) { self.draw(data); })
      .catch(function (error) {
        self.el.dataset.state = "error";
        self.status.textContent = interpolate(gettext("Could not load the timeline: %(error)s"), { error: error.message });
      });
  };

  Timeline.prototype.draw = function (data) {
    this.data = data;
    const rowOf = {};
    data.rows.forEach(function (row, i) { rowOf[row.id] = i; });
    const bars = [], points = [], ticks = [];
    data.runs.forEach(function (run, i) {
      if (run.start) bars.push([rowOf[run.job], Date.parse(run.start), Date.parse(run.end), i]);
      else points.push([Date.parse(run.at), rowOf[run.job], i]);
    });
    data.ticks.forEach(function (tick, i) { ticks.push([Date.parse(tick.at), rowOf[tick.job], i]); });
    const start = Date.parse(data.start), end = Date.parse(data.end), now = Date.parse(data.now);
    const many = data.rows.length > 14;
    const height = Math.max(160, Math.min(many ? 14 : data.rows.length, 14) * 30 + 110);
    this.chart.getDom().style.height = height + "px";
    this.chart.resize();
    this.chart.setOption(this.option(data, bars, points, ticks, start, end, now, many), true);

    const truncated = [];
    if (data.runs_truncated) truncated.push("runs");
    if (data.ticks_truncated) truncated.push("ticks");
    Object.assign(this.el.dataset, {
      rows: data.rows.length, bars: bars.length, points: points.length, ticks: ticks.length,
      truncated: truncated.join(" "), state: "ready",
    });
    const notes = [];
    if (data.runs_truncated) {
      notes.push(interpolate(gettext("Only the newest %(count)s runs in this range are shown: zoom in or pick a shorter range to see all."), { count: data.run_cap }));
    }
    if (data.ticks_truncated) {
      notes.push(interpolate(gettext("Not every upcoming fire time is shown (at most %(count)s; dense triggers are cut)."), { count: data.tick_cap }));
    }
    if (!data.runs_shown) notes.push(gettext("Runs are not shown: you may not view runs."));
    this.note.textContent = notes.join(" ");
    this.note.hidden = !notes.length;
    this.status.textContent = data.rows.length ? "" : gettext("Nothing ran and nothing is due in this range.");
  };

  Timeline.prototype.option = function (data, bars, points, ticks, start, end, now, many) {
    const colours = this.colours, runs = data.runs;
    function clip(params, shape) {
      return window.echarts.graphic.clipRectByRect(shape, params.coordSys);
    }
    const zoom = [
      { type: "slider", xAxisIndex: 0, filterMode: "weakFilter", minValueSpan: MIN_SPAN, height: 18, bottom: 8, labelFormatter: "" },
      { type: "inside", xAxisIndex: 0, filterMode: "weakFilter", minValueSpan: MIN_SPAN },
    ];
    if (many) zoom.push({ type: "slider", yAxisIndex: 0, startValue: 0, endValue: 13, width: 14, right: 6, filterMode: "empty", labelFormatter: "" });
    return {
      animation: false,
      backgroundColor: "transparent",
      grid: { left: 8, right: many ? 36 : 16, top: 16, bottom: 56, containLabel: true },
      tooltip: { trigger: "item", confine: true, formatter: function (p) { return tooltip(data, p); } },
      dataZoom: zoom,
      xAxis: { type: "time", min: start, max: end, splitLine: { show: true, lineStyle: { opacity: 0.3 } } },
      yAxis: {
        type: "category", inverse: true, data: data.rows.map(function (row) { return row.name; }),
        axisLabel: { width: 180, overflow: "truncate" }, splitLine: { show: true, lineStyle: { opacity: 0.3 } },
      },
      series: [
        {
          type: "custom", name: "runs", encode: { x: [1, 2], y: 0 }, data: bars,
          renderItem: function (params, api) {
            const from = api.coord([api.value(1), api.value(0)]), to = api.coord([api.value(2), api.value(0)]);
            const tall = api.size([0, 1])[1] * 0.55;
            const shape = clip(params, { x: from[0], y: from[1] - tall / 2, width: Math.max(to[0] - from[0], 2), height: tall });
            const run = runs[api.value(3)];
            return shape && { type: "rect", shape: shape, style: { fill: colours[run.status], stroke: run.running ? "#fff" : null } };
          },
          markLine: {
            silent: true, symbol: "none", animation: false, data: [{ xAxis: now }],
            label: { formatter: gettext("now") }, lineStyle: { type: "dashed", color: "#888" },
          },
        },
        {
          type: "scatter", name: "points", data: points, symbolSize: 9, symbol: "diamond",
          itemStyle: { color: function (p) { return colours[runs[p.value[2]].status]; }, borderColor: "#555", borderWidth: 0.5 },
        },
        {
          type: "custom", name: "ticks", encode: { x: 0, y: 1 }, data: ticks,
          renderItem: function (params, api) {
            const at = api.coord([api.value(0), api.value(1)]);
            const half = api.size([0, 1])[1] * 0.4;
            if (at[0] < params.coordSys.x || at[0] > params.coordSys.x + params.coordSys.width) return null;
            const overdue = data.ticks[api.value(2)].overdue;
            return {
              type: "line", shape: { x1: at[0], y1: at[1] - half, x2: at[0], y2: at[1] + half },
              style: { stroke: overdue ? colours.failed : "#6b7785", lineWidth: 1.5 },
            };
          },
        },
      ],
    };
  };

  function tooltip(data, p) {
    // Each line's text escaped whole: the catalogue's words are text too.
    const say = function (text, values) { return escape(interpolate(text, values)); };
    const row = function (job) {
      const found = data.rows.find(function (r) { return r.id === job; });
      return found ? escape(found.name) : say(gettext("job #%(id)s"), { id: job });
    };
    if (p.seriesName === "ticks") {
      const tick = data.ticks[p.value[2]];
      const at = when(Date.parse(tick.at));
      return "<b>" + row(tick.job) + "</b><br>" +
        (tick.overdue ? say(gettext("Due, not fired yet: %(time)s"), { time: at }) : say(gettext("Next fire time: %(time)s"), { time: at })) +
        "<br>" + say(gettext("Trigger #%(id)s"), { id: tick.trigger });
    }
    if (p.seriesName !== "runs" && p.seriesName !== "points") return "";
    const run = data.runs[p.seriesName === "runs" ? p.value[3] : p.value[2]];
    const lines = [
      "<b>" + row(run.job) + "</b> — " + say(gettext("run #%(id)s"), { id: run.id }),
      say(gettext("Status: %(status)s (%(trigger)s)"), { status: word(run.status), trigger: word(run.trigger) }),
    ];
    if (run.start) {
      lines.push(say(gettext("Start: %(time)s"), { time: when(Date.parse(run.start)) }));
      if (run.running) lines.push(say(gettext("Running for %(duration)s"), { duration: run.duration }));
      else {
        lines.push(say(gettext("End: %(time)s"), { time: when(Date.parse(run.end)) }));
        lines.push(say(gettext("Duration: %(duration)s"), { duration: run.duration }));
      }
    } else {
      const at = when(Date.parse(run.at));
      lines.push(run.status === "queued" ? say(gettext("Due: %(time)s"), { time: at }) : say(gettext("At: %(time)s"), { time: at }));
    }
    return lines.join("<br>");
  }

  Timeline.prototype.open = function (p) {
    if (!this.data || (p.seriesName !== "runs" && p.seriesName !== "points")) return;
    const run = this.data.runs[p.seriesName === "runs" ? p.value[3] : p.value[2]];
    window.location.href = this.data.run_url.replace("{id}", run.id);
  };

  Timeline.prototype.zoomed = function () {
    // A cap cut runs: fetch the zoomed range again, once the zooming stops.
    if (!this.data || !this.data.runs_truncated) return;
    const self = this;
    clearTimeout(this.zoomTimer);
    this.zoomTimer = setTimeout(function () {
      const zoom = self.chart.getOption().dataZoom[0];
      const span = zoom.endValue - zoom.startValue;
      const loaded = Date.parse(self.data.end) - Date.parse(self.data.start);
      if (span >= MIN_SPAN && span < loaded * 0.9) self.load(zoom.startValue, zoom.endValue);
    }, 600);
  };

  charts.start(".takt-timeline[data-url]", Timeline);
})();
