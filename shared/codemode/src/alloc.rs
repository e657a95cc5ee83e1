//! The memory limit of scripts (`max_memory_mb`), in process.
//!
//! Monty checks a script's memory at its execution checkpoints by reading one process-wide count of live bytes
//! (`monty_types::LIVE_MEMORY`), which it expects a counting global allocator to keep. [`ScriptAllocator`] is that
//! allocator for a daemon where scripts run beside everything else: it counts only what is allocated and freed
//! on a thread while a script runs there ([`Metered`]), so the count is the memory of the scripts running at
//! that moment (together), not the daemon's. A thread's balance is taken out of the count when its script ends,
//! so memory that left the thread (a value handed to the host) never stays counted.
//!
//! Without the allocator installed (`#[global_allocator]` in the binary) Monty still refuses a single
//! allocation larger than the limit before making it (`'a' * 10**9`), but memory grown step by step is bounded
//! only by the time limit.

#![expect(unsafe_code, reason = "a global allocator is an unsafe trait; this one only forwards to System")]

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;
use std::sync::atomic::{AtomicIsize, Ordering};

thread_local! {
    /// Whether a script runs on this thread now.
    static ARMED: Cell<bool> = const { Cell::new(false) };
    /// Bytes this thread allocated minus bytes it freed since its script started.
    static BALANCE: Cell<isize> = const { Cell::new(0) };
}

/// The balances of every thread running a script now.
static SCRIPT_BYTES: AtomicIsize = AtomicIsize::new(0);

/// The system allocator, counting what script threads allocate (see the module docs). Install it in a binary:
///
/// ```ignore
/// #[global_allocator]
/// static ALLOC: minibot_codemode::ScriptAllocator = minibot_codemode::ScriptAllocator;
/// ```
pub struct ScriptAllocator;

// SAFETY: every method forwards its arguments unchanged to `System` and returns what `System` returned. The
// counting touches only const-initialised thread-locals without destructors and an atomic, none of which
// allocates, so it cannot re-enter the allocator.
unsafe impl GlobalAlloc for ScriptAllocator {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        count(layout.size().cast_signed());
        // SAFETY: the caller's layout, forwarded unchanged.
        unsafe { System.alloc(layout) }
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        count(-layout.size().cast_signed());
        // SAFETY: `ptr` came from `System` (through this allocator) with this layout.
        unsafe { System.dealloc(ptr, layout) }
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        count(layout.size().cast_signed());
        // SAFETY: the caller's layout, forwarded unchanged.
        unsafe { System.alloc_zeroed(layout) }
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        count(new_size.cast_signed() - layout.size().cast_signed());
        // SAFETY: `ptr` and `layout` describe a live block of this allocator; `new_size` is the caller's.
        unsafe { System.realloc(ptr, layout, new_size) }
    }
}

#[inline]
fn count(bytes: isize) {
    let armed = ARMED.try_with(Cell::get).unwrap_or(false);
    if !armed {
        return;
    }
    let _ = BALANCE.try_with(|balance| balance.set(balance.get() + bytes));
    let total = SCRIPT_BYTES.fetch_add(bytes, Ordering::Relaxed) + bytes;
    publish(total);
}

fn publish(total: isize) {
    monty_types::LIVE_MEMORY.store(total.max(0).cast_unsigned(), Ordering::Relaxed);
}

/// Counts this thread's allocations toward the scripts' memory while it lives.
pub(crate) struct Metered(());

impl Metered {
    /// Starts counting on this thread. Says whether the allocator is installed (the limit is then enforced).
    pub(crate) fn start() -> (Self, bool) {
        BALANCE.set(0);
        ARMED.set(true);
        let probe = std::hint::black_box(vec![0u8; 64]);
        let installed = BALANCE.get() > 0;
        drop(probe);
        if installed {
            // Monty measures against a baseline its own allocator would have taken; every byte counted here is a
            // script's.
            monty_types::BASELINE_MEMORY.store(0, Ordering::Relaxed);
        }
        (Self(()), installed)
    }
}

impl Drop for Metered {
    fn drop(&mut self) {
        ARMED.set(false);
        let balance = BALANCE.replace(0);
        let total = SCRIPT_BYTES.fetch_sub(balance, Ordering::Relaxed) - balance;
        publish(total);
    }
}
