// agent report's charts, drawn with uPlot from each home's JSON block. Text from the records is only
// ever set with textContent: nothing a model wrote is parsed as HTML.
(function () {
  "use strict";
  var colours = JSON.parse(document.getElementById("colours").textContent);
  var utc = function (ts) { return uPlot.tzDate(new Date(ts * 1e3), "Etc/UTC"); };
  var colour = function (reason) { return colours[reason] || colours["?"]; };
  // Cycles that asked no model, each kind on a row of its own below the line: idle, then held.
  var APART = ["idle", "held"];
  var apart = function (reason) { return APART.indexOf(reason) >= 0; };

  function width(el) { return Math.max(320, Math.floor(el.getBoundingClientRect().width) || 800); }

  function stamp(ts) { return new Date(ts * 1e3).toISOString().replace("T", " ").slice(0, 19) + " UTC"; }

  function cycleLines(tl, i) {
    var lines = [
      ["cycle", tl.id[i]],
      ["started", tl.t[i] == null ? "?" : stamp(tl.t[i])],
      ["stop reason", tl.reason[i] + (tl.held_for[i] ? " (waits on " + tl.held_for[i] + ")" : "")],
      ["task", tl.tasks[tl.task[i]] || "(none)"],
      ["model", tl.model[i]],
      ["tokens", String(tl.tokens[i])],
      ["cost", tl.cost[i] == null ? "unpriced" : tl.cost[i].toFixed(4)]
    ];
    if (tl.error[i]) lines.push(["error", tl.error[i]]);
    return lines;
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

  function timelineChart(el, tl, range, tooltip, pinned) {
    var seen = {};
    tl.reason.forEach(function (r) { seen[r] = true; });
    var rows = Object.keys(colours).filter(function (r) { return seen[r] && !apart(r); });
    Object.keys(seen).forEach(function (r) { if (rows.indexOf(r) < 0 && !apart(r)) rows.push(r); });
    var ys = {}, labels = {};
    rows.forEach(function (r, k) { ys[r] = rows.length - k; labels[rows.length - k] = r; });
    var below = APART.filter(function (r) { return seen[r]; });
    below.forEach(function (r, k) { ys[r] = -1 - k; labels[-1 - k] = r; });
    var shown = rows.concat(below);
    var data = [tl.t].concat(shown.map(function (r) {
      return tl.reason.map(function (x) { return x === r ? ys[r] : null; });
    }));
    var opts = {
      width: width(el),
      height: Math.max(160, 34 * (rows.length + below.length + 1)),
      tzDate: utc,
      legend: { show: false },
      cursor: { points: { show: false }, drag: { x: true, y: false } },
      scales: { x: { time: true, auto: false, range: range }, y: { auto: false, range: [-0.8 - Math.max(1, below.length), rows.length + 0.8] } },
      axes: [
        {},
        {
          size: 150,
          splits: function () { return Object.keys(labels).map(Number); },
          values: function (u, splits) { return splits.map(function (v) { return labels[v] || ""; }); }
        }
      ],
      series: [{}].concat(shown.map(function (r) {
        var small = apart(r);
        return {
          label: r,
          stroke: colour(r),
          paths: function () { return null; },
          points: { show: true, size: small ? 4 : 8, width: 0, fill: colour(r), stroke: colour(r) }
        };
      })),
      hooks: {
        setCursor: [function (u) {
          var i = u.cursor.idx;
          if (i == null || u.cursor.left < 0) { tooltip.hidden = true; return; }
          fill(tooltip, cycleLines(tl, i));
          tooltip.hidden = false;
          tooltip.style.left = Math.max(0, Math.min(u.over.offsetLeft + u.cursor.left + 12, u.width - 340)) + "px";
          tooltip.style.top = (u.over.offsetTop + u.cursor.top + 12) + "px";
        }]
      }
    };
    var plot = new uPlot(opts, data, el);
    el.appendChild(tooltip);
    plot.over.addEventListener("click", function () {
      if (plot.cursor.idx != null) fill(pinned, cycleLines(tl, plot.cursor.idx));
    });
    plot.over.addEventListener("mouseleave", function () { tooltip.hidden = true; });
    return plot;
  }

  function dayStamp(day) {
    var p = day.split("-");
    return Date.UTC(+p[0], +p[1] - 1, +p[2]) / 1e3;
  }

  var PALETTE = ["#1e88e5", "#43a047", "#fb8c00", "#8e24aa", "#00acc1", "#6d4c41", "#c0ca33", "#5e35b1"];

  function perDayChart(el, spending, range, key, budget, title) {
    var days = spending.days.map(function (d) { return d.day; });
    var xs = days.map(dayStamp);
    var models = Object.keys(spending.models);
    var data = [xs];
    var series = [{ label: "day", value: function (u, v) { return v == null ? "-" : new Date(v * 1e3).toISOString().slice(0, 10); } }];
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
    var money = key === "cost";
    return new uPlot({
      title: title,
      width: Math.max(320, Math.floor(width(el.parentNode) / 2) - 12),
      height: 240,
      tzDate: utc,
      scales: { x: { time: true, auto: false, range: [range[0] - 43200, range[1] + 43200] }, y: { range: function (u, lo, hi) { return [0, Math.max(hi, budget || 0) * 1.1 || 1]; } } },
      axes: [{}, {
        size: 70,
        values: function (u, vals) { return vals.map(function (v) { return money ? v.toFixed(2) : (v >= 1e6 ? (v / 1e6) + "M" : v >= 1e3 ? (v / 1e3) + "k" : String(v)); }); }
      }],
      series: series
    }, data, el);
  }

  var drawn = { timelines: {} };  // window.agentReport: the charts, for a test or a person at the console
  document.querySelectorAll("script.home-data").forEach(function (block) {
    var n = block.getAttribute("data-home-index");
    var page = JSON.parse(block.textContent);
    var tl = page.timeline;
    if (tl.t.length) {
      drawn.timelines[n] = timelineChart(document.getElementById("timeline-" + n), tl, page.range,
        document.getElementById("tooltip-" + n), document.getElementById("pinned-" + n));
    }
    if (page.spending.days.length) {
      var days = [page.range[0], page.range[1] - page.range[1] % 86400];
      perDayChart(document.getElementById("tokens-" + n), page.spending, days, "tokens", page.budgets.tokens, "tokens per day");
      perDayChart(document.getElementById("cost-" + n), page.spending, days, "cost", page.budgets.cost, "cost per day");
    }
  });
  window.agentReport = drawn;
  document.body.setAttribute("data-drawn", "true");
})();
