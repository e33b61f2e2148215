//! What the HTTP peer clients share: the measured workload's constants and
//! the one JSON line each prints (the format of the stdio peer harness).

use std::time::Duration;

/// Calls made after connecting and before measuring.
pub const WARMUP: usize = 500;

/// The client's peak resident memory (VmHWM), in KB.
pub fn peak_rss_kb() -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    status.lines().find_map(|l| l.strip_prefix("VmHWM:")).and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok()).unwrap_or(0)
}

/// Prints `{"client","mode","calls","secs","calls_per_s","p50_us","p99_us","peak_rss_kb"}` (+ `extra`).
pub fn report(client: &str, mode: &str, secs: Duration, mut lat: Vec<u64>, extra: &str) {
    lat.sort_unstable();
    let q = |p: f64| lat[((p * lat.len() as f64) as usize).min(lat.len() - 1)] as f64 / 1000.0;
    let s = secs.as_secs_f64();
    println!(
        r#"{{"client":"{client}","mode":"{mode}","calls":{},"secs":{s:.4},"calls_per_s":{:.1},"p50_us":{:.1},"p99_us":{:.1},"peak_rss_kb":{}{extra}}}"#,
        lat.len(),
        lat.len() as f64 / s,
        q(0.50),
        q(0.99),
        peak_rss_kb()
    );
}

/// `(url, mode, numbers)` from `URL seq N | conc N K | connect R`, or exits with the usage.
pub fn arguments(program: &str) -> (String, String, Vec<usize>) {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let numbers: Option<Vec<usize>> = args.iter().skip(2).map(|a| a.parse().ok()).collect();
    match (args.first(), args.get(1), numbers) {
        (Some(url), Some(mode), Some(numbers)) if !numbers.is_empty() => (url.clone(), mode.clone(), numbers),
        _ => {
            eprintln!("usage: {program} URL seq N | conc N K | connect R");
            std::process::exit(2)
        }
    }
}
