// The sections of a finished probe's report: summary cards, module tree, charts, operators,
// findings, warnings, graph breaks, the distributed-training advice and the probe's stages.
// Every field may be missing (see reportTypes.ts): a section or card without data is left
// out rather than drawn empty or with "undefined" in it.
import { constructionText, precisionText } from "../probe/buildFigures";
import type {
  ProbeDevice,
  ProbeFinding,
  ProbeGraphBreaks,
  ProbeLine,
  ProbeMemory,
  ProbeModuleRow,
  ProbeRecommendation,
  ProbeReport,
  ProbeSummary,
  ProbeTimingStats,
  ProbeTopOp,
} from "../probe/reportTypes";
import { formatBytes, formatCount, formatFlops, formatMs, formatPercent, formatShapes } from "../probe/format";
import {
  finite,
  innermostTimedModules,
  inputText,
  lineLocation,
  locatedLines,
  medianText,
  moduleShortName,
  spreadText,
  strategyLabel,
} from "../probe/reportFigures";
import { barChart, type Bar } from "./charts";
import { el } from "./dom";
import { comparisonSection, sweepSection } from "./sweep";

export interface ReportContext {
  /** The figures of the previous probe of the same class, to compare with. */
  previous?: ProbeSummary;
  /** A localized UI string, with {0}… replaced by `args`. */
  t: (key: string, ...args: string[]) => string;
  /** Asks the extension to open `file` at `line` in the editor. */
  reveal: (file: string | null | undefined, line: number | null | undefined) => void;
}

export function reportSections(report: ProbeReport, ctx: ReportContext): HTMLElement[] {
  return [
    summary(report, ctx),
    comparisonSection(report, ctx.previous, ctx),
    modulesTable(report.modules ?? [], ctx),
    el("div", { class: "charts" }, ...charts(report, ctx)),
    sweepSection(report, ctx),
    topOps(report, ctx),
    findings(report.findings ?? [], ctx),
    warnings(report.warnings ?? [], ctx),
    graphBreaks(report.graph_breaks, ctx),
    recommendation(report.recommendation, ctx),
    stages(report.stage_seconds, ctx),
  ].filter((section): section is HTMLElement => section !== undefined);
}

// ---------------------------------------------------------------- summary

interface Card {
  label: string;
  value: string | undefined;
  /** A second, quieter line: the spread, the method, the source… */
  sub?: string | undefined;
  attributes?: Record<string, string>;
}

function summary(report: ProbeReport, ctx: ReportContext): HTMLElement {
  const { t } = ctx;
  const cards: Card[] = [
    paramsCard(report, ctx),
    {
      label: t("size"),
      value: numberText(report.params?.parameter_bytes, formatBytes),
      sub: finite(report.params?.buffer_bytes) && report.params.buffer_bytes > 0
        ? t("buffers", formatBytes(report.params.buffer_bytes))
        : undefined,
    },
    {
      label: t("flops"),
      value: numberText(report.flops?.forward, formatFlops),
      attributes: titleOf(report.flops?.counter),
    },
    {
      label: t("flopsTrain"),
      value: numberText(report.flops?.forward_backward, formatFlops),
      attributes: titleOf(report.flops?.counter),
    },
    latencyCard(t("latency"), report.latency?.forward, report.latency?.method, ctx),
    latencyCard(t("latencyTrain"), report.latency?.forward_backward, report.latency?.method, ctx),
    memoryCard(report.memory, ctx),
    deviceCard(report.device, ctx),
    {
      label: t("torch"),
      value: report.torch_version,
      sub: report.python_version !== undefined ? t("python", report.python_version) : undefined,
    },
    {
      label: t("input"),
      value: inputText(report.input),
      sub: inputSource(report, ctx),
      attributes: { class: "card wide" },
    },
    { label: t("builtWith"), value: constructionText(report), sub: report.construction?.detail ?? undefined },
    { label: t("precision"), value: precisionText(report), attributes: { "data-precision": "" } },
  ];
  const list = el("dl", { class: "cards" });
  for (const card of cards) {
    if (card.value !== undefined && card.value !== "") {
      list.append(
        el(
          "div",
          { class: "card", ...card.attributes },
          el("dt", {}, card.label),
          el("dd", {}, card.value),
          card.sub !== undefined && card.sub !== "" && el("dd", { class: "sub" }, card.sub),
        ),
      );
    }
  }
  return el("section", { class: "summary" }, el("h2", {}, t("summary")), list);
}

