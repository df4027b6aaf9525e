// Decides which Python runs the language server (and, through the `interpreter` setting
// sent to it, the probe and jedi): the `torchdoctor.interpreter` setting, else the Python
// extension's active environment when that extension is installed, else `python3`.
import * as os from "node:os";
import * as path from "node:path";
import * as vscode from "vscode";
import { PythonExtension } from "@vscode/python-extension";

export type InterpreterSource = "setting" | "python-extension" | "default";

export interface Interpreter {
  /** Executable path or a command name looked up on PATH. */
  command: string;
  source: InterpreterSource;
}

const PYTHON_EXTENSION_ID = "ms-python.python";
const DEFAULT_COMMAND = process.platform === "win32" ? "python" : "python3";

export async function resolveInterpreter(resource?: vscode.Uri): Promise<Interpreter> {
  const configured = vscode.workspace
    .getConfiguration("torchdoctor", resource)
    .get<string>("interpreter", "")
    .trim();
  if (configured !== "") {
    return { command: expandPath(configured, resource), source: "setting" };
  }
  // In Restricted Mode a workspace's own environment (e.g. its .venv) is workspace content:
  // starting it would run code the user has not trusted. Fall back to python3 on PATH.
  if (vscode.workspace.isTrusted) {
    const fromExtension = await activeEnvironmentPath(resource);
    if (fromExtension !== undefined) {
      return { command: fromExtension, source: "python-extension" };
    }
  }
  return { command: DEFAULT_COMMAND, source: "default" };
}

/** Fires when the Python extension's selected environment changes (no-op without it). */
export async function onActiveEnvironmentChanged(
  listener: () => void,
): Promise<vscode.Disposable | undefined> {
  const api = await pythonExtensionApi();
  return api?.environments.onDidChangeActiveEnvironmentPath(() => {
    listener();
  });
}

async function activeEnvironmentPath(resource?: vscode.Uri): Promise<string | undefined> {
  const api = await pythonExtensionApi();
  if (api === undefined) {
    return undefined;
  }
  try {
    const active = api.environments.getActiveEnvironmentPath(resource);
    const resolved = await api.environments.resolveEnvironment(active);
    return resolved?.executable.uri?.fsPath;
  } catch {
    return undefined;
  }
}

async function pythonExtensionApi(): Promise<PythonExtension | undefined> {
  // PythonExtension.api() waits for the extension to activate and throws when it is not
  // installed; check first so a missing extension is a quick, silent fallback.
  if (vscode.extensions.getExtension(PYTHON_EXTENSION_ID) === undefined) {
    return undefined;
  }
  try {
    return await PythonExtension.api();
  } catch {
    return undefined;
  }
}

/** Expands `~`, `${workspaceFolder}` and `${userHome}` the way users write them in settings. */
export function expandPath(value: string, resource?: vscode.Uri): string {
  const folder =
    (resource ? vscode.workspace.getWorkspaceFolder(resource) : undefined) ??
    vscode.workspace.workspaceFolders?.[0];
  let expanded = value
    .replace(/\$\{userHome\}/g, os.homedir())
    .replace(/\$\{workspaceFolder\}/g, folder?.uri.fsPath ?? "");
  if (expanded === "~" || expanded.startsWith("~/")) {
    expanded = path.join(os.homedir(), expanded.slice(1));
  }
  return expanded;
}
