// Workspace Trust: the probe imports and runs the workspace's own Python code, so it is
// refused in Restricted Mode; diagnostics, hovers and fixes (which only read text) stay on.
import * as vscode from "vscode";
import { SERVER_PROBE_COMMAND, SERVER_PROBE_DISTRIBUTED_COMMAND } from "./server/client";

export function probeAllowed(): boolean {
  return vscode.workspace.isTrusted;
}

export function refuseProbe(): void {
  const manage = vscode.l10n.t("Manage Workspace Trust");
  void vscode.window
    .showWarningMessage(
      vscode.l10n.t(
        "torchdoctor: Probe model is disabled because this workspace is not trusted. The probe imports and runs the workspace's Python code (your model); trust the folder to use it. Diagnostics, hovers and fixes keep working.",
      ),
      manage,
    )
    .then((choice) => {
      if (choice === manage) {
        void vscode.commands.executeCommand("workbench.trust.manage");
      }
    });
}

/** Middleware guard for server commands: false (and a message) for a probe in Restricted Mode. */
export function guardServerCommand(command: string): boolean {
  if ((command === SERVER_PROBE_COMMAND || command === SERVER_PROBE_DISTRIBUTED_COMMAND) && !probeAllowed()) {
    refuseProbe();
    return false;
  }
  return true;
}
