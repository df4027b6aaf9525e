// `npm run package`: production bundle, bundled Python libraries, then the .vsix at
// <repo>/dist/torchdoctor-<version>.vsix.
import { spawnSync } from "node:child_process";
import { mkdirSync, readFileSync, rmSync, statSync } from "node:fs";
import { dirname, join, resolve } from "node:path";
import { createRequire } from "node:module";
import { fileURLToPath } from "node:url";

const extensionDir = resolve(dirname(fileURLToPath(import.meta.url)), "..");
const distDir = resolve(extensionDir, "..", "dist");
const { name, version } = JSON.parse(readFileSync(join(extensionDir, "package.json"), "utf-8"));
const vsix = join(distDir, `${name}-${version}.vsix`);
// npm workspaces hoist the vsce binary to the repository's node_modules: find it by package.
const vsceCli = join(dirname(createRequire(import.meta.url).resolve("@vscode/vsce/package.json")), "vsce");

function step(command, args) {
  console.log(`\n$ ${command} ${args.join(" ")}`);
  const result = spawnSync(command, args, { cwd: extensionDir, stdio: "inherit" });
  if (result.error) {
    throw result.error;
  }
  if (result.status !== 0) {
    process.exit(result.status ?? 1);
  }
}

const started = Date.now();
rmSync(join(extensionDir, "out"), { recursive: true, force: true });
step(process.execPath, ["esbuild.mjs", "--production"]);
step(process.execPath, ["scripts/bundle-python.mjs"]);
mkdirSync(distDir, { recursive: true });
// --no-dependencies: esbuild already bundled the JavaScript dependencies into out/.
// --allow-package-all-secrets: vsce's secret scan spends ~70 s on the ~2,000 files of
// third-party Python libraries in bundled/libs; our own files are generated bundles, CSS and
// manifests, and .env files are still refused (no --allow-package-env-file).
step(process.execPath, [
  vsceCli,
  "package",
  "--no-dependencies",
  "--skip-license",
  "--allow-missing-repository",
  "--allow-package-all-secrets",
  "--out",
  vsix,
]);
const size = statSync(vsix).size;
console.log(`\n${vsix}: ${(size / 1024 / 1024).toFixed(2)} MiB in ${((Date.now() - started) / 1000).toFixed(1)} s`);
