//! What the engine says of its objects, as the JSON of its CLI
//! (`--format '{{json .}}'`, `inspect`) parsed into types: no field is read
//! from text laid out for people.

use std::collections::BTreeMap;
use std::time::{Duration, SystemTime};

use serde::{Deserialize, Deserializer, Serialize};

/// One line of `ps --format '{{json .}}'`.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
pub struct ContainerSummary {
    /// Its id (whole, with `--no-trunc`).
    #[serde(rename = "ID", alias = "Id")]
    pub id: String,
    /// Its name.
    #[serde(rename = "Names")]
    pub name: String,
    /// `running`, `exited`, `paused`, …
    #[serde(rename = "State")]
    pub state: String,
}

/// A container, as `inspect` says.
#[derive(Debug, Clone, Deserialize)]
pub struct ContainerDetails {
    /// Its id.
    #[serde(rename = "Id")]
    pub id: String,
    /// Its name, with the engine's leading `/`.
    #[serde(rename = "Name", default)]
    name: String,
    /// When it was made.
    #[serde(rename = "Created")]
    pub created: Timestamp,
    /// Its state.
    #[serde(rename = "State")]
    pub state: ContainerState,
    #[serde(rename = "Config", default)]
    config: ContainerConfig,
    #[serde(rename = "NetworkSettings", default)]
    network_settings: NetworkSettings,
}

impl ContainerDetails {
    /// Its name.
    pub fn name(&self) -> &str {
        self.name.trim_start_matches('/')
    }

    /// Its labels.
    pub fn labels(&self) -> &BTreeMap<String, String> {
        &self.config.labels
    }

    /// The value of its label `key`, when it has it.
    pub fn label(&self, key: &str) -> Option<&str> {
        self.config.labels.get(key).map(String::as_str)
    }

    /// Its address on `network`, when it is attached and has one.
    pub fn address_on(&self, network: &str) -> Option<&str> {
        self.network_settings
            .networks
            .get(network)
            .map(|n| n.ip_address.as_str())
            .filter(|ip| !ip.is_empty())
    }
}

/// A container's state, as `inspect` says.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
pub struct ContainerState {
    /// `running`, `exited`, `paused`, `created`, …
    #[serde(rename = "Status")]
    pub status: String,
    /// Whether it runs (a frozen one does too).
    #[serde(rename = "Running")]
    pub running: bool,
    /// Whether it is frozen.
    #[serde(rename = "Paused")]
    pub paused: bool,
    /// Its main process's id on the engine's host (0 when it runs none):
    /// the way into its namespaces.
    #[serde(rename = "Pid", default)]
    pub pid: u32,
    /// When its current run started (RFC 3339, as the engine writes it):
    /// a restart, or a stop and a start, makes a new one.
    #[serde(rename = "StartedAt", default)]
    pub started_at: String,
    /// Its exit code, when it exited.
    #[serde(rename = "ExitCode")]
    pub exit_code: i64,
    /// Whether the kernel killed it for running out of memory.
    #[serde(rename = "OOMKilled")]
    pub oom_killed: bool,
}

#[derive(Debug, Clone, Default, Deserialize)]
struct ContainerConfig {
    #[serde(rename = "Labels", default, deserialize_with = "null_as_default")]
    labels: BTreeMap<String, String>,
}

#[derive(Debug, Clone, Default, Deserialize)]
struct NetworkSettings {
    #[serde(rename = "Networks", default, deserialize_with = "null_as_default")]
    networks: BTreeMap<String, Endpoint>,
}

#[derive(Debug, Clone, Default, Deserialize)]
struct Endpoint {
    #[serde(rename = "IPAddress", default)]
    ip_address: String,
}

/// A network, as `network inspect` says.
#[derive(Debug, Clone, Deserialize)]
pub struct NetworkDetails {
    /// Its name.
    #[serde(rename = "Name")]
    pub name: String,
    /// When it was made.
    #[serde(rename = "Created")]
    pub created: Timestamp,
    /// Its labels.
    #[serde(rename = "Labels", default, deserialize_with = "null_as_default")]
    pub labels: BTreeMap<String, String>,
}

/// A volume, as `volume inspect` says.
#[derive(Debug, Clone, Deserialize)]
pub struct VolumeDetails {
    /// Its name.
    #[serde(rename = "Name")]
    pub name: String,
    /// When it was made.
    #[serde(rename = "CreatedAt")]
    pub created: Timestamp,
    /// Its labels.
    #[serde(rename = "Labels", default, deserialize_with = "null_as_default")]
    pub labels: BTreeMap<String, String>,
}

/// One event of the engine, as `events --format '{{json .}}'` prints it.
#[derive(Debug, Clone, Deserialize)]
pub struct Event {
    /// `start`, `kill`, `die`, `oom`, …
    #[serde(rename = "Action")]
    pub action: String,
    /// The object it happened to.
    #[serde(rename = "Actor")]
    pub actor: Actor,
    /// When, in nanoseconds since the Unix epoch.
    #[serde(rename = "timeNano", default)]
    pub time_nano: u64,
}

