// Draws report.html's charts from the JSON the page carries, sorts its summary
// table, and leaves the page's status (errors, charts drawn, overflow) in
// #page-status for the headless browser test to read.
(function () {
  "use strict";
  const page = JSON.parse(document.getElementById("report-data").textContent);

  // A value for the legend, and a shorter one for an axis tick.
  function number(v) {
    if (v == null) return "–";
    const a = Math.abs(v);
    if (a !== 0 && (a >= 1e5 || a < 1e-3)) return v.toExponential(3);
    return String(Number(v.toPrecision(4)));
  }
  function tick(v) {
    if (v == null) return "";
    const a = Math.abs(v);
    if (a !== 0 && (a >= 1e5 || a < 1e-3)) return v.toExponential(1);
    return String(Number(v.toPrecision(6)));
  }

  const ranges = {
    zero: (u, min, max) => [0, max > 0 ? max * 1.05 : 1],
    jain: (u, min, max) => [Math.max(0, Math.min(min, 0.95) - 0.01), 1.005],
    fraction: () => [0, 1],
  };

  const height = 280;
  const plots = [];
  // Runs that agree draw the same line: each run is drawn narrower than the one
  // before, so lines that coincide show as nested bands, every colour visible,
  // with the ideal dashed on top.
  const runWidth = (i, runs) => (runs > 1 ? 5 - (3.5 * i) / (runs - 1) : 2);
  for (const chart of page.charts) {
    const box = document.getElementById(chart.id);
    const runs = chart.series.filter((s) => !s.ideal).length;
    const unit = chart.unit ? " " + chart.unit : "";
    const options = {
      width: Math.max(200, box.clientWidth),
      height: height,
      scales: {
        x: chart.x_log ? { time: false, distr: 3, log: 10 } : { time: false },
        y: { range: ranges[chart.y_range] },
      },
      axes: [
        { label: chart.x_label, labelSize: 20 },
        { label: chart.y_label, labelSize: 20, size: 56, values: (u, ticks) => ticks.map(tick) },
      ],
      cursor: { drag: { x: true, y: false } },
      legend: { live: true },
      series: [{ label: chart.x_label, value: (u, v) => number(v) }].concat(
        chart.series.map((s, i) => ({
          label: s.label,
          stroke: s.color,
          width: s.ideal ? 1.5 : runWidth(i, runs),
          dash: s.dash ? (s.ideal ? [6, 4] : [2, 3]) : undefined,
          spanGaps: true,
          points: { show: false },
          value: (u, v) => (v == null ? "–" : number(v) + unit),
        }))
      ),
    };
    const data = [chart.x].concat(chart.series.map((s) => s.values));
    plots.push({ plot: new uPlot(options, data, box), box: box, chart: chart });
  }

  // Charts follow their card's width as the window changes.
  const resize = new ResizeObserver(() => {
    for (const p of plots) {
      const width = Math.max(200, p.box.clientWidth);
      if (width !== p.plot.width) p.plot.setSize({ width: width, height: height });
    }
  });
  for (const p of plots) resize.observe(p.box);

  for (const table of document.querySelectorAll("table.sortable")) {
    const heads = Array.from(table.tHead.rows[0].cells);
    heads.forEach((th, column) => {
      th.addEventListener("click", () => {
        const ascending = th.getAttribute("aria-sort") !== "ascending";
        heads.forEach((h) => h.removeAttribute("aria-sort"));
        th.setAttribute("aria-sort", ascending ? "ascending" : "descending");
        const body = table.tBodies[0];
        const key = (row) => {
          const cell = row.cells[column];
          const v = cell.dataset.v;
          return v === undefined ? cell.textContent : v === "" ? null : Number(v);
        };
        const rows = Array.from(body.rows);
        rows.sort((a, b) => {
          const x = key(a), y = key(b);
          if (x === y) return 0;
          if (x === null) return 1;
          if (y === null) return -1;
          const order = typeof x === "number" ? x - y : String(x).localeCompare(String(y));
          return ascending ? order : -order;
        });
        for (const row of rows) body.appendChild(row);
      });
    });
  }

  // A run's line is in a colour (the ideal and the axes are greys): a chart
  // that drew its runs has such pixels.
  function coloured(canvas) {
    const pixels = canvas.getContext("2d").getImageData(0, 0, canvas.width, canvas.height).data;
    let count = 0;
    for (let i = 0; i < pixels.length; i += 4) {
      const r = pixels[i], g = pixels[i + 1], b = pixels[i + 2];
      if (pixels[i + 3] > 0 && Math.max(r, g, b) - Math.min(r, g, b) > 40) count++;
    }
    return count;
  }

  function report() {
    const root = document.documentElement;
    const status = {
      scroll_width: root.scrollWidth,
      client_width: root.clientWidth,
      errors: window.reportErrors,
      charts: plots.map((p) => {
        const canvas = p.box.querySelector("canvas");
        return {
          id: p.chart.id,
          title: p.chart.title,
          expected: p.chart.series.length,
          labels: p.plot.series.slice(1).map((s) => s.label),
          width: canvas ? canvas.width : 0,
          height: canvas ? canvas.height : 0,
          coloured: canvas ? coloured(canvas) : 0,
        };
      }),
    };
    document.getElementById("page-status").textContent = JSON.stringify(status);
    if (window.reportErrors.length > 0) {
      const shown = document.createElement("pre");
      shown.id = "page-errors";
      shown.textContent = "This page failed to draw:\n" + window.reportErrors.join("\n");
      document.body.prepend(shown);
    }
  }
  // Once the whole page is in (load), and after uPlot's drawing, which it does
  // in a microtask after a chart is made.
  window.addEventListener("load", () => setTimeout(report, 0));
})();
