// @magi-code/client: a typed client of `magi-code serve --stdio` (magi-code.local-agent v1).

export { MagiClient, DEFAULT_WAIT_MS, EVENT_BACKLOG } from "./client.js";
export type { CallOptions, Exit, SpawnOptions, TurnHandlers } from "./client.js";
export { doctor } from "./doctor.js";
export type { DoctorFinding, DoctorOptions, DoctorReport } from "./doctor.js";
export { ClientError } from "./errors.js";
export type { ClientErrorKind, TurnErrorKind } from "./errors.js";
export {
  ERROR_CODES,
  EVENT_NAMES,
  INPUT_FRAME_BYTES,
  LineReader,
  OUTPUT_FRAME_BYTES,
  PROTOCOL,
  VERSION,
  isErrorCode,
  isEventName,
  requestLine,
} from "./frames.js";
export type { Event, EventName, Method, ParamsOf, ResultOf } from "./frames.js";
export { Ids, validId } from "./ids.js";
export { Inbox } from "./inbox.js";
export type { Arrived, Body } from "./inbox.js";
export { makeFifos } from "./pipes.js";
export type { Fifos } from "./pipes.js";
export { SavedSession } from "./saved.js";
export { Message, RUN_CONTENT_BYTES, RUN_CONTENT_SEGMENTS, Turn } from "./turn.js";
export type { Update } from "./turn.js";
export type * from "./protocol.js";
