// The language status item next to "Python" in the status bar: server state, interpreter,
// and the figures of the last probe.
import * as vscode from "vscode";
import type { ProbeSummary } from "../probe/reportTypes";
import { formatBytes, formatCount, formatMs } from "../probe/format";

export class ServerStatus implements vscode.Disposable {
  private readonly item: vscode.LanguageStatusItem;
  private serverText = "";
  private lastProbe: ProbeSummary | undefined;
  private probing: string | undefined;

  constructor() {
    this.item = vscode.languages.createLanguageStatusItem("torchdoctor.status", [
      { language: "python" },
    ]);
    this.item.name = "torchdoctor";
    this.item.command = { title: vscode.l10n.t("Show Output"), command: "torchdoctor.showOutput" };
    this.setStopped();
  }

  setStarting(): void {
    this.item.busy = true;
    this.item.severity = vscode.LanguageStatusSeverity.Information;
    this.serverText = vscode.l10n.t("torchdoctor: starting");
    this.item.detail = undefined;
    this.render();
  }

  setRunning(pythonVersion: string, executable: string): void {
    this.item.busy = false;
    this.item.severity = vscode.LanguageStatusSeverity.Information;
    this.serverText = vscode.l10n.t("torchdoctor: Python {0}", pythonVersion);
    this.item.detail = executable;
    this.render();
  }

  setStopped(): void {
    this.item.busy = false;
    this.item.severity = vscode.LanguageStatusSeverity.Warning;
    this.serverText = vscode.l10n.t("torchdoctor: stopped");
    this.render();
  }

  setFailed(reason: string): void {
    this.item.busy = false;
    this.item.severity = vscode.LanguageStatusSeverity.Error;
    this.serverText = vscode.l10n.t("torchdoctor: not running");
    this.item.detail = reason;
    this.render();
  }

  setProbing(className: string | undefined): void {
    this.probing = className;
    this.render();
  }

  setLastProbe(summary: ProbeSummary): void {
    this.lastProbe = summary;
    this.render();
  }

  dispose(): void {
    this.item.dispose();
  }

  private render(): void {
    const parts = [this.serverText];
    if (this.probing !== undefined) {
      parts.push(vscode.l10n.t("probing {0}…", this.probing));
    } else if (this.lastProbe !== undefined) {
      parts.push(describeProbe(this.lastProbe));
    }
    this.item.text = parts.join(" · ");
  }
}

/** "Net: 1.2 M params, 3.4 ms, 120 MB" — shared by the status item and the quick pick. */
export function describeProbe(summary: ProbeSummary): string {
  const figures: string[] = [];
  if (summary.paramsTotal !== undefined) {
    figures.push(vscode.l10n.t("{0} params", formatCount(summary.paramsTotal)));
  }
  if (summary.forwardMs !== undefined) {
    figures.push(formatMs(summary.forwardMs));
  }
  if (summary.peakMemoryBytes !== undefined) {
    figures.push(formatBytes(summary.peakMemoryBytes));
  }
  return `${summary.className}: ${figures.join(", ")}`;
}
