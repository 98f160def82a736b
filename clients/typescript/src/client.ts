// A typed client of `magi-code serve --stdio` for Node: one child over real pipes, calls typed
// per method through the generated `Methods` map, responses correlated by ID, events in order,
// turns reconciled, and the session ID to save only after a durable acknowledgement. The
// protocol's client rules are its easy path (docs/frontend-guide.md, "Node / TypeScript").

import { type ChildProcess, spawn } from "node:child_process";
import type { Socket } from "node:net";
import { ClientError, rejected } from "./errors.js";
import {
  type Event,
  INPUT_FRAME_BYTES,
  LineReader,
  type Method,
  OUTPUT_FRAME_BYTES,
  type ParamsOf,
  type ResultOf,
  requestLine,
} from "./frames.js";
import { Ids } from "./ids.js";
import { type Arrived, Inbox } from "./inbox.js";
import { makeFifos } from "./pipes.js";
import type {
  ApprovalRequestedData,
  CapabilityName,
  ClientTool,
  InitializeParams,
  InitializeResult,
  RecordedResult,
  RunFinishedData,
} from "./protocol.js";
import { Turn, type Update } from "./turn.js";

/** How long a call waits for its response unless told otherwise (the Rust client's). */
export const DEFAULT_WAIT_MS = 60_000;
/** The most events held unread; past it the client fails closed rather than grow. */
export const EVENT_BACKLOG = 8_192;
/** How long stdout may stay open after the child exited (a grandchild holding it) before the client closes. */
const EXIT_GRACE_MS = 2_000;
/** The most stderr bytes kept with `stderr: "pipe"`. */
const STDERR_KEEP = 65_536;

/** How to start the child. */
export interface SpawnOptions {
  /** The `magi-code` executable (default: `magi-code` on the PATH). */
  exe?: string;
  /** The workspace: fixed for the child's life. */
  cwd: string;
  /** The child's environment (default: this process's). `MC_HOME` names the storage root. */
  env?: NodeJS.ProcessEnv;
  /** stderr: discarded (default), inherited, or kept (the last 64 KiB, as `stderrText`). */
  stderr?: "ignore" | "inherit" | "pipe";
  /** How long a call waits for its response, in ms (default 60,000). */
  waitMs?: number;
}

/** Per-call options. */
export interface CallOptions {
  /** An ID of the caller's choosing; refused if used before in this child. */
  id?: string;
  /** This call's wait, in ms. */
  waitMs?: number;
}

/** How `runTurn` shows a run and answers its approvals. */
export interface TurnHandlers {
  /** Each change to the run's display (deltas, reconciliations, the end). */
  onUpdate?: (u: Update, turn: Turn) => void;
  /** Every event as it arrives, the run's and others'. */
  onEvent?: (e: Event) => void;
  /** The user's answer to an approval; without a handler every approval is denied, explicitly. */
  onApproval?: (a: ApprovalRequestedData) => boolean | Promise<boolean>;
}

/** How the child ended. */
export interface Exit {
  /** The exit code, or null when a signal ended it. */
  code: number | null;
  /** The signal, or null. */
  signal: NodeJS.Signals | null;
}

interface Waiter {
  method: Method;
  resolve: (v: unknown) => void;
  reject: (e: ClientError) => void;
  timer: NodeJS.Timeout | undefined;
}

/** One `serve --stdio` child. */
export class MagiClient {
  private readonly ids = new Ids();
  private readonly inbox = new Inbox();
  private readonly waiters = new Map<string, Waiter>();
  private readonly events: Event[] = [];
  private eventWaiters: Array<() => void> = [];
  private readonly lines = new LineReader(OUTPUT_FRAME_BYTES);
  private inputFrameBytes = INPUT_FRAME_BYTES;
  private broken: ClientError | undefined;
  private stderrKept: Buffer[] = [];
  private stderrBytes = 0;
  private exitInfo: Exit | undefined;
  private exitWaiters: Array<(e: Exit) => void> = [];
  /** The default wait of a call, in ms. */
  waitMs: number;

