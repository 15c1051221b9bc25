//! The checkers against known histories, and the register checker against
//! a brute-force one on random small histories.

use std::time::Duration;

use super::*;
use crate::history::{HistorySnapshot, Op, Operation, Outcome, Value};

fn at(client: u32, op: Op, call: u64, ret: u64, outcome: Outcome, result: Value) -> Operation {
    Operation {
        client,
        op,
        invoke_ns: call,
        complete_ns: Some(ret),
        outcome,
        result,
    }
}
fn ok(client: u32, op: Op, call: u64, ret: u64, result: impl Into<Value>) -> Operation {
    at(client, op, call, ret, Outcome::Ok, result.into())
}
fn info(client: u32, op: Op, call: u64, ret: u64) -> Operation {
    at(client, op, call, ret, Outcome::Info, Value::Nil)
}
fn fail(client: u32, op: Op, call: u64, ret: u64) -> Operation {
    at(client, op, call, ret, Outcome::Fail, Value::Nil)
}
fn history(ops: Vec<Operation>) -> HistorySnapshot {
    HistorySnapshot::new("t", ops)
}
fn register(ops: Vec<Operation>) -> Result<Checked, CheckError> {
    Check::register().run(&history(ops))
}
fn linearizable(ops: Vec<Operation>) {
    let h = history(ops);
    if let Err(e) = Check::register().run(&h) {
        panic!("expected linearizable, got: {e}\n{h:#?}");
    }
}
fn not_linearizable(ops: Vec<Operation>) -> Box<NotLinearizable> {
    match register(ops) {
        Err(CheckError::NotLinearizable(n)) => n,
        other => panic!("expected not linearizable, got {other:?}"),
    }
}
const NONE: Option<i64> = None;

// --- the register: known histories -------------------------------------------

#[test]
fn sequential_writes_and_reads_are_linearizable() {
    linearizable(vec![
        ok(1, Op::read("x"), 0, 5, NONE),
        ok(1, Op::write("x", 1), 10, 20, ()),
        ok(2, Op::read("x"), 30, 40, 1),
        ok(2, Op::write("x", 2), 50, 60, ()),
        ok(1, Op::read("x"), 70, 80, 2),
    ]);
}

#[test]
fn a_stale_read_after_an_acknowledged_write_is_not_linearizable() {
    let n = not_linearizable(vec![
        ok(1, Op::write("x", 1), 0, 10, ()),
        ok(2, Op::read("x"), 20, 30, NONE),
    ]);
    assert_eq!(n.key, "x");
    assert_eq!(n.indices, [0, 1]);
    assert_eq!(n.conflict, Some(1), "the read is the conflict");
    let text = n.to_string();
    assert!(text.contains("key \"x\" is not linearizable"), "{text}");
    assert!(text.contains("read x → nil"), "{text}");
    assert!(text.contains("← conflict"), "{text}");
    assert!(
        text.contains("the longest legal order is #1, after which the register holds 1, and #2 cannot come next"),
        "{text}"
    );
}

#[test]
fn a_lost_write_is_not_linearizable() {
    // Both writes acknowledged, one after the other; a later read sees the
    // first: the second was lost.
    not_linearizable(vec![
        ok(1, Op::write("x", 1), 0, 10, ()),
        ok(2, Op::write("x", 2), 20, 30, ()),
        ok(3, Op::read("x"), 40, 50, 1),
    ]);
}

#[test]
fn a_read_of_a_value_never_written_is_not_linearizable() {
    let n = not_linearizable(vec![
        ok(1, Op::write("x", 1), 0, 10, ()),
        ok(2, Op::read("x"), 5, 30, 7),
    ]);
    assert_eq!(n.indices, [1]);
    assert_eq!(n.conflict, Some(1));
}

