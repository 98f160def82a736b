//! The engine's heap bound as an allocator, so the helper knows that an allocation was
//! refused (`code-mode.md` 8: "an uncaught error after the engine refused an allocation →
//! exec ran out of memory"), not only that some error was thrown.

use rquickjs::allocator::{Allocator, RustAllocator};
use std::cell::Cell;
use std::rc::Rc;

/// Rust's allocator under a byte bound, recording any refusal.
pub struct BoundedHeap {
    limit: usize,
    used: usize,
    refused: Rc<Cell<bool>>,
}

impl BoundedHeap {
    /// A heap of `limit` bytes; `refused` turns true at its first refusal.
    #[must_use]
    pub fn new(limit: usize, refused: Rc<Cell<bool>>) -> Self {
        Self {
            limit,
            used: 0,
            refused,
        }
    }

    fn admit(&mut self, more: usize) -> bool {
        if self.used.saturating_add(more) > self.limit {
            self.refused.set(true);
            return false;
        }
        true
    }
}

// The helper's only unsafe impl: the allocator trait is unsafe by contract. Every pointer
// comes from (and goes back to) `RustAllocator`, which keeps that contract; this only counts.
#[allow(unsafe_code)]
// SAFETY: alloc, calloc and realloc return RustAllocator's pointers or null, and every
// pointer given back is one of them (QuickJS frees only what this allocator returned).
unsafe impl Allocator for BoundedHeap {
    fn alloc(&mut self, size: usize) -> *mut u8 {
        if !self.admit(size) {
            return std::ptr::null_mut();
        }
        let p = RustAllocator.alloc(size);
        if !p.is_null() {
            // SAFETY: p was just returned by RustAllocator.
            self.used += unsafe { RustAllocator::usable_size(p) };
        }
        p
    }

    fn calloc(&mut self, count: usize, size: usize) -> *mut u8 {
        if !self.admit(count.saturating_mul(size)) {
            return std::ptr::null_mut();
        }
        let p = RustAllocator.calloc(count, size);
        if !p.is_null() {
            // SAFETY: p was just returned by RustAllocator.
            self.used += unsafe { RustAllocator::usable_size(p) };
        }
        p
    }

    unsafe fn dealloc(&mut self, ptr: *mut u8) {
        // SAFETY: the caller gives back a pointer of this allocator (so of RustAllocator).
        unsafe {
            self.used = self.used.saturating_sub(RustAllocator::usable_size(ptr));
            RustAllocator.dealloc(ptr);
        }
    }

    unsafe fn realloc(&mut self, ptr: *mut u8, new_size: usize) -> *mut u8 {
        if ptr.is_null() {
            return self.alloc(new_size);
        }
        // SAFETY: the caller gives back a pointer of this allocator (so of RustAllocator).
        let old = unsafe { RustAllocator::usable_size(ptr) };
        if new_size > old && !self.admit(new_size - old) {
            return std::ptr::null_mut();
        }
        // SAFETY: as above; on success the old pointer is RustAllocator's to forget.
        let p = unsafe { RustAllocator.realloc(ptr, new_size) };
        if !p.is_null() {
            // SAFETY: p was just returned by RustAllocator.
            self.used = self.used - old + unsafe { RustAllocator::usable_size(p) };
        }
        p
    }

    unsafe fn usable_size(ptr: *mut u8) -> usize {
        // SAFETY: the caller gives a pointer of this allocator (so of RustAllocator).
        unsafe { RustAllocator::usable_size(ptr) }
    }
}