  private constructor(
    private readonly child: ChildProcess,
    private readonly writer: Socket,
    private readonly reader: Socket,
    waitMs: number,
  ) {
    this.waitMs = waitMs;
    reader.on("data", (chunk: Buffer) => this.onData(chunk));
    reader.on("end", () => {
      const cut = this.lines.end();
      this.fail(cut !== undefined && "error" in cut ? new ClientError("protocol", cut.error) : new ClientError("closed"));
    });
    reader.on("error", () => this.fail(new ClientError("closed")));
    // EPIPE and friends: the child is gone; the reader's end says so to every waiter.
    writer.on("error", () => writer.destroy());
    child.on("exit", (code, signal) => {
      this.exitInfo = { code, signal };
      for (const w of this.exitWaiters.splice(0)) w(this.exitInfo);
      // stdout normally ends with the child; a grandchild may hold it open, so stop waiting.
      setTimeout(() => {
        if (!reader.destroyed) reader.destroy();
        this.fail(new ClientError("closed"));
      }, EXIT_GRACE_MS).unref();
    });
  }

  /**
   * Spawns `exe serve --stdio` in `cwd` with real pipes (FIFOs: Node's `stdio: "pipe"` gives
   * a socketpair, which the backend refuses with exit 2) and starts reading its stdout.
   */
  static async spawn(opts: SpawnOptions): Promise<MagiClient> {
    const fifos = await makeFifos();
    const stderr = opts.stderr ?? "ignore";
    let child: ChildProcess;
    try {
      child = spawn(opts.exe ?? "magi-code", ["serve", "--stdio"], {
        cwd: opts.cwd,
        env: opts.env ?? process.env,
        stdio: [fifos.childStdin, fifos.childStdout, stderr],
      });
    } catch (e) {
      fifos.closeChildEnds();
      fifos.writer.destroy();
      fifos.reader.destroy();
      throw e;
    }
    // The parent's copies of the child's ends must go, or neither side ever sees EOF.
    fifos.closeChildEnds();
    try {
      await new Promise<void>((resolve, reject) => {
        child.once("spawn", resolve);
        child.once("error", reject);
      });
    } catch (e) {
      fifos.writer.destroy();
      fifos.reader.destroy();
      throw e;
    }
    const c = new MagiClient(child, fifos.writer, fifos.reader, opts.waitMs ?? DEFAULT_WAIT_MS);
    child.stderr?.on("data", (chunk: Buffer) => c.keepStderr(chunk));
    return c;
  }

  private keepStderr(chunk: Buffer): void {
    this.stderrKept.push(chunk);
    this.stderrBytes += chunk.length;
    while (this.stderrBytes > STDERR_KEEP && this.stderrKept.length > 1) {
      this.stderrBytes -= this.stderrKept.shift()?.length ?? 0;
    }
  }

  /** What the child wrote to stderr (with `stderr: "pipe"`; its last 64 KiB). */
  get stderrText(): string {
    return Buffer.concat(this.stderrKept).toString("utf8");
  }

  /** The child's process id. */
  get pid(): number | undefined {
    return this.child.pid;
  }

  /** The child's `instance_id`, once a frame arrived. */
  get instanceId(): string | undefined {
    return this.inbox.instanceId;
  }

  /** How many request IDs this child has had. */
  get idsUsed(): number {
    return this.ids.count;
  }

  /**
   * The session ID to save for a relaunch: the attached session, once a durable
   * acknowledgement arrived; `undefined` before (a lazy session does not survive the child).
   */
  get savedSession(): string | undefined {
    return this.inbox.saved.toSave;
  }

  /** The attached session, durable or not. */
  get attachedSession(): string | undefined {
    return this.inbox.saved.attachedId;
  }

  /** Why the client refuses everything now (closed or a protocol violation), if it does. */
  get failure(): ClientError | undefined {
    return this.broken;
  }

  private onData(chunk: Buffer): void {
    for (const l of this.lines.push(chunk)) {
      if (this.broken !== undefined) return;
      if ("error" in l) {
        this.fail(new ClientError("protocol", l.error));
        return;
      }
      let a: Arrived;
      try {
        a = this.inbox.push(l.line);
      } catch (e) {
        this.fail(e instanceof ClientError ? e : new ClientError("protocol", String(e)));
        return;
      }
      if (a.kind === "event") {
        if (this.events.length >= EVENT_BACKLOG) {
          this.fail(new ClientError("backlog"));
          return;
        }
        this.events.push(a.event);
        this.wakeEvents();
      } else {
        const w = this.waiters.get(a.id);
        this.waiters.delete(a.id);
        if (w === undefined || !a.keep) continue;
        if (w.timer !== undefined) clearTimeout(w.timer);
        if ("error" in a.body) w.reject(rejected(a.body.error.code));
        else w.resolve(a.body.result);
      }
    }
  }

