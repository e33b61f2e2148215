//! One cgroup per sandboxed process tree, for the memory and process
//! limits: cgroup v2 where `/sys/fs/cgroup` is a writable unified
//! hierarchy with both controllers, else the v1 `memory` and `pids`
//! hierarchies. Created in the parent before the clone; the child joins it by
//! writing `0` to pre-opened `cgroup.procs` descriptors; removed (its
//! stragglers killed) once the process group is gone.

use std::fs::{self, OpenOptions};
use std::os::fd::OwnedFd;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

const ROOT: &str = "/sys/fs/cgroup";
/// The parent of every cgroup mcpvisor makes, in each hierarchy.
const PARENT: &str = "mcpvisor";

static NEXT: AtomicU64 = AtomicU64::new(0);

/// A cgroup (one directory per v1 controller, or one v2 directory).
#[derive(Debug)]
pub struct Cgroup {
    pub version: u8,
    dirs: Vec<PathBuf>,
    /// `cgroup.procs` of each directory, open for writing; closed after spawn.
    procs: Vec<OwnedFd>,
    memory: Option<u64>,
    processes: Option<u64>,
}

impl Cgroup {
    /// Makes a cgroup limited to `memory` bytes (no swap) and `processes`
    /// tasks; `Err` names why the machine has none to offer.
    pub fn create(owner: &str, memory: Option<u64>, processes: Option<u64>) -> Result<Cgroup, String> {
        let leaf = format!("{}-{}-{}", sanitize(owner), std::process::id(), NEXT.fetch_add(1, Ordering::Relaxed));
        let v2 = Path::new(ROOT).join("cgroup.controllers");
        let controllers = fs::read_to_string(&v2).unwrap_or_default();
        let words: Vec<&str> = controllers.split_whitespace().collect();
        if words.contains(&"memory") && words.contains(&"pids") {
            return Self::create_v2(&leaf, memory, processes);
        }
        let mut cgroup = Cgroup { version: 1, dirs: Vec::new(), procs: Vec::new(), memory, processes };
        let mut wanted = Vec::new();
        if let Some(bytes) = memory {
            wanted.push(("memory", vec![("memory.limit_in_bytes", bytes), ("memory.memsw.limit_in_bytes", bytes)]));
        }
        if let Some(count) = processes {
            wanted.push(("pids", vec![("pids.max", count)]));
        }
        for (controller, limits) in wanted {
            let dir = Path::new(ROOT).join(controller).join(PARENT).join(&leaf);
            fs::create_dir_all(&dir).map_err(|e| format!("cannot create {} ({e})", dir.display()))?;
            cgroup.dirs.push(dir.clone());
            for (file, value) in limits {
                let written = fs::write(dir.join(file), value.to_string());
                // memsw exists only with swap accounting: without it there is no swap to escape to.
                if let (Err(e), false) = (written, file.contains("memsw")) {
                    return Err(format!("cannot set {}/{file} ({e})", dir.display()));
                }
            }
            cgroup.procs.push(open_procs(&dir)?);
        }
        Ok(cgroup)
    }

    fn create_v2(leaf: &str, memory: Option<u64>, processes: Option<u64>) -> Result<Cgroup, String> {
        let parent = Path::new(ROOT).join(PARENT);
        fs::create_dir_all(&parent).map_err(|e| format!("cannot create {} ({e})", parent.display()))?;
        for dir in [Path::new(ROOT), &parent] {
            fs::write(dir.join("cgroup.subtree_control"), "+memory +pids")
                .map_err(|e| format!("cannot delegate memory and pids in {} ({e})", dir.display()))?;
        }
        let dir = parent.join(leaf);
        fs::create_dir(&dir).map_err(|e| format!("cannot create {} ({e})", dir.display()))?;
        let mut cgroup = Cgroup { version: 2, dirs: vec![dir.clone()], procs: Vec::new(), memory, processes };
        let limits = [("memory.max", memory), ("memory.swap.max", memory.map(|_| 0)), ("pids.max", processes)];
        for (file, value) in limits.into_iter().filter_map(|(f, v)| Some((f, v?))) {
            let written = fs::write(dir.join(file), value.to_string());
            if let (Err(e), false) = (written, file == "memory.swap.max") {
                return Err(format!("cannot set {}/{file} ({e})", dir.display()));
            }
        }
        cgroup.procs.push(open_procs(&dir)?);
        Ok(cgroup)
    }

