/// mimalloc instead of glibc's malloc: a gateway allocates and frees per
/// call across threads (sessions, connections, the audit writer), where
/// glibc's arena locks and consolidation showed up as a fifth of the
/// gateway's profile (docs/decisions.md, "The binary's allocator").
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

/// `mi_option_arena_eager_commit`, fifth in mimalloc 2's `mi_option_t`
/// (mimalloc.h); the crate names no constant for it.
#[cfg(target_os = "linux")]
const ARENA_EAGER_COMMIT: libmimalloc_sys::mi_option_t = 4;

/// Makes mimalloc commit its arena as it uses it, not all at once: about
/// 12 MB less RSS at the same CPU (docs/decisions.md), unless
/// `MIMALLOC_ARENA_EAGER_COMMIT` is set. An option must be set before
/// mimalloc reads its options, which its own constructor (priority 101)
/// does, and before anything allocates: so this is an `.init_array` entry
/// of priority 100, and it allocates nothing.
#[cfg(target_os = "linux")]
#[used]
#[link_section = ".init_array.00100"]
static LAZY_ARENA_COMMIT: extern "C" fn() = lazy_arena_commit;

#[cfg(target_os = "linux")]
extern "C" fn lazy_arena_commit() {
    // SAFETY: this runs alone, before `main` and before any thread exists, so
    // reading the environment races with nothing; `mi_option_set` only stores
    // a value in mimalloc's option table.
    unsafe {
        if libc::getenv(c"MIMALLOC_ARENA_EAGER_COMMIT".as_ptr()).is_null() {
            libmimalloc_sys::mi_option_set(ARENA_EAGER_COMMIT, 0);
        }
    }
}

fn main() -> std::process::ExitCode {
    mcpvisor::cli::main()
}
