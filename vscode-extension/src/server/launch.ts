// The command line that starts the language server. It must run no code from the folder the user
// opened, trusted or not: `python -m torchdoctor serve` in the workspace folder would import a
// workspace's own `torchdoctor/` or `pathspec.py` first. So the server starts from a script
// shipped in the extension, in isolated mode, with a working folder outside the workspace, and
// the script (python/start_server.py, which explains the flags) sets up sys.path itself.
import * as path from "node:path";

/** Isolated mode, no site at start-up, UTF-8 I/O; start_server.py refuses to run without -I -S. */
export const INTERPRETER_FLAGS: readonly string[] = ["-I", "-S", "-X", "utf8"];

/** The launch script, relative to the extension's folder. */
export const LAUNCH_SCRIPT = path.join("python", "start_server.py");

/**
 * Folders (path-delimited) searched before the bundled libraries: lets a development build or a
 * test run the server from a source checkout (e.g. `<repo>/server`). PYTHONPATH cannot do this:
 * the server ignores it.
 */
export const SERVER_PYTHONPATH_ENV = "TORCHDOCTOR_SERVER_PYTHONPATH";

export interface LaunchInputs {
  /** The checked interpreter (an absolute executable). */
  interpreter: string;
  extensionPath: string;
  /** bundled/libs when the extension carries the server's libraries, else undefined. */
  bundledLibraries: string | undefined;
  /** The extension host's environment (read for SERVER_PYTHONPATH_ENV only). */
  environment: NodeJS.ProcessEnv;
}

export interface ServerLaunch {
  command: string;
  args: string[];
  /** The launch script's folder: never a workspace folder. */
  cwd: string;
}

export function serverLaunch(inputs: LaunchInputs): ServerLaunch {
  const script = path.join(inputs.extensionPath, LAUNCH_SCRIPT);
  const args = [...INTERPRETER_FLAGS, script];
  const extra = inputs.environment[SERVER_PYTHONPATH_ENV] ?? "";
  for (const folder of extra.split(path.delimiter)) {
    if (folder !== "") {
      // A relative folder would be read against the working folder: make it absolute here.
      args.push("--path", path.resolve(folder));
    }
  }
  if (inputs.bundledLibraries !== undefined) {
    args.push("--bundled", inputs.bundledLibraries);
  }
  return { command: inputs.interpreter, args, cwd: path.dirname(script) };
}
