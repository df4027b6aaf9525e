// Builds the vscode-languageclient client for the torchdoctor server over stdio, started from
// the extension's launch script (see launch.ts) with the server's own Python libraries
// (bundled/libs) when the extension carries them.
import * as fs from "node:fs";
import * as path from "node:path";
import * as vscode from "vscode";
import {
  LanguageClient,
  type LanguageClientOptions,
  type Middleware,
  type ServerOptions,
} from "vscode-languageclient/node";
import { serverLaunch } from "./launch";
import { readSettings, SECTION } from "./settings";

export const CLIENT_ID = "torchdoctor";
export const SERVER_PROBE_COMMAND = "torchdoctor.server.probe";
export const SERVER_PROBE_DISTRIBUTED_COMMAND = "torchdoctor.server.probeDistributed";
export const SERVER_FIX_ALL_COMMAND = "torchdoctor.server.fixAll";

export interface ClientInputs {
  context: vscode.ExtensionContext;
  interpreter: string;
  outputChannel: vscode.LogOutputChannel;
  /** Refuses server commands that run workspace code while the workspace is untrusted. */
  guardCommand: (command: string) => boolean;
}

function bundledLibraries(context: vscode.ExtensionContext): string | undefined {
  const bundled = context.asAbsolutePath(path.join("bundled", "libs"));
  return fs.existsSync(bundled) ? bundled : undefined;
}

export function createClient(inputs: ClientInputs): LanguageClient {
  const { context, interpreter, outputChannel } = inputs;
  const launch = serverLaunch({
    interpreter,
    extensionPath: context.extensionPath,
    bundledLibraries: bundledLibraries(context),
    environment: process.env,
  });
  outputChannel.info(`Starting the server: ${launch.command} ${launch.args.join(" ")}`);
  // The environment is passed on as it is: the server ignores PYTHON* variables (-I), and the
  // processes it starts get the user's environment, not one changed for the server.
  const serverOptions: ServerOptions = {
    command: launch.command,
    // No `transport`: with TransportKind.stdio the client would append `--stdio`.
    args: launch.args,
    options: { cwd: launch.cwd },
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
      // Python cells of Jupyter notebooks: the server announces notebook sync, so the client
      // sends whole notebooks (notebookDocument/*) and asks for hovers and fixes per cell
      { notebook: "jupyter-notebook", language: "python" },
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
