// One run as a client shows it (the Rust client's `Turn`): assistant messages built from
// best-effort `message.delta` and then REPLACED (never appended to) by the authoritative
// `message.reconcile` parts once the `last_part` arrives; the one `run.finished` after which
// nothing of the run may come. Sans-IO: feed it the run's events in order.

import { ClientError, type TurnErrorKind } from "./errors.js";
import type { Event } from "./frames.js";
import type { RunFinishedData } from "./protocol.js";

/** The protocol's `run_content_segments`: messages one run carries at most. */
export const RUN_CONTENT_SEGMENTS = 512;
/** The protocol's `run_content_bytes`: text one run carries at most (deltas and reconciliation each). */
export const RUN_CONTENT_BYTES = 8_388_608;

/** One assistant message (a segment) of the run. */
export class Message {
  /** Live text from the deltas, until reconciled. */
  private live = "";
  private nextDelta = 0;
  private gap = false;
  /** Reconciliation parts received before the last. */
  parts: string[] = [];
  private reconciledText: string | undefined;
  private partialFlag = false;

  constructor(
    /** The run-scoped message ID. */
    readonly id: string,
  ) {}

  /** What to show now: the reconciled text once complete, else the deltas so far. */
  get text(): string {
    return this.reconciledText ?? this.live;
  }

  /** The authoritative text, once every reconciliation part arrived. */
  get reconciled(): string | undefined {
    return this.reconciledText;
  }

  /**
   * Whether what `text` shows may miss something: a delta part was missed and no
   * reconciliation replaced it, or the reconciled segment is itself partial.
   */
  get incomplete(): boolean {
    return this.reconciledText !== undefined
      ? this.partialFlag
      : this.gap || this.parts.length > 0;
  }

  /** @internal */
  delta(part: number, text: string): boolean {
    if (this.reconciledText !== undefined || this.parts.length > 0) return false;
    // A skipped part was dropped under pressure: the display is incomplete until
    // reconciliation; a repeated or older part is not appended twice.
    if (part < this.nextDelta) return false;
    this.gap ||= part > this.nextDelta;
    this.nextDelta = part + 1;
    this.live += text;
    return true;
  }

  /** @internal The replaced live text once `last` completes the message, else undefined. */
  reconcile(part: number, text: string, last: boolean, partial: boolean): string | undefined {
    if (this.reconciledText !== undefined || part !== this.parts.length) {
      throw turnError("reconcile_out_of_order");
    }
    this.parts.push(text);
    if (!last) return undefined;
    this.reconciledText = this.parts.join("");
    this.parts = [];
    this.partialFlag = partial;
    const shown = this.live;
    this.live = "";
    return shown;
  }
}

/** What one event changed. */
export type Update =
  /** Live text appended to message `message` (show it; it may be replaced later). */
  | { kind: "delta"; message: string; text: string }
  /** Message `message` is reconciled: `text` replaces `shown`, what its deltas built. */
  | { kind: "reconciled"; message: string; text: string; shown: string; partial: boolean }
  /** The run finished (its data is `Turn.finished`). */
  | { kind: "finished"; data: RunFinishedData }
  /**
   * Nothing to show: a reconciliation part before the last, a delta after the message was
   * reconciled, an event of another run, or an event the caller handles itself.
   */
  | { kind: "other" };

function turnError(turn: TurnErrorKind): ClientError {
  return new ClientError("turn", turn, { turn });
}

/** One run: its messages in order of first appearance and its terminal. */
export class Turn {
  private readonly list: Message[] = [];
  private readonly byId = new Map<string, Message>();
  private bytes = 0;
  private terminal: RunFinishedData | undefined;

  /** The turn of run `runId` (from `turn.start`'s result); events of other runs are `other`. */
  constructor(readonly runId: string) {}

  /** The run's messages, in order of first appearance. */
  get messages(): readonly Message[] {
    return this.list;
  }

  /** Every message's current text, joined in order (the reply once the run finished). */
  get text(): string {
    return this.list.map((m) => m.text).join("");
  }

  /** The `run.finished` data, once it arrived. */
  get finished(): RunFinishedData | undefined {
    return this.terminal;
  }

  private message(id: string): Message {
    const known = this.byId.get(id);
    if (known !== undefined) return known;
    if (this.list.length >= RUN_CONTENT_SEGMENTS) throw turnError("content_limit");
    const m = new Message(id);
    this.list.push(m);
    this.byId.set(id, m);
    return m;
  }

  private count(text: string): void {
    const more = Buffer.byteLength(text, "utf8");
    // Deltas and the reconciliation each carry at most `run_content_bytes` of a run.
    if (this.bytes + more > 2 * RUN_CONTENT_BYTES) throw turnError("content_limit");
    this.bytes += more;
  }

  /** Applies one event; throws a `turn` ClientError when the run's events break its rules. */
  apply(e: Event): Update {
    if (e.data.run_id !== this.runId) return { kind: "other" };
    if (this.terminal !== undefined) throw turnError("after_terminal");
    switch (e.event) {
      case "message.delta": {
        this.count(e.data.text);
        const m = this.message(e.data.message_id);
        if (!m.delta(e.data.part, e.data.text)) return { kind: "other" };
        return { kind: "delta", message: m.id, text: e.data.text };
      }
      case "message.reconcile": {
        const d = e.data;
        this.count(d.text);
        const m = this.message(d.message_id);
        const shown = m.reconcile(d.part, d.text, d.last_part, d.partial);
        if (shown === undefined) return { kind: "other" };
        return { kind: "reconciled", message: m.id, text: m.text, shown, partial: d.partial };
      }
      case "run.finished":
        this.terminal = e.data;
        return { kind: "finished", data: e.data };
      default:
        return { kind: "other" };
    }
  }
}
