//! The packet filter (`iptables`) of the engine's host, or of one
//! container's network namespace (entered by its process's id with
//! `nsenter -t <pid> -n`): the rules that cut a container off or lose its
//! packets, inserted, checked, deleted until gone, and listed by their
//! comment.
//!
//! `iptables -S` has no machine format; its listing is split here, once,
//! into [`Rule`]s (a quoted comment is one word).

use std::path::PathBuf;
use std::time::Duration;

use serde::{Deserialize, Serialize};

/// The longest one `iptables` command may take, the table lock waited for.
const IPTABLES_TIMEOUT: Duration = Duration::from_secs(30);

/// How many times a rule is deleted before it counts as undeletable: a rule
/// inserted twice is there twice.
const DELETE_ROUNDS: usize = 16;

/// One `iptables` rule: its chain and its match.
///
/// A rule in a container's own namespace (`OUTPUT`, `INPUT` there) sees
/// every packet of that container and none of the others'.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct Rule {
    /// `DOCKER-USER` or `OUTPUT`.
    pub chain: String,
    /// What follows the chain: `-s A -d B -m comment --comment C -j DROP`.
    pub spec: Vec<String>,
}

impl Rule {
    /// A rule of `chain` that drops packets from `source` (any, when
    /// `None`) to `dest`, commented `comment`.
    pub fn drop(chain: &str, source: Option<&str>, dest: &str, comment: &str) -> Rule {
        let mut spec = Vec::new();
        if let Some(s) = source {
            spec.extend(["-s".to_owned(), format!("{s}/32")]);
        }
        spec.extend(["-d".to_owned(), format!("{dest}/32")]);
        spec.extend(dropped_as(comment));
        Rule {
            chain: chain.to_owned(),
            spec,
        }
    }

    /// A rule of `chain` that drops each packet with probability `p`
    /// (`-m statistic --mode random`), leaving the loopback alone: in
    /// `OUTPUT` the packets the namespace sends (to `peer` only, when
    /// given), in `INPUT` those it receives (from `peer` only).
    pub fn lose(chain: &str, peer: Option<&str>, p: f64, comment: &str) -> Rule {
        let (device, address) = match chain {
            "INPUT" => ("-i", "-s"),
            _ => ("-o", "-d"),
        };
        let mut spec: Vec<String> = Vec::new();
        match peer {
            Some(a) => spec.extend([address.to_owned(), format!("{a}/32")]),
            None => spec.extend(["!".to_owned(), device.to_owned(), "lo".to_owned()]),
        }
        let probability = format!("{p}");
        spec.extend(
            ["-m", "statistic", "--mode", "random", "--probability"]
                .iter()
                .map(|s| (*s).to_owned()),
        );
        spec.push(probability);
        spec.extend(dropped_as(comment));
        Rule {
            chain: chain.to_owned(),
            spec,
        }
    }

    /// `iptables` arguments that do `op` (`-I`, `-C`, `-D`) with the rule.
    fn args(&self, op: &'static str) -> Vec<&str> {
        let mut args = vec![op, self.chain.as_str()];
        args.extend(self.spec.iter().map(String::as_str));
        args
    }

    /// `CHAIN -s A -d B …`, for people.
    pub fn describe(&self) -> String {
        format!("{} {}", self.chain, self.spec.join(" "))
    }
}

/// What a host without `nsenter` is told.
pub(super) const NO_NSENTER: &str =
    "a fault on a node's own links needs `nsenter` (as root, on the Docker Engine's host) to \
     enter its network namespace: install it (`apt-get install util-linux`)";

/// Why the packet filter did not do what was asked.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum PacketFilterError {
    /// No `iptables` on this host.
    #[error(
        "cutting a node off needs `iptables` (as root, on the Docker Engine's host): \
         install it (`apt-get install iptables`)"
    )]
    NotFound,
    /// No `nsenter` on this host, to reach a container's namespace.
    #[error("{}", NO_NSENTER)]
    NoNsenter,
    /// A rule could not be inserted.
    #[error("cannot insert the rule `{}`", rule.describe())]
    Insert {
        /// The rule.
        rule: Rule,
        /// Why.
        #[source]
        source: IptablesError,
    },
    /// A rule could not be deleted.
    #[error("cannot delete the rule `{}`", rule.describe())]
    Delete {
        /// The rule.
        rule: Rule,
        /// Why.
        #[source]
        source: IptablesError,
    },
    /// Whether a rule is in the filter could not be told: `iptables -C`
    /// failed other than by saying the rule does not exist (the
    /// namespace gone, the table locked, no such match module).
    #[error("cannot tell whether the rule `{}` is there", rule.describe())]
    Check {
        /// The rule.
        rule: Rule,
        /// Why.
        #[source]
        source: IptablesError,
    },
    /// A rule was still there after every deletion.
    #[error("the rule `{}` is still there after {DELETE_ROUNDS} deletions", rule.describe())]
    StillThere {
        /// The rule.
        rule: Rule,
    },
}

