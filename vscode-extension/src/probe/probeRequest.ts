// Sends `torchdoctor.server.probe` and follows its work-done progress. The request is sent
// with our own workDoneToken (rather than through vscode.commands.executeCommand) so the
// report view can show the server's progress messages and cancel the request.
import { randomUUID } from "node:crypto";
import * as vscode from "vscode";
import {
  ExecuteCommandRequest,
  type LanguageClient,
  ResponseError,
  WorkDoneProgress,
} from "vscode-languageclient/node";
import { SERVER_PROBE_COMMAND } from "../server/client";
import { type BuildArguments, buildPayload } from "./buildArguments";
import type { ProbeReport } from "./reportTypes";

export interface ProbeArguments {
  uri: string;
  className: string;
  input?: string;
  build?: BuildArguments;
  /** Ask the server for the batch-size sweep (doubling batch sizes). */
  batchSweep?: boolean;
}

export interface ProbeProgress {
  message: string;
  percent?: number;
}

export type ProbeOutcome =
  | { kind: "report"; report: ProbeReport }
  | { kind: "error"; message: string }
  | { kind: "cancelled" };

export async function requestProbe(
  client: LanguageClient,
  args: ProbeArguments,
  onProgress: (progress: ProbeProgress) => void,
  token: vscode.CancellationToken,
): Promise<ProbeOutcome> {
  const workDoneToken = randomUUID();
  const progressListener = client.onProgress(WorkDoneProgress.type, workDoneToken, (value) => {
    if (value.kind === "end") {
      return;
    }
    const message = value.message ?? (value.kind === "begin" ? value.title : "");
    onProgress({ message, percent: value.percentage });
  });
  const payload: Record<string, unknown> = {
    uri: args.uri,
    className: args.className,
    ...buildPayload(args.build),
  };
  if (args.input !== undefined && args.input !== "") {
    payload.input = args.input;
  }
  if (args.batchSweep === true) {
    payload.batchSweep = true;
  }
  try {
    const result: unknown = await client.sendRequest(
      ExecuteCommandRequest.type,
      { command: SERVER_PROBE_COMMAND, arguments: [payload], workDoneToken },
      token,
    );
    if (token.isCancellationRequested) {
      return { kind: "cancelled" };
    }
    if (result === null || typeof result !== "object") {
      return { kind: "error", message: vscode.l10n.t("The server returned no probe report.") };
    }
    return { kind: "report", report: result };
  } catch (error) {
    if (token.isCancellationRequested) {
      return { kind: "cancelled" };
    }
    if (error instanceof ResponseError) {
      return { kind: "error", message: error.message };
    }
    return { kind: "error", message: error instanceof Error ? error.message : String(error) };
  } finally {
    progressListener.dispose();
  }
}
