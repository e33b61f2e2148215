/// mimalloc instead of glibc's malloc: a gateway allocates and frees per
/// call across threads (sessions, connections, the audit writer), where
/// glibc's arena locks and consolidation showed up as a fifth of the
/// gateway's profile (docs/decisions.md, "The binary's allocator").
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

/// `mi_option_arena_eager_commit`, fifth in mimalloc 3's `mi_option_t`
/// (mimalloc.h of libmimalloc-sys 0.1.49, pinned in Cargo.toml; mimalloc 2
/// numbers it the same); the crate names no constant for it. The tests
/// below read it back from the allocator this binary links.
#[cfg(target_os = "linux")]
const ARENA_EAGER_COMMIT: libmimalloc_sys::mi_option_t = 4;

/// The mimalloc major version [`ARENA_EAGER_COMMIT`] was read from.
#[cfg(all(test, target_os = "linux"))]
const MIMALLOC_MAJOR: i32 = 3;

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

/// The allocator options as the linked mimalloc holds them (issue 32: read
/// back, where a test of RSS margins measured their effect before).
#[cfg(all(test, target_os = "linux"))]
mod tests {
    use super::{ARENA_EAGER_COMMIT, MIMALLOC_MAJOR};

    #[test]
    fn the_linked_mimalloc_is_the_version_whose_option_numbers_are_used() {
        // SAFETY: mi_version only returns a constant.
        let linked = unsafe { libmimalloc_sys::mi_version() };
        assert_eq!(linked / 10000, MIMALLOC_MAJOR, "mimalloc {linked} is linked: check ARENA_EAGER_COMMIT against its mimalloc.h");
    }

    #[test]
    fn the_arena_is_committed_lazily_unless_the_environment_says_otherwise() {
        // SAFETY: mi_option_get only reads mimalloc's option table.
        let value = unsafe { libmimalloc_sys::mi_option_get(ARENA_EAGER_COMMIT) };
        match std::env::var("MIMALLOC_ARENA_EAGER_COMMIT") {
            // The variable wins over our default; mimalloc reads it as a number.
            Ok(set) => assert_eq!(Some(value), set.trim().parse().ok(), "MIMALLOC_ARENA_EAGER_COMMIT={set}"),
            Err(_) => assert_eq!(value, 0, "mi_option_arena_eager_commit is {value}: the .init_array entry did not run first"),
        }
    }

    #[test]
    fn the_options_beside_it_keep_mimallocs_defaults() {
        // Both neighbours default to 1 in mimalloc 3 (src/options.c), so a
        // number off by one would show here as a 0.
        for (option, variable) in
            [(ARENA_EAGER_COMMIT - 1, "MIMALLOC_DEPRECATED_EAGER_COMMIT"), (ARENA_EAGER_COMMIT + 1, "MIMALLOC_PURGE_DECOMMITS")]
        {
            if std::env::var_os(variable).is_none() {
                // SAFETY: mi_option_get only reads mimalloc's option table.
                assert_eq!(unsafe { libmimalloc_sys::mi_option_get(option) }, 1, "option {option} ({variable})");
            }
        }
    }
}
