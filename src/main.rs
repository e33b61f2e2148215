/// mimalloc instead of glibc's malloc: a gateway allocates and frees per
/// call across threads (sessions, connections, the audit writer), where
/// glibc's arena locks and consolidation showed up as a fifth of the
/// gateway's profile (docs/decisions.md, "The binary's allocator").
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() -> std::process::ExitCode {
    mcpvisor::cli::main()
}
