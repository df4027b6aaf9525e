// Builds the vscode-languageclient client for `python -m torchdoctor serve` over stdio, with
// the server's own Python libraries (bundled/libs) on PYTHONPATH.
import * as fs from "node:fs";
import * as path from "node:path";
import * as vscode from "vscode";
import {
  LanguageClient,
  type LanguageClientOptions,
  type Middleware,
  type ServerOptions,
} from "vscode-languageclient/node";
import { readSettings, SECTION } from "./settings";

export const CLIENT_ID = "torchdoctor";
export const SERVER_PROBE_COMMAND = "torchdoctor.server.probe";
export const SERVER_FIX_ALL_COMMAND = "torchdoctor.server.fixAll";

/**
 * Extra PYTHONPATH entries placed before the bundled libraries: lets a development build
 * or a test run the server from a source checkout (e.g. `<repo>/server`).
 */
const SERVER_PYTHONPATH_ENV = "TORCHDOCTOR_SERVER_PYTHONPATH";

export interface ClientInputs {
  context: vscode.ExtensionContext;
  interpreter: string;
  outputChannel: vscode.LogOutputChannel;
  /** Refuses server commands that run workspace code while the workspace is untrusted. */
  guardCommand: (command: string) => boolean;
}

export function serverPythonPath(context: vscode.ExtensionContext): string[] {
  const entries: string[] = [];
  const override = process.env[SERVER_PYTHONPATH_ENV];
  if (override) {
    entries.push(...override.split(path.delimiter).filter((entry) => entry !== ""));
  }
  const bundled = context.asAbsolutePath(path.join("bundled", "libs"));
  if (fs.existsSync(bundled)) {
    entries.push(bundled);
  }
  return entries;
}

export function createClient(inputs: ClientInputs): LanguageClient {
  const { context, interpreter, outputChannel } = inputs;
  const pythonPath = [...serverPythonPath(context)];
  if (process.env.PYTHONPATH) {
    pythonPath.push(process.env.PYTHONPATH);
  }
  const serverOptions: ServerOptions = {
    command: interpreter,
    // No `transport`: with TransportKind.stdio the client would append `--stdio`.
    args: ["-m", "torchdoctor", "serve"],
    options: {
      env: {
        ...process.env,
        PYTHONPATH: pythonPath.join(path.delimiter),
        // The server speaks UTF-8 JSON-RPC over stdio whatever the user's locale says.
        PYTHONIOENCODING: "utf-8",
        PYTHONUTF8: "1",
      },
    },
  };

  const middleware: Middleware = {
    executeCommand: (command, args, next): vscode.ProviderResult<unknown> =>
      inputs.guardCommand(command) ? next(command, args) : undefined,
    workspace: {
      // Answer workspace/configuration with the resolved interpreter, which may come from
      // the Python extension rather than from the `torchdoctor.interpreter` setting.
      configuration: (params) =>
        params.items.map((item): unknown => {
          const resource = item.scopeUri ? vscode.Uri.parse(item.scopeUri) : undefined;
          if (item.section === SECTION) {
            return readSettings(interpreter, resource);
          }
          return item.section
            ? vscode.workspace.getConfiguration(undefined, resource).get<unknown>(item.section) ?? null
            : null;
        }),
    },
  };

  const clientOptions: LanguageClientOptions = {
    documentSelector: [
      { scheme: "file", language: "python" },
      { scheme: "untitled", language: "python" },
    ],
    outputChannel,
    traceOutputChannel: outputChannel,
    diagnosticCollectionName: CLIENT_ID,
    initializationOptions: { settings: readSettings(interpreter) },
    middleware,
    markdown: { isTrusted: false, supportHtml: false },
    connectionOptions: { maxRestartCount: 3 },
  };

  return new LanguageClient(CLIENT_ID, "torchdoctor", serverOptions, clientOptions);
}
