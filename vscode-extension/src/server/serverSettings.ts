// The server's settings in the shape it expects, from any reader of `torchdoctor.*` keys.
// No defaults here: VS Code answers every key with package.json's default (contributes.
// configuration is the one definition), and a key it cannot answer is left out, so the server
// applies its own default, which a Python test keeps equal to package.json's. The TypeScript
// test checks these key names and enums against package.json.

export const LOCALES = ["auto", "en", "zh-CN"] as const;
export const DEVICES = ["auto", "cpu", "cuda"] as const;
export const SEVERITIES = ["error", "warning", "information", "hint"] as const;
export const SHAPE_HINT_SCOPES = ["everyLine", "submodules"] as const;

export type Severity = (typeof SEVERITIES)[number];

export interface ProbeSettings {
  device?: (typeof DEVICES)[number];
  iters?: number;
  timeout?: number;
  /** MiB of address space a probe may use; null: half the machine's memory; 0: no limit. */
  memoryLimit?: number | null;
}

export interface ServerSettings {
  enable?: boolean;
  select?: string[];
  ignore?: string[];
  severity?: Record<string, Severity>;
  locale?: (typeof LOCALES)[number];
  /** The resolved interpreter (setting, Python extension or python3): the probe and jedi use it. */
  interpreter: string;
  codeLens?: boolean;
  inlayHints?: boolean;
  shapeHints?: (typeof SHAPE_HINT_SCOPES)[number];
  hoverSignatures?: boolean;
  maxDocumentSize?: number;
  probe: ProbeSettings;
}

/** Reads one `torchdoctor.<key>` setting; undefined when the key has no value at all. */
// eslint-disable-next-line @typescript-eslint/no-unnecessary-type-parameters -- the caller names the setting's type
export type SettingReader = <T>(key: string) => T | undefined;

/** The `torchdoctor.*` keys that belong to the client alone (the server never sees them). */
export const CLIENT_ONLY_SETTINGS: readonly string[] = ["trace.server"];

export function serverSettings(read: SettingReader, interpreter: string): ServerSettings {
  return {
    enable: read<boolean>("enable"),
    select: read<string[]>("select"),
    ignore: read<string[]>("ignore"),
    severity: read<Record<string, Severity>>("severity"),
    locale: read<ServerSettings["locale"]>("locale"),
    // the setting is only one source of the interpreter: the caller resolves it
    interpreter,
    codeLens: read<boolean>("codeLens"),
    inlayHints: read<boolean>("inlayHints"),
    shapeHints: read<ServerSettings["shapeHints"]>("shapeHints"),
    hoverSignatures: read<boolean>("hoverSignatures"),
    maxDocumentSize: read<number>("maxDocumentSize"),
    probe: {
      device: read<ProbeSettings["device"]>("probe.device"),
      iters: read<number>("probe.iters"),
      timeout: read<number>("probe.timeout"),
      memoryLimit: read<number | null>("probe.memoryLimit"),
    },
  };
}
