// What the tests share: the real binary (MAGI_CODE_BIN, set by magi-code/tests/stdio/ts_client.rs),
// a fresh MC_HOME and workspace per test, and the guide's own script and settings blocks.
import assert from "node:assert/strict";
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";

const here = dirname(fileURLToPath(import.meta.url));
/** docs/frontend-guide.md of this repository. */
export const GUIDE = join(here, "..", "..", "..", "docs", "frontend-guide.md");

/** The backend binary under test; the tests fail (never skip) without it. */
export function bin() {
  const exe = process.env.MAGI_CODE_BIN;
  assert.ok(exe, "MAGI_CODE_BIN must name the magi-code binary (cargo test sets it)");
  return exe;
}

/** The body of the guide's one fenced block whose info string is `info`. */
export function guideBlock(info) {
  const text = readFileSync(GUIDE, "utf8");
  const blocks = [...text.matchAll(/^```(.+)\n([\s\S]*?)^```$/gm)].filter((m) => m[1] === info);
  assert.equal(blocks.length, 1, `one \`${info}\` block in the guide`);
  return blocks[0][2];
}

/**
 * A temporary root holding MC_HOME (mode 0700) and a workspace, with settings written;
 * `env` is only PATH, HOME and MC_HOME, as the Rust tests give the child.
 */
export function fixture(t, settings) {
  const root = mkdtempSync(join(tmpdir(), "magi-ts-"));
  t.after(() => rmSync(root, { recursive: true, force: true }));
  const home = join(root, "mc-home");
  const cwd = join(root, "work");
  mkdirSync(home, { mode: 0o700 });
  mkdirSync(cwd);
  const env = { PATH: process.env.PATH ?? "/usr/bin:/bin", HOME: root, MC_HOME: home };
  const write = (s) => writeFileSync(join(home, "settings.json"), JSON.stringify(s));
  if (settings !== undefined) write(settings);
  return { root, home, cwd, env, write };
}

/** The guide's scripted setup: its script file and settings, in a fresh fixture. */
export function guideFixture(t) {
  const f = fixture(t);
  const script = join(f.root, "script.json");
  writeFileSync(script, guideBlock("json script"));
  const settings = guideBlock("json settings").replace("<script_path>", script);
  writeFileSync(join(f.home, "settings.json"), settings);
  return f;
}