#[test]
fn concurrent_writes_may_take_effect_in_either_order() {
    for last in [1, 2] {
        linearizable(vec![
            ok(1, Op::write("x", 1), 0, 20, ()),
            ok(2, Op::write("x", 2), 5, 25, ()),
            ok(3, Op::read("x"), 30, 40, last),
            ok(3, Op::read("x"), 50, 60, last),
        ]);
    }
    // But not both orders: once one was read last, the other cannot be.
    not_linearizable(vec![
        ok(1, Op::write("x", 1), 0, 20, ()),
        ok(2, Op::write("x", 2), 5, 25, ()),
        ok(3, Op::read("x"), 30, 40, 2),
        ok(3, Op::read("x"), 50, 60, 1),
    ]);
}

#[test]
fn a_read_concurrent_with_a_write_may_see_either_value() {
    for seen in [None, Some(1)] {
        linearizable(vec![
            ok(1, Op::write("x", 1), 0, 20, ()),
            ok(2, Op::read("x"), 5, 10, seen),
        ]);
    }
}

#[test]
fn compare_and_set_success_and_failure() {
    // Swapped from what the register held.
    linearizable(vec![
        ok(1, Op::write("x", 1), 0, 10, ()),
        ok(2, Op::cas("x", 1, 2), 20, 30, true),
        ok(1, Op::read("x"), 40, 50, 2),
    ]);
    // Swapped from what it did not hold.
    not_linearizable(vec![
        ok(1, Op::write("x", 0), 0, 10, ()),
        ok(2, Op::cas("x", 1, 2), 20, 30, true),
    ]);
    // Answered "not what you expected" while it held exactly that.
    not_linearizable(vec![
        ok(1, Op::write("x", 1), 0, 10, ()),
        ok(2, Op::cas("x", 1, 2), 20, 30, false),
    ]);
    // … and while it held something else: fine, and nothing changed.
    linearizable(vec![
        ok(1, Op::write("x", 0), 0, 10, ()),
        ok(2, Op::cas("x", 1, 2), 20, 30, false),
        ok(1, Op::read("x"), 40, 50, 0),
    ]);
    // A failed cas did nothing: reading its value afterwards is wrong.
    linearizable(vec![
        ok(1, Op::write("x", 1), 0, 10, ()),
        fail(2, Op::cas("x", 1, 2), 20, 30),
        ok(1, Op::read("x"), 40, 50, 1),
    ]);
    not_linearizable(vec![
        ok(1, Op::write("x", 1), 0, 10, ()),
        fail(2, Op::cas("x", 1, 2), 20, 30),
        ok(1, Op::read("x"), 40, 50, 2),
    ]);
    // Two concurrent cas from the same value cannot both swap.
    not_linearizable(vec![
        ok(1, Op::write("x", 1), 0, 10, ()),
        ok(2, Op::cas("x", 1, 2), 20, 30, true),
        ok(3, Op::cas("x", 1, 3), 20, 30, true),
    ]);
}

#[test]
fn an_indeterminate_write_may_or_may_not_have_taken_effect() {
    for seen in [1, 2] {
        linearizable(vec![
            ok(1, Op::write("x", 1), 0, 10, ()),
            info(2, Op::write("x", 2), 20, 30),
            ok(3, Op::read("x"), 40, 50, seen),
        ]);
    }
    // It may take effect long after its client gave up on it.
    linearizable(vec![
        ok(1, Op::write("x", 1), 0, 10, ()),
        info(2, Op::write("x", 2), 20, 30),
        ok(3, Op::read("x"), 40, 50, 1),
        ok(3, Op::read("x"), 60, 70, 2),
    ]);
    // But once seen, it took effect: it cannot be undone.
    not_linearizable(vec![
        ok(1, Op::write("x", 1), 0, 10, ()),
        info(2, Op::write("x", 2), 20, 30),
        ok(3, Op::read("x"), 40, 50, 2),
        ok(3, Op::read("x"), 60, 70, 1),
    ]);
    // And not before it was invoked.
    not_linearizable(vec![
        ok(1, Op::write("x", 1), 0, 10, ()),
        ok(3, Op::read("x"), 12, 15, 2),
        info(2, Op::write("x", 2), 20, 30),
    ]);
}

