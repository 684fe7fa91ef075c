/* lakefeed UI: polls the JSON API and redraws. Plain JS; charts by uPlot (vendored). */
"use strict";
(function () {
  const STATE_MS = 1500, TABLE_MS = 2000, EVENTS_MS = 3000, TABLE_LIST_MS = 5000;
  const $ = (sel) => document.querySelector(sel);
  const params = new URLSearchParams(location.search);
  const ui = {
    pipeline: params.get("pipeline"), flow: params.get("flow"), table: null,
    wantedTable: params.get("table"),
    time: params.get("time"), measure: params.get("measure"),
    openDetails: new Set(), flowCharts: {}, flowChartsKey: null, tableChart: null, tableChartKey: null, tables: [],
  };

  // ---- formatting -------------------------------------------------------------------------
  function num(v) {
    if (v === null || v === undefined) return "–";
    const a = Math.abs(v);
    if (a >= 1e9) return (v / 1e9).toFixed(2) + "G";
    if (a >= 1e6) return (v / 1e6).toFixed(2) + "M";
    if (a >= 1e4) return (v / 1e3).toFixed(1) + "k";
    if (Number.isInteger(v)) return String(v);
    return v.toFixed(a >= 100 ? 0 : a >= 10 ? 1 : 2);
  }
  function ms(v) {
    if (v === null || v === undefined) return "–";
    if (Math.abs(v) < 1000) return v.toFixed(0) + " ms";
    if (Math.abs(v) < 10000) return (v / 1000).toFixed(2) + " s";
    if (Math.abs(v) < 120000) return (v / 1000).toFixed(1) + " s";
    return (v / 60000).toFixed(1) + " min";
  }
  const secs = (v) => (v === null || v === undefined ? "–" : ms(v * 1000));
  function bytes(v) {
    if (v === null || v === undefined) return "–";
    const units = ["B", "KiB", "MiB", "GiB", "TiB"];
    let i = 0;
    while (Math.abs(v) >= 1024 && i < units.length - 1) { v /= 1024; i++; }
    return (i ? v.toFixed(1) : String(v)) + " " + units[i];
  }
  const clock = (t) => (t ? new Date(t * 1000).toLocaleTimeString() : "–");
  function el(tag, attrs, ...children) {
    const node = document.createElement(tag);
    for (const [k, v] of Object.entries(attrs || {})) {
      if (v === null || v === undefined || v === false) continue;
      if (k === "class") node.className = v; else node.setAttribute(k, v === true ? "" : v);
    }
    for (const c of children) node.append(c instanceof Node ? c : String(c));
    return node;
  }
  function svg(tag, attrs, text) {
    const node = document.createElementNS("http://www.w3.org/2000/svg", tag);
    for (const [k, v] of Object.entries(attrs || {})) if (v !== undefined) node.setAttribute(k, v);
    if (text !== undefined) node.textContent = text;
    return node;
  }
  function showBanner(node, text) {
    node.hidden = !text;
    node.textContent = text || "";
  }

  async function getJSON(url) {
    const r = await fetch(url, { credentials: "same-origin", cache: "no-store" });
    if (r.status === 401) throw new Error("Token required: open this page as /?token=<token>.");
    const body = await r.json().catch(() => ({}));
    if (!r.ok) throw new Error(body.error || r.status + " " + r.statusText);
    return body;
  }

  // ---- pipeline state -----------------------------------------------------------------------
  function selectOptions(select, values, current) {
    const key = values.join("\u0000");
    if (select.dataset.key !== key) {
      select.replaceChildren(...values.map((v) => el("option", { value: v }, v)));
      select.dataset.key = key;
    }
    if (current !== null && values.includes(current)) select.value = current;
    return select.value || null;
  }

  function renderState(data) {
    const pipelines = data.pipelines;
    ui.pipeline = selectOptions($("#pipeline-select"), pipelines.map((p) => p.name), ui.pipeline);
    const p = pipelines.find((x) => x.name === ui.pipeline);
    $("#updated").textContent = "updated " + clock(data.now);
    const logProblems = (data.event_log_problems || []).map((x) => "event log: " + x);
    if (logProblems.length && data.event_log_fix) logProblems.push("fix: " + data.event_log_fix);
    if (!p) { showBanner($("#problem"), logProblems.join("\n")); return; }
    const badge = $("#pipeline-state");
    badge.textContent = p.state;
    badge.className = "badge state-" + p.state;
    const info = [p.run_id ? "run " + p.run_id.slice(0, 8) : null, p.mode && "mode " + p.mode,
      p.spark, p.started_at && "started " + clock(p.started_at),
      p.stopped_at && "stopped " + clock(p.stopped_at) + (p.stop_reason ? " (" + p.stop_reason + ")" : "")];
    $("#pipeline-info").textContent = info.filter(Boolean).join(" · ");
    const pipelineError = p.last_error ? ["pipeline error: " + p.last_error] : [];
    showBanner($("#problem"), [...logProblems, ...pipelineError].join("\n"));
    const flows = Object.fromEntries(p.flows.map((f) => [f.name, f]));
    if (!flows[ui.flow]) ui.flow = defaultFlow(p.flows);
    renderGraph(p.layout, flows);
    renderFlowTable(p.flows);
    renderFlowErrors(p.flows);
    renderFlowCharts(flows[ui.flow], p.flows);
    renderQuality(p.tables);
  }

  function defaultFlow(flows) {
    // the busiest running flow: the one whose charts say most
    const ranked = [...flows].sort((a, b) =>
      (b.state === "running") - (a.state === "running") || b.batches - a.batches);
    return ranked.length ? ranked[0].name : null;
  }

  function flowState(f) { return f.silent ? "silent" : f.state; }

  function renderGraph(layout, flows) {
    const host = $("#graph");
    if (!layout || !layout.nodes.length) {
      host.replaceChildren(el("p", { class: "muted" }, "No graph yet (waiting for run_start)."));
      return;
    }
    const pad = 12, w = layout.node_width, h = layout.node_height;
    const root = svg("svg", { width: layout.width + 2 * pad, height: layout.height + 2 * pad,
      role: "img", "aria-label": "pipeline graph" });
    const defs = svg("defs");
    const marker = svg("marker", { id: "arrow", viewBox: "0 0 10 10", refX: 10, refY: 5,
      markerWidth: 7, markerHeight: 7, orient: "auto-start-reverse" });
    marker.append(svg("path", { d: "M 0 0 L 10 5 L 0 10 z", fill: "#98a2b8" }));
    defs.append(marker);
    root.append(defs);
    const at = Object.fromEntries(layout.nodes.map((n) => [n.name, n]));
    for (const [src, dst] of layout.edges) {
      const a = at[src], b = at[dst];
      const x1 = a.x + w + pad, y1 = a.y + h / 2 + pad, x2 = b.x + pad, y2 = b.y + h / 2 + pad;
      const mid = (x1 + x2) / 2;
      root.append(svg("path", { class: "edge", "marker-end": "url(#arrow)",
        d: `M ${x1} ${y1} C ${mid} ${y1}, ${mid} ${y2}, ${x2} ${y2}` }));
    }
    for (const n of layout.nodes) {
      const f = flows[n.name];
      const g = svg("g", { class: "node", transform: `translate(${n.x + pad},${n.y + pad})`,
        "data-name": n.name, "data-kind": n.kind || "",
        "data-state": f ? flowState(f) : undefined,
        "data-backpressure": f ? String(f.backpressure) : undefined });
      g.append(svg("title", {}, f && f.error ? n.name + ": " + f.error : n.name));
      g.append(svg("rect", { class: "box", width: w, height: h, rx: 6 }));
      g.append(svg("rect", { class: "bar", width: 6, height: h, rx: 3, fill: nodeColor(n, f) }));
      const label = n.name.length > 22 ? n.name.slice(0, 21) + "…" : n.name;
      g.append(svg("text", { x: 14, y: 19 }, label));
      let sub = n.kind || "";
      if (f) {
        sub += " · " + flowState(f);
        if (f.state === "running" && f.last) sub += " · " + num(f.last.processed_rps) + " rows/s";
      }
      g.append(svg("text", { class: "kind", x: 14, y: 36 }, sub));
      if (f) g.addEventListener("click", () => selectFlow(n.name));
      root.append(g);
    }
    host.replaceChildren(root);
  }

  function nodeColor(node, flow) {
    if (flow) {
      return { running: "#1f9d55", failed: "#d63939", stopped: "#8a93a6" }[flow.state] || "#d99a06";
    }
    return { source: "#2f6fde", table: "#138a8a", view: "#7d5fb2", sink: "#c2571a" }[node.kind]
      || "#98a2b8";
  }

  const FLOW_COLUMNS = [
    ["batch", (f) => (f.last && f.last.batch_id !== null ? f.last.batch_id : "–")],
    ["input_rps", (f) => num(f.last && f.last.input_rps)],
    ["processed_rps", (f) => num(f.last && f.last.processed_rps)],
    ["duration_ms", (f) => ms(f.last && f.last.duration_ms)],
    ["latency_ms", (f) => ms(f.last && f.last.latency_ms)],
    ["watermark_delay_s", (f) => secs(f.last && f.last.watermark_delay_s)],
    ["state_rows", (f) => num(f.last && f.last.state_rows)],
    ["state_memory_bytes", (f) => bytes(f.last && f.last.state_memory_bytes)],
    ["dropped_late_total", (f) =>
      f.kept_late_total ? `${num(f.dropped_late_total)} (+${num(f.kept_late_total)} kept)`
                        : num(f.dropped_late_total)],
    ["kafka_lag", (f) => num(f.last && f.last.kafka_lag)],
  ];

  function renderFlowTable(flows) {
    const rows = flows.map((f) => {
      const state = el("span", { class: "badge state-" + flowState(f) }, flowState(f));
      const tr = el("tr", { "data-flow": f.name, class: f.name === ui.flow ? "selected" : null },
        el("td", {}, f.name), el("td", { "data-field": "state" }, state),
        ...FLOW_COLUMNS.map(([field, show]) => el("td", { "data-field": field }, show(f))),
        el("td", {}, f.backpressure ? el("span", { class: "backpressure-tag" }, "backpressure") : ""));
      tr.addEventListener("click", () => selectFlow(f.name));
      return tr;
    });
    $("#flows tbody").replaceChildren(...rows);
  }

  function renderFlowErrors(flows) {
    const boxes = [];
    for (const f of flows) {
      if (f.state === "failed") {
        const box = el("div", { class: "banner error flow-error", "data-flow": f.name },
          `flow ${f.name} failed: ${f.error}`);
        if (f.error_detail && f.error_detail !== f.error) {
          const open = ui.openDetails.has(f.name);
          const more = el("details", { open }, el("summary", {}, "full error"), el("pre", {}, f.error_detail));
          more.addEventListener("toggle", () => (more.open ? ui.openDetails.add(f.name) : ui.openDetails.delete(f.name)));
          box.append(more);
        }
        boxes.push(box);
      } else if (f.state === "restarting" && f.last_error) {
        boxes.push(el("div", { class: "banner warn", "data-flow": f.name },
          `flow ${f.name} restarting (restart ${f.restarts}) after: ${f.last_error}`));
      } else if (f.silent) {
        boxes.push(el("div", { class: "banner warn", "data-flow": f.name },
          `flow ${f.name}: no event since ${clock(f.last_event_at)}; is its process still alive?`));
      }
    }
    $("#flow-errors").replaceChildren(...boxes);
  }

  function selectFlow(name) {
    ui.flow = name;
    refreshState();
    refreshFlowState();
  }

  // ---- flow state (Spark's state stores, read from the checkpoint on request) ---------------
  const OPERATOR_FIELDS = [
    ["partitions", (o) => o.partitions], ["batches", (o) => `${o.min_batch}..${o.max_batch}`],
    ["bytes on disk", (o) => bytes(o.bytes_on_disk)], ["memory (last batch)", (o) => bytes(o.memory_used_bytes)],
    ["rows dropped by watermark (last batch)", (o) => num(o.rows_dropped_by_watermark)],
    ["TTL", (o) => o.ttl.map((t) => `${t.variable}: ${t.ttl_enabled ? "on" : "off"}`).join(", ") || "–"],
  ];

  function renderOperator(op) {
    const facts = OPERATOR_FIELDS.map(([label, show]) => el("tr", {}, el("td", {}, label), el("td", {}, show(op))));
    const stores = op.stores.map((s) => el("tr", { "data-store": s.name },
      el("td", {}, "store " + s.name),
      el("td", {}, s.error ? `unreadable: ${s.error}` : `${num(s.keys)} keys`,
        ...s.sample.map((row) => el("pre", {}, JSON.stringify(row))))));
    return el("div", { class: "operator", "data-operator": op.name },
      el("h3", {}, `operator ${op.operator_id}: ${op.name}`),
      el("table", { class: "grid small state-grid" }, el("tbody", {}, ...facts, ...stores)));
  }

  let flowStateBusy = false;
  async function refreshFlowState() {
    const flow = ui.flow;
    $("#state-flow").textContent = flow || "";
    if (!flow || flowStateBusy) return;
    flowStateBusy = true;
    const host = $("#flow-state");
    host.replaceChildren(el("p", { class: "muted" }, `reading the state of ${flow}…`));
    try {
      const found = await getJSON(`api/state/${encodeURIComponent(flow)}?limit=3`);
      if (flow !== ui.flow) return;
      showBanner($("#state-error"), found.error ? `${found.error}. ${found.fix || ""}` : "");
      host.replaceChildren(...(found.operators.length ? found.operators.map(renderOperator)
        : [el("p", { class: "muted" }, found.error ? "" : `flow ${flow} keeps no state (no stateful operator)`)]));
    } catch (e) {
      showBanner($("#state-error"), e.message);
      host.replaceChildren();
    } finally {
      flowStateBusy = false;
    }
  }

  // ---- charts -------------------------------------------------------------------------------
  const FLOW_CHARTS = [
    { id: "rates", title: "Rows/s: input vs processed", fmt: num,
      series: [["input_rps", "input", "#2f6fde"], ["processed_rps", "processed", "#1f9d55"]] },
    { id: "duration", title: "Batch duration", fmt: ms, series: [["duration_ms", "batch", "#8e44ad"]] },
    { id: "latency", title: "End-to-end latency", fmt: ms, series: [["latency_ms", "latency", "#d35400"]] },
    { id: "watermark", title: "Watermark delay", fmt: secs,
      series: [["watermark_delay_s", "delay", "#16a085"]] },
    { id: "state", title: "State rows and memory", fmt: num,
      series: [["state_rows", "rows", "#2c3e50"], ["state_memory_bytes", "memory", "#c0392b", "bytes"]] },
    { id: "late", title: "Rows dropped as late (per batch)", fmt: num,
      series: [["dropped_late", "dropped", "#d63939"]] },
    { id: "lag", title: "Kafka lag (messages)", fmt: num, optional: true,
      series: [["kafka_lag", "lag", "#7f8c8d"]] },
  ];

  function makeChart(host, spec, data) {
    const axes = [{}, { size: 64, values: (u, vals) => vals.map(spec.fmt) }];
    const scales = { x: { time: true } };
    const series = [{}];
    for (const [, label, color, scale] of spec.series) {
      series.push({ label, stroke: color, width: 2, scale: scale || "y", spanGaps: true,
        value: (u, v) => (scale === "bytes" ? bytes(v) : spec.fmt(v)) });
      if (scale) {
        scales[scale] = {};
        axes.push({ scale, side: 1, size: 70, grid: { show: false }, values: (u, vals) => vals.map(bytes) });
      }
    }
    const width = Math.max(300, host.clientWidth - 14);
    return new uPlot({ width, height: 190, series, axes, scales, legend: { live: true } }, data, host);
  }

  function renderFlowCharts(flow, flows) {
    const select = $("#flow-select");
    selectOptions(select, flows.map((f) => f.name), ui.flow);
    const bp = flow && flow.backpressure;
    showBanner($("#backpressure"), bp
      ? `Backpressure: input has outpaced processing for ${flow.pressure_streak} consecutive batches on ${flow.name}.`
      : "");
    const host = $("#flow-charts");
    if (!flow || !flow.series) { host.replaceChildren(); ui.flowChartsKey = null; return; }
    const s = flow.series;
    const specs = FLOW_CHARTS.filter((c) => !c.optional || c.series.some(([k]) => s[k].some((v) => v !== null)));
    const key = flow.pipeline + "/" + flow.name + "/" + specs.map((c) => c.id).join(",");
    if (key !== ui.flowChartsKey) {
      Object.values(ui.flowCharts).forEach((c) => c.destroy());
      ui.flowCharts = {};
      host.replaceChildren();
      for (const spec of specs) {
        const card = el("div", { class: "chart-card", "data-chart": spec.id }, el("h3", {}, spec.title));
        host.append(card);
        ui.flowCharts[spec.id] = makeChart(card, spec, chartData(s, spec));
      }
      ui.flowChartsKey = key;
    } else {
      for (const spec of specs) ui.flowCharts[spec.id].setData(chartData(s, spec));
    }
  }

  const chartData = (s, spec) => [s.t, ...spec.series.map(([k]) => s[k])];

  // ---- data quality -------------------------------------------------------------------------
  function quarantined(t) {
    if (t.quarantine_table === null || t.quarantine_table === undefined) return num(t.quarantined);
    return `${num(t.quarantine_rows)} rows in ${t.quarantine_table}`;
  }
  const OUTCOME = { drop: "dropped", fail: "failed", warn: "warned" };
  function renderQuality(tables) {
    const rows = [];
    for (const t of tables) {
      const rules = Object.entries(t.rules);
      if (!rules.length) rules.push(["–", { action: "", passed: null, failed: null }]);
      rules.forEach(([name, r], i) => {
        rows.push(el("tr", { "data-table": t.table, "data-rule": name },
          el("td", {}, i ? "" : t.table), el("td", {}, name), el("td", {}, r.action),
          el("td", { "data-field": "passed" }, num(r.passed)),
          el("td", { "data-field": "failed" }, r.failed === null ? "–" : num(r.failed) + " " + (OUTCOME[r.action] || "")),
          el("td", { "data-field": "quarantined" }, i ? "" : quarantined(t))));
      });
    }
    $("#quality tbody").replaceChildren(...rows);
    $("#quality-empty").hidden = rows.length > 0;
  }

  // ---- tables -------------------------------------------------------------------------------
  async function refreshTableList() {
    try {
      ui.tables = await getJSON("api/tables");
      const names = ui.tables.map((t) => t.name);
      if (ui.wantedTable) {
        // asked for in the URL: wait for it rather than show another table
        ui.table = names.includes(ui.wantedTable) ? ui.wantedTable : null;
        if (ui.table) ui.wantedTable = null;
      } else if (!names.includes(ui.table)) {
        ui.table = preferredTable(ui.tables);
      }
      selectOptions($("#table-select"), names, ui.table);
    } catch (e) {
      showBanner($("#table-error"), e.message);
    }
  }

  function preferredTable(tables) {
    // a dashboard-like table first: one with something to chart, gold/aggregate by name
    const chartable = tables.filter((t) => t.time_columns.length && t.measures.length &&
      !/_quarantine$/.test(t.name)).map((t) => t.name);
    const names = chartable.length ? chartable : tables.map((t) => t.name);
    return names.find((n) => /gold|agg|summary|window|min/.test(n)) || names[0] || null;
  }

  function prefer(options, current, pattern) {
    if (current && options.includes(current)) return current;
    return options.find((o) => pattern.test(o)) || options[0] || null;
  }

  async function refreshTable() {
    if (!ui.table) {
      $("#table-info").textContent = ui.wantedTable ? `Waiting for table ${ui.wantedTable}…` : "No tables yet.";
      return;
    }
    try {
      const name = encodeURIComponent(ui.table);
      const info = await getJSON(`api/tables/${name}?limit=20` + (ui.time ? "&order_by=" + encodeURIComponent(ui.time) : ""));
      $("#table-info").textContent = `version ${info.version} · ${num(info.rows)} rows · ${info.files} files · ${bytes(info.size_bytes)} · last commit ${clock(info.last_modified)}`;
      ui.time = selectOptions($("#chart-time"), info.time_columns, prefer(info.time_columns, ui.time, /window|start|time|ts/));
      const measures = info.measures.filter((m) => !info.time_columns.includes(m));
      ui.measure = selectOptions($("#chart-measure"), measures, prefer(measures, ui.measure, /avg|mean|temp|count|value/));
      renderRows(info.latest);
      await refreshTableChart();
      showBanner($("#table-error"), "");
    } catch (e) {
      showBanner($("#table-error"), e.message);
    }
  }

  function renderRows(latest) {
    const head = el("thead", {}, el("tr", {}, ...latest.columns.map((c) => el("th", {}, c))));
    const body = el("tbody", {}, ...latest.rows.map((row) => el("tr", {},
      ...row.map((v) => el("td", {}, v !== null && typeof v === "object" ? JSON.stringify(v) : v === null ? "null" : v)))));
    $("#table-rows").replaceChildren(head, body);
  }

  async function refreshTableChart() {
    const host = $("#table-chart");
    if (!ui.time || !ui.measure) {
      if (ui.tableChart) { ui.tableChart.destroy(); ui.tableChart = null; ui.tableChartKey = null; }
      host.replaceChildren(el("p", { class: "muted" }, "This table has no timestamp and numeric columns to chart."));
      return;
    }
    const agg = $("#chart-agg").value, bucket = $("#chart-bucket").value;
    const q = new URLSearchParams({ time: ui.time, measure: ui.measure, agg, bucket_s: bucket });
    const data = await getJSON(`api/tables/${encodeURIComponent(ui.table)}/chart?` + q);
    const key = [ui.table, ui.time, ui.measure, agg, bucket].join("|");
    const series = [data.t, data.y];
    if (key !== ui.tableChartKey) {
      if (ui.tableChart) ui.tableChart.destroy();
      host.replaceChildren();
      const spec = { fmt: num, series: [["y", `${agg}(${ui.measure})`, "#2f6fde"]] };
      ui.tableChart = makeChart(host, spec, series);
      ui.tableChartKey = key;
    } else {
      ui.tableChart.setData(series);
    }
    host.dataset.points = String(data.t.length);
  }

  // ---- events -------------------------------------------------------------------------------
  async function refreshEvents() {
    try {
      const events = await getJSON("api/events?limit=30");
      $("#events tbody").replaceChildren(...events.map((e) => el("tr", { "data-type": e.event_type, class: "level-" + e.level },
        el("td", {}, new Date(e.timestamp).toLocaleTimeString()), el("td", {}, e.pipeline),
        el("td", {}, e.flow || ""), el("td", {}, e.event_type), el("td", {}, e.level),
        el("td", { title: e.message.length > 300 ? e.message : null }, e.message.length > 300 ? e.message.slice(0, 300) + "…" : e.message))));
    } catch (e) { /* the state poll reports the problem */ }
  }

  // ---- polling ------------------------------------------------------------------------------
  let stateBusy = false;
  async function refreshState() {
    if (stateBusy) return;
    stateBusy = true;
    try {
      renderState(await getJSON("api/state?series=" + encodeURIComponent(ui.flow || "*")));
      $("#notice").hidden = Boolean(ui.pipeline);
    } catch (e) {
      showBanner($("#problem"), e.message);
    } finally {
      stateBusy = false;
    }
  }

  function every(ms, fn) { fn(); setInterval(fn, ms); }

  $("#pipeline-select").addEventListener("change", (e) => { ui.pipeline = e.target.value; ui.flowChartsKey = null; refreshState(); });
  $("#flow-select").addEventListener("change", (e) => selectFlow(e.target.value));
  $("#state-refresh").addEventListener("click", refreshFlowState);
  $("#table-select").addEventListener("change", (e) => {
    ui.table = e.target.value; ui.wantedTable = null; ui.time = ui.measure = null; refreshTable();
  });
  $("#chart-time").addEventListener("change", (e) => { ui.time = e.target.value; refreshTable(); });
  $("#chart-measure").addEventListener("change", (e) => { ui.measure = e.target.value; refreshTable(); });
  $("#chart-agg").addEventListener("change", refreshTable);
  $("#chart-bucket").addEventListener("change", refreshTable);

  every(STATE_MS, refreshState);
  every(EVENTS_MS, refreshEvents);
  refreshTableList().then(() => every(TABLE_MS, refreshTable));
  setInterval(refreshTableList, TABLE_LIST_MS);
})();
