// Compile-time checks of the typed surface (`npm run build` compiles this with --noEmit):
// results come out as their method's type without a cast, and wrong methods, params or event
// data do not compile.
import type {
  Event,
  HistoryPageResult,
  MagiClient,
  RunFinishedData,
  SessionResult,
  TurnStartResult,
} from "../src/index.js";

type Is<A, B> = [A] extends [B] ? ([B] extends [A] ? true : never) : never;

export async function typed(c: MagiClient): Promise<void> {
  const s = await c.call("session.create", {});
  const sessionIs: Is<typeof s, SessionResult> = true;
  const t = await c.call("turn.start", { session_id: s.session_id, prompt: "hi" });
  const turnIs: Is<typeof t, TurnStartResult> = true;
  const p = await c.call("history.page", { session_id: s.session_id, revision: "r", cursor: null });
  const pageIs: Is<typeof p, HistoryPageResult> = true;
  void [sessionIs, turnIs, pageIs];

  // @ts-expect-error: no such method
  await c.call("turn.pause", {});
  // @ts-expect-error: session.create takes exactly {}
  await c.call("session.create", { session_id: "s" });
  // @ts-expect-error: turn.start needs a prompt
  await c.call("turn.start", { session_id: "s" });
  // @ts-expect-error: allow is a boolean
  await c.call("approval.answer", { session_id: "s", run_id: "r", approval_id: "a", allow: "yes" });
}

export function narrowed(e: Event): RunFinishedData | undefined {
  if (e.event === "run.finished") return e.data;
  // @ts-expect-error: a delta's data has no outcome
  if (e.event === "message.delta") return e.data.outcome;
  return undefined;
}
