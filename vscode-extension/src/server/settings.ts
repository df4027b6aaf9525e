// The server's settings, read from VS Code's configuration in the shape the server expects
// (`initializationOptions.settings` and the `torchdoctor` section of workspace/configuration).
import * as vscode from "vscode";
import { serverSettings, type ServerSettings } from "./serverSettings";

export type { ProbeSettings, ServerSettings, Severity } from "./serverSettings";

export const SECTION = "torchdoctor";

/** Settings whose change needs a new server process rather than a didChangeConfiguration. */
export const RESTART_SETTINGS: readonly string[] = ["torchdoctor.interpreter"];

export function readSettings(interpreter: string, resource?: vscode.Uri): ServerSettings {
  const config = vscode.workspace.getConfiguration(SECTION, resource);
  // package.json contributes every key, so VS Code answers with its default when none is set
  return serverSettings((key) => config.get(key), interpreter);
}
