// The client's sans-IO parts without a child: IDs, the line reader's bounds, correlation and
// the fail-closed envelope checks, the saved session, and reconciliation.
import assert from "node:assert/strict";
import { test } from "node:test";
import { ClientError, Ids, Inbox, LineReader, Turn } from "../dist/index.js";

test("fresh IDs never repeat, claimed ones are checked, the bound holds at its edge", () => {
  const ids = new Ids(3);
  ids.claim("c2");
  assert.equal(ids.fresh(), "c1");
  assert.equal(ids.fresh(), "c3", "c2 was taken");
  assert.throws(() => ids.claim("c1"), (e) => e.kind === "id_reused");
  assert.throws(() => ids.fresh(), (e) => e.kind === "ids_exhausted");
  const big = new Ids();
  big.claim("a".repeat(64));
  assert.throws(() => big.claim("b".repeat(65)), (e) => e.kind === "id_invalid");
  assert.throws(() => big.claim("a b"), (e) => e.kind === "id_invalid");
  assert.throws(() => big.claim(""), (e) => e.kind === "id_invalid");
});

test("output lines are bounded at 65,536 bytes with the LF, whole and UTF-8", () => {
  const edge = new LineReader();
  assert.deepEqual(edge.push(Buffer.from(`${"x".repeat(65_535)}\n`)), [{ line: "x".repeat(65_535) }]);
  const over = new LineReader();
  const got = over.push(Buffer.from(`${"x".repeat(65_536)}\n`));
  assert.equal(got.length, 1);
  assert.ok("error" in got[0]);
  assert.deepEqual(over.push(Buffer.from("{}\n")), [], "broken for good");
  const split = new LineReader();
  assert.deepEqual(split.push(Buffer.from([0x7b, 0x22, 0xc3])), []);
  assert.deepEqual(split.push(Buffer.from([0xa9, 0x22, 0x7d, 0x0a, 0x31])), [{ line: '{"é"}' }], "a character split across chunks");
  assert.ok("error" in split.end(), "a line cut off by EOF");
  const bad = new LineReader();
  assert.ok("error" in bad.push(Buffer.from([0xff, 0x0a]))[0]);
});

class Wire {
  seq = 0;
  frame(v) {
    this.seq += 1;
    return JSON.stringify({ protocol: "magi-code.local-agent", version: 1, instance_id: "i1", seq: this.seq, ...v });
  }
  result(id, result) { return this.frame({ type: "response", id, result }); }
  error(id, code) { return this.frame({ type: "response", id, error: { code } }); }
  event(event, data) { return this.frame({ type: "event", event, data }); }
  persisted(sid) {
    return this.event("input.persisted", { session_id: sid, run_id: "r", message_id: "m", durable: true, revision: "v" });
  }
}
const created = (sid) => ({ session_id: sid, durable: false, revision: "v", notices: [] });

test("responses correlate by ID out of order, events keep theirs, the saved session waits for input.persisted", () => {
  const ib = new Inbox();
  const w = new Wire();
  ib.sent("a", "status");
  ib.sent("b", "session.create");
  const b = ib.push(w.result("b", created("s1")));
  assert.equal(b.kind, "response");
  assert.equal(b.id, "b");
  assert.equal(ib.saved.attachedId, "s1");
  assert.equal(ib.saved.toSave, undefined, "created, never persisted");
  assert.equal(ib.push(w.persisted("s1")).kind, "event");
  assert.equal(ib.saved.toSave, "s1");
  const a = ib.push(w.error("a", "busy"));
  assert.deepEqual([a.id, a.method, a.body], ["a", "status", { error: { code: "busy" } }]);
  assert.ok(!ib.waiting("a") && !ib.waiting("b"));
});

