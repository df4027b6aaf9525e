// What the extension remembers per workspace: the input pinned for each model class and the
// figures of each class's last probe. Kept in workspaceState so they survive reloads.
import type * as vscode from "vscode";
import { type BuildArguments, isEmptyBuild } from "./buildArguments";
import type { ProbeSummary } from "./reportTypes";

const PINNED_INPUTS_KEY = "torchdoctor.pinnedInputs";
const PINNED_BUILDS_KEY = "torchdoctor.pinnedBuilds";
const LAST_PROBES_KEY = "torchdoctor.lastProbes";
const MAX_REMEMBERED = 200;

function classKey(uri: string, className: string): string {
  return `${uri}#${className}`;
}

export class ProbeStore {
  constructor(private readonly state: vscode.Memento) {}

  pinnedInput(uri: string, className: string): string | undefined {
    return this.read<string>(PINNED_INPUTS_KEY)[classKey(uri, className)];
  }

  /** Pins `input` for the class; an empty or undefined input removes the pin. */
  async pinInput(uri: string, className: string, input: string | undefined): Promise<void> {
    const pins = this.read<string>(PINNED_INPUTS_KEY);
    const key = classKey(uri, className);
    if (input === undefined || input.trim() === "") {
      // eslint-disable-next-line @typescript-eslint/no-dynamic-delete -- a string-keyed record
      delete pins[key];
    } else {
      pins[key] = input.trim();
    }
    await this.state.update(PINNED_INPUTS_KEY, pins);
  }

  /** Constructor arguments and precision pinned for the class by "Probe model with arguments…". */
  pinnedBuild(uri: string, className: string): BuildArguments | undefined {
    return this.read<BuildArguments>(PINNED_BUILDS_KEY)[classKey(uri, className)];
  }

  async pinBuild(uri: string, className: string, build: BuildArguments | undefined): Promise<void> {
    const pins = this.read<BuildArguments>(PINNED_BUILDS_KEY);
    const key = classKey(uri, className);
    if (isEmptyBuild(build)) {
      // eslint-disable-next-line @typescript-eslint/no-dynamic-delete -- a string-keyed record
      delete pins[key];
    } else if (build !== undefined) {
      pins[key] = build;
    }
    await this.state.update(PINNED_BUILDS_KEY, pins);
  }

  lastProbe(uri: string, className: string): ProbeSummary | undefined {
    return this.read<ProbeSummary>(LAST_PROBES_KEY)[classKey(uri, className)];
  }

  async recordProbe(summary: ProbeSummary): Promise<void> {
    const probes = this.read<ProbeSummary>(LAST_PROBES_KEY);
    probes[classKey(summary.uri, summary.className)] = summary;
    // Keep the newest entries only, so the memento does not grow without bound.
    const newest = Object.entries(probes)
      .sort(([, a], [, b]) => b.finishedAt - a.finishedAt)
      .slice(0, MAX_REMEMBERED);
    await this.state.update(LAST_PROBES_KEY, Object.fromEntries(newest));
  }

  private read<T>(key: string): Record<string, T> {
    return { ...this.state.get<Record<string, T>>(key, {}) };
  }
}
