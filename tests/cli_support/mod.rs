//! A sandbox for running the real `mcpvisor` binary: its own home, XDG
//! directory, user file and project directory, so no test sees the
//! user's real configuration or another test's.

#![allow(dead_code)]

use std::path::{Path, PathBuf};

use assert_cmd::Command;

pub const BIN: &str = env!("CARGO_BIN_EXE_mcpvisor");

pub struct Sandbox {
    _root: tempfile::TempDir,
    pub home: PathBuf,
    /// The user file (`MCPVISOR_CONFIG`).
    pub user_file: PathBuf,
    /// The working directory of every command.
    pub project: PathBuf,
}

impl Sandbox {
    pub fn new() -> Sandbox {
        let root = tempfile::tempdir().expect("a temporary directory");
        let home = root.path().join("home");
        let project = root.path().join("project");
        std::fs::create_dir_all(&home).unwrap();
        std::fs::create_dir_all(&project).unwrap();
        let user_file = home.join("config/servers.toml");
        Sandbox { _root: root, home, user_file, project }
    }

    /// `mcpvisor ARGS` in the project directory with the sandbox's environment.
    pub fn cmd<I, S>(&self, args: I) -> Command
    where
        I: IntoIterator<Item = S>,
        S: AsRef<std::ffi::OsStr>,
    {
        Command::from_std(self.std_cmd(args))
    }

    /// [`Sandbox::cmd`] as a plain `std::process::Command`.
    pub fn std_cmd<I, S>(&self, args: I) -> std::process::Command
    where
        I: IntoIterator<Item = S>,
        S: AsRef<std::ffi::OsStr>,
    {
        let mut command = std::process::Command::new(BIN);
        command
            .args(args)
            .current_dir(&self.project)
            .env("HOME", &self.home)
            .env("XDG_CONFIG_HOME", self.home.join("xdg"))
            .env("XDG_CACHE_HOME", self.cache_home())
            .env("XDG_DATA_HOME", self.home.join("data"))
            .env("MCPVISOR_CONFIG", &self.user_file)
            // State (trust record, tool pins, audit log) under the sandbox's home, whatever the runner has set.
            .env_remove("XDG_STATE_HOME")
            .env_remove("RUST_LOG")
            .env_remove("NO_COLOR");
        command
    }

    /// Runs the command and parses its stdout as JSON (whatever the exit code).
    pub fn json<I, S>(&self, args: I) -> (serde_json::Value, i32)
    where
        I: IntoIterator<Item = S>,
        S: AsRef<std::ffi::OsStr>,
    {
        let output = self.cmd(args).output().expect("mcpvisor runs");
        let stdout = String::from_utf8_lossy(&output.stdout);
        let value = serde_json::from_str(&stdout)
            .unwrap_or_else(|e| panic!("stdout is not JSON ({e}): {stdout}\nstderr: {}", String::from_utf8_lossy(&output.stderr)));
        (value, output.status.code().unwrap_or(-1))
    }

    pub fn write(&self, relative: &str, text: &str) -> PathBuf {
        let path = self.project.join(relative);
        write(&path, text);
        path
    }

    /// `XDG_CACHE_HOME` of every command (the tool cache is `mcpvisor/tools` in it).
    pub fn cache_home(&self) -> PathBuf {
        self.home.join("cache")
    }

    /// `mcpvisor trust` in the project: its project files, as they are now,
    /// may start servers (a new or changed one is untrusted again).
    pub fn trust(&self) {
        let output = self.cmd(["trust"]).output().expect("mcpvisor runs");
        assert!(output.status.success(), "mcpvisor trust failed: {}", stderr(&output));
    }

    pub fn write_user_file(&self, text: &str) {
        write(&self.user_file, text);
    }

    pub fn user_file_text(&self) -> String {
        std::fs::read_to_string(&self.user_file).unwrap_or_default()
    }
}

pub fn write(path: &Path, text: &str) {
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(path, text).unwrap();
}

/// A `[servers.NAME]` table running the bundled demo server with `flags`.
pub fn demo_table(name: &str, flags: &[&str]) -> String {
    let args: Vec<String> = std::iter::once("demo-server").chain(flags.iter().copied()).map(|a| format!("{a:?}")).collect();
    format!("[servers.{name}]\ncommand = {BIN:?}\nargs = [{}]\n", args.join(", "))
}

pub fn stdout(output: &std::process::Output) -> String {
    String::from_utf8_lossy(&output.stdout).into_owned()
}

pub fn stderr(output: &std::process::Output) -> String {
    String::from_utf8_lossy(&output.stderr).into_owned()
}

/// A `[servers.NAME]` table running the Python fixture `tests/fixtures/SCRIPT` with `flags`.
pub fn python_fixture_table(name: &str, script: &str, flags: &[&str]) -> String {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures").join(script);
    let args: Vec<String> =
        std::iter::once(path.to_string_lossy().as_ref()).chain(flags.iter().copied()).map(|a| format!("{a:?}")).collect();
    format!("[servers.{name}]\ncommand = \"python3\"\nargs = [{}]\n", args.join(", "))
}

/// Every way a command reports on server `name` (its status, its test, a
/// failed call), as text and as JSON, with `-v` logs: where a secret of a
/// server that failed must never show.
pub fn reports_on(name: &str) -> Vec<Vec<String>> {
    let commands: [&[&str]; 7] = [
        &["status"],
        &["status", "--json"],
        &["-v", "status"],
        &["test", name],
        &["test", name, "--json"],
        &["call", name, "x"],
        &["call", name, "x", "--json"],
    ];
    commands.iter().map(|args| args.iter().map(|a| a.to_string()).collect()).collect()
}