#[test]
fn an_indeterminate_cas_may_or_may_not_have_taken_effect() {
    for seen in [1, 2] {
        linearizable(vec![
            ok(1, Op::write("x", 1), 0, 10, ()),
            info(2, Op::cas("x", 1, 2), 20, 30),
            ok(3, Op::read("x"), 40, 50, seen),
        ]);
    }
    // It could only swap from 1.
    not_linearizable(vec![
        ok(1, Op::write("x", 0), 0, 10, ()),
        info(2, Op::cas("x", 1, 2), 20, 30),
        ok(3, Op::read("x"), 40, 50, 2),
    ]);
}

#[test]
fn failed_and_indeterminate_reads_constrain_nothing() {
    linearizable(vec![
        ok(1, Op::write("x", 1), 0, 10, ()),
        fail(2, Op::read("x"), 20, 30),
        info(2, Op::read("x"), 40, 50),
        ok(2, Op::read("x"), 60, 70, 1),
    ]);
}

#[test]
fn keys_are_checked_apart_and_the_failing_one_is_named() {
    let n = not_linearizable(vec![
        ok(1, Op::write("x", 1), 0, 10, ()),
        ok(1, Op::write("y", 1), 0, 10, ()),
        ok(2, Op::read("x"), 20, 30, 1),
        ok(2, Op::read("y"), 20, 30, 2),
    ]);
    assert_eq!(n.key, "y");
    // The same value on another key is not this key's write.
    not_linearizable(vec![
        ok(1, Op::write("x", 1), 0, 10, ()),
        ok(2, Op::read("y"), 20, 30, 1),
    ]);
    let passed = register(vec![
        ok(1, Op::write("x", 1), 0, 10, ()),
        ok(1, Op::write("y", 2), 0, 10, ()),
        ok(2, Op::read("x"), 20, 30, 1),
        ok(2, Op::read("y"), 20, 30, 2),
    ])
    .unwrap();
    assert_eq!((passed.ops, passed.keys), (4, 2));
}

#[test]
fn a_failure_is_shrunk_to_the_operations_that_conflict() {
    // A long, healthy history of one key, with one stale read in its
    // middle: the failure shows the write it missed and the read.
    let mut ops = Vec::new();
    let mut t = 0;
    for i in 0..60 {
        ops.push(ok(i % 3, Op::write("x", i64::from(i)), t, t + 10, ()));
        ops.push(ok((i + 1) % 3, Op::read("x"), t + 2, t + 20, i64::from(i)));
        t += 30;
    }
    let stale_at = ops.len();
    ops.push(ok(4, Op::read("x"), t, t + 5, 3));
    for i in 60..80 {
        ops.push(ok(i % 3, Op::write("x", i64::from(i)), t + 10, t + 20, ()));
        t += 30;
    }
    let n = not_linearizable(ops);
    assert!(n.minimal);
    assert_eq!(n.conflict, Some(stale_at));
    // The write the read saw, one write acknowledged after it, the read.
    assert_eq!(n.indices.len(), 3, "{n}");
    assert_eq!((n.indices[0], n.indices[2]), (6, stale_at), "{n}");
    assert_eq!(n.key_ops, 141);
    assert!(
        n.to_string()
            .contains("3 of its 141 operations have no legal order:"),
        "{n}"
    );
}

#[test]
fn a_search_out_of_time_is_unknown_never_a_pass() {
    // Twenty concurrent writes and a read of a value none wrote: the
    // search tries every order before it can say no.
    let mut ops: Vec<Operation> = (0..20)
        .map(|i| ok(i, Op::write("x", i64::from(i)), 0, 100, ()))
        .collect();
    ops.push(ok(20, Op::read("x"), 0, 100, 99));
    ops.push(ok(21, Op::read("x"), 0, 100, 98));
    let e = Check::register()
        .within(Duration::ZERO)
        .run(&history(ops))
        .unwrap_err();
    assert!(
        matches!(
            e,
            CheckError::Unknown {
                reason: UnknownReason::TimeBound { .. },
                ..
            }
        ),
        "{e:?}"
    );
    let text = e.to_string();
    assert!(
        text.starts_with("register check: unknown: the search ran out of its time bound"),
        "{text}"
    );
    assert!(text.contains("on key \"x\" (22 operations)"), "{text}");
}

