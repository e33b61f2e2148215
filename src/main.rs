fn main() -> std::process::ExitCode {
    mcpvisor::cli::main()
}
