import assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import { existsSync, mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import * as path from "node:path";
import { test } from "node:test";
import { INTERPRETER_FLAGS, LAUNCH_SCRIPT, SERVER_PYTHONPATH_ENV, serverLaunch } from "../server/launch";

// out/test/launch.test.js → the extension's folder
const EXTENSION = path.resolve(__dirname, "..", "..");
const REPO_PYTHON = path.resolve(EXTENSION, "..", ".venv", "bin", "python");

void test("the server starts from the shipped script in isolated mode, outside any workspace", () => {
  const launch = serverLaunch({
    interpreter: "/usr/bin/python3",
    extensionPath: EXTENSION,
    bundledLibraries: path.join(EXTENSION, "bundled", "libs"),
    environment: {},
  });
  assert.equal(launch.command, "/usr/bin/python3");
  assert.deepEqual(launch.args, [
    "-I",
    "-S",
    "-X",
    "utf8",
    path.join(EXTENSION, "python", "start_server.py"),
    "--bundled",
    path.join(EXTENSION, "bundled", "libs"),
  ]);
  assert.ok(!launch.args.includes("-m"), "never `-m`: it puts the working folder on sys.path");
  assert.equal(launch.cwd, path.join(EXTENSION, "python"));
  assert.ok(existsSync(path.join(EXTENSION, LAUNCH_SCRIPT)), "the launch script is in the extension");
});

void test("source folders from the development variable come first, made absolute", () => {
  const launch = serverLaunch({
    interpreter: "python3",
    extensionPath: EXTENSION,
    bundledLibraries: undefined,
    environment: { [SERVER_PYTHONPATH_ENV]: ["relative/server", "", "/abs/other"].join(path.delimiter) },
  });
  assert.deepEqual(launch.args.slice(INTERPRETER_FLAGS.length + 1), [
    "--path",
    path.resolve("relative/server"),
    "--path",
    "/abs/other",
  ]);
});

/** A folder whose modules write `marker` when anything imports them. */
function boobyTrappedFolder(): { folder: string; marker: string } {
  const folder = mkdtempSync(path.join(tmpdir(), "torchdoctor-trap-"));
  const marker = path.join(folder, "MARKER");
  const trap = `open(${JSON.stringify(marker)}, "a").write(__name__ + "\\n")\n`;
  mkdirSync(path.join(folder, "torchdoctor"));
  writeFileSync(path.join(folder, "torchdoctor", "__init__.py"), trap);
  for (const name of ["pathspec.py", "sitecustomize.py", "usercustomize.py", "startup.py"]) {
    writeFileSync(path.join(folder, name), trap);
  }
  return { folder, marker };
}

void test(
  "the command line runs the real server and none of the workspace's modules",
  { skip: existsSync(REPO_PYTHON) ? false : `no ${REPO_PYTHON} with torchdoctor installed (scripts/setup.sh makes it)` },
  () => {
    const { folder, marker } = boobyTrappedFolder();
    try {
      const launch = serverLaunch({
        interpreter: REPO_PYTHON,
        extensionPath: EXTENSION,
        bundledLibraries: undefined,
        environment: {},
      });
      // Worse than the extension's start: the workspace is the working folder, on PYTHONPATH
      // and the startup file. `serve --help` imports the server's command line, then exits.
      const run = spawnSync(launch.command, [...launch.args, "--help"], {
        cwd: folder,
        env: { ...process.env, PYTHONPATH: folder, PYTHONSTARTUP: path.join(folder, "startup.py") },
        encoding: "utf-8",
      });
      assert.equal(run.status, 0, run.stderr);
      assert.match(run.stdout, /usage: torchdoctor serve/);
      assert.ok(!existsSync(marker), "a workspace module ran");

      // The trap is live: the old `-m` start from the workspace runs it.
      spawnSync(REPO_PYTHON, ["-m", "torchdoctor", "serve", "--help"], { cwd: folder, encoding: "utf-8" });
      assert.ok(existsSync(marker), "the booby trap did not fire for `python -m torchdoctor`");
    } finally {
      rmSync(folder, { recursive: true, force: true });
    }
  },
);