#[test]
fn a_truncated_history_is_unknown_never_a_pass() {
    let h = crate::history::History::with_cap("t", 2);
    for i in 0..4 {
        h.invoke(0, Op::write("x", i)).ok(());
    }
    for check in [
        Check::register(),
        Check::set(),
        Check::counter(),
        Check::unique_ids(),
    ] {
        let e = check.run(&h.snapshot()).unwrap_err();
        assert!(
            e.to_string().contains(
                "unknown: the history is truncated: 2 operations past its cap of 2 were dropped"
            ),
            "{e}"
        );
    }
}

#[test]
fn a_history_without_operations_of_the_model_is_unknown() {
    let h = history(vec![ok(1, Op::incr(1), 0, 1, ())]);
    let e = Check::register().run(&h).unwrap_err();
    assert_eq!(
        e.to_string(),
        "register check: unknown: the history holds no completed register operations (Op::Read, Op::Write, Op::Cas) to check"
    );
    assert!(Check::set().run(&h).is_err());
    assert!(Check::unique_ids().run(&h).is_err());
}

#[test]
fn a_cas_completed_with_something_else_than_a_boolean_is_refused() {
    let e = register(vec![ok(1, Op::cas("x", 1, 2), 0, 10, 5)]).unwrap_err();
    assert!(matches!(e, CheckError::Malformed { .. }), "{e:?}");
    assert!(
        e.to_string().contains("complete a cas with ok(true)"),
        "{e}"
    );
}

#[test]
fn the_drawing_puts_each_client_on_its_lane() {
    let ops = [
        ok(1, Op::write("x", 1), 0, 10, ()),
        ok(2, Op::read("x"), 20, 30, NONE),
        info(3, Op::write("x", 5), 5, 25),
    ];
    let drawn: Vec<(usize, &Operation)> = ops.iter().enumerate().collect();
    let d = Drawing::of(&drawn, Some(1));
    let text = d.render();
    let lanes: Vec<&str> = text.lines().collect();
    assert_eq!(lanes[0], "client 1  [1------]");
    assert_eq!(lanes[1], "client 2              [3======]");
    assert_eq!(lanes[2], "client 3      [2----------?");
    assert_eq!(
        lanes[6],
        "  #3   client 2    read x → nil  ok    0.000 … 0.000 ms  ← conflict"
    );
    assert_eq!(
        (d.ops[2].index, d.ops[2].start, d.ops[2].end),
        (1, 3, Some(5))
    );
}

// --- the register: against brute force --------------------------------------

/// A small deterministic generator (xorshift64*): the same cases every run.
struct Rng(u64);
impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }
    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
    fn chance(&mut self, percent: u64) -> bool {
        self.below(100) < percent
    }
}

