import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import * as path from "node:path";
import { test } from "node:test";
import { formatBytes, formatCount, formatFlops, formatMs, formatPercent, formatShape, formatShapes } from "../probe/format";
import { summarize } from "../probe/reportTypes";

// the cases the server's formatter (probe/units.py) is tested against: one spec, same strings
const CASES = JSON.parse(
  readFileSync(path.resolve(__dirname, "..", "..", "..", "tests", "fixtures", "format_cases.json"), "utf8"),
) as Record<string, [unknown, string][]>;
const FORMATTERS: Record<string, (value: never) => string> = {
  size: formatBytes,
  count: formatCount,
  flops: formatFlops,
  milliseconds: formatMs,
  shape: formatShape,
  shapes: formatShapes,
  percent: formatPercent,
};

void test("every shared case gives the server's text", () => {
  assert.deepEqual(Object.keys(CASES).filter((kind) => !kind.startsWith("_")).sort(), Object.keys(FORMATTERS).sort());
  for (const [kind, format] of Object.entries(FORMATTERS)) {
    for (const [value, expected] of CASES[kind] ?? []) {
      assert.equal(format(value as never), expected, `${kind}(${JSON.stringify(value)})`);
    }
  }
});

void test("what is not a shape gives nothing rather than a wrong shape", () => {
  assert.equal(formatShape("8x10"), "");
  assert.equal(formatShape([8, "10"]), "");
  assert.equal(formatShapes(null), "");
  assert.equal(formatShapes([[8, 10], null]), "(8, 10)");
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
