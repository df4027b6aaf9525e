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
  // pyproject.toml's [project] dependencies are the only list: no second pin to drift from it
  const script =
    "import json, sys\n" +
    "try:\n    import tomllib\n" +
    "except ImportError:\n    import tomli as tomllib\n" +
    "print(json.dumps(tomllib.load(open(sys.argv[1], 'rb'))['project']['dependencies']))";
  const result = spawnSync(python, ["-c", script, pyproject], { encoding: "utf-8" });
  if (result.status !== 0) {
    throw new Error(
      `could not read [project] dependencies from ${pyproject} with ${python} ` +
        `(it needs Python >= 3.11, or tomli installed): ${result.stderr.trim()}`,
    );
  }
  return JSON.parse(result.stdout);
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
