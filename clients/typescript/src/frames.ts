// Frames: the request line a client writes, the bounded line reader for what it reads, and the
// runtime lists of event names and error codes that the client fails closed against. The lists
// are checked by the compiler against the generated `Events` map and `ErrorCodeName` union, so
// a name added to the schema without being added here does not build.

import type { ErrorCodeName, Events, Methods } from "./protocol.js";

/** The protocol name every frame carries. */
export const PROTOCOL = "magi-code.local-agent";
/** The protocol version every frame carries. */
export const VERSION = 1;
/** The protocol's default `input_frame_bytes`: the longest request line, LF excluded. */
export const INPUT_FRAME_BYTES = 65_536;
/** The protocol's `output_frame_bytes`: the longest output line, LF included. */
export const OUTPUT_FRAME_BYTES = 65_536;

/** A method name. */
export type Method = keyof Methods;
/** A method's params. */
export type ParamsOf<M extends Method> = Methods[M]["params"];
/** A method's result. */
export type ResultOf<M extends Method> = Methods[M]["result"];
/** An event name. */
export type EventName = keyof Events;
/** One run event: its name and data, discriminated by `event`. */
export type Event = { [K in EventName]: { event: K; data: Events[K] } }[EventName];

/** Fails to compile unless `A` and `B` are the same set of names. */
type Same<A, B> = [Exclude<A, B> | Exclude<B, A>] extends [never] ? true : never;

/** Every event name, for the fail-closed check on the way in. */
export const EVENT_NAMES = [
  "input.persisted",
  "message.delta",
  "message.reconcile",
  "activity",
  "approval.requested",
  "diagnostic",
  "run.finished",
  "tool.card",
  "client.tool.call",
  "client.tool.cancel",
  "tool.output",
  "tool.diff",
] as const;
const eventsComplete: Same<(typeof EVENT_NAMES)[number], EventName> = true;
void eventsComplete;

/** Every error code the protocol defines; any other code fails the client closed. */
export const ERROR_CODES = [
  "invalid_frame", "invalid_request", "invalid_params", "protocol_mismatch",
  "unsupported_method", "unsupported_capability", "not_initialized", "already_initialized",
  "duplicate_id", "request_limit", "frame_too_large", "incomplete_frame",
  "configuration_invalid", "provider_unavailable", "profile_invalid", "mcp_unavailable",
  "startup_cancelled", "startup_failed", "busy", "stale_session", "session_missing",
  "session_busy", "session_invalid", "cwd_mismatch", "history_limit", "stale_revision",
  "content_limit", "operation_cancelled", "discovery_limit", "discovery_unavailable",
  "catalog_limit", "catalog_unavailable", "stale_catalog", "stale_selection",
  "selection_invalid", "effort_unsupported", "persistence_failed", "stale_run",
  "stale_approval", "execution_failed", "output_unavailable", "stale_operation",
  "refresh_failed", "stale_call",
] as const;
const codesComplete: Same<(typeof ERROR_CODES)[number], ErrorCodeName> = true;
void codesComplete;

const eventNames: ReadonlySet<string> = new Set(EVENT_NAMES);
const errorCodes: ReadonlySet<string> = new Set(ERROR_CODES);

/** Whether `name` is an event of the protocol. */
export function isEventName(name: unknown): name is EventName {
  return typeof name === "string" && eventNames.has(name);
}

/** Whether `code` is an error code of the protocol. */
export function isErrorCode(code: unknown): code is ErrorCodeName {
  return typeof code === "string" && errorCodes.has(code);
}

/** One request frame as a line without its LF: exactly the five request members. */
export function requestLine<M extends Method>(id: string, method: M, params: ParamsOf<M>): string {
  return JSON.stringify({ protocol: PROTOCOL, version: VERSION, id, method, params });
}

/** What the line reader found: a whole line, or why the stream cannot be read on. */
export type Line = { line: string } | { error: string };

/**
 * Splits a byte stream into LF-ended lines of at most `bound` bytes, LF included. Past a line
 * over the bound, a line that is not UTF-8, or a line cut off by EOF, nothing more is read:
 * the reader reports the error once and stays broken.
 */
export class LineReader {
  private chunks: Buffer[] = [];
  private held = 0;
  private broken = false;
  private readonly decoder = new TextDecoder("utf-8", { fatal: true });

  constructor(private readonly bound: number = OUTPUT_FRAME_BYTES) {}

  /** The lines completed by `chunk`, in order. */
  push(chunk: Buffer): Line[] {
    const out: Line[] = [];
    if (this.broken) return out;
    let start = 0;
    for (;;) {
      const lf = chunk.indexOf(0x0a, start);
      const end = lf < 0 ? chunk.length : lf + 1;
      if (this.held + (end - start) > this.bound) {
        this.broken = true;
        out.push({ error: `an output line over ${this.bound} bytes` });
        return out;
      }
      if (lf < 0) {
        if (end > start) {
          this.chunks.push(chunk.subarray(start));
          this.held += end - start;
        }
        return out;
      }
      const whole = Buffer.concat([...this.chunks, chunk.subarray(start, lf)]);
      this.chunks = [];
      this.held = 0;
      start = lf + 1;
      try {
        out.push({ line: this.decoder.decode(whole) });
      } catch {
        this.broken = true;
        out.push({ error: "an output line that is not UTF-8" });
        return out;
      }
    }
  }

  /** At EOF: an error when a line was cut off, else nothing. */
  end(): Line | undefined {
    if (this.broken || this.held === 0) return undefined;
    this.broken = true;
    return { error: "an output line cut off by EOF" };
  }
}
