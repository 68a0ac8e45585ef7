//! What the machine says about itself while a benchmark runs: resident and
//! peak memory, load average, CPU time, a one-line description (printed with
//! every figure, since figures mean little without the load they ran under).

/// `VmRSS` and `VmHWM` (peak) of this process, bytes, from /proc.
pub(crate) fn rss() -> Option<(u64, u64)> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let field = |name: &str| {
        status
            .lines()
            .find(|l| l.starts_with(name))?
            .split_whitespace()
            .nth(1)?
            .parse::<u64>()
            .ok()
            .map(|kb| kb * 1024)
    };
    Some((field("VmRSS:")?, field("VmHWM:")?))
}

/// The machine's load average over the last minute (Linux:
/// `/proc/loadavg`; NaN elsewhere), reported beside timings.
pub(crate) fn load_average() -> f64 {
    std::fs::read_to_string("/proc/loadavg")
        .ok()
        .and_then(|l| l.split_whitespace().next()?.parse().ok())
        .unwrap_or(f64::NAN)
}

/// CPU time of this process so far, user and system, seconds (Linux:
/// `/proc/self/stat`; `None` elsewhere): a figure that a loaded machine
/// changes less than the wall clock.
pub(crate) fn cpu_s() -> Option<f64> {
    #[cfg(target_os = "linux")]
    {
        let stat = std::fs::read_to_string("/proc/self/stat").ok()?;
        // After the command's closing parenthesis the fields start at the
        // third; utime and stime are the 14th and 15th.
        let f: Vec<&str> = stat.rsplit_once(')')?.1.split_whitespace().collect();
        let ticks = f.get(11)?.parse::<u64>().ok()? + f.get(12)?.parse::<u64>().ok()?;
        Some(ticks as f64 / rustix::param::clock_ticks_per_second() as f64)
    }
    #[cfg(not(target_os = "linux"))]
    {
        None
    }
}

pub(crate) fn machine() -> String {
    let cpu = std::fs::read_to_string("/proc/cpuinfo")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("model name"))
                .and_then(|l| l.split(':').nth(1))
                .map(|s| s.trim().to_string())
        })
        .unwrap_or_else(|| "unknown CPU".into());
    let cpus = std::thread::available_parallelism().map_or(0, |n| n.get());
    let kernel = std::fs::read_to_string("/proc/sys/kernel/osrelease")
        .map(|s| s.trim().to_string())
        .unwrap_or_default();
    let build = if cfg!(debug_assertions) {
        "debug build"
    } else {
        "release build"
    };
    format!("{cpus} x {cpu}, Linux {kernel}, {build}")
}
