//! One cell in a fresh QuickJS runtime and context (`code-mode.md` 4): the globals of section 3
//! from `prelude.js`, the code as an async function body, its promise driven by the job queue
//! and the backend's answers, under the heap, CPU and interrupt limits.

use super::cpu::CpuBudget;
use super::heap::BoundedHeap;
use super::protocol::{CallAnswer, CallResult, Cell, CellState, Done, InterruptReason};
use super::source::model_stack;
use super::state::{Issued, Shared, Store, RUNAWAY_TEXT};
use super::text::strip_fence;
use rquickjs::context::intrinsic::{
    Date, Eval, Json, MapSet, Promise as PromiseIntrinsic, Proxy, RegExp, RegExpCompiler,
    TypedArrays, WeakRef,
};
use rquickjs::promise::PromiseState;
use rquickjs::{Context, Ctx, Function, Object, Promise, Runtime, Value};
use std::cell::{Cell as Flag, RefCell};
use std::rc::Rc;
use std::sync::atomic::{AtomicU8, Ordering};
use std::sync::Arc;
use std::time::Duration;

/// The ECMAScript intrinsics; none of QuickJS's host extras (`performance`, `atob`).
type Intrinsics = (
    Date,
    Eval,
    RegExpCompiler,
    RegExp,
    Json,
    Proxy,
    MapSet,
    TypedArrays,
    PromiseIntrinsic,
    WeakRef,
);

const PRELUDE: &str = include_str!("prelude.js");

/// What the engine heard from the backend while the code awaited a call.
#[derive(Debug)]
pub enum Heard {
    /// A call's answer.
    Result(CallResult),
    /// Stop the cell.
    Interrupt(InterruptReason),
    /// The backend is gone (stdin closed or broke the protocol).
    Gone,
}

/// The engine's line to the backend during a cell.
pub trait Link {
    /// Writes a nested call (`more`: others of the same flush follow); false when the
    /// backend is gone.
    fn send_call(&mut self, c: &Issued, more: bool) -> bool;
    /// Blocks until the backend says something for this cell.
    fn wait(&mut self) -> Heard;
}

/// An interrupt the backend asked for while the code runs, raised by the stdin reader and
/// read by the engine's interrupt handler.
#[derive(Debug, Clone, Default)]
pub struct Interrupt(Arc<AtomicU8>);

impl Interrupt {
    /// Asks the running cell to stop.
    pub fn raise(&self, reason: InterruptReason) {
        let v = match reason {
            InterruptReason::Timeout => 1,
            InterruptReason::Cancel => 2,
        };
        self.0.store(v, Ordering::SeqCst);
    }

    /// Forgets any interrupt (a new cell starts).
    pub fn clear(&self) {
        self.0.store(0, Ordering::SeqCst);
    }

    fn state(&self) -> Option<CellState> {
        match self.0.load(Ordering::SeqCst) {
            1 => Some(CellState::TimedOut),
            2 => Some(CellState::Cancelled),
            _ => None,
        }
    }
}

/// What one helper keeps between cells.
#[derive(Debug)]
pub struct Keep {
    /// `store`/`load` values.
    pub store: Store,
    /// The next nested call's number.
    pub next_call: u64,
}

impl Default for Keep {
    fn default() -> Self {
        Self {
            store: Store::default(),
            next_call: 1,
        }
    }
}

/// How the code ended: the state and the text after the console lines.
type Ending = (CellState, Option<String>);

/// Runs `cell` to its end; `None` when the backend went away mid-cell.
pub fn run(
    cell: &Cell,
    keep: &mut Keep,
    link: &mut dyn Link,
    interrupt: &Interrupt,
) -> Option<Done> {
    let store = std::mem::take(&mut keep.store);
    let shared = Rc::new(RefCell::new(Shared::new(
        cell.max_calls,
        keep.next_call,
        store,
    )));
    let stop: Rc<Flag<Option<CellState>>> = Rc::new(Flag::new(None));
    let ending = in_runtime(cell, &shared, &stop, link, interrupt);
    let mut shared = shared.borrow_mut();
    keep.next_call = shared.next_call();
    keep.store = std::mem::take(&mut shared.store);
    let (state, tail) = ending?;
    // Calls refused past `max_calls` are said first (`decisions.md` 52).
    let mut output = shared.refused_line().unwrap_or_default();
    let said = shared.out.text();
    if !said.is_empty() {
        if !output.is_empty() {
            output.push('\n');
        }
        output.push_str(&said);
    }
    if let Some(tail) = tail.filter(|t| !t.is_empty()) {
        if !output.is_empty() {
            output.push('\n');
        }
        output.push_str(crate::util::text::cut(&tail, super::protocol::OUTPUT_BYTES));
    }
    Some(Done {
        id: cell.id.clone(),
        state,
        output,
        calls: shared.calls,
    })
}

