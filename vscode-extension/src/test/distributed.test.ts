import assert from "node:assert/strict";
import { test } from "node:test";
import { comparisonRows, type DistributedInfo, distributedPage, type DistributedLabels } from "../probe/distributedView";
import { formatBytes, formatMs } from "../probe/format";

const LABELS: DistributedLabels = {
  title: "Distributed probe",
  perRank: "per rank",
  step: "step",
  commShare: "comm",
  bytesPerStep: "bytes/step",
  peakMemory: "peak",
  parameters: "params",
  gradients: "grads",
  optimizerState: "optimizer",
  incomplete: "incomplete",
  ranksNotFinished: "Ranks that did not finish",
  findings: "Findings",
  recommendation: "Measured choice",
  estimate: "Estimate",
};

function strategy(name: "ddp" | "fsdp", paramBytes: number, kind: string): DistributedInfo["strategies"][number] {
  return {
    strategy: name,
    ok: true,
    ranks: [{ rank: 0, collectives: [{ kind, calls: 2, ms: 3.5, bytes: paramBytes }] }],
    step_ms: 20,
    comm_share: 0.25,
    peak_memory_bytes: 4 * paramBytes,
    param_bytes: paramBytes,
    grad_bytes: paramBytes,
    optimizer_state_bytes: 2 * paramBytes,
    bytes_per_step: paramBytes,
    differences: [],
  };
}

const INFO: DistributedInfo = {
  nproc: 2,
  nnodes: 1,
  backend: "gloo",
  strategies: [strategy("ddp", 2048, "all_reduce"), strategy("fsdp", 1024, "all_gather")],
  ranks: [
    { rank: 0, status: "ok", message: null, stack: [] },
    { rank: 1, status: "timeout", message: null, stack: [{ file: "/w/model.py", line: 14, function: "forward" }] },
  ],
  findings: [
    {
      code: null,
      kind: "collective_divergence",
      severity: "error",
      message: "the ranks did not run the same collectives <b>",
      file: "/w/model.py",
      line: 14,
      detail: "rank 1 (timeout): model.py:14 in forward",
    },
  ],
  recommendation: { strategy: "ddp", reason: "measured with 2 ranks", formula: "estimate: ...", estimates: [] },
  error: "timeout",
  warnings: [],
};

void test("the strategies stand side by side, one column each, collectives by kind", () => {
  const rows = comparisonRows(INFO, LABELS);
  const byLabel = new Map(rows.map((row) => [row[0], row.slice(1)]));
  assert.deepEqual(byLabel.get("params"), [formatBytes(2048), formatBytes(1024)]);
  assert.deepEqual(byLabel.get("  all_gather"), ["-", formatMs(3.5)]);
  assert.deepEqual(byLabel.get("  all_reduce"), [formatMs(3.5), "-"]);
  assert.ok(rows.every((row) => row.length === 3));
});

void test("the page names the stuck rank at its line, escapes text and runs no script", () => {
  const page = distributedPage(INFO, LABELS, "vscode-resource:", "vscode-resource:/media/report.css");
  assert.match(page, /model\.py:14 forward/);
  assert.match(page, /&lt;b&gt;/);
  assert.doesNotMatch(page, /<script/);
  assert.match(page, /default-src 'none'; style-src vscode-resource:/);
});
