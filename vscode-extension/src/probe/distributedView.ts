// The distributed probe's result (the report's `distributed` section, REPORT.md) as a static
// HTML page: the strategies side by side, the ranks that differ or failed, the findings and the
// measured recommendation with its labelled estimate. Pure: no vscode import, so it is tested
// under node; the page carries no script and loads nothing but the extension's stylesheet.
import { formatBytes, formatMs, formatPercent } from "./format";

export interface Collective {
  kind: string;
  calls: number;
  ms: number;
  bytes: number;
}

export interface RankRun {
  rank: number;
  collectives: Collective[];
}

export interface StrategyResult {
  strategy: "ddp" | "fsdp";
  ok: boolean;
  ranks: RankRun[];
  step_ms: number | null;
  comm_share: number | null;
  peak_memory_bytes: number | null;
  param_bytes: number | null;
  grad_bytes: number | null;
  optimizer_state_bytes: number | null;
  bytes_per_step: number | null;
  differences: string[];
}

export interface StackFrame {
  file: string;
  line: number;
  function: string;
}

export interface RankStatus {
  rank: number;
  status: string;
  message: string | null;
  stack: StackFrame[];
}

export interface DistributedFinding {
  code: string | null;
  kind: string;
  severity: string;
  message: string;
  file: string | null;
  line: number | null;
  detail: string;
}

export interface Extrapolation {
  ranks: number;
  nodes: number;
  strategy: string;
  memory_per_rank_bytes: number;
  comm_share: number | null;
}

export interface DistributedInfo {
  nproc: number;
  nnodes: number;
  backend: string;
  strategies: StrategyResult[];
  ranks: RankStatus[];
  findings: DistributedFinding[];
  recommendation: { strategy: string; reason: string; formula: string; estimates: Extrapolation[] } | null;
  error: string | null;
  warnings: string[];
}

/** Labels the page shows, translated by the caller (vscode.l10n in the extension). */
export interface DistributedLabels {
  title: string;
  perRank: string;
  step: string;
  commShare: string;
  bytesPerStep: string;
  peakMemory: string;
  parameters: string;
  gradients: string;
  optimizerState: string;
  incomplete: string;
  ranksNotFinished: string;
  findings: string;
  recommendation: string;
  estimate: string;
}

const bytes = (value: number | null): string => (value === null ? "-" : formatBytes(value));
const ms = (value: number | null): string => (value === null ? "-" : formatMs(value));
const share = (value: number | null): string => (value === null ? "-" : formatPercent(value));

/** One row per measurement, one column per strategy (the highest rank's figure). */
export function comparisonRows(info: DistributedInfo, labels: DistributedLabels): string[][] {
  const results = info.strategies;
  const rows: string[][] = [
    [labels.step, ...results.map((r) => ms(r.step_ms))],
    [labels.commShare, ...results.map((r) => share(r.comm_share))],
  ];
  const kinds = [...new Set(results.flatMap((r) => r.ranks.flatMap((rank) => rank.collectives.map((c) => c.kind))))];
  for (const kind of kinds.sort()) {
    rows.push([
      `  ${kind}`,
      ...results.map((r) => {
        const times = r.ranks.flatMap((rank) => rank.collectives.filter((c) => c.kind === kind).map((c) => c.ms));
        return times.length > 0 ? formatMs(Math.max(...times)) : "-";
      }),
    ]);
  }
  rows.push(
    [labels.bytesPerStep, ...results.map((r) => bytes(r.bytes_per_step))],
    [labels.peakMemory, ...results.map((r) => bytes(r.peak_memory_bytes))],
    [labels.parameters, ...results.map((r) => bytes(r.param_bytes))],
    [labels.gradients, ...results.map((r) => bytes(r.grad_bytes))],
    [labels.optimizerState, ...results.map((r) => bytes(r.optimizer_state_bytes))],
  );
  return rows;
}

