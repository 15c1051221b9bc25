//! Partitions: the pod's nodes split by a shape into groups that see
//! nothing of each other, drawn from the node list. Each shape comes down
//! to the pairs of nodes kept apart, and each pair to the two drop rules
//! of a cut between them; the tests still reach every node.

use serde::{Deserialize, Serialize};

/// The shape of a partition.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "shape", rename_all = "snake_case")]
#[non_exhaustive]
pub enum Partition {
    /// The named nodes (fewer than half) on one side, the rest (the
    /// majority) on the other.
    Minority {
        /// The minority.
        nodes: Vec<String>,
    },
    /// Each node sees only its two neighbours, the nodes in their order
    /// (by name) closed into a ring: four nodes or more.
    Ring,
    /// The other nodes in two halves (in their order), and `via`, which
    /// sees both: three nodes or more.
    Bridge {
        /// The node both halves see.
        via: String,
    },
    /// The nodes shuffled by `seed` and split into a minority (half,
    /// rounded down) and a majority. Without a seed one is drawn when the
    /// partition is planned, and journaled with it: the same seed over the
    /// same nodes gives the same halves.
    RandomHalves {
        /// The seed of the shuffle.
        seed: Option<u64>,
    },
}

/// Why a shape cannot be drawn over the pod's nodes.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct ShapeError(pub String);

impl Partition {
    /// The shape in words, with its seed when it has one.
    pub fn describe(&self) -> String {
        match self {
            Partition::Minority { nodes } => format!("minority [{}]", nodes.join(", ")),
            Partition::Ring => "ring".to_owned(),
            Partition::Bridge { via } => format!("bridge via {via}"),
            Partition::RandomHalves { seed: Some(s) } => format!("random halves (seed {s})"),
            Partition::RandomHalves { seed: None } => "random halves".to_owned(),
        }
    }

    /// The shape's one word, for names: `minority`, `ring`, `bridge`,
    /// `halves`.
    pub fn word(&self) -> &'static str {
        match self {
            Partition::Minority { .. } => "minority",
            Partition::Ring => "ring",
            Partition::Bridge { .. } => "bridge",
            Partition::RandomHalves { .. } => "halves",
        }
    }

    /// Draws the shape over `nodes` (in their order): the shape as
    /// planned (a random one with its seed) and the pairs kept apart,
    /// each pair in node order.
    pub fn draw(&self, nodes: &[String]) -> Result<(Partition, Vec<[String; 2]>), ShapeError> {
        let n = nodes.len();
        let known = |name: &str| -> Result<(), ShapeError> {
            match nodes.iter().any(|x| x == name) {
                true => Ok(()),
                false => Err(ShapeError(format!(
                    "no node `{name}` in this pod; its nodes are {}",
                    nodes.join(", ")
                ))),
            }
        };
        let (planned, sides) = match self {
            Partition::Minority { nodes: few } => {
                if few.is_empty() {
                    return Err(ShapeError(
                        "a minority of no node cuts nothing: name the nodes of the minority"
                            .to_owned(),
                    ));
                }
                for x in few {
                    known(x)?;
                }
                if 2 * few.len() >= n {
                    return Err(ShapeError(format!(
                        "[{}] is {} of the {n} nodes, not a minority: name fewer than half",
                        few.join(", "),
                        few.len()
                    )));
                }
                let rest = nodes.iter().filter(|x| !few.contains(x)).cloned().collect();
                (self.clone(), vec![few.clone(), rest])
            }
            Partition::Ring => {
                if n < 4 {
                    return Err(ShapeError(format!(
                        "a ring of {n} nodes cuts nothing (each node neighbours every other): \
                         it needs 4 nodes or more; with {n}, use a minority or a bridge"
                    )));
                }
                let apart = (0..n)
                    .flat_map(|i| (i + 1..n).map(move |j| (i, j)))
                    .filter(|&(i, j)| j - i != 1 && !(i == 0 && j == n - 1))
                    .map(|(i, j)| [nodes[i].clone(), nodes[j].clone()])
                    .collect();
                return Ok((self.clone(), apart));
            }
            Partition::Bridge { via } => {
                known(via)?;
                if n < 3 {
                    return Err(ShapeError(format!(
                        "a bridge needs 3 nodes or more (two halves and the bridge); this pod has {n}"
                    )));
                }
                let others: Vec<String> = nodes.iter().filter(|x| *x != via).cloned().collect();
                let (left, right) = others.split_at(others.len() / 2);
                (self.clone(), vec![left.to_vec(), right.to_vec()])
            }
            Partition::RandomHalves { seed } => {
                if n < 2 {
                    return Err(ShapeError(format!(
                        "halves need 2 nodes or more; this pod has {n}"
                    )));
                }
                let seed = seed.unwrap_or_else(drawn_seed);
                let mut order = nodes.to_vec();
                shuffle(&mut order, seed);
                let (few, rest) = order.split_at(n / 2);
                let mut few = few.to_vec();
                let mut rest = rest.to_vec();
                few.sort();
                rest.sort();
                (
                    Partition::RandomHalves { seed: Some(seed) },
                    vec![few, rest],
                )
            }
        };
        let position = |x: &String| nodes.iter().position(|y| y == x).unwrap_or(usize::MAX);
        let mut apart = Vec::new();
        for a in &sides[0] {
            for b in &sides[1] {
                let mut pair = [a.clone(), b.clone()];
                pair.sort_by_key(position);
                apart.push(pair);
            }
        }
        apart.sort_by_key(|[a, b]| (position(a), position(b)));
        Ok((planned, apart))
    }
}

