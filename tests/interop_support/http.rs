//! The HTTP servers of the manifest as processes of the test: each gets a
//! free port, is started, and is ready when its stderr says so (the
//! manifest's `ready`); it is killed when dropped.

use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::Duration;

use super::installed;

/// How long a server may take to listen (Node and Python start in 0.5-2 s
/// idle, several seconds on a loaded machine).
const READY_WITHIN: Duration = Duration::from_secs(60);

/// A running HTTP server of the manifest.
pub struct HttpServer {
    child: Child,
    /// The endpoint to connect to.
    pub url: String,
    pub port: u16,
}

/// A port nothing listens on right now (the kernel's choice), never one
/// this test binary handed out before: tests run side by side, and a port
/// released here may be the kernel's next choice for another test, whose
/// server would then find it taken.
pub fn free_port() -> u16 {
    static GIVEN: std::sync::Mutex<Vec<u16>> = std::sync::Mutex::new(Vec::new());
    let mut given = GIVEN.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
    loop {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("a local port can be bound");
        let port = listener.local_addr().expect("a bound port has an address").port();
        if !given.contains(&port) {
            given.push(port);
            return port;
        }
    }
}

impl HttpServer {
    /// Starts the manifest's server `name` on a free port and waits until it listens.
    pub fn start(name: &str) -> HttpServer {
        HttpServer::start_on(name, free_port())
    }

    /// Starts the manifest's server `name` on `port` (again after a kill:
    /// the same URL) and waits until it listens.
    pub fn start_on(name: &str, port: u16) -> HttpServer {
        let server = installed(name);
        let with_port = |text: &str| text.replace("{port}", &port.to_string());
        let url = with_port(server.url.as_deref().unwrap_or_else(|| panic!("{name} is not an HTTP server in the manifest")));
        let ready = server.ready.clone().unwrap_or_else(|| panic!("{name} has no `ready` line in the manifest"));
        let mut command = Command::new(&server.command);
        command.args(server.args.iter().map(|a| with_port(a))).stdin(Stdio::null()).stdout(Stdio::null()).stderr(Stdio::piped());
        for (key, value) in &server.env {
            command.env(key, with_port(value));
        }
        let mut child = command.spawn().unwrap_or_else(|e| panic!("{name}: {} does not start: {e}", server.command));
        let stderr = child.stderr.take().expect("stderr is piped");
        let (tx, rx) = mpsc::channel();
        let needle = ready.clone();
        std::thread::spawn(move || {
            let mut said = Vec::new();
            for line in BufReader::new(stderr).lines().map_while(Result::ok) {
                if line.contains(&needle) {
                    let _ = tx.send(Ok(()));
                } else if said.len() < 40 {
                    said.push(line);
                }
            }
            let _ = tx.send(Err(said));
        });
        match rx.recv_timeout(READY_WITHIN) {
            Ok(Ok(())) => HttpServer { child, url, port },
            Ok(Err(said)) => panic!("{name} exited before listening on {port}; its stderr:\n{}", said.join("\n")),
            Err(_) => panic!("{name} did not say `{ready}` within {READY_WITHIN:?}"),
        }
    }

    /// Kills the server (SIGKILL) and reaps it.
    pub fn kill(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Drop for HttpServer {
    fn drop(&mut self) {
        self.kill();
    }
}