  /** Fails closed: every waiter rejects with `e`, and so does everything after. */
  private fail(e: ClientError): void {
    if (this.broken !== undefined) return;
    this.broken = e;
    for (const w of this.waiters.values()) {
      if (w.timer !== undefined) clearTimeout(w.timer);
      w.reject(e);
    }
    this.waiters.clear();
    this.wakeEvents();
    if (e.kind !== "closed") {
      // Nothing after a violation is trusted: EOF ends the child; keep draining its output.
      this.writer.end();
      this.reader.resume();
    }
  }

  private wakeEvents(): void {
    // Every reader looks again; the first takes the event, the others wait on.
    for (const w of this.eventWaiters.splice(0)) w();
  }

  /** `initialize` requiring `required`; afterwards the returned `limits` bound IDs and lines. */
  async initialize(required: CapabilityName[], clientTools?: ClientTool[]): Promise<InitializeResult> {
    const params = (
      clientTools === undefined
        ? { required_capabilities: required }
        : { required_capabilities: required, client_tools: clientTools }
    ) as InitializeParams;
    const r = await this.call("initialize", params);
    this.ids.limit = r.limits.request_ids;
    this.inputFrameBytes = r.limits.input_frame_bytes;
    return r;
  }

  /**
   * Sends `method` with `params` under a fresh ID (or `opts.id`) and resolves with its result;
   * rejects with a ClientError: `rejected` (with the protocol's `code`), `timeout`, `closed`
   * (also when the child exits first), `protocol`, or a local refusal before anything is
   * written (`frame_too_large`, `id_reused`, `id_invalid`, `ids_exhausted`).
   */
  call<M extends Method>(method: M, params: ParamsOf<M>, opts: CallOptions = {}): Promise<ResultOf<M>> {
    return new Promise<ResultOf<M>>((resolve, reject) => {
      try {
        this.write(method, params, opts.id, {
          method,
          resolve: resolve as (v: unknown) => void,
          reject,
          timer: undefined,
        }, opts.waitMs ?? this.waitMs);
      } catch (e) {
        reject(e);
      }
    });
  }

  /**
   * Sends `method` whose response is not wanted (the events tell the rest); returns its ID.
   * The response is dropped when it arrives.
   */
  sendDetached<M extends Method>(method: M, params: ParamsOf<M>): string {
    const id = this.write(method, params, undefined, undefined, 0);
    this.inbox.discard(id);
    return id;
  }

  private write<M extends Method>(
    method: M,
    params: ParamsOf<M>,
    chosen: string | undefined,
    waiter: Waiter | undefined,
    waitMs: number,
  ): string {
    if (this.broken !== undefined) throw this.broken;
    const id = chosen ?? this.ids.fresh();
    if (chosen !== undefined) this.ids.claim(chosen);
    const line = requestLine(id, method, params);
    const bytes = Buffer.byteLength(line, "utf8");
    if (bytes > this.inputFrameBytes) {
      throw new ClientError("frame_too_large", `${bytes} bytes over ${this.inputFrameBytes}`);
    }
    if (this.writer.destroyed || !this.writer.writable) throw new ClientError("closed");
    this.inbox.sent(id, method);
    if (waiter !== undefined) {
      this.waiters.set(id, waiter);
      if (waitMs > 0) {
        waiter.timer = setTimeout(() => {
          // The late response is dropped when it comes; the ID stays used.
          this.waiters.delete(id);
          this.inbox.discard(id);
          waiter.reject(new ClientError("timeout", method));
        }, waitMs);
      }
    }
    this.writer.write(`${line}\n`, (err) => {
      if (err == null) return;
      const w = this.waiters.get(id);
      this.waiters.delete(id);
      if (w?.timer !== undefined) clearTimeout(w.timer);
      w?.reject(new ClientError("closed", err.message));
    });
    return id;
  }