/// Why one `iptables` command failed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum IptablesError {
    /// It could not start.
    #[error("cannot run {}", program.display())]
    Spawn {
        /// The program.
        program: PathBuf,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// It took too long.
    #[error("iptables took over {} s", IPTABLES_TIMEOUT.as_secs())]
    Timeout,
    /// It exited unsuccessfully.
    #[error("iptables {args} failed ({status}): {stderr}")]
    Failed {
        /// Its arguments.
        args: String,
        /// How it exited.
        status: std::process::ExitStatus,
        /// What it printed on stderr.
        stderr: String,
    },
}

/// The `iptables` of the host, or of one network namespace.
#[derive(Debug, Clone)]
pub struct PacketFilter {
    program: PathBuf,
    /// `nsenter` and the pid whose network namespace the rules are in;
    /// `None`: the host's.
    netns: Option<(PathBuf, u32)>,
}

impl PacketFilter {
    /// `iptables`, on PATH or where Debian puts it.
    pub fn on_host() -> Result<PacketFilter, PacketFilterError> {
        crate::process::find_program("iptables", None, None)
            .or_else(|| {
                ["/usr/sbin/iptables", "/sbin/iptables"]
                    .iter()
                    .map(PathBuf::from)
                    .find(|p| p.is_file())
            })
            .map(|program| PacketFilter {
                program,
                netns: None,
            })
            .ok_or(PacketFilterError::NotFound)
    }

    /// The `iptables` of the network namespace of process `pid` (a
    /// container's), entered by `nsenter -t <pid> -n`: its own `OUTPUT`
    /// and `INPUT`.
    pub fn in_namespace_of(pid: u32) -> Result<PacketFilter, PacketFilterError> {
        let nsenter = nsenter().ok_or(PacketFilterError::NoNsenter)?;
        let mut filter = PacketFilter::on_host()?;
        filter.netns = Some((nsenter, pid));
        Ok(filter)
    }

    /// Inserts `rule` at the head of its chain.
    pub async fn insert(&self, rule: &Rule) -> Result<(), PacketFilterError> {
        self.run(&rule.args("-I"))
            .await
            .map(drop)
            .map_err(|source| PacketFilterError::Insert {
                rule: rule.clone(),
                source,
            })
    }

    /// Whether `rule` is in the filter (`-C`). Only iptables' own "does a
    /// matching rule exist" answer (exit 1) means absent: any other
    /// failure is an error, never read as a rule gone.
    pub async fn holds(&self, rule: &Rule) -> Result<bool, PacketFilterError> {
        match self.run(&rule.args("-C")).await {
            Ok(_) => Ok(true),
            Err(IptablesError::Failed { status, stderr, .. }) if says_absent(status, &stderr) => {
                Ok(false)
            }
            Err(source) => Err(PacketFilterError::Check {
                rule: rule.clone(),
                source,
            }),
        }
    }

    /// Deletes `rule` until none like it is left, and proves it gone;
    /// whether there was one.
    pub async fn remove(&self, rule: &Rule) -> Result<bool, PacketFilterError> {
        for round in 0..DELETE_ROUNDS {
            if !self.holds(rule).await? {
                return Ok(round > 0);
            }
            self.run(&rule.args("-D"))
                .await
                .map_err(|source| PacketFilterError::Delete {
                    rule: rule.clone(),
                    source,
                })?;
        }
        Err(PacketFilterError::StillThere { rule: rule.clone() })
    }

    /// The rules of `chain` whose comment is `comment` whole: a rule whose
    /// comment merely holds it (`testkit.pod=<id>-admin`) is someone
    /// else's. A chain that cannot be listed (absent) has none.
    pub async fn commented(&self, chain: &str, comment: &str) -> Vec<Rule> {
        let Ok(listing) = self.run(&["-S", chain]).await else {
            return Vec::new();
        };
        listing
            .lines()
            .filter_map(|line| owned_rule(line, chain, comment))
            .collect()
    }

