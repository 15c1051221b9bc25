//! Background processes and signals: a started process is listed, its exit
//! is reported, and each signal of the API reaches it.

use conformance_support::{expect_error, Cmd, Sandbox, SandboxSpec};
use testkit::prelude::*;

/// A shell that writes `got-<SIG>` when `sig` reaches it, then exits with
/// `code`. Until then it idles in short sleeps, so the trap runs promptly.
fn trapping(sig: &str, code: i32) -> Cmd {
    Cmd::sh(&format!(
        "trap 'echo {sig} > got-{sig}; exit {code}' {sig}; echo ready > ready; while :; do sleep 0.1; done"
    ))
}

/// Sends `sig` to a process trapping it, and checks that the trap ran (the
/// file it writes) and that the process exited with the trap's exit code.
async fn signal_reaches_the_process(cx: &Cx, sig: &str, code: i32) -> testkit::Result {
    let sb = Sandbox::create(cx, SandboxSpec::new()).await?;
    let p = sb.start(cx, trapping(sig, code)).await?;
    // The trap is set before `ready` is written.
    sb.wait_file(cx, "ready").await?;
    p.signal(cx, sig).await?;
    let got = sb
        .wait_file(cx, &format!("got-{sig}"))
        .await
        .with_context(|| format!("SIG{sig} did not reach the process (its trap never ran)"))?;
    ensure!(got.trim() == sig, "the trap wrote {got:?}");
    let info = p.wait_exited(cx).await?;
    ensure!(
        info.exit_code == Some(code) && info.signal.is_none(),
        "after its SIG{sig} trap the process should have exited {code}, it shows {info:?}"
    );
    Ok(())
}

/// A started process is listed as running with its argv, and shown by pid.
#[testkit::test(requires = ["processes"])]
async fn started_process_is_listed(cx: &mut Cx) -> testkit::Result {
    let sb = Sandbox::create(cx, SandboxSpec::new()).await?;
    let p = sb.start(cx, Cmd::new(["sleep", "300"])).await?;
    let list = sb.processes(cx).await?;
    let listed = list
        .iter()
        .find(|i| i.pid == p.pid())
        .with_context(|| format!("pid {} missing from {list:?}", p.pid()))?;
    ensure!(listed.state == "running", "listed as {}", listed.state);
    ensure!(
        listed.argv == ["sleep", "300"],
        "listed with argv {:?}",
        listed.argv
    );
    let info = p.info(cx).await?;
    ensure!(&info == listed, "by pid {info:?}, listed {listed:?}");
    Ok(())
}

/// A process that exits on its own is shown as exited with its exit code.
#[testkit::test(requires = ["processes"])]
async fn exit_code_is_reported(cx: &mut Cx) -> testkit::Result {
    let sb = Sandbox::create(cx, SandboxSpec::new()).await?;
    let p = sb.start(cx, Cmd::sh("exit 7")).await?;
    let info = p.wait_exited(cx).await?;
    ensure!(
        info.exit_code == Some(7) && info.signal.is_none(),
        "expected exit code 7, got {info:?}"
    );
    Ok(())
}

/// A background process sees the sandbox's env and its own per-process env.
#[testkit::test(requires = ["processes", "files"])]
async fn process_sees_its_env(cx: &mut Cx) -> testkit::Result {
    let sb = Sandbox::create(cx, SandboxSpec::new().env("FROM_SANDBOX", "s")).await?;
    sb.start(
        cx,
        Cmd::sh("echo \"$FROM_SANDBOX-$FROM_CALL\" > env.txt").env("FROM_CALL", "c"),
    )
    .await?;
    let text = sb.wait_file(cx, "env.txt").await?;
    ensure!(
        text == "s-c\n",
        "expected `s-c` (sandbox env, then per-process env), got {text:?}"
    );
    Ok(())
}

/// SIGTERM reaches the process (its trap runs).
#[testkit::test(requires = ["processes", "signals", "files"])]
async fn sigterm_reaches_the_process(cx: &mut Cx) -> testkit::Result {
    signal_reaches_the_process(cx, "TERM", 10).await
}

