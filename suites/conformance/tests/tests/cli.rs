//! The CLI: `sandboxctl` drives the same API, with documented exit codes,
//! and never prints the token.

use std::time::Duration;

use conformance_support::{Sandbox, SandboxSpec, SANDBOX};
use testkit::prelude::*;
use testkit::CliOutput;

/// Fails unless the CLI exited 0, showing what it printed.
fn ensure_ok(out: &CliOutput, what: &str) -> testkit::Result {
    ensure!(
        out.success(),
        "`sandboxctl {what}` exited {:?}\nstdout: {}\nstderr: {}",
        out.exit_code,
        out.stdout.trim_end(),
        out.stderr.trim_end()
    );
    Ok(())
}

/// `sandbox create`, `get` and `delete --wait` manage a sandbox the API then agrees about.
#[testkit::test(timeout = "2m")]
async fn cli_creates_gets_and_deletes(cx: &mut Cx) -> testkit::Result {
    let name = cx.unique_name();
    cx.pod()?;
    let created = cx
        .create(SANDBOX, &name, async {
            let out = cx
                .cli(&[
                    "sandbox", "create", &name, "--label", "via=cli", "--output", "json",
                ])
                .await?;
            ensure_ok(&out, "sandbox create")?;
            testkit::Result::<CliOutput>::Ok(out)
        })
        .await?;
    let created: serde_json::Value = serde_json::from_str(&created.stdout)?;
    ensure!(created["name"] == name.as_str(), "create printed {created}");

    let info = Sandbox::get(cx, &name).await?;
    ensure!(
        info.labels.get("via").map(String::as_str) == Some("cli"),
        "labels: {:?}",
        info.labels
    );

    let out = cx
        .cli(&["sandbox", "get", &name, "--output", "json"])
        .await?;
    ensure_ok(&out, "sandbox get")?;
    let got: serde_json::Value = serde_json::from_str(&out.stdout)?;
    ensure!(
        got["state"] == "ready" && got["labels"]["via"] == "cli",
        "get printed {got}"
    );

    let out = cx
        .cli(&[
            "sandbox",
            "delete",
            &name,
            "--wait",
            "--wait-timeout",
            "60s",
        ])
        .await?;
    ensure_ok(&out, "sandbox delete --wait")?;
    ensure!(
        Sandbox::find(cx, &name).await?.is_none(),
        "{name} still exists after `delete --wait`"
    );
    cx.forget(SANDBOX, &name);
    Ok(())
}

/// `sandbox list --prefix` shows a sandbox created through the API.
#[testkit::test]
async fn cli_lists_sandboxes(cx: &mut Cx) -> testkit::Result {
    let sb = Sandbox::create(cx, SandboxSpec::new().label("seen", "by-cli")).await?;
    let out = cx
        .cli(&["sandbox", "list", "--prefix", sb.name(), "--output", "json"])
        .await?;
    ensure_ok(&out, "sandbox list")?;
    let list: serde_json::Value = serde_json::from_str(&out.stdout)?;
    let names: Vec<&str> = list["items"]
        .as_array()
        .context("no `items` array")?
        .iter()
        .filter_map(|i| i["name"].as_str())
        .collect();
    ensure!(names == [sb.name()], "listed {names:?}");
    let table = cx
        .cli(&[
            "sandbox",
            "list",
            "--label",
            "seen=by-cli",
            "--prefix",
            sb.name(),
        ])
        .await?;
    ensure_ok(&table, "sandbox list (table)")?;
    ensure!(
        table.stdout.contains(sb.name()),
        "the table does not show {}:\n{}",
        sb.name(),
        table.stdout
    );
    Ok(())
}

