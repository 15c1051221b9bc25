//! Tests that `tests/pod.rs` runs as a child process against a real pod.
//! Without a pod every test here is skipped and the binary exits 0.

use testkit::prelude::*;

/// Uses the pod's session and prints the token by mistake, everywhere.
#[testkit::test]
async fn uses_pod_and_leaks_token(cx: &mut Cx) -> testkit::Result {
    let pod = cx.pod()?;
    let token = pod.handle().token().to_owned();
    println!("stdout token: {token}");
    eprintln!("stderr token: {token}");
    cx.log(format!("log token: {token}"));
    std::fs::write(
        cx.artifacts_dir()?.join("artifact.txt"),
        format!("artifact {token}\n"),
    )?;
    println!("debug: {pod:?} {:?}", pod.handle());
    let resp = pod.client().get(pod.url("/api/sandboxes")).send().await?;
    ensure!(
        resp.status().is_success(),
        "listing sandboxes answered {}",
        resp.status()
    );
    if std::env::var_os("FIXTURE_FAIL").is_some() {
        bail!("failing on purpose with {token}");
    }
    Ok(())
}

/// Panics with the token in the message when asked to.
#[testkit::test]
async fn panics_with_token(cx: &mut Cx) -> testkit::Result {
    let pod = cx.pod()?;
    if std::env::var_os("FIXTURE_FAIL").is_some() {
        panic!("panicking with {}", pod.handle().token());
    }
    Ok(())
}

/// Needs a capability sandboxd advertises.
#[testkit::test(requires = ["exec"])]
async fn needs_exec(cx: &mut Cx) -> testkit::Result {
    ensure!(cx.pod()?.has_capability("exec"));
    Ok(())
}

/// Needs a capability no pod has.
#[testkit::test(requires = ["teleport"])]
async fn needs_teleport(_cx: &mut Cx) -> testkit::Result {
    bail!("must not run without `teleport`")
}

/// Requires a capability and never touches the pod itself: only a pod that
/// validated can satisfy it.
#[testkit::test(requires = ["exec"])]
async fn requires_exec_only(_cx: &mut Cx) -> testkit::Result {
    Ok(())
}

/// Runs the CLI against the pod.
#[testkit::test]
async fn runs_the_cli(cx: &mut Cx) -> testkit::Result {
    cx.pod()?;
    let out = cx.cli(&["sandbox", "list"]).await?;
    ensure!(out.success(), "sandboxctl sandbox list failed: {out:?}");
    Ok(())
}

/// Never touches the pod: passes whatever the pod's state.
#[testkit::test]
async fn touches_nothing(cx: &mut Cx) -> testkit::Result {
    cx.log("nothing to do");
    Ok(())
}

testkit::main!();
