// What can go wrong on the client's side of the pipe, as one error class a caller switches on
// by `kind` (the Rust client's `ClientError`, one variant per kind).

import type { ErrorCodeName } from "./protocol.js";

/** Why a call, a send or an event read did not give what was asked for. */
export type ClientErrorKind =
  /** The backend answered the request with an error code (`code`). */
  | "rejected"
  /** Nothing arrived within the wait. */
  | "timeout"
  /** The child closed stdout or exited, or stdin could not be written: the connection is over. */
  | "closed"
  /** An output frame broke the protocol; the client fails closed and refuses everything after. */
  | "protocol"
  /** A response to no outstanding request, or with a null `id`, carrying `code`. */
  | "uncorrelated"
  /** This request ID was already used in this child (IDs are never reused). */
  | "id_reused"
  /** The ID is not 1–64 bytes of `[A-Za-z0-9._-]`. */
  | "id_invalid"
  /** This child has had `request_ids` IDs; the next would close it (`request_limit`). */
  | "ids_exhausted"
  /** The request line is over `input_frame_bytes`: refused here, nothing written. */
  | "frame_too_large"
  /** More events waiting unread than the client buffers. */
  | "backlog"
  /** A turn's events broke the run rules (`turn` says which). */
  | "turn";

/** A run's events broke the protocol's run rules. */
export type TurnErrorKind =
  /** An event of this run after its `run.finished`. */
  | "after_terminal"
  /** A reconciliation part out of order (each message's parts run 0, 1, 2 …). */
  | "reconcile_out_of_order"
  /** More messages or text than a run may carry. */
  | "content_limit";

/** The one error type the client rejects with. */
export class ClientError extends Error {
  /** What went wrong. */
  readonly kind: ClientErrorKind;
  /** The protocol's error code, for `rejected` and `uncorrelated`. */
  readonly code: ErrorCodeName | undefined;
  /** For `turn`: which run rule broke. */
  readonly turn: TurnErrorKind | undefined;

  constructor(
    kind: ClientErrorKind,
    detail?: string,
    extra: { code?: ErrorCodeName; turn?: TurnErrorKind } = {},
  ) {
    const code = extra.code;
    super(
      code !== undefined
        ? `${kind}: ${code}`
        : detail !== undefined
          ? `${kind}: ${detail}`
          : kind,
    );
    this.name = "ClientError";
    this.kind = kind;
    this.code = code;
    this.turn = extra.turn;
  }
}

/** A `rejected` error carrying the protocol's `code`. */
export function rejected(code: ErrorCodeName): ClientError {
  return new ClientError("rejected", undefined, { code });
}
