// The transport against the real binary: Node's own pipes are socketpairs and are refused,
// the client's FIFOs are accepted with EOF both ways, an over-long request line is refused
// before it is written, and a child that dies mid-call rejects the pending call.
import assert from "node:assert/strict";
import { spawn } from "node:child_process";
import { once } from "node:events";
import { test } from "node:test";
import { ClientError, MagiClient, makeFifos } from "../dist/index.js";
import { bin, fixture } from "./env.mjs";

const ECHO = { provider: "scripted", model: "echo" };
const INIT = JSON.stringify({
  protocol: "magi-code.local-agent", version: 1, id: "init", method: "initialize",
  params: { required_capabilities: ["status"] },
});

test("stdio: \"pipe\" gives the child a socketpair, which it refuses with exit 2", async (t) => {
  const f = fixture(t, ECHO);
  const child = spawn(bin(), ["serve", "--stdio"], { cwd: f.cwd, env: f.env, stdio: "pipe" });
  let stderr = "";
  child.stderr.on("data", (d) => (stderr += d));
  let writeError;
  child.stdin.on("error", (e) => (writeError = e));
  child.stdin.write(`${INIT}\n`);
  let stdout = "";
  child.stdout.on("data", (d) => (stdout += d));
  const [code] = await once(child, "close");
  assert.equal(code, 2);
  assert.equal(stdout, "", "not one protocol byte");
  assert.match(stderr, /stdin and stdout must be pipes/);
  // The write races the exit: when it loses, the Node author sees `write EPIPE`.
  if (writeError !== undefined) assert.equal(writeError.code, "EPIPE");
});

test("the client's FIFOs are pipes to the child; closing ours ends it with exit 0", async (t) => {
  const f = fixture(t, ECHO);
  const fifos = await makeFifos();
  const child = spawn(bin(), ["serve", "--stdio"], {
    cwd: f.cwd, env: f.env, stdio: [fifos.childStdin, fifos.childStdout, "pipe"],
  });
  fifos.closeChildEnds();
  let stderr = "";
  child.stderr.on("data", (d) => (stderr += d));
  let out = "";
  fifos.reader.on("data", (d) => {
    out += d;
    // The response is whole: EOF on the child's stdin is what ends it now.
    if (out.endsWith("\n")) fifos.writer.end();
  });
  const ended = once(fifos.reader, "end");
  fifos.writer.write(`${INIT}\n`);
  const [code] = await once(child, "exit");
  await ended;
  assert.equal(code, 0, `stderr: ${stderr}`);
  assert.equal(stderr, "");
  const lines = out.trimEnd().split("\n").map((l) => JSON.parse(l));
  assert.equal(lines.length, 1);
  assert.equal(lines[0].id, "init");
  assert.equal(lines[0].result.status.state, "idle");
});

test("the child's exit ends our stream; calls afterwards reject as closed", async (t) => {
  const f = fixture(t, ECHO);
  const c = await MagiClient.spawn({ exe: bin(), cwd: f.cwd, env: f.env });
  t.after(() => c.kill());
  await c.initialize(["status", "shutdown"]);
  c.close();
  assert.equal((await c.exited()).code, 0);
  const err = await c.nextEvent(5_000).then(() => assert.fail("no event after EOF"), (e) => e);
  assert.equal(err.kind, "closed");
  await assert.rejects(c.call("status", {}), (e) => e instanceof ClientError && e.kind === "closed");
});

test("an over-long request line is refused locally and the child stays usable", async (t) => {
  const f = fixture(t, ECHO);
  const c = await MagiClient.spawn({ exe: bin(), cwd: f.cwd, env: f.env });
  t.after(() => c.kill());
  await c.initialize(["session.create", "turn.start", "status", "shutdown"]);
  const s = await c.call("session.create", {});
  // The line's fixed members plus the prompt: exactly one byte over 65,536.
  const base = JSON.stringify({
    protocol: "magi-code.local-agent", version: 1, id: "c3", method: "turn.start",
    params: { session_id: s.session_id, prompt: "" },
  }).length;
  const over = "x".repeat(65_536 - base + 1);
  await assert.rejects(
    c.call("turn.start", { session_id: s.session_id, prompt: over }),
    (e) => e instanceof ClientError && e.kind === "frame_too_large",
  );
  const status = await c.call("status", {});
  assert.equal(status.state, "idle", "nothing was sent: no turn started, the child did not close");
  // At the bound itself the line goes out; the backend judges the prompt (over prompt_bytes).
  const edge = c.call("turn.start", { session_id: s.session_id, prompt: over.slice(2) + "x" });
  const judged = await edge.then(() => assert.fail("a prompt over prompt_bytes"), (e) => e);
  assert.equal(judged.kind, "rejected", `${judged}`);
  assert.equal(await c.shutdown(5_000), 0);
});

test("a child killed mid-call rejects the pending call as closed, never hangs", async (t) => {
  const f = fixture(t, ECHO);
  const c = await MagiClient.spawn({ exe: bin(), cwd: f.cwd, env: f.env, waitMs: 30_000 });
  t.after(() => c.kill());
  await c.initialize(["status", "shutdown"]);
  // Stopped, the child cannot answer: the call is surely pending when the kill lands.
  process.kill(c.pid, "SIGSTOP");
  const pending = c.call("status", {});
  c.kill();
  await assert.rejects(pending, (e) => e instanceof ClientError && e.kind === "closed");
  assert.equal((await c.exited()).signal, "SIGKILL");
  await assert.rejects(c.call("status", {}), (e) => e instanceof ClientError && e.kind === "closed");
});

test("shutdown past its wait kills a child that does not answer", async (t) => {
  const f = fixture(t, ECHO);
  const c = await MagiClient.spawn({ exe: bin(), cwd: f.cwd, env: f.env });
  t.after(() => c.kill());
  await c.initialize(["status", "shutdown"]);
  process.kill(c.pid, "SIGSTOP");
  assert.equal(await c.shutdown(300), 1, "killed: exit code 1");
  assert.equal((await c.exited()).signal, "SIGKILL");
});

test("two readers waiting at once each get an event, in the child's order", async (t) => {
  const f = fixture(t, ECHO);
  const c = await MagiClient.spawn({ exe: bin(), cwd: f.cwd, env: f.env, waitMs: 20_000 });
  t.after(() => c.kill());
  await c.initialize(["session.create", "turn.start", "shutdown"]);
  const s = await c.call("session.create", {});
  const first = c.nextEvent(20_000);
  const second = c.nextEvent(20_000);
  const turn = await c.startTurn(s.session_id, "hello");
  const [a, b] = await Promise.all([first, second]);
  assert.equal(a.event, "input.persisted", "the first event goes to the first reader");
  assert.ok(b !== undefined && b.data.run_id === turn.runId);
  turn.apply(a);
  turn.apply(b);
  const done = await c.runTurn(turn);
  assert.equal(done.outcome, "completed");
  assert.equal(turn.text, "hello", "model echo answers with the prompt");
  assert.equal(await c.shutdown(5_000), 0);
});
