//! The process table as `/proc` shows it: every pid, and what
//! `/proc/<pid>/stat` says of one. Both the groups this instance starts
//! ([`crate::procs`]) and the processes that left them ([`crate::owner`])
//! are found here.

/// What `/proc/<pid>/stat` says about a process.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Stat {
    pub(crate) state: char,
    pub(crate) ppid: i32,
    pub(crate) pgrp: i32,
    pub(crate) start: u64,
}

/// `/proc/<pid>/stat` of `pid`; `None` once it is gone.
pub(crate) fn read_stat(pid: i32) -> Option<Stat> {
    let s = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let rest = &s[s.rfind(')')? + 1..];
    let f: Vec<&str> = rest.split_whitespace().collect();
    Some(Stat {
        state: f.first()?.chars().next()?,
        ppid: f.get(1)?.parse().ok()?,
        pgrp: f.get(2)?.parse().ok()?,
        start: f.get(19)?.parse().ok()?,
    })
}

/// Every pid `/proc` lists now.
pub(crate) fn all_pids() -> Vec<i32> {
    let Ok(rd) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    rd.filter_map(|e| e.ok()?.file_name().to_str()?.parse().ok())
        .collect()
}
