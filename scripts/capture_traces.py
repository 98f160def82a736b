#!/usr/bin/env python3
"""Captures the replay corpus from the real `magi-code serve --stdio` over real pipes.

Each scenario runs one child with MAGI_CODE_TRACE set, drives it like a client would, and
writes protocol-core/tests/traces/<name>.jsonl with a provenance header. Run from the repo
root after `cargo build`: python3 scripts/capture_traces.py [target/debug/magi-code]
"""
import json, os, subprocess, sys, tempfile, threading, time, queue, datetime

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
OUT = os.path.join(ROOT, "protocol-core", "tests", "traces")
BIN = os.path.abspath(sys.argv[1]) if len(sys.argv) > 1 else os.path.join(ROOT, "target", "debug", "magi-code")


def req(i, method, params=None):
    return (json.dumps({"protocol": "magi-code.local-agent", "version": 1, "id": i,
                        "method": method, "params": {} if params is None else params},
                       separators=(",", ":")) + "\n").encode()


class Child:
    def __init__(self, trace, settings=None, project=None, read=True, env=None):
        self.home = tempfile.mkdtemp()
        self.cwd = tempfile.mkdtemp()
        if settings is not None:
            with open(os.path.join(self.home, "settings.json"), "w") as f:
                json.dump(settings, f)
        if project is not None:
            os.makedirs(os.path.join(self.cwd, ".magi"))
            with open(os.path.join(self.cwd, ".magi", "settings.json"), "w") as f:
                json.dump(project, f)
        e = {k: v for k, v in os.environ.items() if not k.endswith("_API_KEY")}
        e.update({"MC_HOME": self.home, "MAGI_CODE_TRACE": trace})
        e.update(env or {})
        self.p = subprocess.Popen([BIN, "serve", "--stdio"], stdin=subprocess.PIPE,
                                  stdout=subprocess.PIPE, stderr=subprocess.PIPE, cwd=self.cwd, env=e)
        self.q = queue.Queue()
        self.frames = []
        if read:
            threading.Thread(target=self._read, daemon=True).start()

    def _read(self):
        for line in self.p.stdout:
            self.q.put(json.loads(line))
        self.q.put(None)

    def send(self, b):
        self.p.stdin.write(b)
        self.p.stdin.flush()

    def wait_id(self, i, timeout=10):
        end = time.time() + timeout
        while time.time() < end:
            try:
                f = self.q.get(timeout=end - time.time())
            except queue.Empty:
                break
            if f is None:
                break
            self.frames.append(f)
            if f.get("id") == i:
                return f
        raise RuntimeError(f"no response for {i}")

    def close(self):
        try:
            self.p.stdin.close()
        except BrokenPipeError:
            pass

    def wait_exit(self, timeout=15):
        code = self.p.wait(timeout)
        assert self.p.stderr.read() == b"", "stderr must stay silent"
        return code


SCENARIOS = {}


def scenario(desc):
    def deco(f):
        SCENARIOS[f.__name__] = (desc, f)
        return f
    return deco


@scenario("initialize, status and shutdown on the embedded default; exit 0")
def handshake(t):
    c = Child(t)
    c.send(req("r1", "initialize", {"required_capabilities": ["status", "shutdown"]}))
    c.wait_id("r1")
    c.send(req("r2", "status"))
    c.wait_id("r2")
    c.send(req("r3", "shutdown"))
    c.wait_id("r3")
    return c.wait_exit(), 0


@scenario("the protocol's synthetic consumer trace: base-only initialize (session.create, turn.start, "
          "history.page, shutdown), session.create, an echo turn through run.finished, history.page with the "
          "terminal revision, shutdown; exit 0")
