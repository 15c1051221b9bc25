//! Exec: commands run to completion in the sandbox with their exit code,
//! separate stdout and stderr, the sandbox's and the call's environment, and
//! a timeout.

use std::time::Duration;

use conformance_support::{expect_error, Cmd, Sandbox, SandboxSpec};
use testkit::prelude::*;

/// A command's stdout comes back and exit 0 is reported as such.
#[testkit::test(requires = ["exec"])]
async fn exec_returns_stdout_and_exit_zero(cx: &mut Cx) -> testkit::Result {
    let sb = Sandbox::create(cx, SandboxSpec::new()).await?;
    let out = sb.exec(cx, Cmd::new(["echo", "hello world"])).await?;
    out.ensure_success("echo hello world")?;
    ensure!(out.stdout == "hello world\n", "stdout: {:?}", out.stdout);
    ensure!(
        out.signal.is_none() && !out.timed_out,
        "unexpected: {out:?}"
    );
    Ok(())
}

/// Every exit code comes back as the command's own.
#[testkit::test(requires = ["exec"])]
async fn exec_reports_the_exit_code(cx: &mut Cx) -> testkit::Result {
    let sb = Sandbox::create(cx, SandboxSpec::new()).await?;
    for code in [1, 3, 42, 255] {
        let out = sb.exec(cx, Cmd::sh(&format!("exit {code}"))).await?;
        ensure!(
            out.exit_code == Some(code),
            "`exit {code}` reported {out:?}"
        );
    }
    Ok(())
}

/// Standard output and standard error are captured separately.
#[testkit::test(requires = ["exec"])]
async fn exec_separates_stdout_and_stderr(cx: &mut Cx) -> testkit::Result {
    let sb = Sandbox::create(cx, SandboxSpec::new()).await?;
    let out = sb.exec(cx, Cmd::sh("echo to-out; echo to-err >&2")).await?;
    ensure!(out.stdout == "to-out\n", "stdout: {:?}", out.stdout);
    ensure!(out.stderr == "to-err\n", "stderr: {:?}", out.stderr);
    Ok(())
}

/// The per-call `env` of an exec reaches the command's environment.
#[testkit::test(requires = ["exec"])]
async fn exec_sees_per_call_env(cx: &mut Cx) -> testkit::Result {
    let sb = Sandbox::create(cx, SandboxSpec::new()).await?;
    let out = sb
        .exec(cx, Cmd::new(["env"]).env("GREETING", "hello"))
        .await?;
    out.ensure_success("env")?;
    let env = out.env_lines();
    ensure!(
        env.get("GREETING").map(String::as_str) == Some("hello"),
        "exec ignored the per-call env: expected GREETING=hello in the command's environment, got: {}",
        describe_env(&env)
    );
    Ok(())
}

/// The sandbox's own environment reaches every command run in it.
#[testkit::test(requires = ["exec"])]
async fn exec_sees_sandbox_env(cx: &mut Cx) -> testkit::Result {
    let sb = Sandbox::create(cx, SandboxSpec::new().env("STAGE", "conformance")).await?;
    let out = sb.exec(cx, Cmd::new(["env"])).await?;
    let env = out.env_lines();
    ensure!(
        env.get("STAGE").map(String::as_str) == Some("conformance"),
        "the sandbox's env did not reach the command: expected STAGE=conformance, got: {}",
        describe_env(&env)
    );
    Ok(())
}

/// The per-call env wins over the sandbox's env for the same variable, and
/// only for that call.
#[testkit::test(requires = ["exec"])]
async fn per_call_env_overrides_sandbox_env(cx: &mut Cx) -> testkit::Result {
    let sb = Sandbox::create(cx, SandboxSpec::new().env("COLOR", "red")).await?;
    let out = sb.exec(cx, Cmd::new(["env"]).env("COLOR", "blue")).await?;
    let env = out.env_lines();
    ensure!(
        env.get("COLOR").map(String::as_str) == Some("blue"),
        "the per-call COLOR=blue did not override the sandbox's COLOR=red: got {}",
        describe_env(&env)
    );
    let out = sb.exec(cx, Cmd::new(["env"])).await?;
    let env = out.env_lines();
    ensure!(
        env.get("COLOR").map(String::as_str) == Some("red"),
        "a later call without env does not see the sandbox's COLOR=red: got {}",
        describe_env(&env)
    );
    Ok(())
}