test("the envelope fails closed: seq gaps, a second instance, unknown names, uncorrelated responses", () => {
  const diag = { session_id: "s", run_id: "r", code: "x", summary: "" };
  const fresh = () => [new Inbox(), new Wire()];
  const kind = (f, k) => assert.throws(f, (e) => e instanceof ClientError && e.kind === k);
  let [ib, w] = fresh();
  ib.push(w.event("diagnostic", diag));
  w.seq += 1;
  kind(() => ib.push(w.event("diagnostic", diag)), "protocol");
  [ib, w] = fresh();
  kind(() => ib.push(w.event("message.shout", { run_id: "r" })), "protocol");
  [ib, w] = fresh();
  kind(() => ib.push(w.frame({ type: "notice" })), "protocol");
  [ib, w] = fresh();
  ib.sent("x", "status");
  kind(() => ib.push(w.error("x", "brand_new_code")), "protocol");
  [ib, w] = fresh();
  ib.push(w.event("diagnostic", diag));
  const other = JSON.parse(w.event("diagnostic", diag));
  other.instance_id = "i2";
  kind(() => ib.push(JSON.stringify(other)), "protocol");
  [ib, w] = fresh();
  assert.throws(() => ib.push(w.error(null, "invalid_request")), (e) => e.kind === "uncorrelated" && e.code === "invalid_request");
  kind(() => ib.push(w.result("never-sent", {})), "protocol");
  [ib, w] = fresh();
  ib.sent("d", "status");
  ib.discard("d");
  assert.equal(ib.push(w.error("d", "busy")).keep, false, "a discarded response is dropped");
  kind(() => ib.push(w.error("d", "busy")), "uncorrelated");
});

const delta = (m, part, text, run = "r") => ({
  event: "message.delta", data: { session_id: "s", run_id: run, message_id: m, part, text },
});
const reconcile = (m, part, text, last_part) => ({
  event: "message.reconcile", data: { session_id: "s", run_id: "r", message_id: m, part, text, last_part, partial: false },
});
const finished = (run) => ({
  event: "run.finished", data: { session_id: "s", run_id: run, outcome: "completed", persistence: "durable", revision: null, error_code: null },
});

test("reconciliation replaces the deltas, never appends, and only at the last part", () => {
  const t = new Turn("r");
  t.apply(delta("m1", 0, "Hel"));
  t.apply(delta("m1", 1, "lo"));
  assert.equal(t.text, "Hello");
  assert.deepEqual(t.apply(reconcile("m1", 0, "Hello", true)), {
    kind: "reconciled", message: "m1", text: "Hello", shown: "Hello", partial: false,
  });
  assert.equal(t.text, "Hello", "once, not twice");
  t.apply(delta("m2", 0, "draft"));
  assert.deepEqual(t.apply(reconcile("m2", 0, "Fin", false)), { kind: "other" });
  assert.equal(t.text, "Hellodraft", "no half-reconciled text shown as whole");
  assert.ok(t.messages[1].incomplete);
  t.apply(reconcile("m2", 1, "al", true));
  assert.equal(t.messages[1].reconciled, "Final");
  assert.equal(t.text, "HelloFinal");
});

test("a missed delta marks the message incomplete until reconciled; misordered parts fail", () => {
  const t = new Turn("r");
  t.apply(delta("m1", 0, "a"));
  t.apply(delta("m1", 2, "c"));
  assert.deepEqual(t.apply(delta("m1", 2, "c")), { kind: "other" }, "a repeated part is not appended");
  assert.equal(t.text, "ac");
  assert.ok(t.messages[0].incomplete);
  t.apply(reconcile("m1", 0, "abc", true));
  assert.ok(!t.messages[0].incomplete);
  assert.throws(() => t.apply(reconcile("m1", 0, "abc", true)), (e) => e.turn === "reconcile_out_of_order");
  assert.throws(() => t.apply(reconcile("m9", 1, "x", true)), (e) => e.turn === "reconcile_out_of_order");
});

test("nothing of the run after run.finished; other runs pass by", () => {
  const t = new Turn("r");
  assert.deepEqual(t.apply(finished("other")), { kind: "other" });
  assert.deepEqual(t.apply(delta("m", 0, "x", "other")), { kind: "other" });
  assert.equal(t.apply(finished("r")).kind, "finished");
  assert.equal(t.finished.outcome, "completed");
  assert.throws(() => t.apply(delta("m", 0, "late")), (e) => e.kind === "turn" && e.turn === "after_terminal");
});