fn in_runtime(
    cell: &Cell,
    shared: &Rc<RefCell<Shared>>,
    stop: &Rc<Flag<Option<CellState>>>,
    link: &mut dyn Link,
    interrupt: &Interrupt,
) -> Option<Ending> {
    let failed = |why: &str| Some((CellState::Failed, Some(format!("Error: {why}"))));
    let heap = usize::try_from(cell.memory_mib.saturating_mul(1024 * 1024)).unwrap_or(usize::MAX);
    let refused = Rc::new(Flag::new(false));
    let Ok(rt) = Runtime::new_with_alloc(BoundedHeap::new(heap, Rc::clone(&refused))) else {
        return failed("the engine could not start");
    };
    let mut cpu = CpuBudget::new(Duration::from_millis(cell.cpu_ms));
    let (flag, seen) = (interrupt.clone(), Rc::clone(stop));
    let runaway = Rc::clone(&shared.borrow().runaway);
    let watched = Rc::clone(&runaway);
    rt.set_interrupt_handler(Some(Box::new(move || {
        if seen.get().is_some() {
            return true;
        }
        let why = flag
            .state()
            .or_else(|| watched.get().then_some(CellState::Failed))
            .or_else(|| cpu.spent().then_some(CellState::TimedOut));
        seen.set(why);
        why.is_some()
    })));
    let Ok(ctx) = Context::custom::<Intrinsics>(&rt) else {
        return failed("the engine could not start");
    };
    let watch = Watch {
        stop: Rc::clone(stop),
        refused,
        runaway,
    };
    ctx.with(|ctx| drive(&ctx, cell, shared, &watch, link))
}

/// What the runtime's hooks saw: the interrupt that stopped the code, a refused allocation,
/// calls past the runaway bound.
struct Watch {
    stop: Rc<Flag<Option<CellState>>>,
    refused: Rc<Flag<bool>>,
    runaway: Rc<Flag<bool>>,
}

impl Watch {
    /// The ending of code the interrupt handler stopped, if it did.
    fn stopped(&self) -> Option<Ending> {
        let state = self.stop.get()?;
        let why = (state == CellState::Failed && self.runaway.get()).then(|| RUNAWAY_TEXT.into());
        Some((state, why))
    }
}

/// The uncaught error of a refused allocation when the error itself could not be read.
const OOM_TEXT: &str = "InternalError: out of memory";

/// The prelude's glue functions.
struct Glue<'js> {
    settle: Function<'js>,
    compile: Function<'js>,
    returned: Function<'js>,
    failure: Function<'js>,
}

fn drive<'js>(
    ctx: &Ctx<'js>,
    cell: &Cell,
    shared: &Rc<RefCell<Shared>>,
    watch: &Watch,
    link: &mut dyn Link,
) -> Option<Ending> {
    let Ok(glue) = install(ctx, cell, shared) else {
        return Some(uncaught(ctx, None, ctx.catch(), watch));
    };
    let code = strip_fence(&cell.code).code;
    let started = glue
        .compile
        .call::<_, Function<'js>>((code,))
        .and_then(|f| f.call::<_, Promise<'js>>(()));
    let Ok(promise) = started else {
        return Some(uncaught(ctx, Some(&glue), ctx.catch(), watch));
    };
    loop {
        while ctx.execute_pending_job() {
            if !flush(shared, link) {
                return None;
            }
            if let Some(end) = watch.stopped() {
                return Some(end);
            }
        }
        if !flush(shared, link) {
            return None;
        }
        if let Some(end) = watch.stopped() {
            return Some(end);
        }
        match promise.state() {
            PromiseState::Resolved => return Some(finished(ctx, &glue, &promise, watch)),
            PromiseState::Rejected => {
                // A rejected promise's result comes back thrown, for `catch` to take.
                drop(promise.result::<Value<'js>>());
                return Some(uncaught(ctx, Some(&glue), ctx.catch(), watch));
            }
            PromiseState::Pending => {}
        }
        if shared.borrow().outstanding.is_empty() {
            let why =
                "Error: the code awaits a promise that nothing settles (no tool call is in flight)";
            return Some((CellState::Failed, Some(why.to_owned())));
        }
        match link.wait() {
            Heard::Result(r) => settle(&glue, shared, r),
            Heard::Interrupt(InterruptReason::Timeout) => return Some((CellState::TimedOut, None)),
            Heard::Interrupt(InterruptReason::Cancel) => return Some((CellState::Cancelled, None)),
            Heard::Gone => return None,
        }
    }
}

/// Builds the globals: the natives the prelude closes over, then the prelude itself.
fn install<'js>(
    ctx: &Ctx<'js>,
    cell: &Cell,
    shared: &Rc<RefCell<Shared>>,
) -> rquickjs::Result<Glue<'js>> {
    let host = Object::new(ctx.clone())?;
    let s = Rc::clone(shared);
    host.set(
        "out",
        Function::new(ctx.clone(), move |t: String| s.borrow_mut().out.push(t))?,
    )?;
    let s = Rc::clone(shared);
    host.set(
        "call",
        Function::new(ctx.clone(), move |name: String, json: Option<String>| {
            s.borrow_mut().issue(name, json.as_deref())
        })?,
    )?;
    let s = Rc::clone(shared);
    host.set(
        "store",
        Function::new(ctx.clone(), move |k: String, j: Option<String>| {
            s.borrow_mut().store.put(k, j)
        })?,
    )?;
    let s = Rc::clone(shared);
    host.set(
        "load",
        Function::new(ctx.clone(), move |k: String| s.borrow().store.get(&k))?,
    )?;
    let mut tools = cell.tools.clone();
    // `exec` is never reachable from code, even if the backend listed it.
    tools.retain(|t| t.name != "exec");
    tools.sort_by(|a, b| a.name.cmp(&b.name));
    tools.dedup_by(|a, b| a.name == b.name);
    let tools_json = serde_json::to_string(&tools).unwrap_or_else(|_| "[]".to_owned());
    let prelude: Function<'js> = ctx.eval(PRELUDE)?;
    let glue: Object<'js> = prelude.call((host, tools_json, cell.max_calls))?;
    Ok(Glue {
        settle: glue.get("settle")?,
        compile: glue.get("compile")?,
        returned: glue.get("returned")?,
        failure: glue.get("failure")?,
    })
}