/// Whether `ops` are linearizable, by trying every order: each `ok`
/// operation placed once, within real-time order; each `info` operation
/// either left out or placed anywhere after its invocation; `fail`
/// operations left out. Keys share nothing but are searched together, so
/// that this checks the per-key split too.
fn brute_force(ops: &[Operation]) -> bool {
    use std::collections::BTreeMap;
    type Registers = BTreeMap<String, Value>;
    fn step(regs: &mut Registers, o: &Operation) -> bool {
        let Some(key) = o.op.key() else { return true };
        let held = regs.get(key).cloned().unwrap_or(Value::Nil);
        let ok = o.outcome == Outcome::Ok;
        match &o.op {
            Op::Read { .. } => !ok || held == o.result,
            Op::Write { value, .. } => {
                regs.insert(key.to_owned(), value.clone());
                true
            }
            Op::Cas { from, to, .. } => {
                let matches = held == *from;
                if ok && o.result == Value::Bool(false) {
                    return !matches;
                }
                if ok && !matches {
                    return false;
                }
                if matches {
                    regs.insert(key.to_owned(), to.clone());
                }
                true
            }
            _ => true,
        }
    }
    fn go(ops: &[&Operation], placed: &mut Vec<bool>, regs: &Registers) -> bool {
        let remaining: Vec<usize> = (0..ops.len()).filter(|&i| !placed[i]).collect();
        if remaining.is_empty() {
            return true;
        }
        let ret = |o: &Operation| match o.outcome {
            Outcome::Ok => o.complete_ns.unwrap_or(u64::MAX),
            _ => u64::MAX,
        };
        // The earliest return of what is left: nothing invoked after it
        // can come next.
        let earliest = remaining
            .iter()
            .map(|&i| ret(ops[i]))
            .min()
            .unwrap_or(u64::MAX);
        for &i in &remaining {
            if ops[i].invoke_ns > earliest {
                continue;
            }
            let mut next = regs.clone();
            if step(&mut next, ops[i]) {
                placed[i] = true;
                let found = go(ops, placed, &next);
                placed[i] = false;
                if found {
                    return true;
                }
            }
        }
        false
    }
    let kept: Vec<&Operation> = ops
        .iter()
        .filter(|o| {
            o.outcome == Outcome::Ok
                || (o.outcome == Outcome::Info && !matches!(o.op, Op::Read { .. }))
        })
        .collect();
    let open: Vec<usize> = (0..kept.len())
        .filter(|&i| kept[i].outcome == Outcome::Info)
        .collect();
    // Every subset of the indeterminate operations took effect.
    (0..1u32 << open.len()).any(|mask| {
        let chosen: Vec<&Operation> = kept
            .iter()
            .enumerate()
            .filter(|(i, _)| {
                open.iter()
                    .position(|o| o == i)
                    .is_none_or(|bit| mask & (1 << bit) != 0)
            })
            .map(|(_, o)| *o)
            .collect();
        go(&chosen, &mut vec![false; chosen.len()], &Registers::new())
    })
}

/// A random history of up to 7 operations by up to 3 clients on `keys`
/// keys: a real register's answers at random points inside each
/// operation, sometimes tampered with.
fn random_history(rng: &mut Rng, keys: u64) -> Vec<Operation> {
    let clients = 1 + rng.below(3) as u32;
    let count = 1 + rng.below(7) as usize;
    let value = |rng: &mut Rng| match rng.below(4) {
        0 => Value::Nil,
        n => Value::Int(n as i64),
    };
    let mut clock = vec![0u64; clients as usize];
    let mut ops = Vec::new();
    for _ in 0..count {
        let client = rng.below(u64::from(clients)) as u32;
        let call = clock[client as usize] + rng.below(4);
        let ret = call + rng.below(6);
        clock[client as usize] = ret + 1;
        let key = format!("k{}", rng.below(keys));
        let op = match rng.below(20) {
            0..=7 => Op::read(key),
            8..=14 => Op::write(key, value(rng)),
            _ => Op::cas(key, value(rng), value(rng)),
        };
        let outcome = match rng.below(20) {
            0..=13 => Outcome::Ok,
            14..=16 => Outcome::Info,
            _ => Outcome::Fail,
        };
        ops.push(at(client, op, call, ret, outcome, Value::Nil));
    }
    // Where each took effect: inside it when ok, anywhere after its
    // invocation or never when info, never when it failed.
    let mut points: Vec<(u64, usize)> = Vec::new();
    for (i, o) in ops.iter().enumerate() {
        let span = o.complete_ns.unwrap() - o.invoke_ns;
        match o.outcome {
            Outcome::Ok => points.push((o.invoke_ns * 2 + rng.below(2 * span + 1), i)),
            Outcome::Info if rng.chance(50) => points.push((o.invoke_ns * 2 + rng.below(40), i)),
            _ => {}
        }
    }
    points.sort();
    let mut regs: std::collections::HashMap<String, Value> = Default::default();
    for (_, i) in points {
        let key = ops[i].op.key().unwrap().to_owned();
        let held = regs.get(&key).cloned().unwrap_or(Value::Nil);
        match ops[i].op.clone() {
            Op::Read { .. } => ops[i].result = held,
            Op::Write { value, .. } => {
                regs.insert(key, value);
            }
            Op::Cas { from, to, .. } => {
                let swapped = held == from;
                if swapped {
                    regs.insert(key, to);
                }
                ops[i].result = Value::Bool(swapped);
            }
            _ => {}
        }
        if ops[i].outcome != Outcome::Ok {
            ops[i].result = Value::Nil;
        }
    }
    if rng.chance(70) {
        let i = rng.below(ops.len() as u64) as usize;
        if ops[i].outcome == Outcome::Ok {
            ops[i].result = match ops[i].op {
                Op::Read { .. } => value(rng),
                Op::Cas { .. } => Value::Bool(rng.chance(50)),
                _ => Value::Nil,
            };
        }
    }
    ops
}

