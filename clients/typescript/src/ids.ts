// Request IDs: allocated by the client, never reused within a child (protocol: "Request IDs
// … must never be reused within a child, even after response"), at most `request_ids` of
// them, after which the backend would close the child.

import { ClientError } from "./errors.js";

/** The protocol's default `request_ids` bound, until `initialize` says otherwise. */
export const REQUEST_IDS = 4096;
/** The protocol's `id_bytes` bound. */
export const ID_BYTES = 64;

/** Whether `id` is 1–64 bytes of `[A-Za-z0-9._-]` (the protocol's ID grammar). */
export function validId(id: string): boolean {
  return id.length >= 1 && id.length <= ID_BYTES && /^[A-Za-z0-9._-]+$/.test(id);
}

/** The IDs of one child: fresh ones from a counter, chosen ones checked, none twice. */
export class Ids {
  private readonly used = new Set<string>();
  private next = 0;

  /** At most `limit` IDs (the backend's `request_ids`). */
  constructor(public limit: number = REQUEST_IDS) {}

  /** A fresh ID (`c1`, `c2`, …), never handed out or claimed before in this child. */
  fresh(): string {
    for (;;) {
      this.next += 1;
      const id = `c${this.next}`;
      if (!this.used.has(id)) {
        this.claim(id);
        return id;
      }
    }
  }

  /** Claims an ID of the caller's choosing: refused when used before, invalid or past the limit. */
  claim(id: string): void {
    if (!validId(id)) throw new ClientError("id_invalid", id);
    if (this.used.has(id)) throw new ClientError("id_reused", id);
    if (this.used.size >= this.limit) throw new ClientError("ids_exhausted");
    this.used.add(id);
  }

  /** How many IDs this child has had. */
  get count(): number {
    return this.used.size;
  }
}
