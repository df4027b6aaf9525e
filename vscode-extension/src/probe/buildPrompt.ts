// *Probe model with arguments…*: asks for the constructor arguments and the precision (the
// input is asked by input.ts). The server checks everything again; here typos are caught early.
import * as vscode from "vscode";
import { type BuildArguments, parseInit } from "./buildArguments";

/** undefined when the user cancelled; `{}`-less (undefined value) when left empty. */
export async function promptForInit(
  className: string,
  current: Record<string, unknown> | undefined,
): Promise<{ value: Record<string, unknown> | undefined } | undefined> {
  const text = await vscode.window.showInputBox({
    title: vscode.l10n.t("Constructor arguments for {0}", className),
    prompt: vscode.l10n.t(
      "Keyword arguments for __init__ as a JSON object, as in the example. A transformers config argument may be an object of its fields. Remembered for this class; leave empty when the defaults do.",
    ),
    placeHolder: '{"num_classes": 5}',
    value: current !== undefined ? JSON.stringify(current) : "",
    ignoreFocusOut: true,
    validateInput: (value) => {
      const parsed = parseInit(value);
      return parsed.ok ? undefined : vscode.l10n.t("Not usable as arguments: {0}", parsed.error);
    },
  });
  if (text === undefined) {
    return undefined;
  }
  const parsed = parseInit(text);
  return parsed.ok ? { value: parsed.value } : undefined;
}

interface PrecisionItem extends vscode.QuickPickItem {
  choice: Pick<BuildArguments, "dtype" | "amp">;
}

export async function promptForPrecision(
  current: BuildArguments | undefined,
): Promise<Pick<BuildArguments, "dtype" | "amp"> | undefined> {
  const items: PrecisionItem[] = [
    { label: vscode.l10n.t("As built"), description: vscode.l10n.t("the model's own dtype"), choice: {} },
    { label: "bfloat16", description: vscode.l10n.t("convert the model"), choice: { dtype: "bfloat16" } },
    { label: "float16", description: vscode.l10n.t("convert the model"), choice: { dtype: "float16" } },
    { label: "float32", description: vscode.l10n.t("convert the model"), choice: { dtype: "float32" } },
    {
      label: vscode.l10n.t("Autocast (amp)"),
      description: vscode.l10n.t("bfloat16 on CPU, float16 with a GradScaler on CUDA"),
      choice: { amp: true },
    },
  ];
  const active = items.find(
    (item) => item.choice.dtype === current?.dtype && (item.choice.amp ?? false) === (current?.amp ?? false),
  );
  const picked = await vscode.window.showQuickPick(items, {
    title: vscode.l10n.t("Precision to probe in"),
    placeHolder: active?.label,
    ignoreFocusOut: true,
  });
  return picked?.choice;
}
