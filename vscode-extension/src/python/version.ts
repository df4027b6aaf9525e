// Checks that an interpreter exists and is new enough before the server is started with it,
// so the user reads "Python 3.8 is too old" instead of a crashed server's traceback.
import { execFile } from "node:child_process";

export const MINIMUM_PYTHON: readonly [number, number] = [3, 10];

export type PythonCheck =
  | { kind: "ok"; version: string; executable: string }
  | { kind: "missing"; detail: string }
  | { kind: "too-old"; version: string; executable: string }
  | { kind: "broken"; detail: string };

const PROBE_SCRIPT = "import sys; print('%d.%d.%d' % sys.version_info[:3]); print(sys.executable)";
const CHECK_TIMEOUT_MS = 20_000;

export function checkPython(command: string): Promise<PythonCheck> {
  return new Promise((resolve) => {
    execFile(
      command,
      ["-I", "-c", PROBE_SCRIPT],
      { timeout: CHECK_TIMEOUT_MS, windowsHide: true },
      (error, stdout, stderr) => {
        if (error) {
          const code = (error as NodeJS.ErrnoException).code;
          if (code === "ENOENT" || code === "EACCES") {
            resolve({ kind: "missing", detail: error.message });
          } else {
            resolve({ kind: "broken", detail: (stderr || error.message).trim() });
          }
          return;
        }
        const [version = "", executable = command] = stdout.trim().split(/\r?\n/);
        const parts = version.split(".").map(Number);
        const major = parts[0] ?? 0;
        const minor = parts[1] ?? 0;
        if (!/^\d+\.\d+\.\d+$/.test(version)) {
          resolve({ kind: "broken", detail: `unexpected version output: ${stdout.trim()}` });
        } else if (major < MINIMUM_PYTHON[0] || (major === MINIMUM_PYTHON[0] && minor < MINIMUM_PYTHON[1])) {
          resolve({ kind: "too-old", version, executable });
        } else {
          resolve({ kind: "ok", version, executable });
        }
      },
    );
  });
}
