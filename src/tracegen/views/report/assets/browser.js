// The trace browser: filters the embedded sample and renders a trace as `tracegen show` does.
"use strict";
(function () {
  const traces = JSON.parse(document.getElementById("trace-data").textContent);
  const $ = (id) => document.getElementById(id);
  const filters = {
    search: $("f-search"), mode: $("f-mode"), outcome: $("f-outcome"),
    problem: $("f-problem"), failure: $("f-failure"),
  };
  const list = $("trace-list");
  const count = $("trace-count");
  const panes = [$("pane-a"), $("pane-b")];

  // Control and bidirectional characters shown as escapes (as `tracegen show` does), so that a
  // right-to-left override in a problem id cannot reorder the line it is shown in.
  const UNSAFE = /[\x00-\x08\x0b-\x1f\x7f-\x9f\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069]/g;
  function visible(text) {
    return String(text).replace(UNSAFE, (c) => {
      const code = c.charCodeAt(0);
      return code < 0x100 ? "\\x" + code.toString(16).padStart(2, "0")
        : "\\u" + code.toString(16).padStart(4, "0");
    });
  }

  function el(tag, cls, text) {
    const node = document.createElement(tag);
    if (cls) node.className = cls;
    if (text !== undefined && text !== null) node.textContent = visible(text);
    return node;
  }

  const KEYWORDS = new Set(("False None True and as assert async await break class continue def " +
    "del elif else except finally for from global if import in is lambda nonlocal not or pass " +
    "raise return try while with yield match case").split(" "));
  const BUILTINS = new Set(("print len range int str float list dict set tuple bool sum min max " +
    "abs sorted reversed enumerate zip map filter isinstance any all open super object type " +
    "ValueError TypeError KeyError IndexError Exception self").split(" "));
  const TOKEN = new RegExp([
    "(#[^\\n]*)",
    "((?:[rRbBuUfF]{0,2})(?:\"\"\"[\\s\\S]*?(?:\"\"\"|$)|'''[\\s\\S]*?(?:'''|$)|" +
      "\"(?:[^\"\\\\\\n]|\\\\.)*\"?|'(?:[^'\\\\\\n]|\\\\.)*'?))",
    "(\\b\\d[\\d_]*(?:\\.\\d*)?(?:[eE][+-]?\\d+)?j?\\b)",
    "([A-Za-z_][A-Za-z0-9_]*)",
  ].join("|"), "g");

  // Python source as highlighted nodes; text only ever goes through textContent.
  function highlight(source) {
    const code = visible(source);
    const pre = el("pre", "code");
    let last = 0;
    let previous = "";
    for (const m of code.matchAll(TOKEN)) {
      if (m.index > last) pre.append(code.slice(last, m.index));
      let cls = null;
      if (m[1]) cls = "tok-comment";
      else if (m[2]) cls = "tok-string";
      else if (m[3]) cls = "tok-number";
      else if (KEYWORDS.has(m[4])) cls = "tok-keyword";
      else if (previous === "def" || previous === "class") cls = "tok-name";
      else if (BUILTINS.has(m[4])) cls = "tok-builtin";
      pre.append(cls ? el("span", cls, m[0]) : m[0]);
      if (m[4]) previous = m[4];
      last = m.index + m[0].length;
    }
    pre.append(code.slice(last));
    return pre;
  }

  function json(text) {
    try {
      return el("pre", "code json", JSON.stringify(JSON.parse(text), null, 2));
    } catch (e) {
      return el("pre", "plain", text);
    }
  }

  function toolCall(text) {
    let call;
    try { call = JSON.parse(text); } catch (e) { return el("pre", "plain", text); }
    const fn = call && typeof call === "object" ? (call.function || call) : null;
    const args = fn && typeof fn.arguments === "object" ? fn.arguments : null;
    if (args && typeof args.code === "string") {
      const box = el("div");
      box.append(el("div", "call-name", (fn.name || "?") + "(code=…)"), highlight(args.code));
      return box;
    }
    return el("pre", "code json", JSON.stringify(call, null, 2));
  }

  function panel(kind, title, body, system) {
    const box = el("section", "panel kind-" + kind + (system ? " system" : ""));
    const head = el("div", "panel-title", title);
    if (system) head.append(el("span", "badge system-badge", "written by tracegen"));
    box.append(head, body);
    return box;
  }

  function stepBody(step) {
    if (step.kind === "code") return highlight(step.text);
    if (step.kind === "tool_call") return toolCall(step.text);
    if (step.kind === "tool_response") return json(step.text);
    return el("pre", step.kind === "think" ? "plain think" : "plain", step.text);
  }

  function stepPanel(step) {
    let title = step.kind + (step.source === "system" ? " · system" : "");
    if (step.parse_strategy) title += " · parsed " + step.parse_strategy;
    return panel(step.kind, title, stepBody(step), step.source === "system");
  }

  function messagePanel(m) {
    const body = el("div");
    if (m.thinking) body.append(el("pre", "plain think", m.thinking));
    if (m.content) body.append(el("pre", "plain", m.content));
    for (const call of m.tool_calls) body.append(toolCall(call));
    const title = m.role + (m.tool_name ? " · " + m.tool_name : "");
    return panel("role-" + m.role, title, body, m.role === "tool");
  }

  function grid(rows, cls) {
    const table = el("table", cls);
    for (const [key, value] of rows) {
      const tr = el("tr");
      tr.append(el("th", null, key), el("td", null, value));
      table.append(tr);
    }
    return table;
  }

  function tests(verdict) {
    const box = el("section", "panel kind-tests");
    box.append(el("div", "panel-title",
      "Tests: " + verdict.passed + "/" + verdict.total + " passed (" + verdict.status + ")"));
    const table = el("table", "tests");
    const head = el("tr");
    for (const name of ["test", "", "expected", "actual", "error"]) head.append(el("th", null, name));
    table.append(head);
    for (const t of verdict.tests) {
      const tr = el("tr", t.passed ? "pass" : "fail");
      tr.append(el("td", null, t.name), el("td", "mark", t.passed ? "✓" : "✗"),
        el("td", "mono", t.expected || ""), el("td", "mono", t.actual || ""),
        el("td", "mono", t.error || ""));
      table.append(tr);
    }
    box.append(table);
    return box;
  }

  function render(trace, pane) {
    pane.replaceChildren();
    const head = el("div", "viewer-head");
    head.append(el("h3", null, trace.problem_id + " · " + trace.mode));
    const close = el("button", "close", "×");
    close.title = "Close";
    close.addEventListener("click", () => {
      pane.replaceChildren();
      pane.hidden = pane === panes[1];
      document.body.classList.toggle("comparing", !panes[1].hidden);
    });
    head.append(close);
    pane.append(head);
    const verdict = trace.success ? "success" : "failed";
    const rows = [
      ["trace", trace.id],
      ["problem", trace.problem_id + " (sample " + trace.sample + ")"],
      ["mode / model", trace.mode + " / " + trace.model],
      ["created", trace.created_at],
      ["score", trace.score.toFixed(2) + " (" + verdict + ", reward " +
        (trace.reward >= 0 ? "+" : "") + trace.reward.toFixed(2) + ")"],
      ["ideal", trace.is_ideal ? "yes" : "no"],
      ["logprobs", trace.logprobs_status],
    ];
    if (trace.continuation) rows.push(["continuation", trace.continuation]);
    pane.append(grid(rows, "header-grid"));
    if (trace.problem !== null) pane.append(panel("problem", "problem", el("pre", "plain", trace.problem)));
    if (trace.steps.length) trace.steps.forEach((s) => pane.append(stepPanel(s)));
    else trace.messages.forEach((m) => pane.append(messagePanel(m)));
    if (trace.verdict) pane.append(tests(trace.verdict));
    const metrics = Object.entries(trace.metrics).map(([k, v]) =>
      [k, typeof v === "object" ? JSON.stringify(v) : String(v)]);
    metrics.push(["requests", String(trace.usage.requests)]);
    metrics.push(["tokens (prompt / completion)",
      trace.usage.prompt_tokens + " / " + trace.usage.completion_tokens]);
    const box = el("section", "panel kind-metrics");
    box.append(el("div", "panel-title", "Metrics"), grid(metrics, "metrics"));
    pane.append(box);
    if (trace.error) {
      const e = trace.error;
      pane.append(panel("error", "episode failed",
        el("pre", "plain", e.kind + "/" + e.reason + ": " + e.message)));
    }
    pane.hidden = false;
    pane.scrollTop = 0;
  }

  function options(parent, values, labelled) {
    for (const v of [...new Set(values)].sort()) {
      const option = el("option", null, labelled ? v : undefined);
      option.value = visible(v);
      parent.append(option);
    }
  }
  options(filters.mode, traces.map((t) => t.mode), true);
  options(filters.failure, traces.map((t) => t.failure).filter((f) => f), true);
  options($("problem-ids"), traces.map((t) => t.problem_id), false);

  const haystacks = traces.map((t) => [t.id, t.problem_id, t.model, t.mode, t.failure,
    t.problem || "", ...t.steps.map((s) => s.text),
    ...t.messages.map((m) => m.content + " " + (m.thinking || ""))].join("\n").toLowerCase());

  function matches(t, i) {
    const f = filters;
    if (f.mode.value && visible(t.mode) !== f.mode.value) return false;
    if (f.outcome.value && t.outcome !== f.outcome.value) return false;
    if (f.failure.value && visible(t.failure) !== f.failure.value) return false;
    if (f.problem.value && visible(t.problem_id) !== f.problem.value) return false;
    const q = f.search.value.trim().toLowerCase();
    return !q || haystacks[i].includes(q);
  }

  let selected = null;
  function refresh() {
    const rows = [];
    traces.forEach((t, i) => {
      if (!matches(t, i)) return;
      const tr = el("tr");
      tr.dataset.index = i;
      if (selected === i) tr.className = "selected";
      const badge = el("td");
      badge.append(el("span", "badge outcome-" + t.outcome, t.outcome));
      const compare = el("button", "compare", "⇆");
      compare.title = "Open beside the trace shown";
      const beside = el("td");
      beside.append(compare);
      tr.append(badge, el("td", null, t.mode), el("td", "mono", t.problem_id),
        el("td", "num", t.score.toFixed(2)), el("td", "mono", t.failure),
        el("td", "mono muted", t.id), beside);
      rows.push(tr);
    });
    list.replaceChildren(...rows);
    count.textContent = rows.length + " of " + traces.length + " sampled traces";
  }

  list.addEventListener("click", (event) => {
    const tr = event.target.closest("tr");
    if (!tr) return;
    const i = Number(tr.dataset.index);
    const beside = event.target.closest("button.compare") !== null;
    render(traces[i], panes[beside ? 1 : 0]);
    document.body.classList.toggle("comparing", !panes[1].hidden);
    if (!beside) {
      selected = i;
      for (const row of list.querySelectorAll("tr.selected")) row.className = "";
      tr.className = "selected";
    }
  });
  for (const input of Object.values(filters)) input.addEventListener("input", refresh);
  if (traces.length) {
    render(traces[0], panes[0]);
    selected = 0;
  }
  refresh();
})();
