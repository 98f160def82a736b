// Real pipes for the child's stdin and stdout. `serve --stdio` refuses anything but FIFOs on
// fds 0 and 1 (it exits 2), and Node's `stdio: "pipe"` gives the child a socketpair, so the
// parent makes two named FIFOs in a private directory, opens all four ends without blocking,
// unlinks them at once, and hands the child its two ends as plain fds.

import { execFile } from "node:child_process";
import { closeSync, constants, mkdtempSync, openSync, rmSync } from "node:fs";
import { Socket } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { promisify } from "node:util";

/** The four ends: the child's two fds for `spawn`'s `stdio`, and the parent's two streams. */
export interface Fifos {
  /** The child's stdin (the read end of the request FIFO). */
  childStdin: number;
  /** The child's stdout (the write end of the output FIFO). */
  childStdout: number;
  /** Where the parent writes requests. */
  writer: Socket;
  /** Where the parent reads frames. */
  reader: Socket;
  /** Closes the child's ends in the parent (call right after `spawn`, or EOF never comes). */
  closeChildEnds(): void;
}

/**
 * Two FIFOs (mode 0600, in a fresh 0700 directory removed before this returns). `mkfifo(1)`
 * runs once, because Node has no `mkfifo` call; nothing else runs beside the backend.
 */
export async function makeFifos(): Promise<Fifos> {
  const dir = mkdtempSync(join(tmpdir(), "magi-code-fifo-"));
  const opened: number[] = [];
  try {
    const requests = join(dir, "in");
    const output = join(dir, "out");
    await promisify(execFile)("mkfifo", ["-m", "600", requests, output]);
    const { O_RDONLY, O_WRONLY, O_NONBLOCK } = constants;
    // A FIFO's open blocks until the other side opens, unless O_NONBLOCK: a read end opens
    // at once, and a write end opens once a read end exists, so each read end comes first.
    // O_NONBLOCK on the child's ends is harmless: the backend sets it on fds 0 and 1 itself.
    const open = (path: string, flags: number): number => {
      const fd = openSync(path, flags | O_NONBLOCK);
      opened.push(fd);
      return fd;
    };
    const childStdin = open(requests, O_RDONLY);
    const parentWrite = open(requests, O_WRONLY);
    const parentRead = open(output, O_RDONLY);
    const childStdout = open(output, O_WRONLY);
    // libuv sees a FIFO fd as a pipe and streams it like one.
    const writer = new Socket({ fd: parentWrite, readable: false, writable: true });
    const reader = new Socket({ fd: parentRead, readable: true, writable: false });
    let closed = false;
    return {
      childStdin,
      childStdout,
      writer,
      reader,
      closeChildEnds() {
        if (closed) return;
        closed = true;
        closeSync(childStdin);
        closeSync(childStdout);
      },
    };
  } catch (e) {
    for (const fd of opened) closeSync(fd);
    throw e;
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}
