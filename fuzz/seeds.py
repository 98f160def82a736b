#!/usr/bin/env python3
"""Writes the hand-made seed corpus into fuzz/corpus/<target>/seed-*.

Re-run after changing it: `python3 fuzz/seeds.py` (removes old seed-* files, keeps other
inputs that fuzzing found). Every seed is small except the deliberate oversize-ish lines.
"""
import json
import os
import pathlib

ROOT = pathlib.Path(__file__).resolve().parent / "corpus"
PROTO = '"protocol":"magi-code.local-agent","version":1'
BASE = [
    "initialize", "status", "shutdown", "session.create", "session.open", "session.list",
    "session.discover", "model.catalog", "model.catalog.status", "model.refresh",
    "operation.cancel", "selection.set", "history.page", "turn.start", "turn.cancel",
    "approval.answer",
]


def req(rid, method, params="{}"):
    """One request line (no LF); rid/method are raw JSON text when not plain strings."""
    rid_j = rid if rid.startswith(("{", "[", "1", "n", "t", '"')) else json.dumps(rid)
    m_j = method if method.startswith(("{", "[", "7", "n", '"')) else json.dumps(method)
    return ('{' + PROTO + ',"id":' + rid_j + ',"method":' + m_j + ',"params":' + params + '}').encode()


def init(rid="i1", caps=("status",), extra=""):
    return req(rid, "initialize", '{"required_capabilities":' + json.dumps(list(caps)) + extra + '}')


def nest(depth_total):
    """A request whose params nest so that the deepest container is at `depth_total`."""
    inner = depth_total - 2  # request object is 1, params object is 2
    return req("deep", "status", '{"a":' + "[" * inner + "]" * inner + "}")