/// Commands start from a clean environment: only PATH, HOME and what the
/// sandbox and the call add, nothing of the server's own.
#[testkit::test(requires = ["exec"])]
async fn exec_environment_is_clean(cx: &mut Cx) -> testkit::Result {
    let sb = Sandbox::create(cx, SandboxSpec::new().env("A", "1")).await?;
    let out = sb.exec(cx, Cmd::new(["env"]).env("B", "2")).await?;
    let env = out.env_lines();
    let keys: Vec<&str> = env.keys().map(String::as_str).collect();
    ensure!(
        keys == ["A", "B", "HOME", "PATH"],
        "unexpected environment: {}",
        describe_env(&env)
    );
    Ok(())
}

/// Commands run in the sandbox's own directory: a file they write there is
/// the sandbox's file.
#[testkit::test(requires = ["exec", "files"])]
async fn exec_runs_in_the_sandbox_directory(cx: &mut Cx) -> testkit::Result {
    let sb = Sandbox::create(cx, SandboxSpec::new()).await?;
    sb.sh(cx, "echo written-by-exec > here.txt").await?;
    let text = String::from_utf8(sb.get_file(cx, "here.txt").await?)?;
    ensure!(text == "written-by-exec\n", "here.txt holds {text:?}");
    let home = sb
        .sh(cx, "test \"$HOME\" = \"$(pwd)\" && echo same")
        .await?;
    ensure!(
        home == "same\n",
        "HOME is not the working directory: {home:?}"
    );
    Ok(())
}

/// A command that runs over its timeout is killed and reported as timed out.
#[testkit::test(requires = ["exec"], timeout = "90s")]
async fn exec_timeout_kills_the_command(cx: &mut Cx) -> testkit::Result {
    let sb = Sandbox::create(cx, SandboxSpec::new()).await?;
    let out = sb
        .exec(
            cx,
            Cmd::new(["sleep", "60"]).timeout(Duration::from_millis(500)),
        )
        .await?;
    ensure!(
        out.timed_out,
        "a 60 s sleep under a 500 ms timeout was not reported as timed out: {out:?}"
    );
    ensure!(
        out.exit_code != Some(0),
        "a killed command reported success: {out:?}"
    );
    Ok(())
}

/// A command killed by a signal reports the signal and no exit code.
#[testkit::test(requires = ["exec"])]
async fn exec_reports_a_terminating_signal(cx: &mut Cx) -> testkit::Result {
    let sb = Sandbox::create(cx, SandboxSpec::new()).await?;
    let out = sb.exec(cx, Cmd::sh("kill -KILL $$")).await?;
    ensure!(out.signal == Some(9), "expected signal 9, got {out:?}");
    ensure!(
        out.exit_code.is_none(),
        "a signalled command has an exit code: {out:?}"
    );
    ensure!(!out.timed_out, "reported as timed out: {out:?}");
    Ok(())
}

/// A program that does not exist is refused with 400 `command_not_found`.
#[testkit::test(requires = ["exec"])]
async fn exec_of_a_missing_program_is_refused(cx: &mut Cx) -> testkit::Result {
    let sb = Sandbox::create(cx, SandboxSpec::new()).await?;
    let e = expect_error(
        sb.exec(cx, Cmd::new(["no-such-program-here"])).await,
        400,
        "command_not_found",
    )?;
    ensure!(
        e.message.contains("no-such-program-here"),
        "the message does not name the program: {e}"
    );
    Ok(())
}

/// An invalid environment variable name is refused with 400 `bad_request`.
#[testkit::test(requires = ["exec"])]
async fn exec_refuses_an_invalid_env_name(cx: &mut Cx) -> testkit::Result {
    let sb = Sandbox::create(cx, SandboxSpec::new()).await?;
    expect_error(
        sb.exec(cx, Cmd::new(["true"]).env("1BAD", "x")).await,
        400,
        "bad_request",
    )?;
    Ok(())
}

/// Exec in a sandbox that does not exist answers 404 `not_found`.
#[testkit::test(requires = ["exec"])]
async fn exec_in_an_unknown_sandbox_is_404(cx: &mut Cx) -> testkit::Result {
    let name = cx.unique_name();
    let (status, body) = conformance_support::request(
        cx,
        reqwest::Method::POST,
        &format!("/api/sandboxes/{name}/exec"),
        conformance_support::Body::Json(serde_json::json!({ "argv": ["true"] })),
        Duration::from_secs(30),
    )
    .await?;
    ensure!(
        status == 404,
        "exec in {name}, which does not exist, answered {status}: {}",
        String::from_utf8_lossy(&body)
    );
    Ok(())
}

/// `KEY=VALUE` pairs, one per line, for error messages.
fn describe_env(env: &std::collections::BTreeMap<String, String>) -> String {
    if env.is_empty() {
        return "an empty environment".to_owned();
    }
    env.iter()
        .map(|(k, v)| format!("{k}={v}"))
        .collect::<Vec<_>>()
        .join(", ")
}

testkit::main!();