/// Writes the calls the code issued since the last flush; false when the backend is gone.
fn flush(shared: &Rc<RefCell<Shared>>, link: &mut dyn Link) -> bool {
    let queued = std::mem::take(&mut shared.borrow_mut().queued);
    let last = queued.len().saturating_sub(1);
    for (i, c) in queued.iter().enumerate() {
        if !link.send_call(c, i < last) {
            return false;
        }
        shared.borrow_mut().outstanding.insert(c.call);
    }
    true
}

/// Hands a call's answer to the code; an answer to a call not in flight is dropped.
fn settle(glue: &Glue<'_>, shared: &Rc<RefCell<Shared>>, r: CallResult) {
    if !shared.borrow_mut().outstanding.remove(&r.call) {
        return;
    }
    let done = match r.answer {
        CallAnswer::Output(o) => glue.settle.call::<_, ()>((r.call, true, o)),
        CallAnswer::Error { code, message } => {
            glue.settle
                .call::<_, ()>((r.call, false, code.as_str(), message))
        }
    };
    // Settling only resolves a promise; a refused allocation there shows when the code resumes.
    drop(done);
}

fn finished<'js>(
    ctx: &Ctx<'js>,
    glue: &Glue<'js>,
    promise: &Promise<'js>,
    watch: &Watch,
) -> Ending {
    let Some(Ok(value)) = promise.result::<Value<'js>>() else {
        return uncaught(ctx, Some(glue), ctx.catch(), watch);
    };
    match glue.returned.call::<_, Option<String>>((value,)) {
        Ok(json) => (CellState::Completed, json),
        Err(_) => uncaught(ctx, Some(glue), ctx.catch(), watch),
    }
}

/// The ending of an uncaught `error`: the interrupt's state if one stopped the code, out of
/// memory when the engine had refused an allocation, else failed; with the error's text.
fn uncaught<'js>(
    ctx: &Ctx<'js>,
    glue: Option<&Glue<'js>>,
    error: Value<'js>,
    watch: &Watch,
) -> Ending {
    if let Some(end) = watch.stopped() {
        return end;
    }
    // Read before the error is formatted, which may itself be refused memory.
    let (state, unreadable) = if watch.refused.get() {
        (CellState::OutOfMemory, OOM_TEXT)
    } else {
        (
            CellState::Failed,
            "Error: the uncaught error could not be read",
        )
    };
    let text = glue.and_then(|g| g.failure.call::<_, Vec<String>>((error,)).ok());
    let Some([head, stack]) = text.and_then(|t| <[String; 2]>::try_from(t).ok()) else {
        drop(ctx.catch());
        return (state, Some(unreadable.to_owned()));
    };
    let stack = model_stack(&stack);
    let text = if stack.is_empty() {
        head
    } else {
        format!("{head}\n{stack}")
    };
    (state, Some(text))
}