def consumer(t):
    c = Child(t)
    c.send(req("r1", "initialize", {"required_capabilities": ["session.create", "turn.start", "history.page", "shutdown"]}))
    c.wait_id("r1")
    c.send(req("r2", "session.create"))
    sid = c.wait_id("r2")["result"]["session_id"]
    c.send(req("r3", "turn.start", {"session_id": sid, "prompt": "Say hello to the trace."}))
    c.wait_id("r3")
    end = time.time() + 10
    revision = None
    while time.time() < end and revision is None:
        f = c.q.get(timeout=10)
        c.frames.append(f)
        if f.get("event") == "run.finished":
            revision = f["data"]["revision"]
    c.send(req("r4", "history.page", {"session_id": sid, "revision": revision, "cursor": None}))
    c.wait_id("r4")
    c.send(req("r5", "shutdown"))
    c.wait_id("r5")
    return c.wait_exit(), 0


@scenario("every non-closing transport error in one connection, then EOF inside a frame: "
          "invalid_frame, invalid_request, invalid_params, unsupported_method, unsupported_capability, "
          "not_initialized, already_initialized, duplicate_id, incomplete_frame; exit 0")
def transport_errors(t):
    c = Child(t)
    c.send(b"\n")
    c.send(b"\r\n")
    c.send(b'{"a":' + b"[" * 32 + b"1" + b"]" * 32 + b"}\n")
    c.send(b'{"id":"x\xff"}\n')
    c.send(b"{nope\n")
    c.send(b"[1]\n")
    c.send(b'{"protocol":"magi-code.local-agent","version":1,"id":"a","\\u0069d":"b","method":"status","params":{}}\n')
    c.send(b'{"protocol":"magi-code.local-agent","version":1,"id":"e1","method":"status","params":{},"extra":1}\n')
    c.send(req("e2", "bad method"))
    c.send(req("e3", "status"))
    c.send(req("e4", "session.create"))
    c.send(req("e5", "no.such.method"))
    c.send(req("e6", "initialize", {"required_capabilities": ["tool.cards", "nope.nope"]}))
    c.send(req("e7", "initialize", {"required_capabilities": [f"c{i}" for i in range(17)]}))
    c.send(req("e8", "initialize", {"required_capabilities": ["status"], "x": 1}))
    for i in ["e1", "e2", "e3", "e4", "e5", "e6", "e7", "e8"]:
        c.wait_id(i)
    c.send(req("r1", "initialize", {"required_capabilities": ["status"]}))
    c.wait_id("r1")
    c.send(req("r2", "initialize", {"required_capabilities": []}))
    c.send(req("r1", "status"))
    c.send(req("r3", "session.discover", {"limit": 1}))
    c.send(req("r4", "status", {"unexpected": True}))
    c.send(b'{"protocol":"magi-code.local-agent","version":1,"id":"r5","method":"session.open","params":{"session_id":"a","\\u0073ession_id":"b"}}\n')
    c.wait_id("r5")
    c.send(b'{"protocol":"magi-code.local-agent","version":1,"id":"r6","method":"shutdown"')
    c.close()
    return c.wait_exit(), 0


@scenario("protocol_mismatch (version 2) answered with its id, then exit 1; later input ignored")
def protocol_mismatch(t):
    c = Child(t)
    c.send(req("r1", "initialize", {"required_capabilities": []}))
    c.wait_id("r1")
    c.send(b'{"protocol":"magi-code.local-agent","version":2,"id":"v2","method":"status","params":{}}\n' + req("r2", "status"))
    c.wait_id("v2")
    return c.wait_exit(), 1


@scenario("a 70,000-byte line: frame_too_large with id null on byte 65,537, exit 1 while the client keeps its end open")
def frame_too_large(t):
    c = Child(t)
    c.send(b" " * 70000)
    code = c.wait_exit()
    c.close()
    return code, 1


@scenario("4,096 request IDs (status before initialize: not_initialized) are answered; the 4,097th new ID gets request_limit, exit 1")
def request_limit(t):
    c = Child(t)
    batch = b"".join(req(f"{i}", "status") for i in range(4097))
    threading.Thread(target=lambda: c.send(batch), daemon=True).start()
    c.wait_id("4096", timeout=30)
    return c.wait_exit(), 1


