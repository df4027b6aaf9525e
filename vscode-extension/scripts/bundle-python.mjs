// Installs the language server and its Python dependencies into bundled/libs, which the
// extension puts on PYTHONPATH: users then need only a Python >= 3.10, nothing pip-installed.
//
// Dependencies are resolved for the oldest supported Python (3.10) and as pure-Python
// wheels only, so backports that newer Pythons skip (exceptiongroup, typing_extensions)
// are included and the folder works with any CPython >= 3.10 on any platform.
//
// Environment:
//   TORCHDOCTOR_SERVER_SRC     the Python project to bundle (default: the repository root)
//   TORCHDOCTOR_BUNDLE_PYTHON  the Python that runs pip (default: python3)
import { spawnSync } from "node:child_process";
import { existsSync, mkdirSync, readdirSync, rmSync, statSync } from "node:fs";
import { dirname, join, resolve } from "node:path";
import { fileURLToPath } from "node:url";

const extensionDir = resolve(dirname(fileURLToPath(import.meta.url)), "..");
const repoRoot = resolve(extensionDir, "..");
// npm runs workspace scripts inside the workspace: read a relative path from where npm was invoked.
const invokedFrom = process.env.INIT_CWD ?? process.cwd();
const serverSource = process.env.TORCHDOCTOR_SERVER_SRC
  ? resolve(invokedFrom, process.env.TORCHDOCTOR_SERVER_SRC)
  : repoRoot;
const python = process.env.TORCHDOCTOR_BUNDLE_PYTHON ?? "python3";
const target = join(extensionDir, "bundled", "libs");
const OLDEST_PYTHON = "3.10";

// Used only when the project's pyproject.toml cannot be read (no tomllib before 3.11).
const FALLBACK_DEPENDENCIES = ["pygls>=2.1,<3", "lsprotocol>=2025.0.0", "jedi>=0.19", "rich>=13", "pathspec>=0.12"];

function run(command, args) {
  console.log(`$ ${command} ${args.join(" ")}`);
  const result = spawnSync(command, args, { stdio: "inherit" });
  if (result.error) {
    throw result.error;
  }
  if (result.status !== 0) {
    throw new Error(`${command} exited with ${result.status}`);
  }
}

function runtimeDependencies() {
  const pyproject = join(serverSource, "pyproject.toml");
  if (!existsSync(pyproject)) {
    throw new Error(`${pyproject} not found: set TORCHDOCTOR_SERVER_SRC to the torchdoctor Python project`);
  }
  const script =
    "import json, sys, tomllib; " +
    "print(json.dumps(tomllib.load(open(sys.argv[1], 'rb')).get('project', {}).get('dependencies', [])))";
  const result = spawnSync(python, ["-c", script, pyproject], { encoding: "utf-8" });
  if (result.status === 0) {
    return JSON.parse(result.stdout);
  }
  console.warn(`could not read dependencies from ${pyproject}; using the built-in list`);
  return FALLBACK_DEPENDENCIES;
}

/** Removes what the extension never needs: scripts, byte code, jedi's third-party stubs. */
function prune(folder) {
  rmSync(join(folder, "bin"), { recursive: true, force: true });
  rmSync(join(folder, "jedi", "third_party", "typeshed", "stubs"), { recursive: true, force: true });
  rmSync(join(folder, "jedi", "third_party", "typeshed", "third_party"), { recursive: true, force: true });
  const walk = (dir) => {
    for (const name of readdirSync(dir)) {
      const path = join(dir, name);
      if (name === "__pycache__") {
        rmSync(path, { recursive: true, force: true });
      } else if (statSync(path).isDirectory()) {
        walk(path);
      }
    }
  };
  walk(folder);
}

rmSync(target, { recursive: true, force: true });
mkdirSync(target, { recursive: true });
const pip = [python, ["-m", "pip", "install", "--disable-pip-version-check", "--no-input", "--no-compile", "--target", target]];
const dependencies = runtimeDependencies();
console.log(`bundling ${serverSource} with ${dependencies.join(", ")}`);
const installPure = (requirements) =>
  run(pip[0], [...pip[1], "--python-version", OLDEST_PYTHON, "--implementation", "py", "--only-binary=:all:", ...requirements]);
if (dependencies.length > 0) {
  installPure(dependencies);
}
// pip evaluates markers for the Python running it: add what older supported Pythons need.
for (let round = 0; round < 5; round++) {
  const script = join(extensionDir, "scripts", "missing_requirements.py");
  const result = spawnSync(python, [script, target, ...dependencies], {
    encoding: "utf-8",
  });
  if (result.status !== 0) {
    throw new Error(`missing_requirements.py failed: ${result.stderr}`);
  }
  const missing = result.stdout.split("\n").filter((line) => line.trim() !== "");
  if (missing.length === 0) {
    break;
  }
  installPure(missing);
}
run(pip[0], [...pip[1], "--no-deps", serverSource]);
prune(target);
console.log(`bundled Python libraries in ${target}`);
