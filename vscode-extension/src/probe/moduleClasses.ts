// Finds the nn.Module subclasses of a Python file from its text, so "Probe model" can pick
// the class under the cursor or offer a list without a round trip to the server. A regex
// over class headers is enough here: the server, which parses the file properly, decides
// what is probeable when the probe runs.

export interface ModuleClass {
  name: string;
  /** 0-based line of the `class` keyword. */
  line: number;
  indent: number;
}

const CLASS_HEADER = /^([ \t]*)class[ \t]+([A-Za-z_]\w*)[ \t]*\(([^)]*)\)?/;
/** Bases that make a class a torch module: nn.Module, torch.nn.Module, Module, LightningModule… */
const MODULE_BASE = /(^|[.\s])(Module|LightningModule|Sequential|ModuleList|ModuleDict)\s*$/;

export function findModuleClasses(text: string): ModuleClass[] {
  const lines = text.split(/\r?\n/);
  const candidates: (ModuleClass & { bases: string[] })[] = [];
  lines.forEach((lineText, line) => {
    const match = CLASS_HEADER.exec(lineText);
    if (!match) {
      return;
    }
    const [, indent = "", name = "", baseText = ""] = match;
    const bases = baseText
      .split(",")
      .map((base) => base.trim())
      .filter((base) => base !== "" && !base.includes("="));
    candidates.push({ name, line, indent: indent.length, bases });
  });
  // A class deriving from another module class of the same file is a module too.
  const moduleNames = new Set<string>();
  let changed = true;
  while (changed) {
    changed = false;
    for (const candidate of candidates) {
      if (moduleNames.has(candidate.name)) {
        continue;
      }
      if (candidate.bases.some((base) => MODULE_BASE.test(base) || moduleNames.has(base))) {
        moduleNames.add(candidate.name);
        changed = true;
      }
    }
  }
  return candidates
    .filter((candidate) => moduleNames.has(candidate.name))
    .map(({ name, line, indent }) => ({ name, line, indent }));
}

/**
 * The innermost module class whose body contains `line`: the nearest class header at or
 * above it such that every non-blank line in between is indented deeper than the header.
 */
export function moduleClassAt(text: string, classes: ModuleClass[], line: number): ModuleClass | undefined {
  const lines = text.split(/\r?\n/);
  let best: ModuleClass | undefined;
  for (const candidate of classes) {
    if (candidate.line > line) {
      continue;
    }
    let inside = true;
    for (let current = candidate.line + 1; current <= line; current++) {
      const content = lines[current] ?? "";
      if (content.trim() === "" || content.trimStart().startsWith("#")) {
        continue;
      }
      const indent = content.length - content.trimStart().length;
      if (indent <= candidate.indent) {
        inside = false;
        break;
      }
    }
    if (inside && (best === undefined || candidate.line > best.line)) {
      best = candidate;
    }
  }
  return best;
}
