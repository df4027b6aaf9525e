import assert from "node:assert/strict";
import { test } from "node:test";
import { formatBytes, formatCount, formatFlops, formatMs, formatPercent, formatShape, formatShapes } from "../probe/format";
import { summarize } from "../probe/reportTypes";

void test("formats counts, bytes, times and FLOPs for people", () => {
  assert.equal(formatCount(950), "950");
  assert.equal(formatCount(20_490), "20.5 K");
  assert.equal(formatCount(11_689_512), "11.7 M");
  assert.equal(formatBytes(512), "512 B");
  assert.equal(formatBytes(46_758_048), "44.6 MiB");
  assert.equal(formatMs(0.4), "0.40 ms");
  assert.equal(formatMs(120.54), "120.5 ms");
  assert.equal(formatMs(2500), "2.50 s");
  assert.equal(formatFlops(14.6e9), "14.6 GFLOP");
});

void test("formats shapes as tuples and fractions as percentages", () => {
  assert.equal(formatShape([8, 10]), "(8, 10)");
  assert.equal(formatShape([]), "()");
  assert.equal(formatShape("8x10"), "");
  assert.equal(formatShape([8, "10"]), "");
  assert.equal(formatShapes([[8, 16, 128], [2, 8, 64], [2, 8, 64]]), "(8, 16, 128), (2, 8, 64), (2, 8, 64)");
  assert.equal(formatShapes(null), "");
  assert.equal(formatShapes([[8, 10], null]), "(8, 10)");
  assert.equal(formatPercent(0.6642), "66%");
  assert.equal(formatPercent(0.0213), "2.1%");
  assert.equal(formatPercent(0.0001), "<0.1%");
  assert.equal(formatPercent(0), "0.0%");
});

void test("a summary keeps what a report has and skips what it lacks", () => {
  const summary = summarize("file:///m.py", "Net", {
    params: { total: 10 },
    latency: { forward: { median_ms: 1.5 } },
  });
  assert.equal(summary.paramsTotal, 10);
  assert.equal(summary.forwardMs, 1.5);
  assert.equal(summary.peakMemoryBytes, undefined);
  assert.equal(summary.device, undefined);
  assert.deepEqual(summarize("u", "C", {}).paramsTotal, undefined);
});
