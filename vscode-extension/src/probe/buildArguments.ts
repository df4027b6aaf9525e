// How the model is built and at which precision, as the editor pins it per class: constructor
// keyword arguments (a JSON object), the model dtype, autocast. No vscode API here: the report
// view's types import this file too.

export interface BuildArguments {
  /** Keyword arguments for the class's __init__. */
  init?: Record<string, unknown>;
  /** "bfloat16", "float16" or "float32": the model is converted to it. */
  dtype?: string;
  /** Run forward under torch.autocast (bfloat16 on CPU, float16 on CUDA). */
  amp?: boolean;
}

export type InitParse = { ok: true; value: Record<string, unknown> | undefined } | { ok: false; error: string };

/** An empty text means no arguments; otherwise a JSON object whose keys are argument names. */
export function parseInit(text: string): InitParse {
  const trimmed = text.trim();
  if (trimmed === "") {
    return { ok: true, value: undefined };
  }
  let value: unknown;
  try {
    value = JSON.parse(trimmed);
  } catch (error) {
    return { ok: false, error: error instanceof Error ? error.message : String(error) };
  }
  if (value === null || typeof value !== "object" || Array.isArray(value)) {
    return { ok: false, error: 'a JSON object of keyword arguments, e.g. {"num_classes": 5}' };
  }
  const record = value as Record<string, unknown>;
  const bad = Object.keys(record).filter((key) => !/^[A-Za-z_][A-Za-z0-9_]*$/.test(key));
  if (bad.length > 0) {
    return { ok: false, error: `not argument names: ${bad.join(", ")}` };
  }
  return { ok: true, value: record };
}

/** The fields `torchdoctor.server.probe` reads besides uri, className and input. */
export function buildPayload(build: BuildArguments | undefined): Record<string, unknown> {
  const payload: Record<string, unknown> = {};
  if (build?.init !== undefined && Object.keys(build.init).length > 0) {
    payload.init = build.init;
  }
  if (build?.dtype !== undefined && build.dtype !== "") {
    payload.dtype = build.dtype;
  }
  if (build?.amp === true) {
    payload.amp = true;
  }
  return payload;
}

/** Short text for logs and the class picker: `num_classes=5, hidden=64 · bfloat16 · amp`. */
export function describeBuild(build: BuildArguments | undefined): string | undefined {
  const parts: string[] = [];
  if (build?.init !== undefined && Object.keys(build.init).length > 0) {
    parts.push(
      Object.entries(build.init)
        .map(([name, value]) => `${name}=${JSON.stringify(value)}`)
        .join(", "),
    );
  }
  if (build?.dtype !== undefined && build.dtype !== "") {
    parts.push(build.dtype);
  }
  if (build?.amp === true) {
    parts.push("amp");
  }
  return parts.length > 0 ? parts.join(" · ") : undefined;
}

export function isEmptyBuild(build: BuildArguments | undefined): boolean {
  return Object.keys(buildPayload(build)).length === 0;
}
