// The globals of code-mode.md section 3, built once per cell before the model's code runs.
// `host` holds the natives (out, call, store, load); `toolsJson` the reachable tools
// sorted by name; `maxCalls` the cell's bound. Returns the glue the engine calls: settle,
// compile, returned, failure.
(function (host, toolsJson, maxCalls) {
  "use strict";
  const stringify = JSON.stringify;
  const parse = JSON.parse;
  // Lone surrogates become U+FFFD on the way out: Rust strings are UTF-8.
  const wellFormed = Function.prototype.call.bind(String.prototype.toWellFormed);
  const toStr = (v) => wellFormed(String(v));
  const list = parse(toolsJson);
  const decl = new Map(list.map((t) => [t.name, t.declaration]));
  const pending = new Map();

  class ToolError extends Error {
    constructor(code, message) {
      super(message);
      this.code = code;
    }
  }
  Object.defineProperty(ToolError.prototype, "name", {
    value: "ToolError",
    writable: true,
    configurable: true,
  });

  // Strings as they are, other values as compact JSON (errors as `Name: message`).
  const show = (v) => {
    if (typeof v === "string") return wellFormed(v);
    if (v instanceof Error) return toStr(v.name) + ": " + toStr(v.message);
    try {
      const j = stringify(v);
      if (j !== undefined) return j;
    } catch (_) {}
    try {
      return toStr(v);
    } catch (_) {
      return "[value]";
    }
  };
  const line = (args) => host.out(args.map(show).join(" "));
  const console = Object.freeze({
    log: (...a) => line(a),
    info: (...a) => line(a),
    warn: (...a) => line(a),
    error: (...a) => line(a),
  });
  const text = (value) => host.out(show(value));

  // A ToolError whose stack is the one where the code made the call (code-mode.md 5: an
  // uncaught one names the model's line), not the glue's that settles it.
  const thrown = (code, message, site) => {
    const e = new ToolError(code, message);
    if (typeof site === "string") {
      Object.defineProperty(e, "stack", { value: site, writable: true, configurable: true });
    }
    return e;
  };

  // Every call within maxCalls goes to the backend, which records it, refused ones included:
  // a name that is not reachable, an input JSON cannot hold (sent as null with its refusal).
  // One past maxCalls throws limit here and is never sent (decisions.md 52).
  async function call(name, input) {
    const site = new Error().stack;
    let json;
    try {
      json = stringify(input === undefined ? null : input);
      if (json === undefined) json = "null";
    } catch (_) {
      json = null;
    }
    const id = host.call(name, json);
    if (id < 0) throw thrown("limit", "limit: a cell makes at most " + maxCalls + " tool calls", site);
    return await new Promise((resolve, reject) => pending.set(id, { resolve, reject, site }));
  }

  const fns = new Map();
  const fn = (name) => {
    let f = fns.get(name);
    if (f === undefined) {
      f = (input) => call(name, input);
      fns.set(name, f);
    }
    return f;
  };
  const reachable = (p) => typeof p === "string" && decl.has(p);
  // Every string property is a tool function; `then` only when it is a tool, so that
  // `await tools` or returning it does not issue a call.
  const tools = new Proxy(Object.create(null), {
    get: (_, p) => (typeof p !== "string" || (p === "then" && !decl.has(p)) ? undefined : fn(p)),
    has: (_, p) => reachable(p),
    ownKeys: () => list.map((t) => t.name),
    getOwnPropertyDescriptor: (_, p) =>
      reachable(p) ? { value: fn(p), enumerable: true, configurable: true, writable: false } : undefined,
    set: () => false,
    defineProperty: () => false,
    deleteProperty: () => false,
  });

  const ALL_TOOLS = Object.freeze(list.map((t) => Object.freeze({ name: t.name, description: t.description })));
  const describe = (name) => (reachable(name) ? decl.get(name) : null);

  function store(key, value) {
    const k = toStr(key);
    let j;
    try {
      j = stringify(value);
    } catch (e) {
      throw new ToolError("invalid_input", "the value is not JSON: " + toStr(e && e.message));
    }
    if (!host.store(k, j)) {
      throw new ToolError("limit", "store keeps at most 1 MiB (keys and JSON values)");
    }
  }
  function load(key) {
    const j = host.load(toStr(key));
    return j === undefined ? undefined : parse(j);
  }

  const globals = { tools, ToolError, text, console, describe, ALL_TOOLS, store, load };
  for (const [k, v] of Object.entries(globals)) {
    Object.defineProperty(globalThis, k, { value: v, writable: true, configurable: true, enumerable: false });
  }
  // Not ECMAScript, and each a way around "no timers": gone before the code runs.
  for (const k of ["queueMicrotask", "Atomics", "SharedArrayBuffer"]) delete globalThis[k];

  const AsyncFunction = (async function () {}).constructor;
  return {
    settle(id, ok, a, b) {
      const p = pending.get(id);
      if (p === undefined) return;
      pending.delete(id);
      if (ok) p.resolve(a);
      else p.reject(thrown(a, b, p.site));
    },
    compile: (code) => AsyncFunction(code),
    returned(v) {
      if (v === undefined) return undefined;
      try {
        const j = stringify(v);
        return j === undefined ? undefined : j;
      } catch (_) {
        return show(v);
      }
    },
    failure(e) {
      if (e instanceof Error) {
        const stack = typeof e.stack === "string" ? wellFormed(e.stack) : "";
        return [toStr(e.name) + ": " + toStr(e.message), stack];
      }
      return ["Uncaught " + show(e), ""];
    },
  };
});
