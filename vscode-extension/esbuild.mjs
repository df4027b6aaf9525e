// Bundles the extension (Node, CommonJS, `vscode` external) and the report webview script
// (browser, IIFE). `--production` minifies and drops source maps; `--watch` rebuilds on change.
import * as esbuild from "esbuild";

const production = process.argv.includes("--production");
const watch = process.argv.includes("--watch");

const common = {
  bundle: true,
  minify: production,
  sourcemap: production ? false : "linked",
  logLevel: "info",
  target: "es2022",
};

const builds = [
  {
    ...common,
    entryPoints: ["src/extension.ts"],
    outfile: "out/extension.js",
    platform: "node",
    format: "cjs",
    external: ["vscode"],
  },
  {
    ...common,
    entryPoints: ["src/webview/main.ts"],
    outfile: "out/webview.js",
    platform: "browser",
    format: "iife",
  },
];

// Unit tests of the modules that do not need VS Code: `--tests` builds them for node --test.
if (process.argv.includes("--tests")) {
  const { readdirSync } = await import("node:fs");
  const tests = readdirSync("src/test").filter((name) => name.endsWith(".test.ts"));
  await esbuild.build({
    ...common,
    entryPoints: tests.map((name) => `src/test/${name}`),
    outdir: "out/test",
    platform: "node",
    format: "cjs",
    external: ["vscode"],
  });
  process.exit(0);
}

if (watch) {
  for (const options of builds) {
    const context = await esbuild.context(options);
    await context.watch();
  }
} else {
  await Promise.all(builds.map((options) => esbuild.build(options)));
}