function paramsCard(report: ProbeReport, { t }: ReportContext): Card {
  const params = report.params;
  if (!finite(params?.total)) {
    return { label: t("params"), value: undefined };
  }
  const trainable = params.trainable;
  const sub = !finite(trainable) ? undefined : trainable === params.total ? t("allTrainable") : t("trainable", formatCount(trainable));
  return {
    label: t("params"),
    value: params.total.toLocaleString("en-US"),
    sub,
    // The end-to-end test compares this with the count torch computes.
    attributes: { "data-params-total": String(params.total), title: formatCount(params.total) },
  };
}

function latencyCard(
  label: string,
  stats: ProbeTimingStats | null | undefined,
  method: string | undefined,
  { t }: ReportContext,
): Card {
  const spread = spreadText(stats);
  const runs = finite(stats?.iterations) ? String(stats.iterations) : "?";
  const range = finite(stats?.min_ms) && finite(stats.max_ms) ? `${formatMs(stats.min_ms)} – ${formatMs(stats.max_ms)}` : "";
  return {
    label,
    value: medianText(stats),
    sub: spread !== undefined ? t("spread", spread, runs) : undefined,
    attributes: titleOf([t("median"), range, method].filter((part) => part !== undefined && part !== "").join(" · ")),
  };
}

function memoryCard(memory: ProbeMemory | undefined, { t }: ReportContext): Card {
  const parts: string[] = [];
  if (finite(memory?.activation_bytes)) {
    parts.push(t("activations", formatBytes(memory.activation_bytes)));
  }
  if (finite(memory?.peak_reserved_bytes)) {
    parts.push(t("reserved", formatBytes(memory.peak_reserved_bytes)));
  }
  if (memory?.method !== undefined) {
    parts.push(methodName(memory.method, t));
  }
  return {
    label: t("peakMemory"),
    value: numberText(memory?.peak_bytes, formatBytes),
    sub: parts.join(" · "),
    attributes: titleOf(finite(memory?.baseline_bytes) ? t("baseline", formatBytes(memory.baseline_bytes)) : undefined),
  };
}

function methodName(method: string, t: ReportContext["t"]): string {
  switch (method) {
    case "cuda_allocator":
      return t("methodCudaAllocator");
    case "profiler_allocations":
      return t("methodProfiler");
    default:
      return method;
  }
}

function deviceCard(device: ProbeDevice | undefined, { t }: ReportContext): Card {
  const kind = typeof device?.kind === "string" && device.kind !== "" ? device.kind : undefined;
  const kindText = kind === undefined ? undefined : `${kind.toUpperCase()}${finite(device?.index) ? `:${String(device.index)}` : ""}`;
  const name = typeof device?.name === "string" && device.name !== "" ? device.name : undefined;
  const parts = [name !== undefined ? kindText : undefined];
  if (typeof device?.capability === "string" && device.capability !== "") {
    parts.push(t("capability", device.capability));
  }
  if (finite(device?.threads)) {
    parts.push(t("threads", String(device.threads)));
  }
  if (finite(device?.total_memory_bytes)) {
    parts.push(t("deviceMemoryOf", formatBytes(device.total_memory_bytes)));
  }
  return {
    label: t("device"),
    value: name ?? kindText,
    sub: parts.filter((part) => part !== undefined).join(" · "),
    attributes: kind !== undefined ? { "data-device-kind": kind } : {},
  };
}

function inputSource(report: ProbeReport, { t }: ReportContext): string | undefined {
  const source = report.input?.source;
  const word =
    source === "argument" || source === "example" || source === "comment" || source === "inferred"
      ? t(`source_${source}`)
      : source;
  const detail = report.input?.detail;
  return [word, detail].filter((part) => part !== undefined && part !== "").join(": ");
}

// ---------------------------------------------------------------- modules

