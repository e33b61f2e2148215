//! `mcpvisor agent` as an interactive chat, driven through a
//! pseudo-terminal that is the program's controlling terminal (so Ctrl-C
//! is a real SIGINT from the line discipline), with the built-in scripted
//! model and the demo server.

use std::fs::File;
use std::io::{Read, Write};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::os::unix::process::CommandExt;
use std::process::{Child, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use crate::cli_support::{demo_table, Sandbox};

struct Terminal {
    child: Child,
    input: File,
    screen: Arc<Mutex<String>>,
    /// How much of the screen earlier expectations consumed.
    seen: usize,
}

impl Terminal {
    fn start(mut command: std::process::Command) -> Terminal {
        let (mut controller, mut device) = (0, 0);
        let size = libc::winsize { ws_row: 40, ws_col: 160, ws_xpixel: 0, ws_ypixel: 0 };
        // SAFETY: openpty writes two descriptors into the given integers; name and termios may be null.
        let status = unsafe { libc::openpty(&mut controller, &mut device, std::ptr::null_mut(), std::ptr::null(), &size) };
        assert_eq!(status, 0, "openpty: {}", std::io::Error::last_os_error());
        // SAFETY: both descriptors were just opened by openpty and are owned here alone.
        let (device, controller) = unsafe { (OwnedFd::from_raw_fd(device), File::from_raw_fd(controller)) };
        let io = |fd: &OwnedFd| Stdio::from(fd.try_clone().unwrap());
        command.stdin(io(&device)).stdout(io(&device)).stderr(io(&device));
        let tty = device.as_raw_fd();
        // SAFETY: only async-signal-safe calls between fork and exec: a new session whose controlling terminal is the pty.
        unsafe {
            command.pre_exec(move || {
                if libc::setsid() < 0 || libc::ioctl(tty, libc::TIOCSCTTY as _, 0) < 0 {
                    return Err(std::io::Error::last_os_error());
                }
                Ok(())
            });
        }
        let child = command.spawn().expect("mcpvisor runs");
        drop(command);
        drop(device);
        let screen = Arc::new(Mutex::new(String::new()));
        let mut reader = controller.try_clone().unwrap();
        let shown = screen.clone();
        std::thread::spawn(move || {
            let mut buffer = [0u8; 4096];
            while let Ok(n @ 1..) = reader.read(&mut buffer) {
                shown.lock().unwrap().push_str(&String::from_utf8_lossy(&buffer[..n]));
            }
        });
        Terminal { child, input: controller, screen, seen: 0 }
    }

    fn send(&mut self, text: &str) {
        self.input.write_all(text.as_bytes()).unwrap();
    }

    /// Waits (at most 30 s) until `text` appears after what was already seen.
    fn expect(&mut self, text: &str) {
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            let screen = self.screen.lock().unwrap().clone();
            if let Some(at) = screen[self.seen..].find(text) {
                self.seen += at + text.len();
                return;
            }
            assert!(Instant::now() < deadline, "`{text}` never appeared; the screen after what was seen:\n{}", &screen[self.seen..]);
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    fn wait(mut self) -> (Option<i32>, String) {
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            if let Some(status) = self.child.try_wait().unwrap() {
                return (status.code(), self.screen.lock().unwrap().clone());
            }
            assert!(Instant::now() < deadline, "the chat did not end:\n{}", self.screen.lock().unwrap());
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}

#[test]
fn the_chat_lists_tools_and_servers_asks_before_calls_cancels_on_ctrl_c_and_ends_on_a_second() {
    let sandbox = Sandbox::new();
    let requests = sandbox.home.join("requests.log");
    // `echo` is allowed by a rule: an untrusted server's readOnlyHint no longer skips the question.
    let table = demo_table("demo", &["--request-log", requests.to_str().unwrap()]);
    sandbox.write_user_file(&format!("[agent]\nallow = [\"mcp__demo__echo\"]\n\n{table}"));
    let mut command = sandbox.std_cmd(["agent"]);
    command.env_remove("MCPVISOR_MODEL").env_remove("OPENAI_API_KEY").env_remove("ANTHROPIC_API_KEY");
    let mut chat = Terminal::start(command);
    chat.expect("mcpvisor agent: scripted/demo with 31 tools");
    chat.expect("> ");

    chat.send("/tools echo\n");
    chat.expect("mcp__demo__echo  Returns `text` unchanged");
    chat.send("/servers\n");
    chat.expect("connected (27 tools)");

    chat.send("sleep 9\n");
    chat.expect("→ mcp__demo__sleep {\"ms\":9}\r\nAllow `mcp__demo__sleep`");
    chat.send("n\n");
    chat.expect("denied: the user denied it");
    chat.expect("`mcp__demo__sleep` failed: The call to `mcp__demo__sleep` was not made");

    chat.send("sleep 50\n");
    chat.expect(
        "Allow `mcp__demo__sleep` (may change or delete things) with {\"ms\":50}? (\"always\" allows this tool) [y]es / [n]o / [a]lways allow / [d]eny always: ",
    );
    chat.send("y\n");
    chat.expect("✓ mcp__demo__sleep");
    chat.expect("`mcp__demo__sleep` answered: slept 50 ms");

    chat.send("echo hi\n");
    chat.expect("`mcp__demo__echo` answered: hi");

    chat.send("sleep 60000\n");
    chat.expect("allows this tool) [y]es");
    chat.send("a\n");
    // Once the call is at the server, Ctrl-C through the terminal cancels the turn; the chat goes on.
    let deadline = Instant::now() + Duration::from_secs(30);
    while std::fs::read_to_string(&requests).unwrap_or_default().matches("tools/call sleep").count() < 2 {
        assert!(Instant::now() < deadline, "the long sleep never reached the server");
        std::thread::sleep(Duration::from_millis(20));
    }
    chat.send("\x03");
    chat.expect("(cancelling; Ctrl-C again to end the chat)");
    chat.expect("(the turn ended: cancelled)");

    chat.send("sleep 7\n");
    chat.expect("`mcp__demo__sleep` answered: slept 7 ms");

    chat.send("/history\n");
    chat.expect("you: sleep 60000");
    chat.send("/nonsense\n");
    chat.expect("unknown command /nonsense; /help lists them");

    chat.send("\x03");
    chat.expect("(Ctrl-C again to end the chat)");
    chat.send("\x03");
    let (code, screen) = chat.wait();
    assert_eq!(code, Some(0), "{screen}");
    assert!(!screen.contains("panicked"), "{screen}");
}
