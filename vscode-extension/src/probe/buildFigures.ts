// How the probed model was built and at which precision, as short text for the report view's
// summary cards. No vscode API: the webview imports this file.
import type { ProbeReport } from "./reportTypes";

/** `num_classes=5, config=GPT2Config(n_layer=2)`; undefined when __init__ got nothing. */
export function constructionText(report: ProbeReport): string | undefined {
  const built = report.construction ?? undefined;
  const entries = Object.entries(built?.arguments ?? {});
  if (entries.length > 0) {
    return entries.map(([name, text]) => `${name}=${text}`).join(", ");
  }
  return built?.method === "factory" || built?.method === "example_model" ? built.detail : undefined;
}

/** `bfloat16 · autocast bfloat16 · channels_last`; undefined for a float32 contiguous probe. */
export function precisionText(report: ProbeReport): string | undefined {
  const precision = report.precision ?? undefined;
  if (precision === undefined) {
    return undefined;
  }
  const parts: string[] = [];
  if (precision.dtype !== undefined && precision.dtype !== null) {
    parts.push(precision.dtype);
  }
  if (precision.amp !== undefined && precision.amp !== null) {
    parts.push(`autocast ${precision.amp}${precision.grad_scaler === true ? " + GradScaler" : ""}`);
  }
  if (precision.memory_format === "channels_last") {
    parts.push("channels_last");
  }
  const plain = parts.length === 1 && parts[0] === "float32";
  return parts.length === 0 || plain ? undefined : parts.join(" · ");
}
