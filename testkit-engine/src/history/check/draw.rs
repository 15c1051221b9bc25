//! A sub-history drawn as lanes, one per client: each operation a bar from
//! its invocation to its completion, the conflict marked. Time is drawn by
//! rank (the order of the events), not to scale: what a reader needs is
//! which operations overlap.

use std::fmt::Write as _;

use serde::{Deserialize, Serialize};

use crate::history::{Operation, Outcome};

/// The most operations a drawing shows; the rest are counted.
const MAX_DRAWN: usize = 40;

/// Columns between two consecutive events.
const SPACING: usize = 4;

/// A sub-history, ready to draw: what a report draws as it likes, and
/// [`Drawing::render`] draws as text.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct Drawing {
    /// The operations drawn, in order of invocation.
    pub ops: Vec<DrawnOp>,
    /// Operations of the sub-history left out of the drawing.
    pub not_drawn: usize,
}

/// One operation of a drawing.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct DrawnOp {
    /// Its number in the drawing, from 1.
    pub number: usize,
    /// Its index in the history.
    pub index: usize,
    /// The client that performed it.
    pub client: u32,
    /// `read x → 2`.
    pub label: String,
    /// How it ended.
    pub outcome: Outcome,
    /// Its invocation and completion, in nanoseconds from the history's
    /// start; no completion for an operation that never completed.
    pub invoke_ns: u64,
    /// See `invoke_ns`.
    pub complete_ns: Option<u64>,
    /// The rank of its invocation among the drawing's events.
    pub start: usize,
    /// The rank of its completion; `None`: open to the end.
    pub end: Option<usize>,
    /// Whether it is the conflict: the operation that cannot be placed.
    pub conflict: bool,
}

impl Drawing {
    /// A drawing of `ops` (index in the history, operation), `conflict`
    /// marked.
    pub fn of(ops: &[(usize, &Operation)], conflict: Option<usize>) -> Drawing {
        let mut ops: Vec<(usize, &Operation)> = ops.to_vec();
        ops.sort_by_key(|&(i, o)| (o.invoke_ns, i));
        let not_drawn = ops.len().saturating_sub(MAX_DRAWN);
        ops.truncate(MAX_DRAWN);
        let mut times: Vec<u64> = ops
            .iter()
            .flat_map(|(_, o)| [Some(o.invoke_ns), o.complete_ns])
            .flatten()
            .collect();
        times.sort_unstable();
        times.dedup();
        let rank = |t: u64| times.partition_point(|&x| x < t);
        let ops = ops
            .iter()
            .enumerate()
            .map(|(k, &(index, o))| DrawnOp {
                number: k + 1,
                index,
                client: o.client,
                label: o.label(),
                outcome: o.outcome,
                invoke_ns: o.invoke_ns,
                complete_ns: o.complete_ns,
                start: rank(o.invoke_ns),
                end: o.complete_ns.map(rank),
                conflict: conflict == Some(index),
            })
            .collect();
        Drawing { ops, not_drawn }
    }

    /// The drawing as text: a lane per client, then a line per operation.
    ///
    /// ```text
    /// client 1  [1--------]
    /// client 2      [2----------]
    /// client 3                      [3====]
    /// ```
    pub fn render(&self) -> String {
        let last = self
            .ops
            .iter()
            .flat_map(|o| [Some(o.start), o.end])
            .flatten()
            .max()
            .unwrap_or(0);
        let width = (last + 1) * SPACING + 2;
        let mut clients: Vec<u32> = self.ops.iter().map(|o| o.client).collect();
        clients.sort_unstable();
        clients.dedup();
        let name_width = clients
            .iter()
            .map(|c| format!("client {c}").len())
            .max()
            .unwrap_or(0);
        let mut text = String::new();
        for &client in &clients {
            let mut lane = vec![' '; width];
            for o in self.ops.iter().filter(|o| o.client == client) {
                let from = o.start * SPACING;
                let to = o.end.map_or(width - 1, |e| e * SPACING);
                let fill = if o.conflict { '=' } else { '-' };
                for c in &mut lane[from..=to] {
                    *c = fill;
                }
                lane[from] = '[';
                lane[to] = match (o.end, o.outcome) {
                    (None, _) => '…',
                    (Some(_), Outcome::Info) => '?',
                    (Some(_), _) => ']',
                };
                for (k, d) in o.number.to_string().chars().enumerate() {
                    if from + 1 + k < to {
                        lane[from + 1 + k] = d;
                    }
                }
            }
            let lane: String = lane.into_iter().collect();
            let _ = writeln!(
                text,
                "{:<name_width$}  {}",
                format!("client {client}"),
                lane.trim_end()
            );
        }
        let start = self.ops.iter().map(|o| o.invoke_ns).min().unwrap_or(0);
        let ms = |ns: u64| format!("{:.3}", ns.saturating_sub(start) as f64 / 1e6);
        text.push('\n');
        let label_width = self
            .ops
            .iter()
            .map(|o| o.label.chars().count())
            .max()
            .unwrap_or(0);
        for o in &self.ops {
            let until = o.complete_ns.map_or_else(|| "open".to_owned(), ms);
            let _ = writeln!(
                text,
                "  #{:<3} client {:<4} {:<label_width$}  {:<4}  {} … {} ms{}",
                o.number,
                o.client,
                o.label,
                o.outcome.as_str(),
                ms(o.invoke_ns),
                until,
                if o.conflict { "  ← conflict" } else { "" }
            );
        }
        if self.not_drawn > 0 {
            let _ = writeln!(text, "  … {} more operations not drawn", self.not_drawn);
        }
        text
    }
}