function modulesTable(modules: ProbeModuleRow[], ctx: ReportContext): HTMLElement | undefined {
  if (modules.length === 0) {
    return undefined;
  }
  const { t } = ctx;
  const head = el(
    "tr",
    {},
    el("th", {}, t("module")),
    el("th", {}, t("type")),
    el("th", {}, t("outputShape")),
    el("th", { class: "num" }, t("params")),
    el("th", { class: "num" }, t("flopsColumn")),
    el("th", { class: "num" }, t("time")),
  );
  const body = el("tbody");
  for (const row of modules) {
    const calls = finite(row.calls) && row.calls > 1 ? ` ×${String(row.calls)}` : "";
    body.append(
      el(
        "tr",
        {},
        moduleNameCell(row, ctx),
        el("td", {}, row.type ?? ""),
        el("td", { class: "mono shape" }, formatShapes(row.output_shapes)),
        el("td", { class: "num" }, finite(row.params) ? row.params.toLocaleString("en-US") : ""),
        el("td", { class: "num" }, numberText(row.flops, formatFlops) ?? ""),
        el(
          "td",
          { class: "num", ...titleOf(calls !== "" ? t("callsTitle", String(row.calls)) : undefined) },
          `${numberText(row.forward_ms, formatMs) ?? ""}${calls}`,
        ),
      ),
    );
  }
  return el("section", { class: "modules" }, el("h2", {}, t("modules")), el("table", {}, el("thead", {}, head), body));
}

/** The module's own name, indented by its depth in the tree, linked to where it was created. */
function moduleNameCell(row: ProbeModuleRow, ctx: ReportContext): HTMLElement {
  const name = row.name ?? "";
  const text = name === "" ? ctx.t("model") : moduleShortName(row);
  const cell = el("td", { class: "mono", title: name === "" ? row.type ?? "" : name });
  // Through the CSSOM: the view's CSP refuses inline style attributes.
  cell.style.paddingLeft = `${(8 + 14 * (finite(row.depth) ? Math.min(row.depth, 12) : 0)).toString()}px`;
  if (row.file && finite(row.line)) {
    cell.append(revealLink(text, row.file, row.line, ctx, `${row.file}:${String(row.line)}`));
  } else {
    cell.append(text);
  }
  return cell;
}

// ---------------------------------------------------------------- charts

function charts(report: ProbeReport, ctx: ReportContext): HTMLElement[] {
  const { t } = ctx;
  const moduleBars: Bar[] = innermostTimedModules(report.modules ?? []).map((row) => ({
    label: row.name === "" ? t("model") : row.name ?? "",
    value: row.forward_ms ?? 0,
    valueText: formatMs(row.forward_ms ?? 0),
    title: `${row.name ?? ""} (${row.type ?? ""})`,
    onClick: row.file && finite(row.line) ? () => { ctx.reveal(row.file, row.line); } : undefined,
  }));
  const lines = locatedLines(report.lines ?? []);
  const timeBars = lines.flatMap((line) => (finite(line.self_ms) ? [lineBar(line, line.self_ms, formatMs(line.self_ms), ctx)] : []));
  // A line that keeps nothing allocated has no bar: the chart is about what stays in memory.
  const memoryBars = lines.flatMap((line) =>
    finite(line.net_alloc_bytes) && line.net_alloc_bytes > 0
      ? [lineBar(line, line.net_alloc_bytes, formatBytes(line.net_alloc_bytes), ctx)]
      : [],
  );
  return [
    barChart(t("timeByModule"), moduleBars, t("none")),
    barChart(t("timeByLine"), timeBars, t("none")),
    barChart(t("memoryByLine"), memoryBars, t("none")),
  ];
}

function lineBar(line: ProbeLine, value: number, valueText: string, ctx: ReportContext): Bar {
  const times = finite(line.forward_ms) && finite(line.backward_ms)
    ? ctx.t("lineTimes", formatMs(line.forward_ms), formatMs(line.backward_ms))
    : "";
  const share = finite(line.share) ? ctx.t("lineShare", formatPercent(line.share)) : "";
  return {
    label: lineLocation(line),
    detail: line.code,
    value,
    valueText,
    title: [`${line.file ?? ""}:${String(line.line)}`, line.code, times, share].filter((part) => part !== undefined && part !== "").join("\n"),
    onClick: () => { ctx.reveal(line.file, line.line); },
  };
}

// ---------------------------------------------------------------- operators

