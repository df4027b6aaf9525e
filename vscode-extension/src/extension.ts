// Entry point: wires the server controller, the probe, the report view and the commands,
// and decides what triggers a server restart.
import * as vscode from "vscode";
import { fixAllCommand } from "./commands/fixAll";
import { onActiveEnvironmentChanged } from "./python/interpreter";
import { registerDistributedProbe } from "./probe/distributedProbe";
import { ProbeService } from "./probe/probeService";
import { REPORT_VIEW_TYPE, ReportPanel } from "./probe/reportPanel";
import { ProbeStore } from "./probe/store";
import { ServerController } from "./server/controller";
import { RESTART_SETTINGS, SECTION } from "./server/settings";
import { ServerStatus } from "./server/status";
import { guardServerCommand } from "./trust";

let controller: ServerController | undefined;

export async function activate(context: vscode.ExtensionContext): Promise<void> {
  const output = vscode.window.createOutputChannel("torchdoctor", { log: true });
  const status = new ServerStatus();
  const store = new ProbeStore(context.workspaceState);
  const server = new ServerController(context, output, status, guardServerCommand);
  controller = server;

  // The panel and the service refer to each other (cancel/rerun buttons → service →
  // panel updates); the lazy getter breaks the construction cycle.
  let panel: ReportPanel | undefined;
  const probes = new ProbeService(server, store, status, () => reportPanel(), output);
  const reportPanel = (): ReportPanel => {
    panel ??= new ReportPanel(context.extensionUri, {
      cancel: () => {
        probes.cancel();
      },
      rerun: (target) => void probes.run({ ...target, input: store.pinnedInput(target.uri, target.className) }),
      changeInput: (target) => void probes.changeInputAndRun(target),
    });
    return panel;
  };

  context.subscriptions.push(
    output,
    status,
    probes,
    { dispose: () => panel?.dispose() },
    vscode.commands.registerCommand("torchdoctor.probe", (uri?: unknown, className?: unknown) =>
      probes.probeCommand(uri, className),
    ),
    vscode.commands.registerCommand("torchdoctor.probeWithInput", (uri?: unknown) => probes.probeWithInputCommand(uri)),
    registerDistributedProbe(context, server, output),
    vscode.commands.registerCommand("torchdoctor.showReport", () => {
      probes.showReport();
    }),
    vscode.commands.registerCommand("torchdoctor.fixAll", (uri?: unknown) => fixAllCommand(server, uri)),
    vscode.commands.registerCommand("torchdoctor.restart", () => server.restart("requested by the user")),
    vscode.commands.registerCommand("torchdoctor.showOutput", () => {
      output.show();
    }),
    vscode.window.registerWebviewPanelSerializer(REPORT_VIEW_TYPE, {
      deserializeWebviewPanel: (webviewPanel, state: unknown) => {
        reportPanel().restore(webviewPanel, state);
        return Promise.resolve();
      },
    }),
    vscode.workspace.onDidChangeConfiguration((event) => {
      // Other torchdoctor settings reach the running server via didChangeConfiguration
      // (the client's configuration sync); only a different interpreter needs a new process.
      if (RESTART_SETTINGS.some((setting) => event.affectsConfiguration(setting))) {
        server.scheduleRestart("interpreter setting changed");
      } else if (event.affectsConfiguration(SECTION)) {
        server.notifyConfigurationChanged();
      }
    }),
    // Trusting the folder makes workspace-level settings (the interpreter) take effect.
    vscode.workspace.onDidGrantWorkspaceTrust(() => {
      server.scheduleRestart("workspace trusted");
    }),
  );

  const environmentListener = await onActiveEnvironmentChanged(() => {
    server.scheduleRestart("Python environment changed");
  });
  if (environmentListener !== undefined) {
    context.subscriptions.push(environmentListener);
  }

  await server.start();
}

export async function deactivate(): Promise<void> {
  await controller?.dispose();
  controller = undefined;
}
