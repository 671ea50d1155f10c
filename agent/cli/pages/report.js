// agent report's charts, drawn with uPlot from each home's JSON block. Text from the records is only
// ever set with textContent: nothing a model wrote is parsed as HTML.
(function () {
  "use strict";
  var colours = JSON.parse(document.getElementById("colours").textContent);
  var PALETTE = JSON.parse(document.getElementById("palette").textContent);
  var utc = function (ts) { return uPlot.tzDate(new Date(ts * 1e3), "Etc/UTC"); };
  var colour = function (reason) { return colours[reason] || colours["?"]; };
  // Cycles that asked no model, each kind on a row of its own below the line: idle, then held.
  var APART = ["idle", "held"];
  var apart = function (reason) { return APART.indexOf(reason) >= 0; };
  var narrow = function () { return window.innerWidth < 640; };

  function width(el) { return Math.max(200, Math.floor(el.getBoundingClientRect().width) || 800); }

  function stamp(ts) { return new Date(ts * 1e3).toISOString().replace("T", " ").slice(0, 16) + " UTC"; }

  function money(value, currency) { return value == null ? "unpriced" : value.toFixed(4) + " " + currency; }

  // A mark's reasons: a cycle has one; a bucket has its counts by stop reason.
  function reasonsAt(tl, i) {
    var found = {};
    if (!tl.width) { found[tl.reason[i]] = 1; return found; }
    tl.reasons.forEach(function (r, k) { if (tl.counts[i][k]) found[r] = tl.counts[i][k]; });
    return found;
  }

  function cycleLines(tl, i, currency) {
    var lines = [
      ["cycle", tl.id[i]],
      ["started", tl.t[i] == null ? "?" : stamp(tl.t[i])],
      ["stop reason", tl.reason[i] + (tl.held_for[i] ? " (waits on " + tl.held_for[i] + ")" : "")],
      ["task", tl.tasks[tl.task[i]] || "(none)"],
      ["model", tl.model[i]],
      ["tokens", String(tl.tokens[i])],
      ["cost", money(tl.cost[i], currency)]
    ];
    if (tl.error[i]) lines.push(["error", tl.error[i]]);
    return lines;
  }

  function bucketLines(tl, i) {
    var end = tl.t[i] + tl.width;
    var what = tl.width === 86400 ? "day" : tl.width === 3600 ? "hour" : tl.width / 3600 + " hours";
    var lines = [[what, stamp(tl.t[i]) + " to " + (tl.width === 86400 ? stamp(end) : stamp(end).slice(11))]];
    var counts = reasonsAt(tl, i), total = 0;
    Object.keys(counts).forEach(function (r) { total += counts[r]; lines.push([r, String(counts[r]) + " cycle(s)"]); });
    lines.splice(1, 0, ["cycles", String(total)]);
    lines.push(["first cycle", tl.first[i]], ["last cycle", tl.last[i]]);
    return lines;
  }

  // Buckets too narrow to see or tap on this screen (under MIN_PX each) merge into wider ones: the
  // database counted per hour; a phone shows 3, 6, 12 or 24 hours a bucket.
  var MIN_PX = 6;
  function widened(tl, range, px) {
    if (!tl.width) return tl;
    var hours = [1, 3, 6, 12, 24].filter(function (k) { return k * tl.width / (range[1] - range[0]) * px >= MIN_PX; })[0] || 24;
    var size = Math.max(tl.width, tl.width === 3600 ? hours * 3600 : tl.width);
    if (size === tl.width) return tl;
    var out = { width: size, t: [], reasons: tl.reasons, counts: [], first: [], last: [] };
    tl.t.forEach(function (t, i) {
      var start = t - t % size, k = out.t.length - 1;
      if (k < 0 || out.t[k] !== start) {
        out.t.push(start); out.counts.push(tl.reasons.map(function () { return 0; }));
        out.first.push(tl.first[i]); out.last.push(tl.last[i]); k += 1;
      }
      tl.counts[i].forEach(function (n, r) { out.counts[k][r] += n; });
      if (tl.first[i] < out.first[k]) out.first[k] = tl.first[i];
      if (tl.last[i] > out.last[k]) out.last[k] = tl.last[i];
    });
    return out;
  }

  function fill(box, lines) {
    var dl = document.createElement("dl");
    lines.forEach(function (pair) {
      var dt = document.createElement("dt"), dd = document.createElement("dd");
      dt.textContent = pair[0];
      dd.textContent = pair[1];
      dl.appendChild(dt);
      dl.appendChild(dd);
    });
    box.replaceChildren(dl);
  }

  function timelineChart(el, tl, range, tooltip, pinned, currency) {
    tl = widened(tl, range, width(el) - (narrow() ? 118 : 170));
    var seen = {};
    tl.t.forEach(function (_, i) { Object.keys(reasonsAt(tl, i)).forEach(function (r) { seen[r] = true; }); });
    var rows = Object.keys(colours).filter(function (r) { return seen[r] && !apart(r); });
    Object.keys(seen).forEach(function (r) { if (rows.indexOf(r) < 0 && !apart(r)) rows.push(r); });
    var ys = {}, labels = {};
    rows.forEach(function (r, k) { ys[r] = rows.length - k; labels[rows.length - k] = r; });
    var below = APART.filter(function (r) { return seen[r]; });
    below.forEach(function (r, k) { ys[r] = -1 - k; labels[-1 - k] = r; });
    var shown = rows.concat(below);
    var data = [tl.t].concat(shown.map(function (r) {
      return tl.t.map(function (_, i) { return reasonsAt(tl, i)[r] ? ys[r] : null; });
    }));
    var lines = function (i) { return tl.width ? bucketLines(tl, i) : cycleLines(tl, i, currency); };
    var opts = {
      width: width(el),
      height: Math.max(160, 30 * (rows.length + below.length + 1)),
      tzDate: utc,
      legend: { show: false },
      cursor: { points: { show: false }, drag: { x: false, y: false } },
      scales: { x: { time: true, auto: false, range: range }, y: { auto: false, range: [-0.8 - Math.max(1, below.length), rows.length + 0.8] } },
      axes: [
        { space: narrow() ? 70 : 50 },
        {
          size: narrow() ? 118 : 170,
          font: narrow() ? "10px system-ui, sans-serif" : "12px system-ui, sans-serif",
          splits: function () { return Object.keys(labels).map(Number); },
          values: function (u, splits) { return splits.map(function (v) { return labels[v] || ""; }); }
        }
      ],
      series: [{}].concat(shown.map(function (r) {
        var small = apart(r) && !tl.width;
        return {
          label: r,
          stroke: colour(r),
          paths: function () { return null; },
          points: { show: true, size: small ? 4 : tl.width ? 5 : 8, width: 0, fill: colour(r), stroke: colour(r) }
        };
      })),
      hooks: {
        setCursor: [function (u) {
          var i = u.cursor.idx;
          if (i == null || u.cursor.left < 0) { tooltip.hidden = true; return; }
          fill(tooltip, lines(i));
          tooltip.hidden = false;
          tooltip.style.left = Math.max(0, Math.min(u.over.offsetLeft + u.cursor.left + 12, u.width - 300)) + "px";
          tooltip.style.top = (u.over.offsetTop + u.cursor.top + 12) + "px";
        }]
      }
    };
    var plot = new uPlot(opts, data, el);
    el.appendChild(tooltip);
    // A tap (or a click): the mark nearest to it, kept in the panel below the chart.
    // On a row, the tapped mark is the nearest of that row's (several cycles can share a pixel).
    function nearestOnRow(i, y) {
      if (tl.width) return i;
      var row = Math.round(plot.posToVal(y, "y"));
      var reason = shown.filter(function (r) { return ys[r] === row; })[0];
      for (var d = 0; reason && d < 400; d++) {
        if (tl.reason[i - d] === reason) return i - d;
        if (tl.reason[i + d] === reason) return i + d;
      }
      return i;
    }
    plot.over.addEventListener("click", function (e) {
      var box = plot.over.getBoundingClientRect();
      var i = nearestOnRow(plot.posToIdx(e.clientX - box.left), e.clientY - box.top);
      if (i != null && i >= 0 && i < tl.t.length) {
        fill(pinned, lines(i));
        pinned.setAttribute("data-index", String(i));
      }
      tooltip.hidden = true;
    });
    plot.over.addEventListener("mouseleave", function () { tooltip.hidden = true; });
    plot.drawn = tl;  // what is drawn: the cycles, or the buckets as widened for this screen
    return plot;
  }

  function dayStamp(day) {
    var p = day.split("-");
    return Date.UTC(+p[0], +p[1] - 1, +p[2]) / 1e3;
  }

  // The legend below a per-day chart: the window's totals, or the hovered day's values.
  function showLegend(legend, page, key, day) {
    var currency = page.currency;
    var when = legend.querySelector("li.when");
    if (!when.hasAttribute("data-window")) when.setAttribute("data-window", when.textContent);
    when.textContent = day == null ? when.getAttribute("data-window") : day;
    legend.querySelectorAll("li[data-model]").forEach(function (li) {
      var model = li.getAttribute("data-model"), value;
      if (day == null) {
        var total = page.totals.models[model];
        value = key === "cost" ? (total.unpriced && !total.cost ? "unpriced" : money(total.cost, currency)) : total.tokens.toLocaleString("en");
      } else {
        var row = page.spending.models[model].filter(function (r) { return r.day === day; })[0];
        value = !row ? "-" : key === "cost" ? (row.unpriced_cycles && !row.cost ? "unpriced" : money(row.cost, currency)) : row.tokens.toLocaleString("en");
      }
      li.querySelector("b").textContent = value;
    });
  }

  function perDayChart(el, legend, page, range, key, budget, whole) {
    var spending = page.spending;
    var days = spending.days.map(function (d) { return d.day; });
    var xs = days.map(dayStamp);
    var models = Object.keys(spending.models);
    var data = [xs];
    var series = [{}];
    models.forEach(function (model, k) {
      var byDay = {};
      spending.models[model].forEach(function (row) { byDay[row.day] = row[key]; });
      data.push(days.map(function (d) { return d in byDay ? byDay[d] : null; }));
      var c = PALETTE[k % PALETTE.length];
      series.push({ label: model, stroke: c, width: 2, points: { show: true, size: 5, fill: c } });
    });
    if (budget != null) {
      data.push(xs.map(function () { return budget; }));
      series.push({ label: "daily budget", stroke: "#d32f2f", dash: [6, 4], width: 1.5, points: { show: false } });
    }
    var money2 = key === "cost";
    return new uPlot({
      width: whole >= 700 ? Math.floor(whole / 2) - 12 : whole,
      height: 220,
      tzDate: utc,
      legend: { show: false },
      scales: { x: { time: true, auto: false, range: [range[0] - 43200, range[1] + 43200] }, y: { range: function (u, lo, hi) { return [0, Math.max(hi, budget || 0) * 1.1 || 1]; } } },
      axes: [{ space: narrow() ? 70 : 50 }, {
        size: 60,
        values: function (u, vals) { return vals.map(function (v) { return money2 ? v.toFixed(2) : (v >= 1e6 ? (v / 1e6) + "M" : v >= 1e3 ? (v / 1e3) + "k" : String(v)); }); }
      }],
      series: series,
      hooks: {
        setCursor: [function (u) {
          var i = u.cursor.idx;
          showLegend(legend, page, key, i == null || u.cursor.left < 0 ? null : days[i]);
        }]
      }
    }, data, el);
  }

  var drawn = { timelines: {}, days: {} };  // window.agentReport: the charts, for a test or a person at the console
  document.querySelectorAll("script.home-data").forEach(function (block) {
    var n = block.getAttribute("data-home-index");
    var page = JSON.parse(block.textContent);
    var tl = page.timeline;
    if (tl.t.length) {
      drawn.timelines[n] = timelineChart(document.getElementById("timeline-" + n), tl, page.range,
        document.getElementById("tooltip-" + n), document.getElementById("pinned-" + n), page.currency);
    }
    if (page.spending.days.length) {
      var days = [page.range[0] - page.range[0] % 86400, page.range[1] - page.range[1] % 86400];
      var whole = width(document.getElementById("tokens-" + n).closest(".chart-row"));  // measured before either is drawn
      drawn.days[n] = ["tokens", "cost"].map(function (key) {
        var legend = document.getElementById(key + "-legend-" + n);
        return perDayChart(document.getElementById(key + "-" + n), legend, page, days, key, page.budgets[key], whole);
      });
    }
  });
  window.agentReport = drawn;
  document.body.setAttribute("data-drawn", "true");
})();