function topOps(report: ProbeReport, { t }: ReportContext): HTMLElement | undefined {
  const ops = report.top_ops ?? [];
  if (ops.length === 0) {
    return undefined;
  }
  const hasDevice = ops.some((op) => finite(op.self_device_ms));
  const head = el(
    "tr",
    {},
    el("th", {}, t("operator")),
    el("th", { class: "num" }, t("calls")),
    el("th", { class: "num" }, t("selfTime")),
    el("th", { class: "num" }, t("totalTime")),
    hasDevice && el("th", { class: "num" }, t("deviceTime")),
    el("th", { class: "num" }, t("share")),
  );
  const body = el("tbody");
  for (const op of ops) {
    body.append(opRow(op, hasDevice));
  }
  const section = el("section", { class: "ops" }, el("h2", {}, t("topOps")));
  if (finite(report.profiled_step_ms) && finite(report.op_total_ms)) {
    section.append(el("p", { class: "muted" }, t("profiledStep", formatMs(report.profiled_step_ms), formatMs(report.op_total_ms))));
  }
  section.append(el("table", {}, el("thead", {}, head), body));
  return section;
}

function opRow(op: ProbeTopOp, hasDevice: boolean): HTMLElement {
  return el(
    "tr",
    {},
    el("td", { class: "mono" }, op.name ?? ""),
    el("td", { class: "num" }, finite(op.calls) ? op.calls.toLocaleString("en-US") : ""),
    el("td", { class: "num" }, numberText(op.self_ms, formatMs) ?? ""),
    el("td", { class: "num" }, numberText(op.total_ms, formatMs) ?? ""),
    hasDevice && el("td", { class: "num" }, numberText(op.self_device_ms, formatMs) ?? ""),
    el("td", { class: "num" }, numberText(op.share, formatPercent) ?? ""),
  );
}

// ---------------------------------------------------------------- findings and warnings

function findings(items: ProbeFinding[], ctx: ReportContext): HTMLElement {
  const section = el("section", { class: "findings" }, el("h2", {}, ctx.t("findings")));
  if (items.length === 0) {
    section.append(el("p", { class: "muted" }, ctx.t("noFindings")));
    return section;
  }
  section.append(el("ul", {}, ...items.map((finding) => findingItem(finding, ctx))));
  return section;
}

function findingItem(finding: ProbeFinding, ctx: ReportContext): HTMLElement {
  const severity = finding.severity ?? "information";
  const item = el(
    "li",
    { class: `finding severity-${severity.replace(/[^a-z]/g, "")}` },
    el("span", { class: "badge" }, severity),
    finding.kind ? el("span", { class: "kind mono" }, finding.kind) : null,
    el("span", { class: "message" }, finding.message ?? ""),
    finite(finding.count) && finding.count > 1 && el("span", { class: "count", title: ctx.t("countTitle", String(finding.count)) }, `×${String(finding.count)}`),
  );
  // The detail names the parameter or function; most messages already say it.
  if (finding.detail && !(finding.message ?? "").includes(finding.detail)) {
    item.append(el("span", { class: "detail mono" }, finding.detail));
  }
  if (finding.file && finite(finding.line)) {
    item.append(revealLink(lineLocation(finding), finding.file, finding.line, ctx, `${finding.file}:${String(finding.line)}`, "location"));
  }
  return item;
}

function warnings(items: string[], { t }: ReportContext): HTMLElement | undefined {
  const shown = items.filter((item) => typeof item === "string" && item !== "");
  if (shown.length === 0) {
    return undefined;
  }
  return el(
    "section",
    { class: "warnings" },
    el("h2", {}, t("warnings")),
    el("ul", {}, ...shown.map((warning) => el("li", { class: "finding severity-warning" }, el("span", { class: "message" }, warning)))),
  );
}

// ---------------------------------------------------------------- graph breaks

