//! Gives freed memory back to the system once the daemon has gone quiet. A burst of turns allocates copies of
//! each chat's history (the rows, the request, its JSON) and frees them when the turns end, but glibc's
//! allocator keeps freed pages that sit between live allocations: the soak's resident size followed the largest
//! burst it had served (+5 MiB over 18,000 messages while heaptrack showed a flat live heap). `malloc_trim`
//! returns those pages. It is not called while turns keep coming (the pages would only be faulted in again,
//! which cost the soak a quarter of its throughput), but [`QUIET_FOR`] after the last turn of a burst ended.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::time::Duration;

/// How long no turn may run before the memory is released.
pub const QUIET_FOR: Duration = Duration::from_secs(2);

/// Bursts ended so far: a release waits only for the latest one.
static BURSTS_ENDED: AtomicU64 = AtomicU64::new(0);

/// Called when the last running turn ended (`active` is the count of running turns): releases freed memory
/// after [`QUIET_FOR`] unless a turn runs by then. Outside a Tokio runtime (shutting down) it does nothing.
pub fn after_burst(active: Arc<AtomicUsize>) {
    let burst = BURSTS_ENDED.fetch_add(1, Ordering::SeqCst) + 1;
    let Ok(runtime) = tokio::runtime::Handle::try_current() else { return };
    runtime.spawn(async move {
        tokio::time::sleep(QUIET_FOR).await;
        if BURSTS_ENDED.load(Ordering::SeqCst) == burst && active.load(Ordering::SeqCst) == 0 {
            release_freed_memory();
        }
    });
}

#[cfg(all(target_os = "linux", target_env = "gnu"))]
#[allow(unsafe_code)]
fn release_freed_memory() {
    // SAFETY: `malloc_trim` takes no pointers and only walks glibc's own free lists, under the same arena locks
    // that `malloc` and `free` take, so it is safe to call from any thread at any time.
    unsafe {
        libc::malloc_trim(0);
    }
}

/// Other allocators (musl, macOS) return memory on their own terms; nothing to do.
#[cfg(not(all(target_os = "linux", target_env = "gnu")))]
fn release_freed_memory() {}
