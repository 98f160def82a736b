// The package as another project gets it: `npm pack` of the built package, the
// tarball installed into a fresh folder outside this repository with no network, then a
// program there importing `@magi-code/client` by name: `doctor` on a broken and a sound
// setup, and a turn through the real binary.
import assert from "node:assert/strict";
import { execFile } from "node:child_process";
import { mkdirSync, mkdtempSync, readdirSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { test } from "node:test";
import { fileURLToPath } from "node:url";
import { promisify } from "node:util";
import { bin, fixture } from "./env.mjs";

const run = promisify(execFile);
const pkg = join(dirname(fileURLToPath(import.meta.url)), "..");

/** What the consumer's program does, printed as one JSON line. */
const PROGRAM = `
import { MagiClient, doctor } from "@magi-code/client";
const [exe, cwd, home, badHome] = process.argv.slice(2);
const env = { PATH: process.env.PATH, HOME: home, MC_HOME: home };
const bad = await doctor({ exe, cwd, env: { ...env, MC_HOME: badHome } });
const good = await doctor({ exe, cwd, env });
const c = await MagiClient.spawn({ exe, cwd, env });
await c.initialize(["session.create", "turn.start", "shutdown"]);
const s = await c.call("session.create", {});
const turn = await c.startTurn(s.session_id, "hello from a packed client");
const done = await c.runTurn(turn, {});
const exit = await c.shutdown(5000);
console.log(JSON.stringify({ bad, good, outcome: done.outcome, text: turn.text, exit }));
`;

test("npm pack gives a package another project installs and uses by name", async (t) => {
  const out = mkdtempSync(join(tmpdir(), "magi-pack-"));
  t.after(() => rmSync(out, { recursive: true, force: true }));
  // `--ignore-scripts`: dist/ is built already (`npm run build` runs before `npm test`), and
  // a `prepack` rebuild would remove dist/ under the other test files running beside this one.
  const { stdout } = await run("npm", ["pack", "--silent", "--ignore-scripts", "--pack-destination", out], {
    cwd: pkg,
    maxBuffer: 16 * 1024 * 1024,
  });
  const tarball = join(out, stdout.trim().split("\n").pop());
  assert.ok(readdirSync(out).includes("magi-code-client-0.1.0.tgz"), stdout);

  // What the tarball holds: the built package, its README, no sources, tests or scripts.
  const { stdout: listing } = await run("tar", ["-tzf", tarball]);
  const files = listing.trim().split("\n").sort();
  assert.ok(files.includes("package/dist/index.js"), listing);
  assert.ok(files.includes("package/dist/index.d.ts"), listing);
  assert.ok(files.includes("package/dist/protocol.d.ts"), listing);
  assert.ok(files.includes("package/dist/doctor.js"), listing);
  assert.ok(files.includes("package/README.md"), listing);
  assert.ok(files.includes("package/package.json"), listing);
  for (const f of files) {
    assert.ok(/^package\/(dist\/[^/]+\.(js|d\.ts)|README\.md|package\.json)$/.test(f), f);
  }

  // A fresh project, outside the repository, installing the tarball offline.
  const app = join(out, "app");
  mkdirSync(app);
  writeFileSync(
    join(app, "package.json"),
    JSON.stringify({ name: "consumer", private: true, type: "module" }),
  );
  await run("npm", ["install", "--offline", "--no-audit", "--no-fund", "--silent", tarball], {
    cwd: app,
  });
  writeFileSync(join(app, "main.mjs"), PROGRAM);

  const f = fixture(t, { provider: "scripted", model: "echo" });
  const broken = fixture(t, { tols: {} });
  const { stdout: result } = await run(
    process.execPath,
    ["main.mjs", bin(), f.cwd, f.home, broken.home],
    { cwd: app },
  );
  const r = JSON.parse(result);
  assert.equal(r.bad.ready, false);
  assert.deepEqual(r.bad.findings, [
    {
      severity: "error",
      file: join(broken.home, "settings.json"),
      key: "tols",
      message: 'unknown key "tols"',
      fix: 'did you mean "tools"?',
    },
  ]);
  assert.deepEqual(r.good, { ready: true, findings: [] });
  assert.equal(r.outcome, "completed");
  assert.equal(r.text, "hello from a packed client");
  assert.equal(r.exit, 0);
});
