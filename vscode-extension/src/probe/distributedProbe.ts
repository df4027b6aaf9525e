// "torchdoctor: Probe with 2 ranks (DDP/FSDP)": runs the server's distributed probe on the
// nn.Module class under the cursor (or the one picked), with progress and cancel in a
// notification, and shows the strategies side by side in a panel of their own.
import { randomUUID } from "node:crypto";
import * as path from "node:path";
import * as vscode from "vscode";
import { ExecuteCommandRequest, ResponseError, WorkDoneProgress } from "vscode-languageclient/node";
import { SERVER_PROBE_DISTRIBUTED_COMMAND } from "../server/client";
import type { ServerController } from "../server/controller";
import { probeAllowed, refuseProbe } from "../trust";
import { type DistributedInfo, type DistributedLabels, distributedPage } from "./distributedView";
import { findModuleClasses, moduleClassAt } from "./moduleClasses";

export const DISTRIBUTED_VIEW_TYPE = "torchdoctor.distributed";
const RANKS = 2;

function labels(): DistributedLabels {
  return {
    title: vscode.l10n.t("Distributed probe"),
    perRank: vscode.l10n.t("per rank"),
    step: vscode.l10n.t("step (slowest rank, median)"),
    commShare: vscode.l10n.t("communication share"),
    bytesPerStep: vscode.l10n.t("bytes communicated / step"),
    peakMemory: vscode.l10n.t("peak memory"),
    parameters: vscode.l10n.t("parameters"),
    gradients: vscode.l10n.t("gradients"),
    optimizerState: vscode.l10n.t("optimizer state"),
    incomplete: vscode.l10n.t("incomplete"),
    ranksNotFinished: vscode.l10n.t("Ranks that did not finish"),
    findings: vscode.l10n.t("Findings"),
    recommendation: vscode.l10n.t("Measured choice"),
    estimate: vscode.l10n.t("Estimate (extrapolated, not measured)"),
  };
}

async function chooseClass(): Promise<{ uri: vscode.Uri; className: string } | undefined> {
  const editor = vscode.window.activeTextEditor;
  if (editor === undefined) {
    void vscode.window.showInformationMessage(vscode.l10n.t("Open a Python file with an nn.Module class to probe it."));
    return undefined;
  }
  const text = editor.document.getText();
  const classes = findModuleClasses(text);
  if (classes.length === 0) {
    void vscode.window.showInformationMessage(
      vscode.l10n.t("No nn.Module subclass found in {0}.", path.basename(editor.document.uri.fsPath)),
    );
    return undefined;
  }
  const underCursor = moduleClassAt(text, classes, editor.selection.active.line);
  const name =
    underCursor?.name ??
    (classes.length === 1
      ? classes[0].name
      : await vscode.window.showQuickPick(
          classes.map((c) => c.name),
          { title: vscode.l10n.t("Probe which model?") },
        ));
  return name === undefined ? undefined : { uri: editor.document.uri, className: name };
}

export function registerDistributedProbe(
  context: vscode.ExtensionContext,
  server: ServerController,
  output: vscode.LogOutputChannel,
): vscode.Disposable {
  return vscode.commands.registerCommand("torchdoctor.probeDistributed", async () => {
    if (!probeAllowed()) {
      refuseProbe();
      return;
    }
    const client = server.runningClient;
    if (client === undefined) {
      void vscode.window.showErrorMessage(
        vscode.l10n.t("torchdoctor: the language server is not running, so the model cannot be probed."),
      );
      return;
    }
    const target = await chooseClass();
    if (target === undefined) {
      return;
    }
    const document = vscode.workspace.textDocuments.find((d) => d.uri.toString() === target.uri.toString());
    if (document?.isDirty === true && !document.isUntitled) {
      await document.save();
    }
    output.info(`Probing ${target.className} on ${RANKS} ranks (DDP and FSDP)`);
    const workDoneToken = randomUUID();
    try {
      const info = await vscode.window.withProgress(
        {
          location: vscode.ProgressLocation.Notification,
          title: vscode.l10n.t("Probing {0} on {1} ranks", target.className, RANKS),
          cancellable: true,
        },
        async (progress, token) => {
          const listener = client.onProgress(WorkDoneProgress.type, workDoneToken, (value) => {
            if (value.kind !== "end") {
              progress.report({ message: value.message ?? "" });
            }
          });
          try {
            const payload = { uri: target.uri.toString(), className: target.className, nproc: RANKS, strategy: "both" };
            return (await client.sendRequest(
              ExecuteCommandRequest.type,
              { command: SERVER_PROBE_DISTRIBUTED_COMMAND, arguments: [payload], workDoneToken },
              token,
            )) as DistributedInfo | null;
          } catch (error) {
            if (token.isCancellationRequested) {
              return null; // cancelled from the notification: every rank was killed, nothing to show
            }
            throw error;
          } finally {
            listener.dispose();
          }
        },
      );
      if (info === null || typeof info !== "object") {
        return;
      }
      const panel = vscode.window.createWebviewPanel(
        DISTRIBUTED_VIEW_TYPE,
        vscode.l10n.t("{0} on {1} ranks", target.className, info.nproc),
        { viewColumn: vscode.ViewColumn.Beside, preserveFocus: true },
        { enableScripts: false, localResourceRoots: [vscode.Uri.joinPath(context.extensionUri, "media")] },
      );
      const style = panel.webview.asWebviewUri(vscode.Uri.joinPath(context.extensionUri, "media", "report.css"));
      panel.webview.html = distributedPage(info, labels(), panel.webview.cspSource, style.toString());
    } catch (error) {
      const message = error instanceof ResponseError || error instanceof Error ? error.message : String(error);
      output.warn(`Distributed probe of ${target.className} failed: ${message}`);
      void vscode.window.showErrorMessage(vscode.l10n.t("torchdoctor: the distributed probe failed: {0}", message));
    }
  });
}
