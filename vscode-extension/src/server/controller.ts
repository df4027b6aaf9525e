// Owns the language client's lifecycle: resolves and checks the interpreter, starts the
// server, and restarts it when the interpreter or workspace trust changes. Restart requests
// that arrive in a burst (a settings sync, several edits to settings.json) are batched into
// one restart, and restarts never overlap.
import * as vscode from "vscode";
import { DidChangeConfigurationNotification, State, type LanguageClient } from "vscode-languageclient/node";
import { resolveInterpreter, type Interpreter } from "../python/interpreter";
import { checkPython, MINIMUM_PYTHON, type PythonCheck } from "../python/version";
import { createClient } from "./client";
import { readSettings, SECTION } from "./settings";
import type { ServerStatus } from "./status";

const RESTART_BATCH_MS = 400;

export class ServerController implements vscode.Disposable {
  private client: LanguageClient | undefined;
  private interpreter: Interpreter | undefined;
  /** The checked executable the server runs with (sys.executable of the interpreter). */
  private serverPython: string | undefined;
  private queue: Promise<void> = Promise.resolve();
  private restartTimer: NodeJS.Timeout | undefined;
  private pendingReasons: string[] = [];
  private readonly clientStateListeners: { dispose(): void }[] = [];

  constructor(
    private readonly context: vscode.ExtensionContext,
    private readonly output: vscode.LogOutputChannel,
    private readonly status: ServerStatus,
    private readonly guardCommand: (command: string) => boolean,
  ) {}

  /** The running client, or undefined while stopped, starting or failed. */
  get runningClient(): LanguageClient | undefined {
    return this.client?.state === State.Running ? this.client : undefined;
  }

  get currentInterpreter(): Interpreter | undefined {
    return this.interpreter;
  }

  start(): Promise<void> {
    return this.enqueue(() => this.doStart());
  }

  /** Restarts now (the Restart server command). */
  restart(reason: string): Promise<void> {
    this.output.info(`Restarting the server: ${reason}`);
    return this.enqueue(async () => {
      await this.doStop();
      await this.doStart();
    });
  }

  /** Restarts after a short quiet period, folding a burst of requests into one restart. */
  scheduleRestart(reason: string): void {
    this.pendingReasons.push(reason);
    if (this.restartTimer) {
      clearTimeout(this.restartTimer);
    }
    this.restartTimer = setTimeout(() => {
      this.restartTimer = undefined;
      const reasons = [...new Set(this.pendingReasons)].join(", ");
      this.pendingReasons = [];
      void this.restart(reasons);
    }, RESTART_BATCH_MS);
  }

  /**
   * Tells the running server that its settings changed. The server re-reads them with
   * workspace/configuration; the payload carries them too for servers that read it.
   */
  notifyConfigurationChanged(): void {
    const client = this.runningClient;
    if (client === undefined || this.serverPython === undefined) {
      return;
    }
    const settings = readSettings(this.serverPython);
    client.sendNotification(DidChangeConfigurationNotification.type, { settings: { [SECTION]: settings } }).catch(
      (error: unknown) => {
        this.output.warn(`Sending the new settings failed: ${String(error)}`);
      },
    );
  }

  async dispose(): Promise<void> {
    if (this.restartTimer) {
      clearTimeout(this.restartTimer);
    }
    await this.enqueue(() => this.doStop());
  }

  private enqueue(step: () => Promise<void>): Promise<void> {
    const next = this.queue.then(step, step);
    this.queue = next.catch((error: unknown) => {
      this.output.error(`Server lifecycle step failed: ${String(error)}`);
    });
    return this.queue;
  }

  private async doStart(): Promise<void> {
    this.status.setStarting();
    const interpreter = await resolveInterpreter();
    this.interpreter = interpreter;
    this.output.info(`Python interpreter: ${interpreter.command} (from ${describeSource(interpreter)})`);

    const check = await checkPython(interpreter.command);
    if (check.kind !== "ok") {
      this.reportUnusablePython(interpreter, check);
      return;
    }
    this.output.info(`Python ${check.version} at ${check.executable}`);
    this.serverPython = check.executable;

    const client = createClient({
      context: this.context,
      interpreter: check.executable,
      outputChannel: this.output,
      guardCommand: this.guardCommand,
    });
    this.clientStateListeners.push(
      client.onDidChangeState((event) => {
        if (event.newState === State.Running) {
          this.status.setRunning(check.version, check.executable);
        } else if (event.newState === State.Stopped) {
          this.status.setStopped();
        }
      }),
    );
    this.client = client;
    try {
      await client.start();
      this.status.setRunning(check.version, check.executable);
    } catch (error) {
      const message = error instanceof Error ? error.message : String(error);
      this.output.error(`The server did not start: ${message}`);
      this.status.setFailed(vscode.l10n.t("The server did not start"));
      void vscode.window
        .showErrorMessage(
          vscode.l10n.t(
            "torchdoctor: the language server did not start with {0}. See the output for details.",
            check.executable,
          ),
          vscode.l10n.t("Show Output"),
        )
        .then((choice) => {
          if (choice !== undefined) {
            this.output.show();
          }
        });
    }
  }

  private async doStop(): Promise<void> {
    const client = this.client;
    this.client = undefined;
    for (const listener of this.clientStateListeners.splice(0)) {
      listener.dispose();
    }
    if (client === undefined) {
      return;
    }
    try {
      if (client.isRunning()) {
        await client.stop(5_000);
      }
      await client.dispose();
    } catch (error) {
      this.output.warn(`Stopping the server: ${String(error)}`);
    }
    this.status.setStopped();
  }

  private reportUnusablePython(interpreter: Interpreter, check: Exclude<PythonCheck, { kind: "ok" }>): void {
    const minimum = `${MINIMUM_PYTHON[0]}.${MINIMUM_PYTHON[1]}`;
    let message: string;
    switch (check.kind) {
      case "missing":
        message = vscode.l10n.t(
          "torchdoctor needs Python {0} or newer, but \"{1}\" was not found. Install Python, or set \"torchdoctor.interpreter\" to a Python executable.",
          minimum,
          interpreter.command,
        );
        break;
      case "too-old":
        message = vscode.l10n.t(
          "torchdoctor needs Python {0} or newer; {1} is Python {2}. Choose a newer interpreter in \"torchdoctor.interpreter\" or in the Python extension.",
          minimum,
          check.executable,
          check.version,
        );
        break;
      case "broken":
        message = vscode.l10n.t(
          "torchdoctor could not run \"{0}\" to check its Python version: {1}",
          interpreter.command,
          check.detail,
        );
        break;
    }
    this.output.error(message);
    this.status.setFailed(message);
    const openSettings = vscode.l10n.t("Open Settings");
    void vscode.window.showErrorMessage(message, openSettings).then((choice) => {
      if (choice === openSettings) {
        void vscode.commands.executeCommand("workbench.action.openSettings", "torchdoctor.interpreter");
      }
    });
  }
}

function describeSource(interpreter: Interpreter): string {
  switch (interpreter.source) {
    case "setting":
      return "the torchdoctor.interpreter setting";
    case "python-extension":
      return "the Python extension's selected environment";
    case "default":
      return "the default on PATH";
  }
}
