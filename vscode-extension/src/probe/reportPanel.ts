// The probe report panel: one webview panel that shows the running probe's progress, then
// its report or error. The webview keeps its own state (setState), and the serializer
// registered in extension.ts hands that state back after a window reload.
import * as vscode from "vscode";
import type { ProbeTarget, ReportViewState, ShowStateMessage, WebviewMessage } from "./messages";
import { reportHtml } from "./reportHtml";
import { viewStrings } from "./viewStrings";

export const REPORT_VIEW_TYPE = "torchdoctor.report";

export interface ReportPanelHandlers {
  cancel(): void;
  rerun(target: ProbeTarget): void;
  changeInput(target: ProbeTarget): void;
}

export class ReportPanel implements vscode.Disposable {
  private panel: vscode.WebviewPanel | undefined;
  private state: ReportViewState = { kind: "idle" };
  private readonly panelListeners: vscode.Disposable[] = [];

  constructor(
    private readonly extensionUri: vscode.Uri,
    private readonly handlers: ReportPanelHandlers,
  ) {}

  get currentState(): ReportViewState {
    return this.state;
  }

  /** Shows `state`, opening the panel beside the editor when it is not open yet. */
  show(state: ReportViewState): void {
    this.state = state;
    if (this.panel === undefined) {
      const panel = vscode.window.createWebviewPanel(
        REPORT_VIEW_TYPE,
        this.title(),
        { viewColumn: vscode.ViewColumn.Beside, preserveFocus: true },
        this.webviewOptions(),
      );
      this.attach(panel);
    } else {
      this.panel.title = this.title();
      this.panel.reveal(undefined, true);
    }
    this.post();
  }

  /** Updates the panel only if it is open (progress messages must not reopen a closed panel). */
  update(state: ReportViewState): void {
    this.state = state;
    if (this.panel !== undefined) {
      this.panel.title = this.title();
      this.post();
    }
  }

  /** Re-attaches a panel that VS Code restored after a reload, with the webview's saved state. */
  restore(panel: vscode.WebviewPanel, saved: unknown): void {
    const state = (saved as { state?: ReportViewState } | undefined)?.state;
    // A probe that was running when the window closed is gone: show it as cancelled.
    if (state?.kind === "running") {
      this.state = { kind: "cancelled", target: state.target };
    } else if (state !== undefined) {
      this.state = state;
    }
    panel.webview.options = this.webviewOptions();
    this.attach(panel);
    this.post();
  }

  dispose(): void {
    this.panel?.dispose();
  }

  private attach(panel: vscode.WebviewPanel): void {
    this.panel?.dispose();
    this.panel = panel;
    panel.title = this.title();
    panel.webview.html = reportHtml(panel.webview, this.extensionUri);
    this.panelListeners.push(
      panel.webview.onDidReceiveMessage((message: WebviewMessage) => {
        this.onMessage(message);
      }),
      panel.onDidDispose(() => {
        if (this.panel === panel) {
          this.panel = undefined;
          for (const listener of this.panelListeners.splice(0)) {
            listener.dispose();
          }
        }
      }),
    );
  }

  private webviewOptions(): vscode.WebviewOptions & vscode.WebviewPanelOptions {
    return {
      enableScripts: true,
      enableCommandUris: false,
      localResourceRoots: [
        vscode.Uri.joinPath(this.extensionUri, "out"),
        vscode.Uri.joinPath(this.extensionUri, "media"),
      ],
    };
  }

  private post(): void {
    const message: ShowStateMessage = { type: "state", state: this.state, strings: viewStrings() };
    void this.panel?.webview.postMessage(message);
  }

  private title(): string {
    const state = this.state;
    if (state.kind === "idle") {
      return vscode.l10n.t("Probe report");
    }
    return vscode.l10n.t("Probe: {0}", state.target.className);
  }

  private onMessage(message: WebviewMessage): void {
    switch (message.type) {
      case "ready":
        this.post();
        break;
      case "cancel":
        this.handlers.cancel();
        break;
      case "rerun":
        this.handlers.rerun(message.target);
        break;
      case "changeInput":
        this.handlers.changeInput(message.target);
        break;
      case "reveal":
        void revealSource(message.file, message.line, message.uri);
        break;
    }
  }
}

/** Opens `file` at the 1-based `line` in the first editor column. */
async function revealSource(file: string, line: number, fallbackUri?: string): Promise<void> {
  const uri = file.includes("://") ? vscode.Uri.parse(file) : file !== "" ? vscode.Uri.file(file) : undefined;
  const target = uri ?? (fallbackUri !== undefined ? vscode.Uri.parse(fallbackUri) : undefined);
  if (target === undefined) {
    return;
  }
  const position = new vscode.Position(Math.max(0, line - 1), 0);
  try {
    await vscode.window.showTextDocument(target, {
      viewColumn: vscode.ViewColumn.One,
      selection: new vscode.Range(position, position),
      preserveFocus: false,
    });
  } catch (error) {
    void vscode.window.showWarningMessage(
      vscode.l10n.t("Cannot open {0}: {1}", target.fsPath, error instanceof Error ? error.message : String(error)),
    );
  }
}
