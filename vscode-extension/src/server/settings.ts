// The server's settings, read from VS Code's configuration in the shape the server expects
// (`initializationOptions.settings` and the `torchdoctor` section of workspace/configuration).
import * as vscode from "vscode";

export type Severity = "error" | "warning" | "information" | "hint";

export interface ProbeSettings {
  device: "auto" | "cpu" | "cuda";
  iters: number;
  timeout: number;
  /** MiB of address space a probe may use; null: half the machine's memory; 0: no limit. */
  memoryLimit: number | null;
}

export interface ServerSettings {
  enable: boolean;
  select: string[];
  ignore: string[];
  severity: Record<string, Severity>;
  locale: "auto" | "en" | "zh-CN";
  /** The resolved interpreter (setting, Python extension or python3): the probe and jedi use it. */
  interpreter: string;
  codeLens: boolean;
  inlayHints: boolean;
  hoverSignatures: boolean;
  maxDocumentSize: number;
  probe: ProbeSettings;
}

export const SECTION = "torchdoctor";

/** Settings whose change needs a new server process rather than a didChangeConfiguration. */
export const RESTART_SETTINGS: readonly string[] = ["torchdoctor.interpreter"];

export function readSettings(interpreter: string, resource?: vscode.Uri): ServerSettings {
  const config = vscode.workspace.getConfiguration(SECTION, resource);
  return {
    enable: config.get<boolean>("enable", true),
    select: config.get<string[]>("select", []),
    ignore: config.get<string[]>("ignore", []),
    severity: config.get<Record<string, Severity>>("severity", {}),
    locale: config.get<ServerSettings["locale"]>("locale", "auto"),
    interpreter,
    codeLens: config.get<boolean>("codeLens", true),
    inlayHints: config.get<boolean>("inlayHints", true),
    hoverSignatures: config.get<boolean>("hoverSignatures", true),
    maxDocumentSize: config.get<number>("maxDocumentSize", 2 * 1024 * 1024),
    probe: {
      device: config.get<ProbeSettings["device"]>("probe.device", "auto"),
      iters: config.get<number>("probe.iters", 20),
      timeout: config.get<number>("probe.timeout", 120),
      memoryLimit: config.get<number | null>("probe.memoryLimit", null),
    },
  };
}