/// The object an [`Event`] happened to.
#[derive(Debug, Clone, Deserialize)]
pub struct Actor {
    /// Its id.
    #[serde(rename = "ID")]
    pub id: String,
    /// Its labels, and what the event adds (`signal`, `exitCode`).
    #[serde(rename = "Attributes", default)]
    pub attributes: BTreeMap<String, String>,
}

/// What a container printed: stdout and stderr, apart.
#[derive(Debug, Clone, Default)]
pub struct Logs {
    /// Its stdout.
    pub stdout: String,
    /// Its stderr.
    pub stderr: String,
}

/// A moment as the engine's JSON gives it: RFC 3339, to the nanosecond,
/// in UTC (`Z`) or with an offset (`+01:00`), as the daemon's zone has it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize)]
pub struct Timestamp(pub SystemTime);

impl<'de> Deserialize<'de> for Timestamp {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Timestamp, D::Error> {
        let text = String::deserialize(deserializer)?;
        parse_rfc3339(&text).map(Timestamp).ok_or_else(|| {
            serde::de::Error::custom(format!("{text:?} is not an RFC 3339 date and time"))
        })
    }
}

/// `2026-12-01T23:45:55.58Z`, `2026-12-01T23:45:55+01:00`: the moment.
fn parse_rfc3339(text: &str) -> Option<SystemTime> {
    let (local, offset) = match text.strip_suffix('Z') {
        Some(local) => (local, 0i64),
        None => {
            // The offset is the last six characters: `+hh:mm` or `-hh:mm`.
            let at = text.len().checked_sub(6)?;
            let (local, offset) = (text.get(..at)?, text.get(at..)?);
            let sign = match offset.as_bytes()[0] {
                b'+' => 1,
                b'-' => -1,
                _ => return None,
            };
            let (hours, minutes) = offset[1..].split_once(':')?;
            let seconds = hours.parse::<i64>().ok()? * 3600 + minutes.parse::<i64>().ok()? * 60;
            (local, sign * seconds)
        }
    };
    let utc = humantime::parse_rfc3339_weak(local).ok()?;
    let shift = Duration::from_secs(offset.unsigned_abs());
    if offset >= 0 {
        utc.checked_sub(shift)
    } else {
        utc.checked_add(shift)
    }
}

/// A map the engine prints as `null` when empty.
fn null_as_default<'de, D, T>(deserializer: D) -> Result<T, D::Error>
where
    D: Deserializer<'de>,
    T: Default + Deserialize<'de>,
{
    Ok(Option::<T>::deserialize(deserializer)?.unwrap_or_default())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(text: &str) -> SystemTime {
        serde_json::from_str::<Timestamp>(&format!("{text:?}"))
            .unwrap_or_else(|e| panic!("{text}: {e}"))
            .0
    }

    #[test]
    fn the_dates_the_engine_prints_in_json_parse_to_the_same_moment() {
        // A container's `Created`, a network's `Created`, a volume's
        // `CreatedAt` with the daemon in UTC and in another zone.
        let moment = humantime::parse_rfc3339("2026-12-01T23:45:55Z").unwrap();
        assert_eq!(
            at("2026-12-01T23:45:55.58Z"),
            moment + Duration::from_millis(580)
        );
        assert_eq!(
            at("2026-12-01T23:45:55.315116294Z"),
            moment + Duration::from_nanos(315_116_294)
        );
        assert_eq!(at("2026-12-01T23:45:55Z"), moment);
        assert_eq!(at("2026-12-02T00:45:55+01:00"), moment);
        assert_eq!(at("2026-12-01T21:45:55.000-02:00"), moment);
        for bad in ["2026-12-01 23:45:55 +0000 UTC", "yesterday", ""] {
            assert!(
                serde_json::from_str::<Timestamp>(&format!("{bad:?}")).is_err(),
                "{bad}"
            );
        }
    }

    #[test]
    fn an_inspected_container_gives_its_state_labels_and_address() {
        let json = r#"[{"Id":"c1","Name":"/testkit-p","Created":"2026-12-01T23:45:55.5Z",
            "State":{"Status":"paused","Running":true,"Paused":true,"ExitCode":0,"OOMKilled":false},
            "Config":{"Labels":{"testkit.pod":"p"}},
            "NetworkSettings":{"Networks":{"testkit-p":{"IPAddress":"172.18.0.2"},"none":{"IPAddress":""}}}}]"#;
        let listed: Vec<ContainerDetails> = serde_json::from_str(json).unwrap();
        let c = &listed[0];
        assert_eq!(c.name(), "testkit-p");
        assert_eq!(c.label("testkit.pod"), Some("p"));
        assert!(c.state.paused && c.state.running);
        assert_eq!(c.address_on("testkit-p"), Some("172.18.0.2"));
        assert_eq!(c.address_on("none"), None);
        let bare = r#"{"Id":"c2","Created":"2026-12-01T23:45:55Z",
            "State":{"Status":"exited","Running":false,"Paused":false,"ExitCode":134,"OOMKilled":false},
            "Config":{"Labels":null},"NetworkSettings":{"Networks":null}}"#;
        let c: ContainerDetails = serde_json::from_str(bare).unwrap();
        assert!(c.labels().is_empty());
        assert_eq!(c.state.exit_code, 134);
    }
}
