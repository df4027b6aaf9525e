// The report view's figures, read from real probe reports saved by `torchdoctor probe --json`
// (see fixtures/pitfalls.py for how each one was made).
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { test } from "node:test";
import { formatShapes } from "../probe/format";
import {
  innermostTimedModules,
  inputText,
  lineLocation,
  locatedLines,
  medianText,
  moduleShortName,
  spreadText,
  strategyLabel,
} from "../probe/reportFigures";
import { deviceLabel, summarize, type ProbeReport } from "../probe/reportTypes";

/** The fixtures stay in src/: the bundled tests run from out/test/. */
function fixture(name: string): ProbeReport {
  const path = join(__dirname, "..", "..", "src", "test", "fixtures", name);
  const event = JSON.parse(readFileSync(path, "utf-8")) as { report: ProbeReport };
  return event.report;
}

const mlp = fixture("mlp.report.json");
const pitfalls = fixture("pitfalls.report.json");
const classifier = fixture("classifier.report.json");

void test("the fixtures are real schema 1 reports", () => {
  for (const report of [mlp, pitfalls, classifier]) {
    assert.equal(report.schema, 1);
    assert.ok((report.modules ?? []).length > 0);
  }
});

void test("summarize reads the real report's figures", () => {
  const summary = summarize("file:///train.py", "MLP", mlp);
  assert.equal(summary.paramsTotal, 101_770);
  assert.equal(summary.forwardMs, mlp.latency?.forward?.median_ms);
  assert.equal(summary.peakMemoryBytes, mlp.memory?.peak_bytes);
  assert.ok((summary.peakMemoryBytes ?? 0) > 0);
  assert.equal(summary.device, mlp.device?.name);
  assert.doesNotMatch(summary.device ?? "", /object/);
  assert.equal(summary.className, "MLP");
  assert.equal(summary.uri, "file:///train.py");
});

void test("summarize tolerates missing, null and mistyped fields", () => {
  const empty = summarize("u", "C", {});
  assert.deepEqual(
    [empty.paramsTotal, empty.forwardMs, empty.peakMemoryBytes, empty.device],
    [undefined, undefined, undefined, undefined],
  );
  const odd = JSON.parse('{"params": {"total": "12"}, "latency": {"forward": null}, "memory": null, "device": 3}') as ProbeReport;
  const summary = summarize("u", "C", odd);
  assert.equal(summary.paramsTotal, undefined);
  assert.equal(summary.forwardMs, undefined);
  assert.equal(summary.peakMemoryBytes, undefined);
  assert.equal(summary.device, undefined);
  // No backward: the forward figures are still there.
  assert.equal(classifier.latency?.forward_backward, null);
  assert.equal(summarize("u", "Classifier", classifier).forwardMs, classifier.latency.forward?.median_ms);
});

void test("the device is named by its name, else by its kind", () => {
  assert.equal(deviceLabel({ kind: "cuda", name: "NVIDIA H100", index: 0 }), "NVIDIA H100");
  assert.equal(deviceLabel({ kind: "cpu", name: "" }), "cpu");
  assert.equal(deviceLabel("cuda:0"), "cuda:0");
  assert.equal(deviceLabel(null), undefined);
  assert.equal(deviceLabel({}), undefined);
});

void test("module output shapes read like Python tuples", () => {
  const model = mlp.modules?.find((row) => row.name === "");
  assert.equal(formatShapes(model?.output_shapes), "(8, 10)");
  // An LSTM returns output, h and c: all three are shown.
  const lstm = pitfalls.modules?.find((row) => row.type === "LSTM");
  assert.equal(formatShapes(lstm?.output_shapes), "(4, 6, 8), (1, 4, 8), (1, 4, 8)");
});

void test("the time chart keeps the innermost timed modules", () => {
  assert.deepEqual(
    innermostTimedModules(mlp.modules ?? []).map((row) => row.name),
    ["net.0", "net.1", "net.2", "net.3"],
  );
  // A module whose only child never ran as a module is still innermost.
  const rows = [
    { name: "", forward_ms: 3 },
    { name: "attn", forward_ms: 2 },
    { name: "attn.out_proj", forward_ms: null },
    { name: "attn2", forward_ms: 1 },
  ];
  assert.deepEqual(innermostTimedModules(rows).map((row) => row.name), ["attn", "attn2"]);
  // Only the model timed: the model is the one bar.
  assert.deepEqual(innermostTimedModules([{ name: "", forward_ms: 1 }]).map((row) => row.name), [""]);
  assert.equal(moduleShortName({ name: "encoder.layers.0.self_attn" }), "self_attn");
  assert.equal(moduleShortName({ name: "" }), "");
});

void test("timings, input and strategy read for people", () => {
  assert.match(medianText(mlp.latency?.forward) ?? "", /^\d+(\.\d+)? m?s$/);
  assert.match(spreadText(mlp.latency?.forward_backward) ?? "", /^\d+(\.\d+)? m?s$/);
  assert.equal(medianText(classifier.latency?.forward_backward), undefined);
  assert.equal(inputText(mlp.input), "(8, 784)");
  assert.equal(
    inputText({ spec: null, tensors: [{ path: "args[0]", shape: [8, 16], dtype: "int64" }, { path: "kwargs['mask']", shape: [8, 16], dtype: "bool" }] }),
    "args[0] (8, 16) int64; kwargs['mask'] (8, 16) bool",
  );
  assert.equal(inputText(undefined), undefined);
  assert.equal(strategyLabel("ddp"), "DDP");
  assert.equal(strategyLabel("fsdp_shard_grad_op"), "FSDP (SHARD_GRAD_OP)");
  assert.equal(strategyLabel("fsdp_full_shard"), "FSDP (FULL_SHARD)");
});

void test("source lines link to their file and line", () => {
  const lines = locatedLines(mlp.lines ?? []);
  assert.ok(lines.length > 0);
  const forward = lines.find((line) => line.code === "return self.net(x)");
  assert.ok(forward);
  assert.equal(lineLocation(forward), `train_mnist.py:${String(forward.line)}`);
  assert.deepEqual(locatedLines([{ file: "", line: 3 }, { file: "/a.py" }, { file: "/a.py", line: 2 }]), [{ file: "/a.py", line: 2 }]);
  assert.equal(lineLocation({ file: "C:\\work\\model.py", line: 7 }), "model.py:7");
  // Findings carry their place the same way.
  const finding = pitfalls.findings?.find((item) => item.kind === "unused_parameter");
  assert.ok(finding);
  assert.equal(finding.count, 2);
  assert.equal(lineLocation(finding), `pitfalls.py:${String(finding.line)}`);
});