#[test]
fn the_register_checker_agrees_with_brute_force_on_random_small_histories() {
    let mut rng = Rng(0x5eed_1234_abcd_0001);
    let (mut yes, mut no) = (0, 0);
    for case in 0..4000 {
        let keys = if case % 2 == 0 { 1 } else { 2 };
        let ops = random_history(&mut rng, keys);
        let expected = brute_force(&ops);
        let h = history(ops.clone());
        match Check::register().run(&h) {
            Ok(_) => {
                assert!(
                    expected,
                    "case {case}: checker says linearizable, brute force not:\n{ops:#?}"
                );
                yes += 1;
            }
            Err(CheckError::NotLinearizable(n)) => {
                assert!(
                    !expected,
                    "case {case}: checker says not linearizable, brute force does:\n{n}\n{ops:#?}"
                );
                // What it shows fails on its own.
                let part: Vec<Operation> = n.indices.iter().map(|&i| ops[i].clone()).collect();
                assert!(
                    !brute_force(&part),
                    "case {case}: the part shown is linearizable:\n{n}"
                );
                no += 1;
            }
            Err(CheckError::Unknown {
                reason: UnknownReason::Empty { .. },
                ..
            }) => assert!(expected),
            Err(e) => panic!("case {case}: {e}"),
        }
    }
    // Both verdicts are well represented, or the comparison proves little.
    println!("linearizable {yes}, not {no}");
    assert!(yes > 1000 && no > 600, "linearizable {yes}, not {no}");
}

// --- the set, the counter, unique ids ---------------------------------------

fn set_error(ops: Vec<Operation>) -> SetAnomalies {
    match Check::set().run(&history(ops)) {
        Err(CheckError::Set(a)) => *a,
        other => panic!("expected set anomalies, got {other:?}"),
    }
}

#[test]
fn a_set_that_keeps_what_was_acknowledged_passes() {
    let checked = Check::set()
        .run(&history(vec![
            ok(1, Op::add(1), 0, 10, ()),
            ok(2, Op::add(2), 0, 10, ()),
            info(3, Op::add(3), 0, 10),
            fail(3, Op::add(4), 20, 30),
            // Acknowledged while the final read ran: may be missing.
            ok(1, Op::add(5), 35, 60, ()),
            ok(2, Op::ReadSet, 40, 50, vec![1, 2, 3]),
        ]))
        .unwrap();
    assert_eq!(checked.ops, 6);
}

