// The batch-size sweep (latency and peak memory against batch size) and the comparison with
// the previous probe of the same class. Bars keep batch order, unlike the "by share" charts.
import { formatBytes, formatMs } from "../probe/format";
import { summarize, type ProbeReport, type ProbeSummary } from "../probe/reportTypes";
import { changesSince, sweepFigures, type SweepRow } from "../probe/sweepFigures";
import { el } from "./dom";
import type { ReportContext } from "./report";

type Translate = ReportContext["t"];

function batchBars(
  title: string,
  rows: SweepRow[],
  value: (row: SweepRow) => number | undefined,
  text: (row: SweepRow) => string,
  t: Translate,
): HTMLElement {
  const section = el("section", { class: "chart sweep" }, el("h3", {}, title));
  const values = rows.map(value).filter((v): v is number => v !== undefined && v >= 0);
  const largest = Math.max(...values, Number.MIN_VALUE);
  const list = el("div", { class: "bars", role: "list" });
  for (const row of rows) {
    const amount = value(row);
    const fill = el("div", { class: row.fits ? "bar-fill" : "bar-fill over" });
    fill.style.width = `${amount === undefined ? 0 : Math.max(0.5, (amount / largest) * 100).toFixed(2)}%`;
    list.append(
      el(
        "div",
        { class: "bar-row", role: "listitem", "data-batch": String(row.batch) },
        el("span", { class: "bar-label" }, t("batchLabel", String(row.batch))),
        el("div", { class: "bar-track" }, fill),
        el("span", { class: "bar-value" }, text(row)),
      ),
    );
  }
  section.append(list);
  return section;
}

export function sweepSection(report: ProbeReport, ctx: ReportContext): HTMLElement | undefined {
  const figures = sweepFigures(report);
  if (figures === undefined || figures.rows.length === 0) {
    return undefined;
  }
  const { t } = ctx;
  const largest = figures.largestFittingBatch;
  const headline = [largest !== undefined ? t("sweepLargest", String(largest)) : t("sweepNoFit")];
  if (figures.memoryLimitBytes !== undefined) {
    headline.push(t("sweepLimit", formatBytes(figures.memoryLimitBytes)));
  }
  const latency = batchBars(
    t("sweepLatency"),
    figures.rows,
    (row) => row.latencyMs,
    (row) =>
      row.latencyMs !== undefined
        ? `${formatMs(row.latencyMs)} · ${t("sweepRate", Math.round(row.samplesPerS ?? 0).toLocaleString())}`
        : (row.reason ?? "—"),
    t,
  );
  const memory = batchBars(
    t("sweepMemory"),
    figures.rows,
    (row) => row.peakBytes,
    (row) => (row.peakBytes !== undefined ? formatBytes(row.peakBytes) : (row.reason ?? "—")),
    t,
  );
  return el(
    "section",
    { class: "batch-sweep", id: "batch-sweep" },
    el("h2", {}, t("sweepTitle")),
    el("p", { class: "muted" }, headline.join(" · ")),
    el("div", { class: "charts" }, latency, memory),
  );
}

export function comparisonSection(
  report: ProbeReport,
  previous: ProbeSummary | undefined,
  ctx: ReportContext,
): HTMLElement | undefined {
  if (previous === undefined) {
    return undefined;
  }
  const current = summarize(previous.uri, previous.className, report);
  const changes = changesSince(previous, current);
  if (changes.length === 0) {
    return undefined;
  }
  const { t } = ctx;
  const labels = { params: t("compareParams"), forward: t("compareForward"), peakMemory: t("comparePeak") };
  const show = (what: string, value: number): string =>
    what === "forward" ? formatMs(value) : what === "peakMemory" ? formatBytes(value) : value.toLocaleString();
  const rows = changes.map((change) => {
    const ratio = change.ratio === undefined ? "" : `${change.ratio.toFixed(2)}×`;
    const direction = change.ratio === undefined || change.ratio === 1 ? "same" : change.ratio > 1 ? "up" : "down";
    return el(
      "tr",
      { "data-change": direction },
      el("th", {}, labels[change.what]),
      el("td", {}, show(change.what, change.before)),
      el("td", {}, "→"),
      el("td", {}, show(change.what, change.after)),
      el("td", { class: "ratio" }, ratio),
    );
  });
  return el(
    "section",
    { class: "comparison", id: "comparison" },
    el("h2", {}, t("compareTitle")),
    el("table", {}, el("tbody", {}, ...rows)),
  );
}