    /// The descriptors the child writes `0` to, to join.
    pub fn join_fds(&self) -> &[OwnedFd] {
        &self.procs
    }

    /// Closes the join descriptors (after spawn).
    pub fn spawned(&mut self) {
        self.procs.clear();
    }

    /// What the cgroup enforces, for status.
    pub fn describe(&self) -> String {
        let mut parts = Vec::new();
        if let Some(bytes) = self.memory {
            parts.push(format!("memory {}", human_size(bytes)));
        }
        if let Some(count) = self.processes {
            parts.push(format!("{count} processes"));
        }
        format!("cgroup v{}: {}", self.version, parts.join(", "))
    }

    /// Which limit the tree hit, as a sentence; `None` if none did.
    pub fn violation(&self) -> Option<String> {
        let counter = |file: &str, key: &str| {
            self.dirs
                .iter()
                .filter_map(|d| fs::read_to_string(d.join(file)).ok())
                .find_map(|text| text.lines().find_map(|line| line.strip_prefix(key)?.trim().parse::<u64>().ok()).filter(|n| *n > 0))
        };
        let memory_file = if self.version == 2 { "memory.events" } else { "memory.oom_control" };
        let mut found = Vec::new();
        if let (Some(kills), Some(bytes)) = (counter(memory_file, "oom_kill "), self.memory) {
            found.push(format!("its memory limit ({}) was reached and the kernel killed {kills} of its processes", human_size(bytes)));
        }
        if let (Some(refused), Some(count)) = (counter("pids.events", "max "), self.processes) {
            found.push(format!("its process limit ({count}) refused {refused} new processes"));
        }
        (!found.is_empty()).then(|| format!("sandbox: {}", found.join("; ")))
    }

    /// Kills what is left in the cgroup (processes that left the group
    /// with `setsid` included) and removes it, within a bounded time: at
    /// once with `cgroup.kill` (v2, Linux 5.14), else one by one, as many
    /// rounds as it takes a fork loop to run out.
    pub async fn remove(self) {
        for dir in self.dirs.iter().filter(|_| self.version == 2) {
            let _ = fs::write(dir.join("cgroup.kill"), "1");
        }
        for _ in 0..50 {
            for dir in &self.dirs {
                for pid in fs::read_to_string(dir.join("cgroup.procs")).unwrap_or_default().lines().filter_map(|l| l.parse::<i32>().ok()) {
                    // SAFETY: kill has no memory-safety preconditions; pids read from the cgroup are > 0.
                    unsafe { libc::kill(pid, libc::SIGKILL) };
                }
            }
            if self.dirs.iter().all(|dir| fs::remove_dir(dir).is_ok() || !dir.exists()) {
                return;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        tracing::warn!(cgroups = ?self.dirs, "a sandbox's cgroup could not be removed: a process in it did not die");
    }
}

impl Cgroup {
    /// Removes a cgroup nothing has joined yet.
    pub fn remove_now(self) {
        for dir in &self.dirs {
            let _ = fs::remove_dir(dir);
        }
    }
}

fn open_procs(dir: &Path) -> Result<OwnedFd, String> {
    let file = OpenOptions::new()
        .write(true)
        .open(dir.join("cgroup.procs"))
        .map_err(|e| format!("cannot open {}/cgroup.procs ({e})", dir.display()))?;
    Ok(file.into())
}

fn sanitize(name: &str) -> String {
    name.chars().map(|c| if c.is_ascii_alphanumeric() || c == '-' || c == '_' { c } else { '_' }).take(64).collect()
}

/// `512MiB`, `2GiB`, or bytes.
pub fn human_size(bytes: u64) -> String {
    match bytes {
        b if b >= 1 << 30 && b % (1 << 30) == 0 => format!("{}GiB", b >> 30),
        b if b >= 1 << 20 && b % (1 << 20) == 0 => format!("{}MiB", b >> 20),
        b if b >= 1 << 10 && b % (1 << 10) == 0 => format!("{}KiB", b >> 10),
        b => format!("{b} bytes"),
    }
}