  /**
   * The next event within `waitMs` (default: until one comes), in the order the child wrote
   * them; `undefined` on timeout. Rejects once the connection is over and no event is left.
   */
  async nextEvent(waitMs?: number): Promise<Event | undefined> {
    const deadline = waitMs === undefined ? undefined : Date.now() + waitMs;
    for (;;) {
      const e = this.events.shift();
      if (e !== undefined) return e;
      if (this.broken !== undefined) throw this.broken;
      const left = deadline === undefined ? undefined : deadline - Date.now();
      if (left !== undefined && left <= 0) return undefined;
      await new Promise<void>((resolve) => {
        const wake = () => {
          if (timer !== undefined) clearTimeout(timer);
          resolve();
        };
        const timer =
          left === undefined
            ? undefined
            : setTimeout(() => {
                this.eventWaiters = this.eventWaiters.filter((w) => w !== wake);
                resolve();
              }, left);
        this.eventWaiters.push(wake);
      });
    }
  }

  /** Every event in order until the connection closes (ends) or breaks the protocol (throws). */
  async *eventStream(): AsyncGenerator<Event, void, undefined> {
    for (;;) {
      let e: Event | undefined;
      try {
        e = await this.nextEvent();
      } catch (err) {
        if (err instanceof ClientError && err.kind === "closed") return;
        throw err;
      }
      if (e !== undefined) yield e;
    }
  }

  /** `turn.start` for `sessionId`; on admission, the Turn of its run. */
  async startTurn(sessionId: string, prompt: string): Promise<Turn> {
    const r = await this.call("turn.start", { session_id: sessionId, prompt });
    return new Turn(r.run_id);
  }

  /** Answers an approval (`allow` or deny); `recorded:true` means this answer won. */
  answerApproval(a: ApprovalRequestedData, allow: boolean): Promise<RecordedResult> {
    return this.call("approval.answer", {
      session_id: a.session_id,
      run_id: a.run_id,
      approval_id: a.approval_id,
      allow,
    });
  }

  /**
   * Reads events into `turn` until its `run.finished`, showing them through `h` and answering
   * the run's approvals; resolves with the `run.finished` data. An approval that expired or a
   * run already over (`stale_approval`, `stale_run`) is not an error: the events tell the rest.
   */
  async runTurn(turn: Turn, h: TurnHandlers = {}): Promise<RunFinishedData> {
    const answers: Promise<void>[] = [];
    while (turn.finished === undefined) {
      const e = await this.nextEvent();
      if (e === undefined) continue;
      h.onEvent?.(e);
      const u = turn.apply(e);
      if (u.kind !== "other") h.onUpdate?.(u, turn);
      if (e.event === "approval.requested" && e.data.run_id === turn.runId) {
        const a = e.data;
        const allow = h.onApproval === undefined ? false : await h.onApproval(a);
        answers.push(
          this.answerApproval(a, allow).then(
            () => undefined,
            (err: unknown) => {
              const stale = err instanceof ClientError && (err.code === "stale_approval" || err.code === "stale_run");
              if (!stale) throw err;
            },
          ),
        );
      }
    }
    await Promise.all(answers);
    return turn.finished;
  }

  /** Closes stdin (EOF to the child: it cancels work, drains and exits 0). */
  close(): void {
    this.writer.end();
  }

  /** SIGKILLs the child (a crash, stdin still open). */
  kill(): void {
    this.child.kill("SIGKILL");
  }

  /** Resolves when the child has exited. */
  exited(): Promise<Exit> {
    if (this.exitInfo !== undefined) return Promise.resolve(this.exitInfo);
    return new Promise((resolve) => this.exitWaiters.push(resolve));
  }

  /**
   * Sends `shutdown`, waits at most `withinMs` for its answer and the exit, killing the child
   * past it; resolves with the exit code (1 when killed or ended by a signal).
   */
  async shutdown(withinMs = 5_000): Promise<number> {
    const end = Date.now() + withinMs;
    try {
      await this.call("shutdown", {}, { waitMs: withinMs });
    } catch {
      // Gone already, or no answer in time: the exit below decides.
    }
    this.close();
    const left = Math.max(0, end - Date.now());
    let timer: NodeJS.Timeout | undefined;
    const exit = await Promise.race([
      this.exited(),
      new Promise<undefined>((resolve) => {
        timer = setTimeout(() => resolve(undefined), left);
      }),
    ]);
    clearTimeout(timer);
    if (exit !== undefined) return exit.code ?? 1;
    this.kill();
    await this.exited();
    return 1;
  }
}