SID = "s_1-A"
LINES = {
    "init-status": init(),
    "init-empty-caps": init(caps=()),
    "init-all-base": init(caps=BASE),
    "init-negotiated": init(caps=("session.discover", "model.catalog.status", "model.refresh", "operation.cancel")),
    "init-client-tools": init(caps=("status", "client.tools"), extra=',"client_tools":[]'),
    "init-tool-cards": init(caps=("tool.cards",)),
    "init-unknown-cap": init(caps=("bogus",)),
    "init-17-caps": init(caps=BASE + ["tool.cards"]),
    "init-19-caps": init(caps=BASE + ["tool.cards", "client.tools", "x"]),
    "init-bad-cap-grammar": init(caps=("a b",)),
    "init-cap-not-string": req("i1", "initialize", '{"required_capabilities":[1]}'),
    "init-params-array": req("i1", "initialize", "[]"),
    "init-extra-param": init(extra=',"x":1'),
    "status": req("r1", "status"),
    "status-params-null": req("r1", "status", "null"),
    "status-params-extra": req("r1", "status", '{"x":1}'),
    "shutdown": req("r2", "shutdown"),
    "session-create": req("r3", "session.create"),
    "session-open": req("r4", "session.open", json.dumps({"session_id": SID})),
    "session-open-bad-sid": req("r4", "session.open", '{"session_id":"a.b"}'),
    "session-list": req("r5", "session.list"),
    "session-list-page": req("r5", "session.list", '{"revision":"rev-1","cursor":"c1","limit":5}'),
    "session-list-half-pair": req("r5", "session.list", '{"revision":"rev-1","limit":0}'),
    "session-discover": req("r6", "session.discover", '{"cursor":null,"limit":100}'),
    "model-catalog": req("r7", "model.catalog", '{"limit":101}'),
    "model-catalog-status": req("r8", "model.catalog.status"),
    "model-refresh": req("r9", "model.refresh", '{"provider":"scripted"}'),
    "model-refresh-control": req("r9", "model.refresh", '{"provider":"a\\u0001b"}'),
    "operation-cancel": req("r10", "operation.cancel", '{"request_id":"r5"}'),
    "selection-set": req("r11", "selection.set", json.dumps({
        "session_id": SID, "selection_revision": "sel-1", "catalog_revision": "cat-1",
        "provider": "scripted", "model": "echo", "effort": {"mode": "set", "value": "high"}})),
    "selection-set-default": req("r11", "selection.set", json.dumps({
        "session_id": SID, "selection_revision": "sel-1", "catalog_revision": "cat-1",
        "provider": "scripted", "model": "echo", "effort": {"mode": "default"}})),
    "history-page": req("r12", "history.page", json.dumps({"session_id": SID, "revision": "h1", "cursor": None})),
    "turn-start": req("r13", "turn.start", json.dumps({"session_id": SID, "prompt": "hello"})),
    "turn-start-blank": req("r13", "turn.start", '{"session_id":"s1","prompt":" \\u3000\\t"}'),
    "turn-start-emoji": req("r13", "turn.start", '{"session_id":"s1","prompt":"\\ud83d\\ude00 ok"}'),
    "turn-cancel": req("r14", "turn.cancel", json.dumps({"session_id": SID, "run_id": "run-1"})),
    "approval-answer": req("r15", "approval.answer", json.dumps(
        {"session_id": SID, "run_id": "run-1", "approval_id": "ap-1", "allow": True})),
    "client-tool-result": req("r16", "client.tool.result", "{}"),
    "tool-cards-method": req("r16", "tool.cards", "{}"),
    "unknown-method": req("r17", "frobnicate"),
    "method-bad-grammar": req("r18", "a b"),
    "method-number": req("r19", "7"),
    "method-empty": req("r19", '""'),
    "dup-id": b'{' + PROTO.encode() + b',"id":"a","id":"b","method":"status","params":{}}',
    "dup-id-escaped": b'{' + PROTO.encode() + b',"id":"a","\\u0069d":"a","method":"status","params":{}}',
    "dup-method-escaped": b'{' + PROTO.encode() + b',"id":"a","method":"status","\\u006dethod":"status","params":{}}',
    "dup-params-escaped": req("r20", "status", '{"a":1,"\\u0061":2}'),
    "dup-nested": req("r20", "session.open", '{"session_id":"s1","x":[{"k":1,"k":1}]}'),
    "no-dup-array": req("r20", "status", '[{"a":1},{"a":2}]'),
    "depth-32": nest(32),
    "depth-33": nest(33),
    "depth-arrays-32": b"[" * 32 + b"]" * 32,
    "depth-arrays-33": b"[" * 33 + b"]" * 33,
    "depth-objects-33": b'{"a":' * 33 + b"1" + b"}" * 33,
    "depth-in-string": req("r21", "turn.start", json.dumps({"session_id": "s1", "prompt": "[" * 40})),
    "depth-open-only": b"[" * 200,
    "depth-utf8-precedence": b"[" * 40 + b"\xff",
    "utf8-ff-in-string": b'{' + PROTO.encode() + b',"id":"r1","method":"status","params":{"x":"\xff"}}',
    "utf8-overlong": b'{"id":"\xc0\xaf"}',
    "utf8-truncated": b'{"id":"r1","x":"\xe2\x82"}',
    "utf8-surrogate-raw": b'{"id":"\xed\xa0\x80"}',
    "utf8-valid-multibyte": req("r22", "turn.start", '{"session_id":"s1","prompt":"h\xc3\xa9llo \xe2\x82\xac \xf0\x9f\x98\x80"}'),
    "lone-surrogate-id": req('"\\ud800"', "status"),
    "lone-surrogate-prompt": req("r23", "turn.start", '{"session_id":"s1","prompt":"\\udc00x"}'),
    "surrogate-bad-pair": req("r23", "turn.start", '{"session_id":"s1","prompt":"\\ud800\\u0041"}'),
    "nul-escape": req("r24", "turn.start", '{"session_id":"s1","prompt":"a\\u0000b"}'),
    "protocol-mismatch": b'{"protocol":"x","version":1,"id":"a","method":"status","params":{}}',
    "version-2": b'{"protocol":"magi-code.local-agent","version":2,"id":"a","method":"status","params":{}}',
    "version-float": b'{"protocol":"magi-code.local-agent","version":1.0,"id":"a","method":"status","params":{}}',
    "version-string": b'{"protocol":"magi-code.local-agent","version":"1","id":"a","method":"status","params":{}}',
    "version-huge": b'{"protocol":"magi-code.local-agent","version":18446744073709551617,"id":"a","method":"status","params":{}}',
    "missing-protocol": b'{"version":1,"id":"a","method":"status","params":{}}',
    "missing-params": b'{' + PROTO.encode() + b',"id":"a","method":"status"}',
    "extra-field": b'{' + PROTO.encode() + b',"id":"a","method":"status","params":{},"x":1}',
    "id-64": req("a" * 64, "status"),
    "id-65": req("a" * 65, "status"),
    "id-empty": req('""', "status"),
    "id-number": req("1", "status"),
    "id-null": req("null", "status"),
    "id-space": req('"a b"', "status"),
    "id-escaped": req('"\\u0072\\u0031"', "status"),
    "non-object-array": b"[1]",
    "non-object-string": b'"status"',
    "non-object-null": b"null",
    "non-object-number": b"1e400",
    "trailing-garbage": req("r25", "status") + b" x",
    "trailing-cr": req("r25", "status") + b"\r",
    "leading-ws": b" \t" + req("r25", "status"),
    "truncated-json": req("r25", "status")[:-3],
    "bom": b"\xef\xbb\xbf" + req("r25", "status"),
    "empty": b"",
    "blank-cr": b"\r",
    "blank-ws": b" \t \r",
}


def lf(*lines):
    return b"".join(l + b"\n" for l in lines)


def pad_to(line, total):
    """Pads a status request with spaces before the closing brace so it is `total` bytes long."""
    assert len(line) < total
    return line[:-1] + b" " * (total - len(line)) + b"}"