#[test]
fn a_set_check_names_lost_unexpected_duplicated_and_never_acknowledged_elements() {
    let a = set_error(vec![
        ok(1, Op::add(1), 0, 10, ()),
        ok(1, Op::add(2), 10, 20, ()),
        fail(2, Op::add(3), 0, 10),
        ok(3, Op::ReadSet, 30, 40, vec![1, 1, 3, 9]),
        ok(2, Op::add(4), 50, 60, ()),
        ok(3, Op::ReadSet, 70, 80, vec![1, 4]),
    ]);
    assert_eq!(a.lost, [Value::Int(2)]);
    assert_eq!(a.unexpected, [Value::Int(9)]);
    assert_eq!(a.duplicated, [Value::Int(1)]);
    assert_eq!(a.failed_but_read, [Value::Int(3)]);
    let text = CheckError::Set(Box::new(a)).to_string();
    assert!(
        text.starts_with("set check failed: 1 lost (acknowledged, not in the final read): 2; "),
        "{text}"
    );

    let a = set_error(vec![
        ok(3, Op::ReadSet, 0, 10, vec![7]),
        ok(1, Op::add(7), 20, 30, ()),
        ok(3, Op::ReadSet, 40, 50, vec![7]),
    ]);
    assert_eq!(a.read_before_add, [Value::Int(7)]);
}

#[test]
fn a_set_without_a_completed_read_is_unknown() {
    let e = Check::set()
        .run(&history(vec![
            ok(1, Op::add(1), 0, 10, ()),
            info(2, Op::ReadSet, 20, 30),
        ]))
        .unwrap_err();
    assert!(
        e.to_string()
            .starts_with("set check: unknown: no read of the set completed"),
        "{e}"
    );
}

#[test]
fn counter_reads_lie_between_the_certain_and_the_possible_increments() {
    let base = || {
        vec![
            ok(1, Op::incr(1), 0, 10, ()),
            ok(2, Op::incr(2), 0, 10, ()),
            info(3, Op::incr(4), 0, 10),
            fail(3, Op::incr(100), 20, 30),
        ]
    };
    for read in [3, 5, 7] {
        let mut ops = base();
        ops.push(ok(1, Op::ReadCounter, 40, 50, read));
        Check::counter().run(&history(ops)).unwrap();
    }
    for read in [2, 8, 103] {
        let mut ops = base();
        ops.push(ok(1, Op::ReadCounter, 40, 50, read));
        match Check::counter().run(&history(ops)) {
            Err(CheckError::Counter(a)) => {
                assert_eq!(
                    (a.reads[0].value, a.reads[0].lower, a.reads[0].upper),
                    (read, 3, 7)
                );
                assert!(
                    a.to_string()
                        .contains(&format!("read {read}, outside 3..=7")),
                    "{a}"
                );
            }
            other => panic!("read {read}: {other:?}"),
        }
    }
    // A read concurrent with an acknowledged increment may or may not see it.
    for read in [0, 1] {
        Check::counter()
            .run(&history(vec![
                ok(1, Op::incr(1), 0, 20, ()),
                ok(2, Op::ReadCounter, 5, 10, read),
            ]))
            .unwrap();
    }
}

#[test]
fn an_id_handed_out_twice_is_named() {
    let ops = vec![
        ok(1, Op::NewId, 0, 10, "a"),
        ok(2, Op::NewId, 0, 10, "b"),
        info(3, Op::NewId, 0, 10),
        ok(3, Op::NewId, 20, 30, "a"),
    ];
    match Check::unique_ids().run(&history(ops)) {
        Err(CheckError::DuplicateIds(d)) => {
            assert_eq!(d.ids, [(Value::from("a"), vec![0, 3])]);
            assert_eq!(
                d.to_string(),
                "1 of 3 ids handed out more than once: \"a\" (operations 0, 3)"
            );
        }
        other => panic!("{other:?}"),
    }
    Check::unique_ids()
        .run(&history(vec![
            ok(1, Op::NewId, 0, 10, 1),
            ok(2, Op::NewId, 0, 10, 2),
        ]))
        .unwrap();
}
