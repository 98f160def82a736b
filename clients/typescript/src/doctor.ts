// `magi-code doctor --json`: why `initialize` fails, in words a frontend can show. The
// protocol's errors are code-only (`configuration_invalid`); doctor names the file, the key
// and the fix. Run it when `initialize` answers a startup error code.

import { execFile } from "node:child_process";

/** One problem doctor found. */
export interface DoctorFinding {
  /** `error`: `initialize` would fail on it; `note`: passed over (a skill left out). */
  severity: "error" | "note";
  /** The file it is about, when it is about one. */
  file: string | null;
  /** The setting (a dotted key path such as `mcp.servers.fs`) or variable it is about. */
  key: string | null;
  /** What is wrong. */
  message: string;
  /** What to do, when there is one thing to do. */
  fix: string | null;
}

/** What doctor said: `ready` exactly when it found no error (its exit code 0). */
export interface DoctorReport {
  ready: boolean;
  findings: DoctorFinding[];
}

/** Where and how to run doctor: the same `exe`, `cwd` and `env` as the child it explains. */
export interface DoctorOptions {
  /** The binary (default `magi-code` on the PATH). */
  exe?: string;
  /** The workspace (default: this process's cwd). */
  cwd?: string;
  /** The environment (default: this process's). */
  env?: NodeJS.ProcessEnv;
  /** How long doctor may take, in ms (default 30,000: it starts MCP servers, bounded by 10 s). */
  timeoutMs?: number;
}

const SEVERITIES = new Set(["error", "note"]);

function isFinding(v: unknown): v is DoctorFinding {
  if (typeof v !== "object" || v === null) return false;
  const f = v as Record<string, unknown>;
  const text = (x: unknown) => x === null || typeof x === "string";
  return (
    SEVERITIES.has(f["severity"] as string) &&
    text(f["file"]) &&
    text(f["key"]) &&
    typeof f["message"] === "string" &&
    text(f["fix"])
  );
}

/**
 * Runs `magi-code doctor --json` and parses its findings. Rejects when the binary cannot be
 * run, times out, or prints anything but the documented array.
 */
export function doctor(options: DoctorOptions = {}): Promise<DoctorReport> {
  return new Promise((resolve, reject) => {
    execFile(
      options.exe ?? "magi-code",
      ["doctor", "--json"],
      {
        cwd: options.cwd,
        env: options.env,
        timeout: options.timeoutMs ?? 30_000,
        maxBuffer: 4 * 1024 * 1024,
      },
      (error, stdout) => {
        const code = error === null ? 0 : (error as { code?: unknown }).code;
        if (code !== 0 && code !== 1) {
          reject(new Error(`magi-code doctor did not run: ${error?.message ?? "unknown"}`));
          return;
        }
        let parsed: unknown;
        try {
          parsed = JSON.parse(stdout);
        } catch {
          reject(new Error("magi-code doctor printed no JSON array"));
          return;
        }
        if (!Array.isArray(parsed) || !parsed.every(isFinding)) {
          reject(new Error("magi-code doctor printed an unexpected shape"));
          return;
        }
        resolve({ ready: code === 0, findings: parsed });
      },
    );
  });
}
