//! Lifecycle: deletion is asynchronous, final, idempotent, and frees the name.

use conformance_support::{expect_error, Cmd, Sandbox, SandboxSpec, SANDBOX};
use testkit::prelude::*;

/// A delete is accepted with 202 and the sandbox in state `deleting` (or
/// already gone), then the sandbox answers 404.
#[testkit::test]
async fn delete_is_accepted_then_the_sandbox_is_gone(cx: &mut Cx) -> testkit::Result {
    let sb = Sandbox::create(cx, SandboxSpec::new()).await?;
    let answer = Sandbox::delete(cx, sb.name()).await?;
    ensure!(
        answer.name == sb.name(),
        "the delete answered another sandbox: {answer:?}"
    );
    ensure!(
        answer.state == "deleting",
        "the delete answered state {}, expected `deleting`",
        answer.state
    );
    Sandbox::wait_gone(cx, sb.name()).await?;
    cx.forget(SANDBOX, sb.name());
    Ok(())
}

/// Deleting a sandbox twice is harmless: the second delete is accepted while
/// it is going, or answers 404 once it is gone.
#[testkit::test]
async fn delete_twice_is_harmless(cx: &mut Cx) -> testkit::Result {
    let sb = Sandbox::create(cx, SandboxSpec::new()).await?;
    Sandbox::delete(cx, sb.name()).await?;
    match Sandbox::delete(cx, sb.name()).await {
        Ok(info) => ensure!(
            info.state == "deleting",
            "a second delete answered {info:?}"
        ),
        Err(e) => {
            expect_error::<()>(Err(e), 404, "not_found")?;
        }
    }
    Sandbox::wait_gone(cx, sb.name()).await?;
    cx.forget(SANDBOX, sb.name());
    expect_error(Sandbox::delete(cx, sb.name()).await, 404, "not_found")?;
    Ok(())
}

/// Deleting a sandbox that never existed answers 404 `not_found`.
#[testkit::test]
async fn delete_unknown_is_404(cx: &mut Cx) -> testkit::Result {
    let name = cx.unique_name();
    expect_error(Sandbox::delete(cx, &name).await, 404, "not_found")?;
    Ok(())
}

/// Once a sandbox is gone its name can be used again, for a fresh sandbox.
#[testkit::test]
async fn deleted_name_can_be_reused(cx: &mut Cx) -> testkit::Result {
    let first = Sandbox::create(cx, SandboxSpec::new().label("generation", "1")).await?;
    first.delete_and_wait(cx).await?;
    let second = Sandbox::create_named(
        cx,
        first.name(),
        SandboxSpec::new().label("generation", "2"),
    )
    .await?;
    let got = Sandbox::get(cx, second.name()).await?;
    ensure!(
        got.labels.get("generation").map(String::as_str) == Some("2"),
        "the re-created sandbox shows the old one's labels: {:?}",
        got.labels
    );
    ensure!(
        got.state == "ready",
        "the re-created sandbox is {}",
        got.state
    );
    Ok(())
}

/// Files of a deleted sandbox do not survive into a new sandbox of the same name.
#[testkit::test(requires = ["files"])]
async fn reused_name_starts_empty(cx: &mut Cx) -> testkit::Result {
    let first = Sandbox::create(cx, SandboxSpec::new()).await?;
    first.put_file(cx, "left-behind.txt", b"old").await?;
    first.delete_and_wait(cx).await?;
    let second = Sandbox::create_named(cx, first.name(), SandboxSpec::new()).await?;
    let found = second.find_file(cx, "left-behind.txt").await?;
    ensure!(
        found.is_none(),
        "a file of the deleted sandbox survived: {found:?}"
    );
    Ok(())
}

/// A sandbox being deleted or gone accepts no more commands (409 or 404).
#[testkit::test(requires = ["exec"])]
async fn deleted_sandbox_refuses_exec(cx: &mut Cx) -> testkit::Result {
    let sb = Sandbox::create(cx, SandboxSpec::new()).await?;
    Sandbox::delete(cx, sb.name()).await?;
    match sb.exec(cx, Cmd::new(["true"])).await {
        Ok(out) => bail!("exec in a deleted sandbox ran: {out:?}"),
        Err(e) => {
            let api = e
                .downcast_ref::<conformance_support::ApiError>()
                .with_context(|| format!("exec failed, but not with an API error: {e:#}"))?;
            ensure!(
                (api.status == 409 && api.code == "conflict")
                    || (api.status == 404 && api.code == "not_found"),
                "expected 409 conflict or 404 not_found, got: {api}"
            );
        }
    }
    Sandbox::wait_gone(cx, sb.name()).await?;
    cx.forget(SANDBOX, sb.name());
    Ok(())
}

/// Deleting a sandbox ends its background processes: a process that would
/// otherwise run for minutes does not keep the delete from finishing.
#[testkit::test(requires = ["processes"])]
async fn delete_ends_background_processes(cx: &mut Cx) -> testkit::Result {
    let sb = Sandbox::create(cx, SandboxSpec::new()).await?;
    let p = sb.start(cx, Cmd::new(["sleep", "600"])).await?;
    ensure!(
        p.info(cx).await?.state == "running",
        "the process is not running"
    );
    sb.delete_and_wait(cx).await?;
    // The process is addressed through its sandbox, which is gone.
    expect_error(p.info(cx).await, 404, "not_found")?;
    Ok(())
}

testkit::main!();
