// The probe report view. Draws the state the extension sends (running, report, error,
// cancelled) and saves it with setState, so after a window reload the panel shows the same
// report before the extension has said anything.
import type { ProbeTarget, ReportViewState, ShowStateMessage, WebviewMessage } from "../probe/messages";
import type { ProbeFinding, ProbeHotLine, ProbeModuleRow, ProbeReport } from "../probe/reportTypes";
import { formatBytes, formatCount, formatFlops, formatMs } from "../probe/format";
import { barChart, type Bar } from "./charts";
import { button, el } from "./dom";

interface SavedState {
  state: ReportViewState;
  strings: Record<string, string>;
}

interface VsCodeApi {
  postMessage(message: WebviewMessage): void;
  getState(): SavedState | undefined;
  setState(state: SavedState): void;
}

declare function acquireVsCodeApi(): VsCodeApi;

const vscode = acquireVsCodeApi();
const root = document.getElementById("root") ?? document.body;
let strings: Record<string, string> = {};

function t(key: string, ...args: string[]): string {
  const template = strings[key] ?? key;
  return template.replace(/\{(\d+)\}/g, (_, index: string) => args[Number(index)] ?? "");
}

function post(message: WebviewMessage): void {
  vscode.postMessage(message);
}

function reveal(file: string | null | undefined, line: number | null | undefined, target: ProbeTarget): void {
  post({ type: "reveal", file: file ?? "", line: line ?? 1, uri: target.uri });
}

function render(saved: SavedState): void {
  strings = saved.strings;
  const state = saved.state;
  root.replaceChildren();
  root.dataset.state = state.kind;
  switch (state.kind) {
    case "idle":
      root.append(el("p", { class: "muted" }, t("idle")));
      return;
    case "running":
      root.append(header(state.target, false), running(state.target, state.message, state.percent));
      return;
    case "cancelled":
      root.append(header(state.target, true), el("p", { class: "muted" }, t("cancelled", state.target.className)));
      return;
    case "error":
      root.append(header(state.target, true), errorView(state.target, state.message));
      return;
    case "report":
      root.append(header(state.target, true), ...reportView(state.target, state.report));
      return;
  }
}

function header(target: ProbeTarget, actions: boolean): HTMLElement {
  const title = el("h1", {}, target.className, el("span", { class: "file" }, ` — ${target.fileLabel}`));
  const bar = el("div", { class: "actions" });
  if (actions) {
    bar.append(
      button(t("rerun"), () => {
        post({ type: "rerun", target });
      }),
      button(t("changeInput"), () => {
        post({ type: "changeInput", target });
      }, { class: "secondary" }),
    );
  }
  return el("header", {}, title, bar);
}

function running(target: ProbeTarget, message: string, percent: number | undefined): HTMLElement {
  const progress = el("progress", { max: "100", "aria-label": t("running", target.className) });
  if (percent !== undefined) {
    progress.value = percent;
  }
  return el(
    "section",
    { class: "running" },
    el("p", {}, t("running", target.className)),
    progress,
    el("p", { class: "muted", id: "progress-message" }, message),
    button(t("cancel"), () => {
      post({ type: "cancel" });
    }, { id: "cancel", class: "secondary" }),
  );
}

