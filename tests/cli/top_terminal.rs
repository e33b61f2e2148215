//! `mcpvisor top` in a real pseudo-terminal (80×24), its screen read back
//! with the `vt100` crate: the server rows appear, `s` changes the sort,
//! `/` filters, `r` restarts the selected server (its pid changes), Enter
//! opens its log, and `q` quits with exit code 0, the terminal restored.

use std::fs::File;
use std::io::{Read, Write};
use std::os::fd::{FromRawFd, OwnedFd};
use std::os::unix::process::CommandExt;
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

const BIN: &str = env!("CARGO_BIN_EXE_mcpvisor");
/// How long the screen may take to show what is awaited (a bound against hangs).
const PATIENCE: Duration = Duration::from_secs(30);

/// `top` on the slave side of a pty; everything it writes goes to a vt100 screen.
struct Pty {
    child: Child,
    master: File,
    screen: Arc<Mutex<vt100::Parser>>,
    /// Every byte written, to look for escape sequences.
    raw: Arc<Mutex<Vec<u8>>>,
}

impl Pty {
    fn spawn(args: &[&str], env: &[(&str, &str)]) -> Pty {
        let (mut master, mut slave) = (0, 0);
        let size = libc::winsize { ws_row: 24, ws_col: 80, ws_xpixel: 0, ws_ypixel: 0 };
        // SAFETY: openpty writes two descriptors into the given integers; the name pointer may be null.
        let opened = unsafe { libc::openpty(&mut master, &mut slave, std::ptr::null_mut(), std::ptr::null(), &size) };
        assert_eq!(opened, 0, "openpty: {}", std::io::Error::last_os_error());
        // SAFETY: both descriptors were just opened and are owned here only.
        let (master, slave) = unsafe { (OwnedFd::from_raw_fd(master), OwnedFd::from_raw_fd(slave)) };
        let mut command = Command::new(BIN);
        command.args(args).env("TERM", "xterm-256color").env_remove("MCPVISOR_SERVE_TOKEN");
        for (key, value) in env {
            command.env(key, value);
        }
        command.stdin(Stdio::from(slave.try_clone().unwrap())).stdout(Stdio::from(slave.try_clone().unwrap())).stderr(Stdio::from(slave));
        // SAFETY: setsid and ioctl are async-signal-safe; the child makes the pty its controlling terminal.
        unsafe {
            command.pre_exec(|| {
                if libc::setsid() < 0 || libc::ioctl(0, libc::TIOCSCTTY as _, 0) < 0 {
                    return Err(std::io::Error::last_os_error());
                }
                Ok(())
            });
        }
        let child = command.spawn().expect("mcpvisor top starts");
        let master = File::from(master);
        let screen = Arc::new(Mutex::new(vt100::Parser::new(
            std::num::NonZeroU16::MIN.saturating_add(23),
            std::num::NonZeroU16::MIN.saturating_add(79),
            0,
        )));
        let raw = Arc::new(Mutex::new(Vec::new()));
        let mut reader = master.try_clone().unwrap();
        let (parser, kept) = (screen.clone(), raw.clone());
        std::thread::spawn(move || {
            let mut buffer = [0u8; 8192];
            // Ends when the child's side closes (EIO) or the master is dropped.
            while let Ok(n) = reader.read(&mut buffer) {
                if n == 0 {
                    break;
                }
                parser.lock().unwrap().process(&buffer[..n]);
                kept.lock().unwrap().extend_from_slice(&buffer[..n]);
            }
        });
        Pty { child, master, screen, raw }
    }

    fn text(&self) -> String {
        self.screen.lock().unwrap().screen().contents()
    }

    fn rows(&self) -> Vec<String> {
        self.text().lines().map(str::to_string).collect()
    }

    /// Waits until `ready` holds for the screen's rows; fails with the screen after [`PATIENCE`].
    fn wait_for(&self, what: &str, ready: impl Fn(&[String]) -> bool) {
        let deadline = Instant::now() + PATIENCE;
        while !ready(&self.rows()) {
            assert!(Instant::now() < deadline, "the screen never showed {what}:\n{}", self.text());
            std::thread::sleep(Duration::from_millis(30));
        }
    }

