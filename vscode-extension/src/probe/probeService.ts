// "Probe model": picks the class to probe, runs the server's probe with the pinned input,
// and routes progress, the report and errors to the report panel, the status item and the
// per-class memory. One probe runs at a time; starting another cancels the first.
import * as path from "node:path";
import * as vscode from "vscode";
import type { ServerController } from "../server/controller";
import { describeProbe, type ServerStatus } from "../server/status";
import { probeAllowed, refuseProbe } from "../trust";
import { describeBuild } from "./buildArguments";
import { promptForInit, promptForPrecision } from "./buildPrompt";
import { promptForInput } from "./input";
import type { ProbeTarget } from "./messages";
import { findModuleClasses, moduleClassAt, type ModuleClass } from "./moduleClasses";
import { requestProbe } from "./probeRequest";
import type { ReportPanel } from "./reportPanel";
import { summarize } from "./reportTypes";
import type { ProbeStore } from "./store";

export class ProbeService implements vscode.Disposable {
  private running: vscode.CancellationTokenSource | undefined;

  constructor(
    private readonly server: ServerController,
    private readonly store: ProbeStore,
    private readonly status: ServerStatus,
    private readonly panel: () => ReportPanel,
    private readonly output: vscode.LogOutputChannel,
  ) {}

  /**
   * The `torchdoctor.probe` command. From the CodeLens it gets `[uri, className]`; from the
   * editor context menu a resource Uri; from the palette nothing (the active editor is used).
   */
  async probeCommand(uriArgument?: unknown, classArgument?: unknown): Promise<void> {
    if (!probeAllowed()) {
      refuseProbe();
      return;
    }
    const target = await this.chooseTarget(uriArgument, classArgument);
    if (target !== undefined) {
      await this.run(target);
    }
  }

  /**
   * `torchdoctor.probeWithInput` ("Probe model with arguments…"): like probeCommand, but asks
   * for (and pins) the constructor arguments, the input and the precision first.
   */
  async probeWithInputCommand(uriArgument?: unknown): Promise<void> {
    if (!probeAllowed()) {
      refuseProbe();
      return;
    }
    const target = await this.chooseTarget(uriArgument, undefined);
    if (target !== undefined) {
      await this.changeInputAndRun(target);
    }
  }

  async changeInputAndRun(target: ProbeTarget): Promise<void> {
    const pinnedBuild = this.store.pinnedBuild(target.uri, target.className);
    const init = await promptForInit(target.className, pinnedBuild?.init);
    if (init === undefined) {
      return;
    }
    const input = await promptForInput(target.className, this.store.pinnedInput(target.uri, target.className));
    if (input === undefined) {
      return;
    }
    const precision = await promptForPrecision(pinnedBuild);
    if (precision === undefined) {
      return;
    }
    const build = { ...(init.value !== undefined ? { init: init.value } : {}), ...precision };
    await this.store.pinBuild(target.uri, target.className, build);
    await this.store.pinInput(target.uri, target.className, input);
    await this.run({ ...target, input: input.trim() === "" ? undefined : input.trim(), build });
  }

  cancel(): void {
    this.running?.cancel();
  }

  showReport(): void {
    const state = this.panel().currentState;
    if (state.kind === "idle") {
      void vscode.window.showInformationMessage(
        vscode.l10n.t("No probe report yet. Run \"torchdoctor: Probe model\" on an nn.Module class first."),
      );
    }
    this.panel().show(state);
  }

  dispose(): void {
    this.running?.cancel();
    this.running?.dispose();
  }

