// Lint step: every vscode.l10n.t("…") message in src/ has a zh-CN translation, every
// %key% in package.json exists in both package.nls files, and no translation is stale.
import { readdirSync, readFileSync, statSync } from "node:fs";
import { dirname, join, resolve } from "node:path";
import { fileURLToPath } from "node:url";

const root = resolve(dirname(fileURLToPath(import.meta.url)), "..");
const problems = [];

function sources(dir) {
  return readdirSync(dir).flatMap((name) => {
    const path = join(dir, name);
    return statSync(path).isDirectory() ? sources(path) : path.endsWith(".ts") ? [path] : [];
  });
}

const messages = new Set();
for (const file of sources(join(root, "src"))) {
  for (const match of readFileSync(file, "utf-8").matchAll(/l10n\.t\(\s*("(?:[^"\\]|\\.)*")/g)) {
    messages.add(JSON.parse(match[1]));
  }
}
const bundle = JSON.parse(readFileSync(join(root, "l10n", "bundle.l10n.zh-cn.json"), "utf-8"));
for (const message of messages) {
  if (!(message in bundle)) {
    problems.push(`l10n/bundle.l10n.zh-cn.json: no translation for ${JSON.stringify(message)}`);
  }
}
for (const message of Object.keys(bundle)) {
  if (!messages.has(message)) {
    problems.push(`l10n/bundle.l10n.zh-cn.json: unused translation ${JSON.stringify(message)}`);
  }
}

const manifestKeys = new Set(
  [...readFileSync(join(root, "package.json"), "utf-8").matchAll(/"%([\w.-]+)%"/g)].map((match) => match[1]),
);
for (const nls of ["package.nls.json", "package.nls.zh-cn.json"]) {
  const keys = Object.keys(JSON.parse(readFileSync(join(root, nls), "utf-8")));
  for (const key of manifestKeys) {
    if (!keys.includes(key)) {
      problems.push(`${nls}: missing ${key}`);
    }
  }
  for (const key of keys) {
    if (!manifestKeys.has(key)) {
      problems.push(`${nls}: unused ${key}`);
    }
  }
}

if (problems.length > 0) {
  console.error(problems.join("\n"));
  process.exit(1);
}
console.log(`l10n: ${messages.size} messages and ${manifestKeys.size} manifest strings translated`);