/// `sandbox exec` prints the command's output and exits with its exit code.
#[testkit::test(requires = ["exec"])]
async fn cli_exec_passes_output_and_exit_code(cx: &mut Cx) -> testkit::Result {
    let sb = Sandbox::create(cx, SandboxSpec::new()).await?;
    let out = cx
        .cli(&[
            "sandbox",
            "exec",
            sb.name(),
            "--",
            "sh",
            "-c",
            "echo out; echo err >&2; exit 5",
        ])
        .await?;
    ensure!(
        out.exit_code == Some(5),
        "expected exit 5, got {:?} (stderr: {})",
        out.exit_code,
        out.stderr
    );
    ensure!(out.stdout == "out\n", "stdout: {:?}", out.stdout);
    ensure!(out.stderr.contains("err"), "stderr: {:?}", out.stderr);
    Ok(())
}

/// `sandbox exec --env` passes the per-call env, and `--timeout` exits 124.
#[testkit::test(requires = ["exec"])]
async fn cli_exec_env_and_timeout(cx: &mut Cx) -> testkit::Result {
    let sb = Sandbox::create(cx, SandboxSpec::new()).await?;
    let out = cx
        .cli(&[
            "sandbox",
            "exec",
            sb.name(),
            "--env",
            "GREETING=hello",
            "--",
            "sh",
            "-c",
            "echo $GREETING",
        ])
        .await?;
    ensure_ok(&out, "sandbox exec --env")?;
    ensure!(
        out.stdout == "hello\n",
        "`sandboxctl sandbox exec --env GREETING=hello` did not pass the env: printed {:?}",
        out.stdout
    );
    let out = cx
        .cli_command(&[
            "sandbox",
            "exec",
            sb.name(),
            "--timeout",
            "300ms",
            "--",
            "sleep",
            "60",
        ])
        .timeout(Duration::from_secs(60))
        .run()
        .await?;
    ensure!(
        out.exit_code == Some(124),
        "a timed-out exec exited {:?}, expected 124",
        out.exit_code
    );
    Ok(())
}

/// An API error exits 1 and says what the API said on stderr.
#[testkit::test]
async fn cli_reports_api_errors(cx: &mut Cx) -> testkit::Result {
    let name = cx.unique_name();
    let out = cx.cli(&["sandbox", "get", &name]).await?;
    ensure!(
        out.exit_code == Some(1),
        "getting a missing sandbox exited {:?}",
        out.exit_code
    );
    ensure!(
        out.stderr.contains("404")
            && out.stderr.contains("not_found")
            && out.stderr.contains(&name),
        "stderr does not explain the 404: {}",
        out.stderr
    );
    Ok(())
}

/// An unreachable server exits 2, and missing credentials exit 64.
#[testkit::test]
async fn cli_exit_codes_for_unreachable_and_usage(cx: &mut Cx) -> testkit::Result {
    // Port 9 (discard) on loopback: nothing listens there on a test machine.
    let out = cx
        .cli_command(&["sandbox", "list"])
        .env("SANDBOXD_URL", "http://127.0.0.1:9")
        .run()
        .await?;
    ensure!(
        out.exit_code == Some(2),
        "an unreachable server exited {:?}: {}",
        out.exit_code,
        out.stderr
    );
    let out = cx
        .cli_command(&["sandbox", "list"])
        .env("SANDBOXD_TOKEN", "")
        .env("SANDBOXD_COOKIE", "")
        .run()
        .await?;
    ensure!(
        out.exit_code == Some(64) || out.exit_code == Some(1),
        "an empty token and no session exited {:?}: {}",
        out.exit_code,
        out.stderr
    );
    Ok(())
}

/// The CLI never prints the token, not in help, not in errors.
#[testkit::test]
async fn cli_never_prints_the_token(cx: &mut Cx) -> testkit::Result {
    // Output is redacted: a token the CLI printed shows as the redaction marker.
    let name = cx.unique_name();
    for args in [
        vec!["--help"],
        vec!["sandbox", "list", "--help"],
        vec!["sandbox", "get", name.as_str()],
    ] {
        let out = cx.cli(&args).await?;
        for (stream, text) in [("stdout", &out.stdout), ("stderr", &out.stderr)] {
            ensure!(
                !text.contains(testkit::REDACTED),
                "`sandboxctl {}` printed the token on {stream}:\n{text}",
                args.join(" ")
            );
        }
    }
    Ok(())
}

testkit::main!();