/// SIGINT reaches the process (its trap runs).
#[testkit::test(requires = ["processes", "signals", "files"])]
async fn sigint_reaches_the_process(cx: &mut Cx) -> testkit::Result {
    signal_reaches_the_process(cx, "INT", 11).await
}

/// SIGHUP reaches the process (its trap runs).
#[testkit::test(requires = ["processes", "signals", "files"])]
async fn sighup_reaches_the_process(cx: &mut Cx) -> testkit::Result {
    signal_reaches_the_process(cx, "HUP", 12).await
}

/// SIGUSR1 reaches the process (its trap runs).
#[testkit::test(requires = ["processes", "signals", "files"])]
async fn sigusr1_reaches_the_process(cx: &mut Cx) -> testkit::Result {
    signal_reaches_the_process(cx, "USR1", 13).await
}

/// SIGKILL ends the process, which is then shown as killed by signal 9.
#[testkit::test(requires = ["processes", "signals"])]
async fn sigkill_ends_the_process(cx: &mut Cx) -> testkit::Result {
    let sb = Sandbox::create(cx, SandboxSpec::new()).await?;
    let p = sb.start(cx, Cmd::new(["sleep", "300"])).await?;
    p.signal(cx, "KILL").await?;
    let info = p.wait_exited(cx).await?;
    ensure!(
        info.signal == Some(9) && info.exit_code.is_none(),
        "expected signal 9, got {info:?}"
    );
    Ok(())
}

/// The `SIG` prefix is accepted: `SIGTERM` is `TERM`.
#[testkit::test(requires = ["processes", "signals"])]
async fn signal_names_accept_the_sig_prefix(cx: &mut Cx) -> testkit::Result {
    let sb = Sandbox::create(cx, SandboxSpec::new()).await?;
    let p = sb.start(cx, Cmd::new(["sleep", "300"])).await?;
    p.signal(cx, "SIGTERM").await?;
    let info = p.wait_exited(cx).await?;
    ensure!(
        info.signal == Some(15),
        "expected signal 15 after SIGTERM, got {info:?}"
    );
    Ok(())
}

/// An unknown signal name is refused with 400 and the process keeps running.
#[testkit::test(requires = ["processes", "signals"])]
async fn unknown_signal_is_refused(cx: &mut Cx) -> testkit::Result {
    let sb = Sandbox::create(cx, SandboxSpec::new()).await?;
    let p = sb.start(cx, Cmd::new(["sleep", "300"])).await?;
    let e = expect_error(p.signal(cx, "STOP").await, 400, "bad_request")?;
    ensure!(
        e.message.contains("STOP"),
        "the message does not name the signal: {e}"
    );
    ensure!(
        p.info(cx).await?.state == "running",
        "the process did not survive a refused signal"
    );
    Ok(())
}

/// Signalling a pid that is not a process of the sandbox answers 404, and
/// signalling a process that has exited answers 409.
#[testkit::test(requires = ["processes", "signals"])]
async fn signal_to_a_missing_or_exited_process_is_refused(cx: &mut Cx) -> testkit::Result {
    let sb = Sandbox::create(cx, SandboxSpec::new()).await?;
    // Pid 1 is never a background process of a sandbox.
    expect_error(sb.process(1).signal(cx, "TERM").await, 404, "not_found")?;
    let p = sb.start(cx, Cmd::new(["true"])).await?;
    p.wait_exited(cx).await?;
    expect_error(p.signal(cx, "TERM").await, 409, "conflict")?;
    Ok(())
}

/// Processes are per sandbox: another sandbox does not list them or know their pid.
#[testkit::test(requires = ["processes"])]
async fn processes_belong_to_their_sandbox(cx: &mut Cx) -> testkit::Result {
    let a = Sandbox::create(cx, SandboxSpec::new()).await?;
    let b = Sandbox::create(cx, SandboxSpec::new()).await?;
    let p = a.start(cx, Cmd::new(["sleep", "300"])).await?;
    let in_b = b.processes(cx).await?;
    ensure!(
        in_b.iter().all(|i| i.pid != p.pid()),
        "{}'s process is listed in {}: {in_b:?}",
        a.name(),
        b.name()
    );
    expect_error(b.process(p.pid()).info(cx).await, 404, "not_found")?;
    Ok(())
}

testkit::main!();