/// A seed from the operating system.
fn drawn_seed() -> u64 {
    let mut bytes = [0u8; 8];
    getrandom::fill(&mut bytes).expect("the operating system's random source failed");
    u64::from_le_bytes(bytes)
}

/// Fisher-Yates over splitmix64: the same seed, the same order, on every
/// platform and release.
fn shuffle(items: &mut [String], seed: u64) {
    let mut state = seed;
    let mut next = || {
        state = state.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = state;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    };
    for i in (1..items.len()).rev() {
        let j = (next() % (i as u64 + 1)) as usize;
        items.swap(i, j);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn nodes(n: usize) -> Vec<String> {
        (1..=n).map(|i| format!("n{i}")).collect()
    }

    fn pairs(apart: &[[String; 2]]) -> Vec<String> {
        apart.iter().map(|[a, b]| format!("{a}-{b}")).collect()
    }

    #[test]
    fn a_minority_is_kept_apart_from_every_other_node() {
        let (_, apart) = Partition::Minority {
            nodes: vec!["n3".into()],
        }
        .draw(&nodes(3))
        .unwrap();
        assert_eq!(pairs(&apart), ["n1-n3", "n2-n3"]);
        let half = Partition::Minority {
            nodes: vec!["n1".into(), "n2".into()],
        };
        let why = half.draw(&nodes(4)).unwrap_err().0;
        assert!(why.contains("not a minority"), "{why}");
    }

    #[test]
    fn a_ring_keeps_each_node_with_its_two_neighbours_only() {
        let (_, apart) = Partition::Ring.draw(&nodes(5)).unwrap();
        assert_eq!(pairs(&apart), ["n1-n3", "n1-n4", "n2-n4", "n2-n5", "n3-n5"]);
        let why = Partition::Ring.draw(&nodes(3)).unwrap_err().0;
        assert!(why.contains("4 nodes or more"), "{why}");
    }

    #[test]
    fn a_bridge_sees_both_halves_that_see_nothing_of_each_other() {
        let bridge = Partition::Bridge { via: "n2".into() };
        let (_, apart) = bridge.draw(&nodes(3)).unwrap();
        assert_eq!(pairs(&apart), ["n1-n3"]);
        let (_, apart) = bridge.draw(&nodes(5)).unwrap();
        assert_eq!(pairs(&apart), ["n1-n4", "n1-n5", "n3-n4", "n3-n5"]);
    }

    #[test]
    fn random_halves_are_the_seeds_and_the_seed_is_kept() {
        let drawn = Partition::RandomHalves { seed: None };
        let (planned, apart) = drawn.draw(&nodes(5)).unwrap();
        let Partition::RandomHalves { seed: Some(seed) } = planned else {
            panic!("the plan keeps its seed: {planned:?}")
        };
        assert_eq!(
            apart.len(),
            2 * 3,
            "a minority of 2 apart from a majority of 3"
        );
        let again = Partition::RandomHalves { seed: Some(seed) };
        assert_eq!(
            again.draw(&nodes(5)).unwrap().1,
            apart,
            "same seed, same halves"
        );
        let differ = (0..20u64)
            .map(|s| {
                Partition::RandomHalves { seed: Some(s) }
                    .draw(&nodes(5))
                    .unwrap()
                    .1
            })
            .collect::<std::collections::BTreeSet<_>>();
        assert!(differ.len() > 3, "seeds give other halves: {differ:?}");
    }
}