    fn keys(&mut self, keys: &str) {
        self.master.write_all(keys.as_bytes()).unwrap();
        self.master.flush().unwrap();
    }
}

impl Drop for Pty {
    fn drop(&mut self) {
        if self.child.try_wait().ok().flatten().is_none() {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }
}

/// The row of server `name` in the table (`> name` when selected).
fn row_of<'a>(rows: &'a [String], name: &str) -> Option<&'a String> {
    rows.iter().find(|row| row.get(2..).is_some_and(|rest| rest.starts_with(&format!("{name} "))))
}

fn pid_of(rows: &[String], name: &str) -> Option<u32> {
    row_of(rows, name)?.split_whitespace().find_map(|field| field.parse::<u32>().ok().filter(|pid| *pid > 100))
}

#[test]
fn top_in_a_terminal_sorts_filters_restarts_and_quits() {
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("servers.toml");
    let server = format!("command = {BIN:?}\nargs = [\"demo-server\"]\n");
    std::fs::write(&config, format!("[servers.alpha]\n{server}\n[servers.beta]\n{server}")).unwrap();
    let home = dir.path().to_str().unwrap();
    let mut top = Pty::spawn(&["--config", config.to_str().unwrap(), "top", "--interval", "0.2"], &[("HOME", home), ("NO_COLOR", "1")]);

    let connected =
        |rows: &[String], name: &str| row_of(rows, name).is_some_and(|row| row.contains("connected")) && pid_of(rows, name).is_some();
    top.wait_for("both servers connected", |rows| connected(rows, "alpha") && connected(rows, "beta"));
    let rows = top.rows();
    assert!(rows[0].contains("sort: name") && rows[1].contains("2 servers (2 up)"), "{}", top.text());
    assert!(row_of(&rows, "alpha").is_some_and(|row| row.starts_with("> ")), "the selection is marked without colour:\n{}", top.text());

    top.keys("s");
    top.wait_for("the sort by calls/s", |rows| rows[0].contains("sort: calls/s"));

    top.keys("/bet");
    top.wait_for("the filter being typed", |rows| rows[0].contains("filter: bet_"));
    top.keys("\r");
    top.wait_for("only beta", |rows| rows[0].contains("filter: bet") && row_of(rows, "alpha").is_none() && row_of(rows, "beta").is_some());
    let beta = pid_of(&top.rows(), "beta").expect("beta's pid");

    top.keys("r");
    top.wait_for("beta restarted under a new pid", |rows| {
        connected(rows, "beta")
            && pid_of(rows, "beta").is_some_and(|pid| pid != beta)
            && rows.iter().any(|r| r.contains("restart of beta: done"))
    });

    let restarted = pid_of(&top.rows(), "beta").expect("beta's new pid");
    top.keys("\r");
    top.wait_for("beta's log", |rows| {
        rows.iter().any(|r| r.starts_with("beta - connected - stderr")) && rows.iter().any(|r| r.contains("demo-server: started"))
    });
    top.keys("\x1b");
    top.wait_for("the table again", |rows| row_of(rows, "beta").is_some());

    top.keys("q");
    let deadline = Instant::now() + PATIENCE;
    let status = loop {
        if let Some(status) = top.child.try_wait().unwrap() {
            break status;
        }
        assert!(Instant::now() < deadline, "top did not quit on q:\n{}", top.text());
        std::thread::sleep(Duration::from_millis(20));
    };
    assert_eq!(status.code(), Some(0), "{}", top.text());
    let raw = top.raw.lock().unwrap().clone();
    let raw = String::from_utf8_lossy(&raw);
    assert!(raw.contains("\x1b[?1049l"), "the alternate screen is left on exit");
    assert!(!raw.contains("\x1b[7m") && !raw.contains("\x1b[1m"), "NO_COLOR: no reverse video, no bold");
    // The servers top started are gone with it.
    // SAFETY: kill with signal 0 only checks that the process exists.
    let gone = |pid: u32| unsafe { libc::kill(pid as i32, 0) } != 0;
    let deadline = Instant::now() + PATIENCE;
    while !gone(restarted) {
        assert!(Instant::now() < deadline, "beta's process {restarted} outlived top");
        std::thread::sleep(Duration::from_millis(20));
    }
}