L = LINES
I = L["init-status"]
STREAMS = {
    "init-status-shutdown": lf(I, L["status"], L["shutdown"]),
    "init-status": lf(I, L["status"]),
    "status-before-init": lf(L["status"], I),
    "init-twice": lf(I, init(rid="i2")),
    "init-all-then-each": lf(init(caps=BASE), *(L[k] for k in (
        "session-create", "session-open", "session-list", "session-discover", "model-catalog",
        "model-catalog-status", "model-refresh", "operation-cancel", "selection-set",
        "history-page", "turn-start", "turn-cancel", "approval-answer"))),
    "init-negotiated-then-extras": lf(L["init-negotiated"], L["session-discover"],
                                      L["model-catalog-status"], L["model-refresh"], L["operation-cancel"]),
    "init-unknown-method": lf(I, L["unknown-method"], L["client-tool-result"], L["tool-cards-method"]),
    "init-turn": lf(I, L["turn-start"], L["turn-cancel"]),
    "dup-request-id": lf(I, L["status"], L["status"]),
    "dup-keys": lf(I, L["dup-id"], L["dup-id-escaped"], L["dup-params-escaped"], L["dup-nested"], L["status"]),
    "empty-lines": b"\n\r\n \t\n" + lf(I) + b"\n" + lf(L["status"]),
    "crlf": b"".join(l + b"\r\n" for l in (I, L["status"], L["shutdown"])),
    "invalid-utf8-then-status": lf(I, L["utf8-ff-in-string"], L["utf8-overlong"], L["status"]),
    "depth-then-status": lf(I, L["depth-32"], L["depth-33"], L["depth-arrays-33"], L["status"]),
    "surrogates": lf(I, L["lone-surrogate-id"], L["lone-surrogate-prompt"], L["turn-start-emoji"]),
    "protocol-mismatch": lf(I, L["protocol-mismatch"], L["status"]),
    "version-mismatch-first": lf(L["version-2"], I),
    "bad-ids": lf(I, L["id-65"], L["id-empty"], L["id-number"], L["id-null"], L["id-space"], L["id-64"]),
    "non-objects": lf(L["non-object-array"], L["non-object-string"], L["non-object-null"], I),
    "unterminated": lf(I) + L["status"],
    "unterminated-utf8": lf(I) + b'{"id":"\xe2',
    "shutdown-then-more": lf(I, L["shutdown"], L["status"], L["session-create"]),
    "shutdown-before-init": lf(L["shutdown"], L["status"]),
    "pipelined-40": lf(I, *(req(f"p{n}", "status") for n in range(40))),
    "mixed-garbage": lf(I, b"{", b"}", b'{"id":', b"x" * 100, L["status"]),
    "nul-bytes": lf(I) + b"\x00\x00\n" + lf(L["status"]),
}

# Oversize-ish lines: exactly the bound (accepted) and one byte over (frame_too_large).
BIG_OK = pad_to(req("big", "status"), 65536)
BIG_OVER = pad_to(req("big", "status"), 65537)

MODES = [0x00, 0x01, 0x02, 0x03, 0x04, 0x40, 0x41, 0x80, 0x81, 0x84, 0xC0, 0xC2, 0xC4]


def write(target, name, data):
    d = ROOT / target
    d.mkdir(parents=True, exist_ok=True)
    (d / ("seed-" + name)).write_bytes(data)


def main():
    for target in ("framing", "envelope", "engine"):
        d = ROOT / target
        if d.is_dir():
            for p in d.glob("seed-*"):
                p.unlink()
    # envelope: one line, LF excluded.
    for name, line in LINES.items():
        write("envelope", name, line)
    write("envelope", "big-65536", BIG_OK)
    # framing: byte streams (the first byte of each chunk steers the next chunk size).
    for name, data in STREAMS.items():
        write("framing", name, data)
    write("framing", "single-lf", b"\n")
    write("framing", "no-lf", b"abc")
    write("framing", "lf-run", b"\n" * 64)
    write("framing", "big-65536", BIG_OK + b"\n" + L["status"] + b"\n")
    write("framing", "big-65537", BIG_OVER + b"\n" + L["status"] + b"\n")
    write("framing", "big-cr-over", BIG_OK + b"\r\n")
    # engine: mode byte, then the client's input.
    for i, (name, data) in enumerate(STREAMS.items()):
        mode = MODES[i % len(MODES)]
        write("engine", f"{name}-m{mode:02x}", bytes([mode]) + data)
    for mode in (0x00, 0x40, 0x80, 0xC0, 0xC4):
        write("engine", f"init-status-shutdown-m{mode:02x}", bytes([mode]) + STREAMS["init-status-shutdown"])
    write("engine", "mode-only-m80", b"\x80")
    write("engine", "stall-pipelined-m40", b"\x40" + STREAMS["pipelined-40"])
    write("engine", "big-65536-m80", b"\x80" + lf(I, BIG_OK, L["status"]))
    write("engine", "big-65537-m84", b"\x84" + lf(I, BIG_OVER, L["status"]))


if __name__ == "__main__":
    main()
