//! `run`: a container, as a typed set of options rather than an argv.

use std::collections::BTreeMap;
use std::path::PathBuf;

/// `--label k=v` for each label.
pub(super) fn label_args(labels: &BTreeMap<String, String>) -> Vec<String> {
    labels
        .iter()
        .flat_map(|(k, v)| ["--label".to_owned(), format!("{k}={v}")])
        .collect()
}

/// What a mount's source is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MountKind {
    /// A named volume of the engine.
    Volume,
    /// A path of the host.
    Bind,
}

/// One mount of a container.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Mount {
    /// A volume or a host path.
    pub kind: MountKind,
    /// The volume's name, or the host path.
    pub source: String,
    /// Where it appears in the container.
    pub target: String,
    /// Whether the container only reads it.
    pub read_only: bool,
}

impl Mount {
    /// Whether `--mount` can carry it: its comma-separated syntax has no
    /// escape for a `,` in a path.
    pub fn carriable(&self) -> bool {
        !self.source.contains(',') && !self.target.contains(',')
    }

    fn arg(&self) -> String {
        let kind = match self.kind {
            MountKind::Volume => "volume",
            MountKind::Bind => "bind",
        };
        let ro = if self.read_only { ",readonly" } else { "" };
        format!(
            "type={kind},source={},target={}{ro}",
            self.source, self.target
        )
    }
}

/// A container to run: never pulled, labelled, on one network, its
/// environment from env files (never on the command line), its port
/// published on 127.0.0.1 only.
#[derive(Debug, Clone, Default)]
pub struct RunOptions {
    /// Its labels.
    pub labels: BTreeMap<String, String>,
    /// The network it joins.
    pub network: String,
    /// Env files, later ones winning.
    pub env_files: Vec<PathBuf>,
    /// Its mounts.
    pub mounts: Vec<Mount>,
    /// Its name.
    pub name: String,
    /// Its name on the network and its hostname, when it has one.
    pub alias: Option<String>,
    /// `(host port, container port)`: the container port published on
    /// `127.0.0.1:<host port>`.
    pub publish: Option<(u16, u16)>,
    /// Whether `run` returns once it started, rather than attached to it.
    pub detach: bool,
    /// Whether the engine removes it when it exits.
    pub remove: bool,
    /// Its image, which the engine must hold.
    pub image: String,
    /// Its command, or empty for the image's.
    pub command: Vec<String>,
}

impl RunOptions {
    /// The CLI's arguments for it.
    pub fn args(&self) -> Vec<String> {
        let mut args = vec!["run".to_owned(), "--pull".to_owned(), "never".to_owned()];
        args.extend(label_args(&self.labels));
        args.extend(["--network".to_owned(), self.network.clone()]);
        for file in &self.env_files {
            args.extend(["--env-file".to_owned(), file.to_string_lossy().into_owned()]);
        }
        for mount in &self.mounts {
            args.extend(["--mount".to_owned(), mount.arg()]);
        }
        if let Some(alias) = &self.alias {
            args.extend([
                "--network-alias".to_owned(),
                alias.clone(),
                "--hostname".to_owned(),
                alias.clone(),
            ]);
        }
        if self.detach {
            args.push("--detach".to_owned());
        }
        if self.remove {
            args.push("--rm".to_owned());
        }
        args.extend(["--name".to_owned(), self.name.clone()]);
        if let Some((host, container)) = self.publish {
            args.extend([
                "--publish".to_owned(),
                format!("127.0.0.1:{host}:{container}"),
            ]);
        }
        args.push(self.image.clone());
        args.extend(self.command.iter().cloned());
        args
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_run_publishes_on_loopback_only_and_never_pulls() {
        let run = RunOptions {
            labels: BTreeMap::from([("testkit.pod".to_owned(), "p".to_owned())]),
            network: "testkit-p".into(),
            env_files: vec!["/private/container.env".into()],
            mounts: vec![Mount {
                kind: MountKind::Volume,
                source: "testkit-p-data".into(),
                target: "/data".into(),
                read_only: true,
            }],
            name: "testkit-p".into(),
            publish: Some((41234, 8080)),
            image: "svc:1".into(),
            command: vec!["serve".into()],
            ..RunOptions::default()
        };
        assert_eq!(
            run.args().join(" "),
            "run --pull never --label testkit.pod=p --network testkit-p \
             --env-file /private/container.env \
             --mount type=volume,source=testkit-p-data,target=/data,readonly \
             --name testkit-p --publish 127.0.0.1:41234:8080 svc:1 serve"
        );
    }
}
