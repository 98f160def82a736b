// The guide's whole exchange (docs/frontend-guide.md, sections 2–8; the one that
// magi-code/tests/stdio/guide.rs replays frame by frame) driven through the client against the
// real binary: initialize, session.create, a turn with streaming and an approval (with the
// busy checks while it waits), a cancelled turn, history paging, shutdown, and the relaunch
// that reopens the saved session.
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { test } from "node:test";
import { ClientError, MagiClient } from "../dist/index.js";
import { bin, guideFixture } from "./env.mjs";

/** The history both children page: kind and text of every entry, in order. */
const HISTORY = [
  ["user", "Create notes.txt saying hello."],
  ["assistant", "I will create notes.txt."],
  ["activity", "write_file: completed — write_file notes.txt (6 bytes): wrote 6 bytes"],
  ["assistant", "Created notes.txt."],
  ["user", "Now wait for a minute."],
  ["diagnostic", "The turn was cancelled."],
];

/** Every entry of a revision, following `next_cursor` until `complete`. */
async function history(c, sessionId, revision) {
  const entries = [];
  let cursor = null;
  for (;;) {
    const page = await c.call("history.page", { session_id: sessionId, revision, cursor });
    assert.equal(page.revision, revision);
    entries.push(...page.entries);
    if (page.complete) return entries;
    cursor = page.next_cursor;
  }
}

function shown(entries) {
  for (const e of entries) assert.ok(e.last_part && !e.partial, "whole entries");
  return entries.map((e) => [e.kind, e.text]);
}

async function rejection(promise) {
  const err = await promise.then(
    () => assert.fail("expected a rejection"),
    (e) => e,
  );
  assert.ok(err instanceof ClientError, `a ClientError, not ${err}`);
  return err;
}

test("the guide's exchange, relaunch included, through the client", async (t) => {
  const f = guideFixture(t);
  const spawn = () => MagiClient.spawn({ exe: bin(), cwd: f.cwd, env: f.env, stderr: "pipe", waitMs: 20_000 });

  // 2. initialize.
  const c = await spawn();
  t.after(() => c.kill());
  const init = await c.initialize([
    "session.create", "turn.start", "turn.cancel", "approval.answer", "history.page", "status", "shutdown",
  ]);
  assert.equal(init.status.readiness, "ready");
  assert.equal(init.status.provider, "scripted");
  assert.equal(init.status.state, "idle");
  assert.equal(init.limits.input_frame_bytes, 65_536);
  assert.ok(c.instanceId);

  // 3. session.create: lazy, nothing to save yet.
  const s = await c.call("session.create", {});
  assert.equal(s.durable, false);
  assert.equal(c.attachedSession, s.session_id);
  assert.equal(c.savedSession, undefined, "a lazy session is not saved");

  // 4. A turn with an approval; while it waits, status says running and a second turn is busy.
  const turn1 = await c.startTurn(s.session_id, "Create notes.txt saying hello.");
  const updates = [];
  let savedAtApproval;
  const events = [];
  const finished1 = await c.runTurn(turn1, {
    onEvent: (e) => events.push(e.event),
    onUpdate: (u) => updates.push(u),
    onApproval: async (a) => {
      assert.equal(a.summary, "write_file notes.txt (6 bytes)");
      assert.equal(a.expires_in_ms, 60_000);
      savedAtApproval = c.savedSession;
      const status = await c.call("status", {});
      assert.equal(status.state, "running");
      assert.equal(status.run_id, turn1.runId);
      const busy = await rejection(c.call("turn.start", { session_id: s.session_id, prompt: "And another thing." }));
      assert.equal(busy.kind, "rejected");
      assert.equal(busy.code, "busy");
      return true;
    },
  });
  assert.equal(savedAtApproval, s.session_id, "saved once input.persisted arrived");
  assert.deepEqual(
    events.filter((e) => e !== "message.delta"),
    ["input.persisted", "message.reconcile", "activity", "approval.requested", "activity", "message.reconcile", "run.finished"],
  );
  assert.deepEqual(
    { outcome: finished1.outcome, persistence: finished1.persistence, error_code: finished1.error_code },
    { outcome: "completed", persistence: "durable", error_code: null },
  );
  const reconciled = updates.filter((u) => u.kind === "reconciled");
  assert.deepEqual(reconciled.map((u) => u.text), ["I will create notes.txt.", "Created notes.txt."]);
  for (const u of reconciled) {
    // Deltas are best effort (the backend may coalesce or drop them): `shown` is what they
    // built, and the reconciled text replaces it rather than following it.
    const live = updates.filter((d) => d.kind === "delta" && d.message === u.message).map((d) => d.text).join("");
    assert.equal(u.shown, live);
  }
  assert.equal(turn1.text, "I will create notes.txt.Created notes.txt.", "each message once");
  assert.ok(turn1.messages.every((m) => !m.incomplete));
  assert.equal(readFileSync(join(f.cwd, "notes.txt"), "utf8"), "hello\n", "the approved write ran");

  // 5. A cancelled turn: Stop after the input is acknowledged, then wait for run.finished.
  const turn2 = await c.startTurn(s.session_id, "Now wait for a minute.");
  let inputRevision;
  for (;;) {
    const e = await c.nextEvent(20_000);
    assert.ok(e, "an event within the wait");
    turn2.apply(e);
    if (e.event === "input.persisted") {
      inputRevision = e.data.revision;
      break;
    }
  }
  const cancel = await c.call("turn.cancel", { session_id: s.session_id, run_id: turn2.runId });
  assert.equal(cancel.cancellation_requested, true);
  const finished2 = await c.runTurn(turn2);
  assert.equal(finished2.outcome, "cancelled");
  assert.equal(finished2.persistence, "durable");

  // 6. History: the input acknowledgement's revision is stale; run.finished's pages it.
  const stale = await rejection(c.call("history.page", { session_id: s.session_id, revision: inputRevision, cursor: null }));
  assert.equal(stale.code, "stale_revision");
  assert.deepEqual(shown(await history(c, s.session_id, finished2.revision)), HISTORY);

  // 7. Shutdown: exit 0, nothing on stderr.
  const ids = c.idsUsed;
  assert.equal(await c.shutdown(5_000), 0);
  assert.equal(c.stderrText, "");
  assert.ok(ids >= 9, "every call had its own ID");
  const saved = c.savedSession;
  assert.equal(saved, s.session_id);

  // 8. Relaunch: a new child, a new instance, the saved ID reopened and its history paged.
  const c2 = await spawn();
  t.after(() => c2.kill());
  const init2 = await c2.initialize(["session.open", "history.page", "shutdown"]);
  assert.equal(init2.status.context_id, init.status.context_id, "same cwd and MC_HOME");
  const opened = await c2.call("session.open", { session_id: saved });
  assert.equal(opened.durable, true);
  assert.equal(c2.savedSession, saved, "opened durable: saved at once");
  assert.notEqual(c2.instanceId, c.instanceId);
  assert.deepEqual(shown(await history(c2, saved, opened.revision)), HISTORY);
  assert.equal(await c2.shutdown(5_000), 0);
  assert.equal(c2.stderrText, "");
});
