// The one session ID a client may save for a relaunch: the attached session, and only once a
// durable acknowledgement said it is on disk (protocol: "Client saves relaunch ID only after
// either durable acknowledgement": `input.persisted`, or `selection.set` with `durable:true`;
// a session that `session.open` found durable is on disk already).

import type { InputPersistedData, SelectionSetResult, SessionResult } from "./protocol.js";

/** The attached session and whether it is durable. */
export class SavedSession {
  private attached: string | undefined;
  private durable = false;

  /** A `session.create` or `session.open` result: the new attachment, durable only when it says so. */
  attach(r: SessionResult): void {
    this.attached = r.session_id;
    this.durable = r.durable;
  }

  /** An `input.persisted` acknowledgement. */
  inputPersisted(d: InputPersistedData): void {
    this.acknowledged(d.session_id);
  }

  /** A `selection.set` result (always `durable:true`). */
  selectionSet(r: SelectionSetResult): void {
    if (r.durable) this.acknowledged(r.session_id);
  }

  private acknowledged(sid: string): void {
    // An acknowledgement of a session that is no longer attached says nothing of this one.
    if (this.attached === sid) this.durable = true;
  }

  /** The session ID to save for a relaunch, once durable; `undefined` before. */
  get toSave(): string | undefined {
    return this.durable ? this.attached : undefined;
  }

  /** The attached session, durable or not. */
  get attachedId(): string | undefined {
    return this.attached;
  }
}
