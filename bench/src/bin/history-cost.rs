//! What a history costs a test: recording an operation (invoke, then ok),
//! and checking histories of the sizes a fault test records.
//!
//!     cargo run --bin history-cost              # from bench/, under a minute
//!     cargo run --release --bin history-cost    # the same, optimized
//!
//! Prints, each a median of five rounds:
//!
//! - recording: one operation invoked and completed, on one thread, and on
//!   five threads recording at once into one history (target: at most 2 µs);
//! - the register check of 10,000 operations over 100 keys from 5 clients,
//!   linearizable (target: at most 1 s), and the same with one stale read
//!   (found, shrunk and drawn);
//! - the register check of 1,000 operations on one key from 10 clients,
//!   within a bound of 5 s (target: an answer, or unknown at the bound).
//!
//! The histories are a real register's answers at random points inside
//! each operation (a fixed seed), so each is linearizable by construction.

use std::process::ExitCode;
use std::time::{Duration, Instant};

use testkit_engine::history::check::{Check, CheckError};
use testkit_engine::history::{History, HistorySnapshot, Op, Operation, Outcome, Value};

const ROUNDS: usize = 5;
const RECORDED: u32 = 50_000;

fn main() -> ExitCode {
    let one = median(|| record(1));
    let five = median(|| record(5));
    println!(
        "recording, one operation invoked and completed: {one:?} on one thread, {five:?} an operation \
         with five threads at once (target: at most 2 µs; median of {ROUNDS} rounds of {RECORDED} per thread)"
    );

    let wide = generate(10_000, 100, 5, 1);
    let took = median(|| timed(&wide, Check::register()).0);
    let (_, verdict) = timed(&wide, Check::register());
    println!("register check, 10,000 operations over 100 keys from 5 clients: {took:?} ({verdict}; target: at most 1 s)");

    let mut stale = wide.clone();
    plant_stale_read(&mut stale);
    let took = median(|| timed(&stale, Check::register()).0);
    let (_, verdict) = timed(&stale, Check::register());
    println!(
        "register check, the same with one stale read: {took:?} to find, shrink and draw it ({})",
        verdict.lines().next().unwrap_or_default()
    );

    let narrow = generate(1_000, 1, 10, 2);
    let bound = Duration::from_secs(5);
    let took = median(|| timed(&narrow, Check::register().within(bound)).0);
    let (_, verdict) = timed(&narrow, Check::register().within(bound));
    println!(
        "register check, 1,000 operations on one key from 10 clients: {took:?} ({verdict}; target: at most 5 s, or unknown at the bound)"
    );
    ExitCode::SUCCESS
}

/// The median of [`ROUNDS`] runs of `f`.
fn median(mut f: impl FnMut() -> Duration) -> Duration {
    let mut each: Vec<Duration> = (0..ROUNDS).map(|_| f()).collect();
    each.sort();
    each[ROUNDS / 2]
}

/// The wall time per operation while `threads` threads record into one
/// history at once.
fn record(threads: u32) -> Duration {
    let history = History::with_cap("bench", (RECORDED * threads) as usize);
    let started = Instant::now();
    std::thread::scope(|s| {
        for client in 0..threads {
            let h = history.clone();
            s.spawn(move || {
                for i in 0..RECORDED {
                    let op = h.invoke(client, Op::write("k17", i64::from(i)));
                    op.ok(());
                }
            });
        }
    });
    let took = started.elapsed() / (RECORDED * threads);
    assert_eq!(history.len(), (RECORDED * threads) as usize);
    took
}

/// How long the check took, and its verdict.
fn timed(history: &HistorySnapshot, check: Check) -> (Duration, String) {
    let started = Instant::now();
    let verdict = match check.run(history) {
        Ok(passed) => passed.to_string(),
        Err(e @ CheckError::NotLinearizable(_)) => e.to_string(),
        Err(e) => e.to_string(),
    };
    (started.elapsed(), verdict)
}

/// xorshift64*: the same histories every run.
struct Rng(u64);
impl Rng {
    fn below(&mut self, n: u64) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D) % n
    }
}

/// `count` operations over `keys` keys from `clients` clients, each client
/// one operation at a time: reads, writes and compare-and-sets, a few
/// indeterminate, answered by a real register at a random point inside
/// each operation.
fn generate(count: usize, keys: u64, clients: u32, seed: u64) -> HistorySnapshot {
    let mut rng = Rng(0x9e37_79b9_7f4a_7c15 ^ seed);
    let mut clock = vec![0u64; clients as usize];
    let mut ops = Vec::with_capacity(count);
    let mut points = Vec::with_capacity(count);
    for i in 0..count {
        let client = (i as u32) % clients;
        let call = clock[client as usize] + rng.below(1_000);
        let ret = call + 1 + rng.below(20_000);
        clock[client as usize] = ret + 1;
        let key = format!("k{}", rng.below(keys));
        let value = || Value::Int(i as i64);
        let op = match rng.below(10) {
            0..=4 => Op::read(key),
            5..=7 => Op::write(key, value()),
            _ => Op::cas(key, Value::Int(rng.below(count as u64) as i64), value()),
        };
        let outcome = if rng.below(50) == 0 {
            Outcome::Info
        } else {
            Outcome::Ok
        };
        // An indeterminate operation took effect half the time.
        if outcome == Outcome::Ok || rng.below(2) == 0 {
            points.push((call + rng.below(ret - call), i));
        }
        ops.push(Operation {
            client,
            op,
            invoke_ns: call,
            complete_ns: Some(ret),
            outcome,
            result: Value::Nil,
        });
    }
    points.sort();
    let mut held: std::collections::HashMap<String, Value> = Default::default();
    for (_, i) in points {
        let o = &mut ops[i];
        let key = o.op.key().unwrap_or_default().to_owned();
        let now = held.get(&key).cloned().unwrap_or(Value::Nil);
        let result = match &o.op {
            Op::Read { .. } => now,
            Op::Write { value, .. } => {
                held.insert(key, value.clone());
                Value::Nil
            }
            Op::Cas { from, to, .. } => {
                let swapped = *from == now;
                if swapped {
                    held.insert(key, to.clone());
                }
                Value::Bool(swapped)
            }
            _ => Value::Nil,
        };
        if o.outcome == Outcome::Ok {
            o.result = result;
        }
    }
    ops.sort_by_key(|o| o.invoke_ns);
    HistorySnapshot::new("bench", ops)
}

/// Appends, after everything, a read of the first value written to some
/// key that was written again since: a stale read.
fn plant_stale_read(history: &mut HistorySnapshot) {
    let end = history
        .ops
        .iter()
        .filter_map(|o| o.complete_ns)
        .max()
        .unwrap_or(0);
    let (key, first) = history
        .ops
        .iter()
        .find_map(|o| match &o.op {
            Op::Write { key, value } if o.outcome == Outcome::Ok => {
                Some((key.clone(), value.clone()))
            }
            _ => None,
        })
        .expect("a write");
    history.ops.push(Operation {
        client: 99,
        op: Op::read(key),
        invoke_ns: end + 1_000,
        complete_ns: Some(end + 2_000),
        outcome: Outcome::Ok,
        result: first,
    });
}
