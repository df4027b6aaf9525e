import assert from "node:assert/strict";
import { test } from "node:test";
import { buildPayload, describeBuild, isEmptyBuild, parseInit } from "../probe/buildArguments";
import { constructionText, precisionText } from "../probe/buildFigures";

void test("constructor arguments are a JSON object of argument names", () => {
  assert.deepEqual(parseInit('{"num_classes": 5, "config": {"n_layer": 2}}'), {
    ok: true,
    value: { num_classes: 5, config: { n_layer: 2 } },
  });
  assert.deepEqual(parseInit("   "), { ok: true, value: undefined });
  for (const bad of ["[1, 2]", "5", "null", '{"num classes": 1}', "{num_classes: 5}"]) {
    assert.equal(parseInit(bad).ok, false, bad);
  }
});

void test("the request carries only what was chosen", () => {
  assert.deepEqual(buildPayload(undefined), {});
  assert.deepEqual(buildPayload({ init: {}, dtype: "", amp: false }), {});
  assert.deepEqual(buildPayload({ init: { hidden: 3 }, dtype: "bfloat16", amp: true }), {
    init: { hidden: 3 },
    dtype: "bfloat16",
    amp: true,
  });
  assert.equal(isEmptyBuild({ amp: false }), true);
  assert.equal(isEmptyBuild({ dtype: "float16" }), false);
});

void test("a pinned build reads as one line", () => {
  assert.equal(describeBuild({ init: { num_classes: 5, name: "x" }, amp: true }), 'num_classes=5, name="x" · amp');
  assert.equal(describeBuild({}), undefined);
});

void test("the report view names the arguments and a precision other than float32", () => {
  const report = {
    construction: { method: "init", detail: "keyword arguments from --init", arguments: { hidden: "7", config: "GPT2Config(n_layer=2)" } },
    precision: { dtype: "bfloat16", dtype_source: "argument", amp: "bfloat16", grad_scaler: false, memory_format: "channels_last" },
  };
  assert.equal(constructionText(report), "hidden=7, config=GPT2Config(n_layer=2)");
  assert.equal(precisionText(report), "bfloat16 · autocast bfloat16 · channels_last");
  const plain = {
    construction: { method: "default", detail: "no arguments", arguments: {} },
    precision: { dtype: "float32", dtype_source: "model", amp: null, grad_scaler: false, memory_format: "contiguous" },
  };
  assert.equal(constructionText(plain), undefined);
  assert.equal(precisionText(plain), undefined);
  assert.equal(precisionText({}), undefined); // a report from before these fields
});