@scenario("startup_delay_ms=300: a status sent during startup is answered (starting) before initialize; then shutdown")
def startup_delay(t):
    c = Child(t, settings={"providers": {"scripted": {"startup_delay_ms": 300}}})
    c.send(req("r1", "initialize", {"required_capabilities": ["status"]}))
    c.send(req("r2", "status"))
    c.wait_id("r1")
    c.send(req("r3", "shutdown"))
    c.wait_id("r3")
    return c.wait_exit(), 0


@scenario("shutdown during a 5 s startup: stopping, then startup_cancelled for initialize; exit 0")
def shutdown_during_startup(t):
    c = Child(t, settings={"providers": {"scripted": {"startup_delay_ms": 5000}}})
    c.send(req("r1", "initialize", {"required_capabilities": []}))
    time.sleep(0.2)
    c.send(req("r2", "shutdown"))
    c.wait_id("r1")
    return c.wait_exit(), 0


@scenario("an unknown settings key: configuration_invalid; status failed; session.create returns the startup code; "
          "initialize again is already_initialized")
def configuration_invalid(t):
    c = Child(t, settings={"modle": "typo"})
    c.send(req("r1", "initialize", {"required_capabilities": []}))
    c.wait_id("r1")
    c.send(req("r2", "status") + req("r3", "session.create") + req("r4", "initialize", {"required_capabilities": []}) + req("r5", "shutdown"))
    c.wait_id("r5")
    return c.wait_exit(), 0


@scenario("provider anthropic without a key: provider_unavailable; status failed with context_id")
def provider_unavailable(t):
    c = Child(t, project={"provider": "anthropic", "model": "claude-sonnet-4-5"})
    c.send(req("r1", "initialize", {"required_capabilities": []}))
    c.wait_id("r1")
    c.send(req("r2", "status") + req("r3", "shutdown"))
    c.wait_id("r3")
    return c.wait_exit(), 0


@scenario("a client that never reads: 400 pipelined status requests fill the pipe; the oldest frame misses its 2,000 ms deadline; exit 1")
def stalled_reader(t):
    c = Child(t, read=False)
    c.send(req("r1", "initialize", {"required_capabilities": []}))
    time.sleep(0.2)
    batch = b"".join(req(f"s{i}", "status") for i in range(400))
    threading.Thread(target=lambda: c.send(batch), daemon=True).start()
    return c.wait_exit(), 1


def write_history(c, sid, lines):
    os.makedirs(os.path.join(c.home, "sessions"), exist_ok=True)
    with open(os.path.join(c.home, "sessions", f"{sid}.jsonl"), "w") as f:
        for rec in lines:
            f.write(json.dumps(rec) + "\n")


@scenario("sessions: create (lazy), empty page, open of a stored history, its pages, session_missing, "
          "stale_session, stale_revision, session.list and session.discover; then shutdown")
def sessions(t):
    c = Child(t)
    ts = "2026-11-30T12:00:00Z"
    cwd = os.path.realpath(c.cwd)
    recs = [{"type": "session_meta", "session_id": "stored", "ts": ts, "cwd": cwd}]
    for i in range(3):
        recs += [{"type": "user_input", "session_id": "stored", "ts": ts, "run_id": f"r{i}", "text": f"question {i}"},
                 {"type": "assistant_message", "session_id": "stored", "ts": ts, "run_id": f"r{i}", "message_id": f"a{i}", "text": f"answer {i}"},
                 {"type": "run_finished", "session_id": "stored", "ts": ts, "run_id": f"r{i}", "outcome": "completed"}]
    recs.append({"type": "title", "session_id": "stored", "ts": ts, "title": "Three questions"})
    write_history(c, "stored", recs)
    c.send(req("r1", "initialize", {"required_capabilities": ["session.discover", "operation.cancel"]}))
    c.wait_id("r1")
    c.send(req("r2", "session.create"))
    lazy = c.wait_id("r2")["result"]
    c.send(req("r3", "history.page", {"session_id": lazy["session_id"], "revision": lazy["revision"]}))
    c.wait_id("r3")
    c.send(req("r4", "session.open", {"session_id": "stored"}))
    opened = c.wait_id("r4")["result"]
    c.send(req("r5", "history.page", {"session_id": "stored", "revision": opened["revision"], "cursor": None}))
    c.wait_id("r5")
    c.send(req("r6", "history.page", {"session_id": "other", "revision": opened["revision"], "cursor": None}))
    c.wait_id("r6")
    c.send(req("r7", "history.page", {"session_id": "stored", "revision": "old", "cursor": None}))
    c.wait_id("r7")
    c.send(req("r8", "session.open", {"session_id": "missing"}))
    c.wait_id("r8")
    c.send(req("r9", "session.list", {"limit": 1}))
    c.wait_id("r9")
    c.send(req("r10", "session.discover", {"limit": 10}))
    c.wait_id("r10")
    c.send(req("r11", "operation.cancel", {"request_id": "r10"}))
    c.wait_id("r11")
    c.send(req("r12", "shutdown"))
    c.wait_id("r12")
    return c.wait_exit(), 0


