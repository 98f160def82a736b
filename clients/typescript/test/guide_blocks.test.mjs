// The guide's Node blocks run as printed (docs/frontend-guide.md, "Node / TypeScript"): the
// plain-Node FIFO recipe, and the client example run as a program with `magi-code` on the PATH.
import assert from "node:assert/strict";
import { execFile } from "node:child_process";
import { once } from "node:events";
import { readFileSync, rmSync, writeFileSync } from "node:fs";
import { dirname, join } from "node:path";
import { test } from "node:test";
import { fileURLToPath, pathToFileURL } from "node:url";
import { promisify } from "node:util";
import { bin, fixture, guideBlock, guideFixture } from "./env.mjs";

const pkg = join(dirname(fileURLToPath(import.meta.url)), "..");

/** Writes `text` as a module inside the package (so `@magi-code/client` resolves to itself). */
function module(t, name, text) {
  const path = join(pkg, "dist", name);
  writeFileSync(path, text);
  t.after(() => rmSync(path, { force: true }));
  return path;
}

test("the guide's FIFO recipe: the child takes the pipes, EOF ends it with 0, its exit ends ours", async (t) => {
  const f = fixture(t, { provider: "scripted", model: "echo" });
  const { spawnServe } = await import(pathToFileURL(module(t, "fifo-recipe.mjs", guideBlock("js fifo-recipe"))).href);
  const { child, input, output } = spawnServe(bin(), { cwd: f.cwd, env: f.env });
  let out = "";
  output.on("data", (d) => {
    out += d;
    if (out.endsWith("\n")) input.end();
  });
  const ended = once(output, "end");
  input.write(`${JSON.stringify({
    protocol: "magi-code.local-agent", version: 1, id: "init", method: "initialize",
    params: { required_capabilities: ["status"] },
  })}\n`);
  const [code] = await once(child, "exit");
  await ended;
  assert.equal(code, 0);
  const frame = JSON.parse(out);
  assert.equal(frame.id, "init");
  assert.equal(frame.result.status.readiness, "ready");

  // A killed child (stdin still open) ends our stream too.
  const second = spawnServe(bin(), { cwd: f.cwd, env: f.env });
  second.output.resume();
  const gone = once(second.output, "end");
  second.child.kill("SIGKILL");
  await gone;
  second.input.destroy();
});

test("the guide's client example runs as printed", async (t) => {
  const f = guideFixture(t);
  const example = module(t, "client-example.mjs", guideBlock("js client-example"));
  const env = { ...f.env, PATH: `${dirname(bin())}:${f.env.PATH}` };
  const { stdout, stderr } = await promisify(execFile)(process.execPath, [example], { cwd: f.cwd, env });
  assert.equal(stderr, "");
  const lines = stdout.split("\n");
  assert.ok(lines.includes("Allow write_file notes.txt (6 bytes)? yes"), stdout);
  assert.ok(lines.includes("completed: I will create notes.txt.Created notes.txt."), stdout);
  const saved = /^save (\S+)$/m.exec(stdout);
  assert.ok(saved && saved[1] !== "undefined", "a durable session to save");
  assert.equal(readFileSync(join(f.cwd, "notes.txt"), "utf8"), "hello\n");
});
