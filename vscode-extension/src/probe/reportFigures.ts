// Picks and words the report's figures for the report view. Pure functions over the report
// (no DOM, no vscode), shared by the webview and the unit tests; localized words stay in the
// view, which passes them in where a sentence needs them.
import { formatMs, formatShape } from "./format";
import type { ProbeInput, ProbeLine, ProbeModuleRow, ProbeTimingStats } from "./reportTypes";

/** A number that can be shown: not missing, not null, not NaN. */
export function finite(value: unknown): value is number {
  return typeof value === "number" && Number.isFinite(value);
}

/** A timing's median, e.g. "16.9 ms". */
export function medianText(stats: ProbeTimingStats | null | undefined): string | undefined {
  return finite(stats?.median_ms) ? formatMs(stats.median_ms) : undefined;
}

/** A timing's spread (interquartile range), e.g. "4.44 ms". */
export function spreadText(stats: ProbeTimingStats | null | undefined): string | undefined {
  return finite(stats?.iqr_ms) ? formatMs(stats.iqr_ms) : undefined;
}

/**
 * The input as the user would pin it: the server's --input spec "(8, 784)", or, when the
 * input is not plain positional tensors, each tensor: "kwargs['mask'] (8, 16) bool".
 */
export function inputText(input: ProbeInput | undefined): string | undefined {
  if (typeof input?.spec === "string" && input.spec !== "") {
    return input.spec;
  }
  const tensors = (input?.tensors ?? []).map((tensor) =>
    [tensor.path, formatShape(tensor.shape), tensor.dtype].filter((part) => part !== undefined && part !== "").join(" "),
  );
  return tensors.length > 0 ? tensors.join("; ") : undefined;
}

/** The row's own name in the module tree: "conv1" for "encoder.conv1" (the tree gives the rest). */
export function moduleShortName(row: ProbeModuleRow): string {
  const name = row.name ?? "";
  return name.slice(name.lastIndexOf(".") + 1);
}

/**
 * The modules where forward time is actually spent. Module times are inclusive, so a
 * container's bar would repeat its children's: keep the timed modules none of whose
 * descendants are timed. A module with an untimed child (MultiheadAttention's out_proj,
 * which its forward does not call as a module) still counts as innermost.
 */
export function innermostTimedModules(modules: readonly ProbeModuleRow[]): ProbeModuleRow[] {
  const timed = modules.filter((row) => finite(row.forward_ms) && typeof row.name === "string");
  return timed.filter((row) => {
    const name = row.name ?? "";
    const prefix = name === "" ? "" : `${name}.`;
    return !timed.some((other) => other !== row && other.name !== name && (other.name ?? "").startsWith(prefix));
  });
}

/** "train.py:24": the line's file name (not its path) and line. */
export function lineLocation(line: { file?: string | null; line?: number | null }): string {
  return `${baseName(line.file ?? "")}:${finite(line.line) ? String(line.line) : "?"}`;
}

/** Lines with a place to go to: the chart links each bar to its source line. */
export function locatedLines(lines: readonly ProbeLine[]): ProbeLine[] {
  return lines.filter((line) => typeof line.file === "string" && line.file !== "" && finite(line.line));
}

/** "DDP", "FSDP (SHARD_GRAD_OP)", "FSDP (FULL_SHARD)": the strategy as PyTorch names it. */
export function strategyLabel(strategy: string): string {
  const match = /^fsdp_(.+)$/.exec(strategy);
  if (match?.[1] !== undefined) {
    return `FSDP (${match[1].toUpperCase()})`;
  }
  return strategy.toUpperCase();
}

export function baseName(file: string): string {
  return file.split(/[\\/]/).pop() ?? file;
}
