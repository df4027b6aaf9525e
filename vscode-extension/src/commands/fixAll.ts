// "Fix all torchdoctor problems": asks the server to apply every safe fix in the active file
// (it sends the edit back through workspace/applyEdit).
import * as vscode from "vscode";
import { ExecuteCommandRequest } from "vscode-languageclient/node";
import { SERVER_FIX_ALL_COMMAND } from "../server/client";
import type { ServerController } from "../server/controller";

export async function fixAllCommand(server: ServerController, uriArgument?: unknown): Promise<void> {
  const uri = uriArgument instanceof vscode.Uri ? uriArgument : vscode.window.activeTextEditor?.document.uri;
  if (uri === undefined) {
    void vscode.window.showInformationMessage(vscode.l10n.t("Open a Python file to fix its torchdoctor problems."));
    return;
  }
  const client = server.runningClient;
  if (client === undefined) {
    void vscode.window.showErrorMessage(vscode.l10n.t("torchdoctor: the language server is not running."));
    return;
  }
  try {
    await client.sendRequest(ExecuteCommandRequest.type, {
      command: SERVER_FIX_ALL_COMMAND,
      arguments: [uri.toString()],
    });
  } catch (error) {
    void vscode.window.showErrorMessage(
      vscode.l10n.t("torchdoctor: fixing all problems failed: {0}", error instanceof Error ? error.message : String(error)),
    );
  }
}