@scenario("a scripted turn with a tool call that asks: activity started, approval.requested, a winning "
          "approval.answer, a second answer stale_approval, activity completed, tool-separated segments, run.finished")
def turn_with_approval(t):
    home = tempfile.mkdtemp()
    script = os.path.join(home, "script.json")
    with open(script, "w") as f:
        json.dump({"turns": [{"steps": [{"text": "Let me write it."},
                                        {"tool": {"name": "write_file", "input": {"path": "note.txt", "content": "hi"}}},
                                        {"text": "Done."}]}]}, f)
    c = Child(t, settings={"model": "script", "providers": {"scripted": {"script": script}}})
    c.send(req("r1", "initialize", {"required_capabilities": []}))
    c.wait_id("r1")
    c.send(req("r2", "session.create"))
    sid = c.wait_id("r2")["result"]["session_id"]
    c.send(req("r3", "turn.start", {"session_id": sid, "prompt": "write a note"}))
    run_id = c.wait_id("r3")["result"]["run_id"]
    approval = None
    while approval is None:
        f = c.q.get(timeout=10)
        c.frames.append(f)
        if f.get("event") == "approval.requested":
            approval = f["data"]["approval_id"]
    c.send(req("r4", "approval.answer", {"session_id": sid, "run_id": run_id, "approval_id": approval, "allow": True}))
    c.wait_id("r4")
    c.send(req("r5", "approval.answer", {"session_id": sid, "run_id": run_id, "approval_id": approval, "allow": False}))
    c.wait_id("r5")
    while True:
        f = c.q.get(timeout=10)
        c.frames.append(f)
        if f.get("event") == "run.finished":
            break
    c.send(req("r6", "shutdown"))
    c.wait_id("r6")
    return c.wait_exit(), 0


def main():
    names = sys.argv[2:] or list(SCENARIOS)
    os.makedirs(OUT, exist_ok=True)
    for name in names:
        desc, f = SCENARIOS[name]
        with tempfile.NamedTemporaryFile(suffix=".jsonl", delete=False) as tmp:
            path = tmp.name
        code, want = f(path)
        assert code == want, f"{name}: exit {code}, want {want}"
        with open(path) as fh:
            lines = fh.read().splitlines()
        os.unlink(path)
        header = {"trace": "magi-code.local-agent.trace", "version": 1, "provenance": {
            "scenario": name, "description": desc, "captured": datetime.date.today().isoformat(),
            "source": "real magi-code serve --stdio over pipes, scripts/capture_traces.py",
            "client": "scripts/capture_traces.py (python3 subprocess pipes)"}}
        body = [l for l in lines if not l.startswith('{"trace"')]
        with open(os.path.join(OUT, f"{name}.jsonl"), "w") as fh:
            fh.write(json.dumps(header, separators=(",", ":")) + "\n")
            fh.write("\n".join(body) + "\n")
        r = subprocess.run([BIN, "replay", os.path.join(OUT, f"{name}.jsonl")], capture_output=True, text=True)
        print(f"{name}: exit {code}; replay: {r.stdout.strip().splitlines()[-1]}")


if __name__ == "__main__":
    main()