  async run(target: ProbeTarget): Promise<void> {
    if (!probeAllowed()) {
      refuseProbe();
      return;
    }
    const client = this.server.runningClient;
    if (client === undefined) {
      void vscode.window.showErrorMessage(
        vscode.l10n.t("torchdoctor: the language server is not running, so the model cannot be probed."),
      );
      return;
    }
    await saveIfDirty(target.uri);

    this.running?.cancel();
    const cancellation = new vscode.CancellationTokenSource();
    this.running = cancellation;
    const panel = this.panel();
    panel.show({ kind: "running", target, message: "" });
    this.status.setProbing(target.className);
    const built = describeBuild(target.build);
    this.output.info(
      `Probing ${target.className} in ${target.uri}${target.input ? ` with input ${target.input}` : ""}${built ? ` (${built})` : ""}`,
    );

    try {
      const outcome = await vscode.window.withProgress(
        {
          location: vscode.ProgressLocation.Notification,
          title: vscode.l10n.t("Probing {0}", target.className),
          cancellable: true,
        },
        async (progress, notificationToken) => {
          notificationToken.onCancellationRequested(() => {
            cancellation.cancel();
          });
          let reported = 0;
          return requestProbe(
            client,
            {
              uri: target.uri,
              className: target.className,
              input: target.input,
              build: target.build,
              batchSweep: target.batchSweep === true,
            },
            (update) => {
              // The notification wants increments; the panel wants the absolute value.
              const increment = update.percent !== undefined ? Math.max(0, update.percent - reported) : undefined;
              reported = update.percent ?? reported;
              progress.report({ message: update.message, increment });
              if (this.running === cancellation) {
                panel.update({ kind: "running", target, message: update.message, percent: update.percent });
              }
            },
            cancellation.token,
          );
        },
      );
      if (this.running !== cancellation) {
        return; // superseded by a newer probe
      }
      switch (outcome.kind) {
        case "report": {
          const summary = summarize(target.uri, target.className, outcome.report);
          const previous = this.store.lastProbe(target.uri, target.className);
          await this.store.recordProbe(summary);
          this.status.setLastProbe(summary);
          panel.show({ kind: "report", target, report: outcome.report, ...(previous ? { previous } : {}) });
          this.output.info(`Probe finished: ${describeProbe(summary)}`);
          break;
        }
        case "error":
          panel.show({ kind: "error", target, message: outcome.message });
          this.output.warn(`Probe of ${target.className} failed: ${outcome.message}`);
          break;
        case "cancelled":
          panel.update({ kind: "cancelled", target });
          this.output.info(`Probe of ${target.className} cancelled`);
          break;
      }
    } finally {
      if (this.running === cancellation) {
        this.running = undefined;
        this.status.setProbing(undefined);
      }
      cancellation.dispose();
    }
  }

  private async chooseTarget(uriArgument: unknown, classArgument: unknown): Promise<ProbeTarget | undefined> {
    if (typeof uriArgument === "string" && typeof classArgument === "string") {
      return this.target(vscode.Uri.parse(uriArgument), classArgument);
    }
    const editor = vscode.window.activeTextEditor;
    const uri = uriArgument instanceof vscode.Uri ? uriArgument : editor?.document.uri;
    if (uri === undefined) {
      void vscode.window.showInformationMessage(vscode.l10n.t("Open a Python file with an nn.Module class to probe it."));
      return undefined;
    }
    const document =
      editor?.document.uri.toString() === uri.toString() ? editor.document : await vscode.workspace.openTextDocument(uri);
    const text = document.getText();
    const classes = findModuleClasses(text);
    if (classes.length === 0) {
      void vscode.window.showInformationMessage(
        vscode.l10n.t("No nn.Module subclass found in {0}.", path.basename(uri.fsPath)),
      );
      return undefined;
    }
    if (editor !== undefined && editor.document === document) {
      const underCursor = moduleClassAt(text, classes, editor.selection.active.line);
      if (underCursor !== undefined) {
        return this.target(uri, underCursor.name);
      }
    }
    if (classes.length === 1) {
      return this.target(uri, classes[0].name);
    }
    const picked = await this.pickClass(uri, classes);
    return picked === undefined ? undefined : this.target(uri, picked.name);
  }

  private async pickClass(uri: vscode.Uri, classes: ModuleClass[]): Promise<ModuleClass | undefined> {
    const items = classes.map((moduleClass) => {
      const last = this.store.lastProbe(uri.toString(), moduleClass.name);
      const pinned = this.store.pinnedInput(uri.toString(), moduleClass.name);
      return {
        label: moduleClass.name,
        description: vscode.l10n.t("line {0}", moduleClass.line + 1),
        detail: [
          last !== undefined ? describeProbe(last) : vscode.l10n.t("not probed yet"),
          pinned !== undefined ? vscode.l10n.t("input {0}", pinned) : undefined,
          describeBuild(this.store.pinnedBuild(uri.toString(), moduleClass.name)),
        ]
          .filter((part) => part !== undefined)
          .join(" · "),
        moduleClass,
      };
    });
    const choice = await vscode.window.showQuickPick(items, {
      title: vscode.l10n.t("Probe which model?"),
      placeHolder: path.basename(uri.fsPath),
      matchOnDetail: true,
    });
    return choice?.moduleClass;
  }

  private target(uri: vscode.Uri, className: string): ProbeTarget {
    const input = this.store.pinnedInput(uri.toString(), className);
    const build = this.store.pinnedBuild(uri.toString(), className);
    return { uri: uri.toString(), className, fileLabel: path.basename(uri.fsPath), input, build };
  }
}

async function saveIfDirty(uri: string): Promise<void> {
  // The probe runs the file as it is on disk: save first so it probes what the user sees.
  const document = vscode.workspace.textDocuments.find((candidate) => candidate.uri.toString() === uri);
  if (document?.isDirty === true && !document.isUntitled) {
    await document.save();
  }
}