export function escapeHtml(value: string): string {
  return value
    .replace(/&/g, "&amp;")
    .replace(/</g, "&lt;")
    .replace(/>/g, "&gt;")
    .replace(/"/g, "&quot;")
    .replace(/'/g, "&#39;");
}

function table(header: string[], rows: string[][]): string {
  const head = header.map((cell) => `<th>${escapeHtml(cell)}</th>`).join("");
  const body = rows.map((row) => `<tr>${row.map((cell) => `<td>${escapeHtml(cell)}</td>`).join("")}</tr>`).join("");
  return `<table><thead><tr>${head}</tr></thead><tbody>${body}</tbody></table>`;
}

function basename(file: string): string {
  return file.split(/[\\/]/).pop() ?? file;
}

/** The page body: everything the CLI prints for `--nproc`, in the same order. */
export function distributedBody(info: DistributedInfo, labels: DistributedLabels): string {
  const parts = [`<h1>${escapeHtml(`${labels.title}: ${info.nproc} × ${info.nnodes}, ${info.backend}`)}</h1>`];
  if (info.strategies.length > 0) {
    const header = [
      labels.perRank,
      ...info.strategies.map((r) => r.strategy.toUpperCase() + (r.ok ? "" : ` (${labels.incomplete})`)),
    ];
    parts.push(table(header, comparisonRows(info, labels)));
  }
  const differences = info.strategies.flatMap((r) => r.differences.map((d) => `${r.strategy.toUpperCase()}: ${d}`));
  if (differences.length > 0) {
    parts.push(`<ul>${differences.map((d) => `<li>${escapeHtml(d)}</li>`).join("")}</ul>`);
  }
  const troubled = info.ranks.filter((status) => status.status !== "ok");
  if (troubled.length > 0) {
    parts.push(`<h2>${escapeHtml(labels.ranksNotFinished)}</h2>`);
    parts.push(
      table(
        ["rank", "status", "stack", "message"],
        troubled.map((s) => [
          String(s.rank),
          s.status,
          s.stack.slice(0, 4).map((f) => `${basename(f.file)}:${f.line} ${f.function}`).join(" ← ") || "-",
          s.message ?? "-",
        ]),
      ),
    );
  }
  if (info.findings.length > 0) {
    parts.push(`<h2>${escapeHtml(labels.findings)}</h2><ul>`);
    for (const finding of info.findings) {
      const where = finding.file !== null ? `${basename(finding.file)}:${finding.line ?? ""} ` : "";
      const code = finding.code !== null ? `${finding.code} ` : "";
      const detail = finding.kind === "collective_divergence" ? `<pre>${escapeHtml(finding.detail)}</pre>` : "";
      parts.push(`<li>${escapeHtml(`${code}${finding.severity} ${where}${finding.message}`)}${detail}</li>`);
    }
    parts.push("</ul>");
  }
  const advice = info.recommendation;
  if (advice !== null) {
    parts.push(`<h2>${escapeHtml(labels.recommendation)}: ${escapeHtml(advice.strategy.toUpperCase())}</h2>`);
    parts.push(`<p>${escapeHtml(advice.reason)}</p>`);
    if (advice.estimates.length > 0) {
      parts.push(`<h3>${escapeHtml(labels.estimate)}</h3>`);
      parts.push(
        table(
          ["ranks", "nodes", "strategy", "memory / rank", "comm"],
          advice.estimates.map((row) => [
            String(row.ranks),
            String(row.nodes),
            row.strategy.toUpperCase(),
            formatBytes(row.memory_per_rank_bytes),
            share(row.comm_share),
          ]),
        ),
      );
      parts.push(`<p><small>${escapeHtml(advice.formula)}</small></p>`);
    }
  }
  for (const note of [...(info.error !== null ? [info.error] : []), ...info.warnings]) {
    parts.push(`<p>${escapeHtml(note)}</p>`);
  }
  return parts.join("\n");
}

/** A whole page: no script at all, only the extension's stylesheet (`styleSource` is the
 *  webview's cspSource, `styleHref` the stylesheet's webview URI). */
export function distributedPage(
  info: DistributedInfo,
  labels: DistributedLabels,
  styleSource: string,
  styleHref: string,
): string {
  const csp = `default-src 'none'; style-src ${styleSource}`;
  return `<!DOCTYPE html>
<html>
<head>
<meta charset="UTF-8">
<meta http-equiv="Content-Security-Policy" content="${csp.replace(/"/g, "&quot;")}">
<link rel="stylesheet" href="${escapeHtml(styleHref)}">
<title>${escapeHtml(labels.title)}</title>
</head>
<body>
<main>
${distributedBody(info, labels)}
</main>
</body>
</html>`;
}
