// gpuplan dashboard: draws the charts from the pages' JSON data islands and
// sends the plan, job and sign-in forms as JSON. No inline script: the pages'
// Content-Security-Policy allows only this file and the bundled uPlot.
"use strict";

(function () {
  function island(id) {
    var el = document.getElementById(id);
    return el ? JSON.parse(el.textContent) : null;
  }

  function width(el) {
    return Math.max(320, Math.min(el.clientWidth || 900, 1200));
  }

  var DARK = ["#000", "#b3261e", "#555", "#1e7b34"];
  var COLORS = ["#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2", "#17becf"];

  // Spot prices hold until the next report: each zone's line is a step
  // function over the union of every zone's timestamps.
  function spotChart(el, data) {
    var times = {};
    data.series.forEach(function (s) {
      s.points.forEach(function (p) { times[Math.max(p[0], data.since)] = true; });
    });
    times[data.since] = true;
    times[data.until] = true;
    var xs = Object.keys(times).map(Number).sort(function (a, b) { return a - b; });
    var columns = [xs];
    var series = [{}];
    data.series.forEach(function (s, i) {
      var ys = [];
      var j = 0;
      var current = null;
      xs.forEach(function (x) {
        while (j < s.points.length && s.points[j][0] <= x) { current = s.points[j][1]; j++; }
        ys.push(current);
      });
      columns.push(ys);
      series.push({
        label: s.label,
        stroke: COLORS[i % COLORS.length],
        width: 1.5,
        paths: uPlot.paths.stepped({ align: 1 }),
        value: function (u, v) { return v == null ? "—" : v.toFixed(4); }
      });
    });
    [["on-demand", data.on_demand, "#555"], ["best committed", data.committed, "#999"]].forEach(function (ref) {
      if (ref[1] == null) { return; }
      columns.push(xs.map(function () { return ref[1]; }));
      series.push({ label: ref[0], stroke: ref[2], dash: [6, 4], width: 1 });
    });
    return new uPlot({
      width: width(el),
      height: 360,
      series: series,
      axes: [{}, { label: "USD per instance-hour", size: 70 }],
      scales: { x: { time: true } }
    }, columns, el);
  }

  // The plan's GPUs per hour, stacked: reserved at the bottom, then spot,
  // then on-demand, with the demand as a line on top.
  function planChart(el, data) {
    var reserved = data.reserved;
    var spot = data.spot.map(function (v, i) { return reserved[i] + v; });
    var total = data.on_demand.map(function (v, i) { return spot[i] + v; });
    var layers = [
      ["on-demand", total, "#ff7f0e"],
      ["spot", spot, "#2ca02c"],
      ["reserved", reserved, "#1f77b4"]
    ];
    var series = [{ label: "hour" }];
    var columns = [data.hours];
    layers.forEach(function (l) {
      series.push({ label: l[0], stroke: l[2], fill: l[2], width: 1, points: { show: false } });
      columns.push(l[1]);
    });
    series.push({ label: "demand", stroke: "#000", width: 2, points: { show: false } });
    columns.push(data.demand);
    return new uPlot({
      width: width(el),
      height: 360,
      series: series,
      axes: [{ label: "hour of the horizon" }, { label: "GPUs", size: 60 }],
      // GPUs from zero, so that the reserved baseline is drawn to scale.
      scales: { x: { time: false }, y: { range: function (u, min, max) { return [0, Math.max(1, max * 1.05)]; } } }
    }, columns, el);
  }

  // Bands stacked bottom to top in the order given, each drawn as the sum
  // of itself and those below (filled, so each band shows its own share),
  // then lines on top (budgets, forecasts, utilization), null where absent.
  function stackedChart(el, data) {
    var series = [{ label: data.time ? "day" : "x" }];
    var columns = [data.x];
    var running = data.x.map(function () { return 0; });
    var bands = data.stacks.map(function (s) {
      running = running.map(function (v, i) { return s.values[i] == null ? null : (v || 0) + s.values[i]; });
      return { label: s.label, values: running.slice() };
    });
    bands.reverse().forEach(function (b, i) {
      var c = COLORS[(bands.length - 1 - i) % COLORS.length];
      series.push({ label: b.label, stroke: c, fill: c + "99", width: 1, points: { show: false } });
      columns.push(b.values);
    });
    data.lines.forEach(function (l, i) {
      series.push({
        // Over stacks, lines come in pairs (a budget and its forecast): one
        // dark colour each pair.
        label: l.label, stroke: data.stacks.length ? DARK[Math.floor(i / 2) % DARK.length] : COLORS[i % COLORS.length], width: 2,
        dash: l.dash ? [6, 4] : undefined, spanGaps: false, points: { show: data.x.length < 40 }
      });
      columns.push(l.values);
    });
    return new uPlot({
      width: width(el),
      height: 340,
      series: series,
      axes: [{}, { label: data.y_label, size: 80 }],
      scales: { x: { time: data.time }, y: { range: function (u, min, max) { return [0, Math.max(1, max * 1.05)]; } } }
    }, columns, el);
  }

  function status(el, text) {
    if (el) { el.textContent = text; }
  }

  function postJson(url, body) {
    return fetch(url, {
      method: "POST",
      headers: { "Content-Type": "application/json" },
      credentials: "same-origin",
      body: JSON.stringify(body)
    });
  }

  function errorText(response) {
    return response.json().then(
      function (doc) { return doc.error || ("HTTP " + response.status); },
      function () { return "HTTP " + response.status; }
    );
  }

  function numbers(text) {
    return text.split(/[\s,;]+/).filter(function (t) { return t.length > 0; }).map(Number);
  }

  function planForm(form) {
    var out = document.getElementById("plan-status");
    var file = form.querySelector("input[name=demand_file]");
    if (file) {
      file.addEventListener("change", function () {
        if (!file.files.length) { return; }
        file.files[0].text().then(function (text) {
          // A CSV's header line and any hour column are dropped: the last
          // number of each line is the demand.
          var values = text.split(/\r?\n/).map(function (line) {
            var cells = line.split(",");
            return cells[cells.length - 1].trim();
          }).filter(function (v) { return v !== "" && !isNaN(Number(v)); });
          form.elements.demand.value = values.join("\n");
        });
      });
    }
    form.addEventListener("submit", function (event) {
      event.preventDefault();
      var demand = numbers(form.elements.demand.value);
      if (!demand.length || demand.some(isNaN)) {
        status(out, "The demand must be numbers, one per hour.");
        return;
      }
      var name = form.elements.name.value.trim();
      status(out, "Planning…");
      postJson("/v1/plans?save=true", {
        name: name,
        gpu: form.elements.gpu.value.split(",").map(function (g) { return g.trim(); }).filter(Boolean),
        demand: demand
      })
        .then(function (response) {
          if (response.ok) {
            // Read the answer whole before leaving, so the request ends cleanly.
            response.json().then(function () {
              window.location.assign("/ui/plans/latest?name=" + encodeURIComponent(name));
            });
          } else {
            errorText(response).then(function (text) { status(out, text); });
          }
        }, function (err) { status(out, String(err)); });
    });
  }

  function money(v) {
    return v == null ? "—" : "$" + v.toFixed(2);
  }

  function fixed(v, digits) {
    return v == null ? "—" : Number(v).toFixed(digits);
  }

  // Rows of text cells: every cell through textContent, never as markup.
  function fillTable(table, header, rows) {
    var head = table.querySelector("thead tr");
    var body = table.querySelector("tbody");
    head.replaceChildren();
    body.replaceChildren();
    header.forEach(function (h) {
      var th = document.createElement("th");
      th.textContent = h;
      head.appendChild(th);
    });
    rows.forEach(function (cells) {
      var tr = document.createElement("tr");
      cells.forEach(function (c) {
        var td = document.createElement("td");
        td.textContent = c;
        tr.appendChild(td);
      });
      body.appendChild(tr);
    });
  }

  var frontierPlot = null;

  // The cheapest plan for each deadline: total USD against finish hours.
  function frontierChart(el, points) {
    if (frontierPlot) { frontierPlot.destroy(); frontierPlot = null; }
    el.replaceChildren();
    if (!points.length) { return; }
    frontierPlot = new uPlot({
      width: width(el),
      height: 320,
      series: [
        { label: "finish, hours" },
        { label: "total USD", stroke: "#1f77b4", width: 2, points: { show: true, size: 7, fill: "#1f77b4" },
          value: function (u, v) { return v == null ? "—" : "$" + v.toFixed(2); } }
      ],
      axes: [{ label: "finish, hours from now" }, { label: "USD", size: 80 }],
      scales: { x: { time: false }, y: { range: function (u, min, max) { return [0, Math.max(1, max * 1.05)]; } } }
    }, [points.map(function (p) { return p.finish_hours; }), points.map(function (p) { return p.total_usd; })], el);
  }

  function jobAnswer(doc) {
    var section = document.getElementById("job-answer");
    section.hidden = false;
    var summary = document.getElementById("job-summary");
    if (doc.status === "optimal") {
      summary.textContent = "Optimal: " + money(doc.total_usd) + ", finished " + fixed(doc.finish_hours, 2) +
        " hours from now, " + money(doc.cost_usd / doc.work) + " per reference GPU-hour.";
    } else {
      var inf = doc.infeasibility || {};
      var figure = { deadline: "the most work by the deadline is " + fixed(inf.max_work, 3),
                     budget: "the cheapest plan by the deadline costs " + money(inf.min_cost),
                     carbon: "the least it can emit is " + fixed(inf.min_carbon_kg, 3) + " kg" }[inf.kind];
      summary.textContent = "Infeasible (" + inf.kind + ")" + (figure ? ": " + figure : "") + ".";
    }
    var table = document.getElementById("job-plan");
    if (doc.shape === "gang") {
      fillTable(table, ["Offer", "Nodes", "Finish h", "Total USD", "Why not"], (doc.ranking || []).map(function (r) {
        return r.feasible ? [r.offer, String(r.nodes), fixed(r.finish_hours, 2), money(r.total_usd), ""]
                          : [r.offer, "—", "—", "—", "no option: " + r.reason];
      }));
    } else {
      fillTable(table, ["Offer", "Kind", "Instance-hours", "Work", "USD"], (doc.schedule || []).map(function (s) {
        return [s.offer, s.kind, String(s.instance_hours), fixed(s.work, 3), money(s.cost_usd)];
      }));
    }
    frontierChart(document.getElementById("job-frontier-chart"), doc.frontier || []);
    var basis = doc.catalog && doc.catalog.perf_basis;
    document.getElementById("job-basis").textContent = basis
      ? "Work is rated by " + basis.workload + " against " + basis.reference + (basis.estimate ? " (a datasheet ratio, an estimate)." : " (measured rows).")
      : "";
  }

  function jobForm(form) {
    var out = document.getElementById("job-status");
    form.addEventListener("submit", function (event) {
      event.preventDefault();
      var el = form.elements;
      var list = function (v) { return v.split(",").map(function (x) { return x.trim(); }).filter(Boolean); };
      var body = { work: Number(el.work.value), deadline_hours: Number(el.deadline_hours.value),
                   shape: el.shape.value, objective: el.objective.value,
                   gpu: list(el.gpu.value), countries: list(el.countries.value) };
      [["budget_usd", el.budget_usd], ["gpus", el.gpus], ["scaling", el.scaling]].forEach(function (f) {
        if (f[1].value.trim() !== "") { body[f[0]] = Number(f[1].value); }
      });
      if (body.shape !== "gang") { delete body.gpus; delete body.scaling; }
      if (el.perf.value.trim() !== "") { body.perf = el.perf.value.trim(); }
      status(out, "Planning…");
      postJson("/v1/jobs", body).then(function (response) {
        if (response.ok) {
          response.json().then(function (doc) { status(out, ""); jobAnswer(doc); });
        } else {
          errorText(response).then(function (text) { status(out, text); });
        }
      }, function (err) { status(out, String(err)); });
    });
  }

  function loginForm(form) {
    var out = document.getElementById("login-status");
    form.addEventListener("submit", function (event) {
      event.preventDefault();
      postJson("/ui/login", { token: form.elements.token.value }).then(function (response) {
        if (response.ok) {
          window.location.assign("/");
        } else {
          errorText(response).then(function (text) { status(out, text); });
        }
      }, function (err) { status(out, String(err)); });
    });
  }

  document.addEventListener("DOMContentLoaded", function () {
    var spot = island("spot-data");
    var spotEl = document.getElementById("spot-chart");
    if (spot && spotEl) { spotChart(spotEl, spot); }
    var plan = island("plan-data");
    var planEl = document.getElementById("plan-chart");
    if (plan && planEl) { planChart(planEl, plan); }
    ["spend", "usage", "commitments"].forEach(function (name) {
      var d = island(name + "-data");
      var el = document.getElementById(name + "-chart");
      if (d && el) { stackedChart(el, d); }
    });
    var pf = document.getElementById("plan-form");
    if (pf) { planForm(pf); }
    var jf = document.getElementById("job-form");
    if (jf) { jobForm(jf); }
    var lf = document.getElementById("login-form");
    if (lf) { loginForm(lf); }
  });
})();
