import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import * as path from "node:path";
import { test } from "node:test";
import {
  CLIENT_ONLY_SETTINGS,
  DEVICES,
  LOCALES,
  SEVERITIES,
  SHAPE_HINT_SCOPES,
  serverSettings,
  type SettingReader,
} from "../server/serverSettings";

// out/test/settings.test.js → the extension's package.json, the one definition of the settings
interface Property {
  default?: unknown;
  enum?: string[];
  additionalProperties?: { enum?: string[] };
}
const MANIFEST = JSON.parse(readFileSync(path.resolve(__dirname, "..", "..", "package.json"), "utf8")) as {
  contributes: { configuration: { properties: Record<string, Property | undefined> } };
};
const PROPERTIES = MANIFEST.contributes.configuration.properties;
const KEYS = Object.keys(PROPERTIES).map((key) => key.replace(/^torchdoctor\./, ""));

void test("the server's settings read every key package.json contributes, and no other", () => {
  const asked: string[] = [];
  const recording: SettingReader = (key) => {
    asked.push(key);
    return undefined;
  };
  serverSettings(recording, "/usr/bin/python3");
  // the interpreter setting is one of several sources: the caller resolves it and passes it in
  const expected = KEYS.filter((key) => !CLIENT_ONLY_SETTINGS.includes(key) && key !== "interpreter");
  assert.deepEqual([...asked].sort(), [...expected].sort());
  for (const key of CLIENT_ONLY_SETTINGS) {
    assert.ok(KEYS.includes(key), `${key} is not in package.json`);
  }
});

void test("package.json's defaults reach the server under the key it reads", () => {
  const defaults = ((key: string) => PROPERTIES[`torchdoctor.${key}`]?.default) as SettingReader;
  // "probe.iters" → { probe: { iters } }: the nesting the server's parser expects
  const expected: Record<string, unknown> = { interpreter: "python3", probe: {} };
  for (const key of KEYS.filter((name) => !CLIENT_ONLY_SETTINGS.includes(name) && name !== "interpreter")) {
    const [head, tail] = key.split(".", 2) as [string, string | undefined];
    const value = PROPERTIES[`torchdoctor.${key}`]?.default;
    if (tail === undefined) {
      expected[head] = value;
    } else {
      (expected[head] as Record<string, unknown>)[tail] = value;
    }
  }
  assert.deepEqual(serverSettings(defaults, "python3"), expected);
});

void test("the enums typed here are package.json's", () => {
  assert.deepEqual(PROPERTIES["torchdoctor.locale"]?.enum, [...LOCALES]);
  assert.deepEqual(PROPERTIES["torchdoctor.probe.device"]?.enum, [...DEVICES]);
  assert.deepEqual(PROPERTIES["torchdoctor.shapeHints"]?.enum, [...SHAPE_HINT_SCOPES]);
  assert.deepEqual(PROPERTIES["torchdoctor.severity"]?.additionalProperties?.enum, [...SEVERITIES]);
});