    /// Runs `iptables` with `args` (waiting for the table lock); its stdout.
    async fn run(&self, args: &[&str]) -> Result<String, IptablesError> {
        let mut cmd = match &self.netns {
            None => tokio::process::Command::new(&self.program),
            Some((nsenter, pid)) => {
                let mut cmd = tokio::process::Command::new(nsenter);
                cmd.args(["-t", &pid.to_string(), "-n", "--"])
                    .arg(&self.program);
                cmd
            }
        };
        cmd.arg("-w").args(args).kill_on_drop(true);
        let out = tokio::time::timeout(IPTABLES_TIMEOUT, cmd.output())
            .await
            .map_err(|_| IptablesError::Timeout)?
            .map_err(|source| IptablesError::Spawn {
                program: self.program.clone(),
                source,
            })?;
        if out.status.success() {
            Ok(String::from_utf8_lossy(&out.stdout).into_owned())
        } else {
            Err(IptablesError::Failed {
                args: args.join(" "),
                status: out.status,
                stderr: String::from_utf8_lossy(&out.stderr).trim().to_owned(),
            })
        }
    }
}

/// Whether `iptables -C` failed by saying no such rule is there: its exit
/// 1 with its own words. `nsenter` also exits 1 when it cannot enter the
/// namespace, saying something else; that is no answer about the rule.
fn says_absent(status: std::process::ExitStatus, stderr: &str) -> bool {
    status.code() == Some(1) && stderr.contains("does a matching rule exist")
}

/// The end of a rule that drops what it matched, commented `comment`.
fn dropped_as(comment: &str) -> impl Iterator<Item = String> + '_ {
    ["-m", "comment", "--comment", comment, "-j", "DROP"]
        .into_iter()
        .map(str::to_owned)
}

/// `nsenter`, on PATH or where Debian puts it.
pub(super) fn nsenter() -> Option<PathBuf> {
    crate::process::find_program("nsenter", None, None).or_else(|| {
        ["/usr/bin/nsenter", "/bin/nsenter"]
            .iter()
            .map(PathBuf::from)
            .find(|p| p.is_file())
    })
}

/// The rule `line` of `iptables -S chain` lists, when its comment is
/// `comment` whole.
fn owned_rule(line: &str, chain: &str, comment: &str) -> Option<Rule> {
    let spec = split_rule(line.strip_prefix(&format!("-A {chain} "))?);
    let given = spec
        .windows(2)
        .find(|w| w[0] == "--comment")
        .map(|w| w[1].as_str())?;
    (given == comment).then(|| Rule {
        chain: chain.to_owned(),
        spec,
    })
}

/// Splits a rule as `iptables -S` prints it: words, with a quoted comment
/// as one.
fn split_rule(text: &str) -> Vec<String> {
    let mut words = Vec::new();
    let mut rest = text.trim();
    while !rest.is_empty() {
        if let Some(quoted) = rest.strip_prefix('"') {
            let end = quoted.find('"').unwrap_or(quoted.len());
            words.push(quoted[..end].to_owned());
            rest = quoted.get(end + 1..).unwrap_or("").trim_start();
        } else {
            let end = rest.find(' ').unwrap_or(rest.len());
            words.push(rest[..end].to_owned());
            rest = rest[end..].trim_start();
        }
    }
    words
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_listed_rule_splits_as_it_was_given() {
        let listed =
            r#"-s 172.18.0.2/32 -d 172.18.0.3/32 -m comment --comment "testkit.pod=abc" -j DROP"#;
        let rule = Rule::drop(
            "DOCKER-USER",
            Some("172.18.0.2"),
            "172.18.0.3",
            "testkit.pod=abc",
        );
        assert_eq!(split_rule(listed), rule.spec);
    }

    #[test]
    fn only_a_rule_whose_whole_comment_is_the_pods_is_its_own() {
        let comment = "testkit.pod=abc";
        let line =
            |c: &str| format!("-A OUTPUT -d 10.0.0.2/32 -m comment --comment \"{c}\" -j DROP");
        let own = owned_rule(&line(comment), "OUTPUT", comment).expect("the pod's own rule");
        assert_eq!(
            own.spec,
            Rule::drop("OUTPUT", None, "10.0.0.2", comment).spec
        );
        for foreign in [
            "testkit.pod=abc-admin",
            "x testkit.pod=abc",
            "testkit.pod=ab",
        ] {
            assert!(
                owned_rule(&line(foreign), "OUTPUT", comment).is_none(),
                "{foreign} is not the pod's"
            );
        }
        assert!(owned_rule(&line(comment), "DOCKER-USER", comment).is_none());
    }
}
