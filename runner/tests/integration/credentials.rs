//! Every credential any process of a run obtains is redacted wherever the
//! run writes: also those only a test process ever knew (a renewal, a login
//! after an expiry), which a pod that logs what it is sent prints.

use std::path::Path;

use crate::truth::{add_test_binary, only};
use crate::{fixture, runner, Ran};

/// Logs in again twice, sends a request with each new credential (the pod
/// logs it), and writes each one, raw, to the file `CREDENTIALS_PROBE`
/// names: outside the results folder, for the test to look for.
const RENEWS: &str = r#"
use std::io::Write;
use testkit::prelude::*;

/// Renews the session twice and uses each new one.
#[testkit::test]
async fn renews_twice(cx: &mut Cx) -> testkit::Result {
    let pod = cx.pod()?;
    let probe = std::env::var("CREDENTIALS_PROBE").context("CREDENTIALS_PROBE is not set")?;
    for _ in 0..2 {
        pod.renew().await?;
        let mut file = std::fs::OpenOptions::new().create(true).append(true).open(&probe)?;
        for (name, value) in pod.credential_headers() {
            // `Cookie: sandboxd_session=<sid>`: the session id is the secret.
            let secret = value.rsplit('=').next().unwrap_or(&value).to_owned();
            writeln!(file, "{secret}")?;
            cx.log(format!("renewed: {name} {value}"));
        }
        pod.send(|c| c.get(pod.url("/api/sandboxes?prefix=nothing")))
            .await?
            .error_for_status()?;
    }
    Ok(())
}

testkit::main!();
"#;

/// Every file under `dir`, recursively.
fn files(dir: &Path) -> Vec<std::path::PathBuf> {
    let mut out = Vec::new();
    let mut stack = vec![dir.to_owned()];
    while let Some(d) = stack.pop() {
        for entry in std::fs::read_dir(&d).unwrap().flatten() {
            let path = entry.path();
            if entry.file_type().unwrap().is_dir() {
                stack.push(path);
            } else {
                out.push(path);
            }
        }
    }
    out
}

/// A pod that logs the credentials it receives (`--fault log-credentials`)
/// shows the sessions test processes obtained by renewing; not one of them
/// is left unredacted anywhere under the results folder, under either
/// engine.
#[test]
fn credentials_only_a_test_process_obtained_are_redacted_in_every_file_of_the_results() {
    for engine in ["nextest", "cargo-test"] {
        let suite = fixture("suite");
        add_test_binary(suite.path(), "renews", RENEWS);
        let config = suite.path().join("testkit.toml");
        let mut text = std::fs::read_to_string(&config).unwrap();
        text.push_str(
            "\n[pod]\ncommand = [\"sandboxd\", \"serve\", \"--fault\", \"log-credentials\"]\n",
        );
        std::fs::write(&config, text).unwrap();
        let probe_dir = tempfile::tempdir().unwrap();
        let probe = probe_dir.path().join("credentials");
        let ran = Ran::from(
            runner()
                .arg("run")
                .arg(suite.path())
                .args(["--runner", engine])
                .args(only("renews", engine))
                .env("CREDENTIALS_PROBE", &probe)
                .output()
                .unwrap(),
        );
        assert_eq!(ran.code, 0, "{engine}: {}", ran.stdout);
        let secrets: Vec<String> = std::fs::read_to_string(&probe)
            .unwrap()
            .lines()
            .map(str::to_owned)
            .collect();
        assert_eq!(secrets.len(), 2, "{engine}: two renewals: {secrets:?}");
        let results = ran.results();
        // The pod did log them: this test would prove nothing otherwise.
        let pod_log = std::fs::read_to_string(results.join("pod/logs/pod.stderr.log")).unwrap();
        assert!(
            pod_log.contains("fault log-credentials") && pod_log.contains("session=[REDACTED]"),
            "{engine}: the pod logged no credential: {pod_log}"
        );
        let mut leaks = Vec::new();
        for file in files(&results) {
            let bytes = std::fs::read(&file).unwrap();
            for secret in &secrets {
                if bytes.windows(secret.len()).any(|w| w == secret.as_bytes()) {
                    leaks.push(format!("{} holds {secret}", file.display()));
                }
            }
        }
        assert!(leaks.is_empty(), "{engine}: {leaks:#?}");
    }
}