/** Error messages name the user's file and line ("…/model.py:42" or "File "…", line 42"): link them. */
function errorView(target: ProbeTarget, message: string): HTMLElement {
  const section = el("section", { class: "error" }, el("h2", {}, t("failed", target.className)));
  const location = /([^\s"'()]+\.py)"?(?::|,\s*line\s+)(\d+)/.exec(message);
  const text = el("pre", { class: "error-text" }, message);
  section.append(text);
  if (location !== null) {
    const file = location[1];
    const line = Number(location[2]);
    const link = el("a", { href: "#" }, `${file}:${line}`);
    link.addEventListener("click", (event) => {
      event.preventDefault();
      reveal(file, line, target);
    });
    section.append(el("p", {}, t("source"), ": ", link));
  }
  return section;
}

function reportView(target: ProbeTarget, report: ProbeReport): HTMLElement[] {
  return [
    summary(report),
    modulesTable(target, report.modules ?? []),
    el("div", { class: "charts" }, ...charts(target, report)),
    topOps(report),
    findings(target, report.findings ?? []),
    recommendation(report),
  ].filter((section): section is HTMLElement => section !== undefined);
}

function summary(report: ProbeReport): HTMLElement {
  const cards = el("dl", { class: "cards" });
  const card = (label: string, value: string | undefined, attributes: Record<string, string> = {}): void => {
    if (value === undefined) {
      return;
    }
    cards.append(el("div", { class: "card", ...attributes }, el("dt", {}, label), el("dd", {}, value)));
  };
  const params = report.params;
  if (typeof params?.total === "number") {
    const trainable =
      typeof params.trainable === "number" && params.trainable !== params.total
        ? ` (${formatCount(params.trainable)} ${t("trainable")})`
        : "";
    card(t("params"), `${params.total.toLocaleString("en-US")}${trainable}`, {
      "data-params-total": String(params.total),
      title: formatCount(params.total),
    });
  }
  card(t("size"), numberOr(report.param_bytes, formatBytes));
  card(t("flops"), numberOr(report.flops?.forward, formatFlops));
  card(t("flopsTrain"), numberOr(report.flops?.forward_backward, formatFlops));
  card(t("latency"), latency(report.latency?.forward_ms));
  card(t("latencyTrain"), latency(report.latency?.forward_backward_ms));
  card(t("peakMemory"), numberOr(report.peak_memory_bytes, formatBytes));
  card(t("device"), report.device);
  card(t("input"), inputText(report));
  card(t("torch"), report.torch_version);
  return el("section", { class: "summary" }, el("h2", {}, t("summary")), cards);
}

function modulesTable(target: ProbeTarget, modules: ProbeModuleRow[]): HTMLElement | undefined {
  if (modules.length === 0) {
    return undefined;
  }
  const hasMemory = modules.some((row) => typeof row.memory_bytes === "number");
  const head = el(
    "tr",
    {},
    el("th", {}, t("module")),
    el("th", {}, t("type")),
    el("th", {}, t("outputShape")),
    el("th", { class: "num" }, t("params")),
    el("th", { class: "num" }, t("time")),
    hasMemory && el("th", { class: "num" }, t("memory")),
  );
  const body = el("tbody");
  for (const row of modules) {
    const name = row.name ?? "";
    const nameCell = el("td", { class: "mono" });
    if (row.file && typeof row.line === "number") {
      const link = el("a", { href: "#", title: `${row.file}:${row.line}` }, name === "" ? "(root)" : name);
      link.addEventListener("click", (event) => {
        event.preventDefault();
        reveal(row.file, row.line, target);
      });
      nameCell.append(link);
    } else {
      nameCell.append(name === "" ? "(root)" : name);
    }
    body.append(
      el(
        "tr",
        {},
        nameCell,
        el("td", {}, row.type ?? ""),
        el("td", { class: "mono" }, shapeText(row.output_shape)),
        el("td", { class: "num" }, typeof row.params === "number" ? row.params.toLocaleString("en-US") : ""),
        el("td", { class: "num" }, numberOr(row.forward_ms, formatMs) ?? ""),
        hasMemory && el("td", { class: "num" }, numberOr(row.memory_bytes, formatBytes) ?? ""),
      ),
    );
  }
  return el("section", {}, el("h2", {}, t("modules")), el("table", {}, el("thead", {}, head), body));
}

function charts(target: ProbeTarget, report: ProbeReport): HTMLElement[] {
  const modules = (report.modules ?? []).filter((row) => row.name !== undefined && row.name !== "");
  const moduleBars = (pick: (row: ProbeModuleRow) => number | null | undefined, format: (n: number) => string): Bar[] =>
    modules.flatMap((row) => {
      const value = pick(row);
      if (typeof value !== "number") {
        return [];
      }
      return [
        {
          label: row.name ?? "",
          value,
          valueText: format(value),
          title: row.type,
          onClick: row.file && typeof row.line === "number" ? () => { reveal(row.file, row.line, target); } : undefined,
        },
      ];
    });
  const lines = report.hot_lines ?? [];
  const lineBars = (pick: (line: ProbeHotLine) => number | null | undefined, format: (n: number) => string): Bar[] =>
    lines.flatMap((line) => {
      const value = pick(line);
      if (typeof value !== "number") {
        return [];
      }
      return [
        {
          label: `${baseName(line.file ?? "")}:${line.line ?? "?"}`,
          value,
          valueText: format(value),
          title: `${line.file ?? ""}:${line.line ?? ""}`,
          onClick: () => { reveal(line.file, line.line, target); },
        },
      ];
    });
  const result = [barChart(t("timeByModule"), moduleBars((row) => row.forward_ms, formatMs), t("none"))];
  const memoryByModule = moduleBars((row) => row.memory_bytes, formatBytes);
  if (memoryByModule.length > 0) {
    result.push(barChart(t("memoryByModule"), memoryByModule, t("none")));
  }
  result.push(barChart(t("timeByLine"), lineBars((line) => line.ms, formatMs), t("none")));
  const memoryByLine = lineBars((line) => line.memory_bytes, formatBytes);
  if (memoryByLine.length > 0) {
    result.push(barChart(t("memoryByLine"), memoryByLine, t("none")));
  }
  return result;
}

function topOps(report: ProbeReport): HTMLElement | undefined {
  const ops = report.top_ops ?? [];
  if (ops.length === 0) {
    return undefined;
  }
  const body = el("tbody");
  for (const op of ops) {
    body.append(
      el(
        "tr",
        {},
        el("td", { class: "mono" }, op.name ?? ""),
        el("td", { class: "num" }, numberOr(op.self_ms, formatMs) ?? ""),
        el("td", { class: "num" }, typeof op.count === "number" ? String(op.count) : ""),
      ),
    );
  }
  const head = el(
    "tr",
    {},
    el("th", {}, t("operator")),
    el("th", { class: "num" }, t("selfTime")),
    el("th", { class: "num" }, t("calls")),
  );
  return el("section", {}, el("h2", {}, t("topOps")), el("table", {}, el("thead", {}, head), body));
}

function findings(target: ProbeTarget, items: ProbeFinding[]): HTMLElement {
  const section = el("section", { class: "findings" }, el("h2", {}, t("findings")));
  if (items.length === 0) {
    section.append(el("p", { class: "muted" }, t("noFindings")));
    return section;
  }
  const list = el("ul");
  for (const finding of items) {
    const severity = finding.severity ?? "information";
    const item = el(
      "li",
      { class: `finding severity-${severity.replace(/[^a-z]/g, "")}` },
      el("span", { class: "badge" }, severity),
      finding.kind ? el("span", { class: "kind mono" }, finding.kind) : null,
      el("span", { class: "message" }, finding.message ?? ""),
    );
    if (finding.file && typeof finding.line === "number") {
      const link = el("a", { href: "#", class: "location" }, `${baseName(finding.file)}:${finding.line}`);
      link.addEventListener("click", (event) => {
        event.preventDefault();
        reveal(finding.file, finding.line, target);
      });
      item.append(link);
    }
    list.append(item);
  }
  section.append(list);
  return section;
}

function recommendation(report: ProbeReport): HTMLElement | undefined {
  const advice = report.recommendation;
  if (advice === undefined) {
    return undefined;
  }
  const section = el("section", { class: "recommendation" }, el("h2", {}, t("recommendation")));
  if (advice.strategy) {
    section.append(el("p", { class: "strategy" }, advice.strategy));
  }
  if (advice.reason) {
    section.append(el("p", {}, advice.reason));
  }
  const details = Object.entries(advice).filter(([key]) => key !== "strategy" && key !== "reason");
  if (details.length > 0) {
    const list = el("dl", { class: "details" });
    for (const [key, value] of details) {
      list.append(el("dt", {}, key.replace(/_/g, " ")), el("dd", {}, detailText(key, value)));
    }
    section.append(list);
  }
  return section;
}

function latency(stats: { median?: number; spread?: number } | undefined): string | undefined {
  if (typeof stats?.median !== "number") {
    return undefined;
  }
  return typeof stats.spread === "number" ? `${formatMs(stats.median)} ± ${formatMs(stats.spread)}` : formatMs(stats.median);
}

function inputText(report: ProbeReport): string | undefined {
  const input = report.input;
  if (input === undefined) {
    return undefined;
  }
  const shape = input.shape !== undefined ? shapeText(input.shape) : "";
  const extras = [input.dtype, input.source].filter((part): part is string => typeof part === "string" && part !== "");
  return extras.length > 0 ? `${shape} (${extras.join(", ")})` : shape;
}

function shapeText(shape: unknown): string {
  if (shape === null || shape === undefined) {
    return "";
  }
  if (typeof shape === "string" || typeof shape === "number") {
    return String(shape);
  }
  if (Array.isArray(shape)) {
    if (shape.every((dim) => typeof dim === "number")) {
      return `(${shape.join(", ")})`;
    }
    return shape.map(shapeText).join(", ");
  }
  return JSON.stringify(shape);
}

function detailText(key: string, value: unknown): string {
  if (typeof value === "number") {
    return /bytes/.test(key) ? formatBytes(value) : /_ms$/.test(key) ? formatMs(value) : value.toLocaleString("en-US");
  }
  return typeof value === "string" ? value : JSON.stringify(value);
}

function numberOr(value: number | null | undefined, format: (n: number) => string): string | undefined {
  return typeof value === "number" && Number.isFinite(value) ? format(value) : undefined;
}

function baseName(file: string): string {
  return file.split(/[\\/]/).pop() ?? file;
}

function isStateMessage(data: unknown): data is ShowStateMessage {
  return typeof data === "object" && data !== null && (data as { type?: unknown }).type === "state";
}

window.addEventListener("message", (event: MessageEvent<unknown>) => {
  const message = event.data;
  if (!isStateMessage(message)) {
    return;
  }
  const saved: SavedState = { state: message.state, strings: message.strings };
  vscode.setState(saved);
  render(saved);
});

const restored = vscode.getState();
if (restored !== undefined) {
  render(restored);
}
post({ type: "ready" });
