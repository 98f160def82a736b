// Correlation, sans-IO (the Rust client's `Inbox`): output lines go in, responses come out by
// request ID (never by order: responses overtake each other and events interleave), events in
// order. Every frame is checked on the way in (protocol and version, one `instance_id`, `seq`
// rising by exactly 1, a known frame type, event name and error code, a response only to an
// outstanding request), and the durable acknowledgements feed the `SavedSession`.

import { ClientError } from "./errors.js";
import { type Event, type Method, PROTOCOL, VERSION, isErrorCode, isEventName } from "./frames.js";
import type { ErrorObject, SelectionSetResult, SessionResult } from "./protocol.js";
import { SavedSession } from "./saved.js";

/** A response's body: exactly one of `result` and `error`. */
export type Body = { result: unknown } | { error: ErrorObject };

/** What one line was. */
export type Arrived =
  /** A response to `id` (`keep` false when its caller no longer wants it). */
  | { kind: "response"; id: string; method: Method; keep: boolean; body: Body }
  /** An event, in the order it arrived. */
  | { kind: "event"; event: Event };

function isObject(v: unknown): v is Record<string, unknown> {
  return typeof v === "object" && v !== null && !Array.isArray(v);
}

function violation(why: string): ClientError {
  return new ClientError("protocol", why);
}

/** One child's incoming side. */
export class Inbox {
  private readonly outstanding = new Map<string, { method: Method; keep: boolean }>();
  private seq = 0;
  private instance: string | undefined;
  /** The session to save for a relaunch. */
  readonly saved = new SavedSession();

  /** Records a request just written, so its response correlates. */
  sent(id: string, method: Method): void {
    this.outstanding.set(id, { method, keep: true });
  }

  /** The response to `id` is not wanted: it is dropped when it arrives. */
  discard(id: string): void {
    const o = this.outstanding.get(id);
    if (o !== undefined) o.keep = false;
  }

  /** Whether `id` was sent and its response has not arrived. */
  waiting(id: string): boolean {
    return this.outstanding.has(id);
  }

  /** This child's `instance_id`, from its first frame. */
  get instanceId(): string | undefined {
    return this.instance;
  }

  /** Takes one output line (without its LF); throws a ClientError when it breaks the protocol. */
  push(line: string): Arrived {
    let v: unknown;
    try {
      v = JSON.parse(line);
    } catch {
      throw violation("not JSON");
    }
    if (!isObject(v)) throw violation("not a JSON object");
    if (v.protocol !== PROTOCOL || v.version !== VERSION) {
      throw violation("unknown protocol or version");
    }
    const iid = v.instance_id;
    if (typeof iid !== "string") throw violation("no instance_id");
    if (this.instance === undefined) this.instance = iid;
    else if (this.instance !== iid) throw violation("instance_id changed");
    if (v.seq !== this.seq + 1) throw violation("seq is not the next number");
    this.seq += 1;
    if (v.type === "response") return this.response(v);
    if (v.type === "event") {
      if (!isEventName(v.event)) throw violation("unknown event");
      if (!isObject(v.data) || typeof v.data.run_id !== "string") {
        throw violation("malformed event");
      }
      const event = { event: v.event, data: v.data } as Event;
      if (event.event === "input.persisted") this.saved.inputPersisted(event.data);
      return { kind: "event", event };
    }
    throw violation("unknown frame type");
  }

  private response(v: Record<string, unknown>): Arrived {
    const hasResult = "result" in v;
    const hasError = "error" in v;
    if (hasResult === hasError) throw violation("a response needs exactly one of result and error");
    let body: Body;
    if (hasError) {
      const e = v.error;
      if (!isObject(e) || !isErrorCode(e.code)) throw violation("unknown error code");
      body = { error: { code: e.code } };
    } else {
      body = { result: v.result };
    }
    const id = v.id;
    const o = typeof id === "string" ? this.outstanding.get(id) : undefined;
    if (typeof id !== "string" || o === undefined) {
      if ("error" in body) {
        throw new ClientError("uncorrelated", undefined, { code: body.error.code });
      }
      throw violation("response to no outstanding request");
    }
    this.outstanding.delete(id);
    if ("result" in body && isObject(body.result)) {
      const r = body.result;
      if ((o.method === "session.create" || o.method === "session.open") && typeof r.session_id === "string") {
        this.saved.attach(r as SessionResult);
      } else if (o.method === "selection.set" && typeof r.session_id === "string") {
        this.saved.selectionSet(r as SelectionSetResult);
      }
    }
    return { kind: "response", id, method: o.method, keep: o.keep, body };
  }
}
