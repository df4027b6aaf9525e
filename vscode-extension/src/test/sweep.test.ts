// The report view's batch-size sweep and its comparison with the previous probe, read from a
// real report saved by `torchdoctor probe line_shapes_models.py::SmallCNN --batch-sweep
// --max-memory 2 --json` (tests/probe/fixtures/line_shapes_models.py).
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { test } from "node:test";
import { summarize, type ProbeReport } from "../probe/reportTypes";
import { changesSince, sweepFigures } from "../probe/sweepFigures";

function fixture(name: string): ProbeReport {
  const path = join(__dirname, "..", "..", "src", "test", "fixtures", name);
  return (JSON.parse(readFileSync(path, "utf-8")) as { report: ProbeReport }).report;
}

const sweep = fixture("cnn-sweep.report.json");
const mlp = fixture("mlp.report.json");

void test("the sweep's points come in batch order with the largest fitting batch", () => {
  const figures = sweepFigures(sweep);
  assert.ok(figures !== undefined);
  const batches = figures.rows.map((row) => row.batch);
  assert.deepEqual(batches, [...batches].sort((a, b) => a - b));
  const largest = figures.largestFittingBatch;
  assert.ok(largest !== undefined && largest > 1);
  assert.equal(figures.memoryLimitBytes, 2 * 1024 * 1024);
  for (const row of figures.rows) {
    // every batch up to the largest fitted; every one above it did not
    assert.equal(row.fits, row.batch <= largest, `batch ${row.batch}`);
    if (row.fits) {
      assert.ok(row.latencyMs !== undefined && row.samplesPerS !== undefined);
      assert.ok((row.peakBytes ?? Infinity) <= (figures.memoryLimitBytes ?? 0));
    } else {
      assert.equal(row.reason, "over the memory limit");
    }
  }
});

void test("a report without a sweep draws none, and bad points are skipped", () => {
  assert.equal(sweepFigures(mlp), undefined);
  const broken = { batch_sweep: { points: [{ batch: "8" }, { batch: 4, fits: true, latency_ms: null }] } };
  const figures = sweepFigures(broken as unknown as ProbeReport);
  assert.deepEqual(figures?.rows, [{ batch: 4, fits: true }]);
});

void test("the comparison with the previous probe of the class gives before, after and ratio", () => {
  const before = summarize("file:///m.py", "SmallCNN", sweep);
  const slower = structuredClone(sweep);
  const forward = slower.latency?.forward;
  assert.ok(forward?.median_ms !== undefined);
  forward.median_ms *= 2;
  const after = summarize("file:///m.py", "SmallCNN", slower);
  const changes = changesSince(before, after);
  const latency = changes.find((change) => change.what === "forward");
  assert.ok(latency !== undefined);
  assert.equal(latency.after, latency.before * 2);
  assert.ok(Math.abs((latency.ratio ?? 0) - 2) < 1e-9);
  assert.equal(changes.find((change) => change.what === "params")?.ratio, 1);
  assert.deepEqual(changesSince(undefined, after), []);
});