function graphBreaks(info: ProbeGraphBreaks | null | undefined, ctx: ReportContext): HTMLElement | undefined {
  if (info === null || info === undefined) {
    return undefined;
  }
  const { t } = ctx;
  const section = el("section", { class: "graph-breaks" }, el("h2", {}, t("graphBreaks")));
  if (typeof info.error === "string" && info.error !== "") {
    section.append(el("p", { class: "error-text" }, t("explainFailed", info.error)));
    return section;
  }
  const count = (value: number | null | undefined): string => (finite(value) ? String(value) : "?");
  const seconds = finite(info.seconds) ? formatMs(info.seconds * 1000) : "?";
  section.append(el("p", { class: "muted" }, t("graphSummary", count(info.graph_count), count(info.graph_break_count), seconds)));
  const breaks = info.breaks ?? [];
  if (breaks.length > 0) {
    const list = el("ul");
    for (const item of breaks) {
      const entry = el("li", { class: "finding" }, el("span", { class: "message" }, item.reason ?? ""));
      if (item.file && finite(item.line)) {
        entry.append(revealLink(lineLocation(item), item.file, item.line, ctx, `${item.file}:${String(item.line)}`, "location"));
      }
      list.append(entry);
    }
    section.append(list);
  }
  return section;
}

// ---------------------------------------------------------------- recommendation

function recommendation(advice: ProbeRecommendation | undefined, { t }: ReportContext): HTMLElement | undefined {
  if (advice === undefined) {
    return undefined;
  }
  const section = el("section", { class: "recommendation" }, el("h2", {}, t("recommendation")));
  if (advice.strategy) {
    section.append(el("p", { class: "strategy", "data-strategy": advice.strategy }, strategyLabel(advice.strategy)));
  }
  if (advice.reason) {
    section.append(el("p", {}, advice.reason));
  }
  const perParam = finite(advice.bytes_per_trainable_param) ? t("bytesPerParam", formatBytes(advice.bytes_per_trainable_param)) : undefined;
  const rows: [string, string | undefined][] = [
    [t("modelStates"), joinDefined([numberText(advice.model_state_bytes, formatBytes), perParam && `(${perParam})`])],
    [t("activationsLabel"), numberText(advice.activation_bytes, formatBytes)],
    [t("totalPerReplica"), numberText(advice.total_bytes, formatBytes)],
    [t("deviceMemory"), numberText(advice.device_memory_bytes, formatBytes)],
    [t("stateFraction"), numberText(advice.state_fraction, formatPercent)],
    [t("totalFraction"), numberText(advice.total_fraction, formatPercent)],
  ];
  if (advice.find_unused_parameters === true) {
    const names = (advice.unused_parameters ?? []).join(", ");
    rows.push([t("findUnused"), names !== "" ? names : t("yes")]);
  }
  const list = el("dl", { class: "details" });
  for (const [label, value] of rows) {
    if (value !== undefined && value !== "") {
      list.append(el("dt", {}, label), el("dd", {}, value));
    }
  }
  if (list.childElementCount > 0) {
    section.append(list);
  }
  return section;
}

// ---------------------------------------------------------------- stages

function stages(seconds: Record<string, number> | undefined, { t }: ReportContext): HTMLElement | undefined {
  const entries = Object.entries(seconds ?? {}).filter((entry): entry is [string, number] => finite(entry[1]));
  if (entries.length === 0) {
    return undefined;
  }
  const total = entries.reduce((sum, [, value]) => sum + value, 0);
  const list = el("dl", { class: "details" });
  for (const [stage, value] of entries) {
    list.append(el("dt", {}, stage), el("dd", {}, formatMs(value * 1000)));
  }
  return el("details", { class: "stages" }, el("summary", {}, t("stages", formatMs(total * 1000))), list);
}

// ---------------------------------------------------------------- helpers

function revealLink(
  text: string,
  file: string,
  line: number,
  ctx: ReportContext,
  title: string,
  className?: string,
): HTMLAnchorElement {
  const link = el("a", { href: "#", title, ...(className !== undefined ? { class: className } : {}) }, text);
  link.addEventListener("click", (event) => {
    event.preventDefault();
    ctx.reveal(file, line);
  });
  return link;
}

function numberText(value: number | null | undefined, format: (n: number) => string): string | undefined {
  return finite(value) ? format(value) : undefined;
}

function titleOf(text: string | undefined): Record<string, string> {
  return text !== undefined && text !== "" ? { title: text } : {};
}

function joinDefined(parts: (string | undefined)[]): string | undefined {
  const shown = parts.filter((part): part is string => part !== undefined && part !== "");
  return shown.length > 0 ? shown.join(" ") : undefined;
}
