// Asks for the example input of a probe, e.g. "(8, 3, 224, 224)" or "[(8, 128), (8, 128)]".
// The server owns the grammar; here we only catch obvious typos before a probe is started.
import * as vscode from "vscode";

export async function promptForInput(className: string, current: string | undefined): Promise<string | undefined> {
  return vscode.window.showInputBox({
    title: vscode.l10n.t("Example input for {0}", className),
    prompt: vscode.l10n.t(
      "Input shape(s) to call the model with, e.g. (8, 3, 224, 224). It is remembered for this class. Leave empty to let torchdoctor infer it.",
    ),
    placeHolder: "(8, 3, 224, 224)",
    value: current ?? "",
    ignoreFocusOut: true,
    validateInput: (value) => validateInput(value),
  });
}

export function validateInput(value: string): string | undefined {
  const text = value.trim();
  if (text === "") {
    return undefined;
  }
  let depth = 0;
  for (const char of text) {
    if (char === "(" || char === "[") {
      depth += 1;
    } else if (char === ")" || char === "]") {
      depth -= 1;
      if (depth < 0) {
        break;
      }
    }
  }
  if (depth !== 0) {
    return vscode.l10n.t("Brackets do not balance.");
  }
  if (!/\d/.test(text)) {
    return vscode.l10n.t("Give at least one dimension, e.g. (8, 3, 224, 224).");
  }
  return undefined;
}
