//! Files: bytes round-trip, parents are created, overwrite and delete work,
//! and no path leaves the sandbox.

use conformance_support::{expect_error, Cmd, Sandbox, SandboxSpec};
use testkit::prelude::*;

/// Every byte value survives a put and a get unchanged.
#[testkit::test(requires = ["files"])]
async fn file_round_trip(cx: &mut Cx) -> testkit::Result {
    let sb = Sandbox::create(cx, SandboxSpec::new()).await?;
    let data: Vec<u8> = (0..=255u8).cycle().take(64 * 1024 + 7).collect();
    let status = sb.put_file(cx, "blob.bin", &data).await?;
    ensure!(status == 201, "a new file answered {status}, expected 201");
    let back = sb.get_file(cx, "blob.bin").await?;
    ensure!(
        back.len() == data.len(),
        "wrote {} bytes, read {}",
        data.len(),
        back.len()
    );
    ensure!(
        back == data,
        "the bytes read back differ from the bytes written"
    );
    Ok(())
}

/// An empty file is a file: it round-trips as zero bytes.
#[testkit::test(requires = ["files"])]
async fn empty_file_round_trip(cx: &mut Cx) -> testkit::Result {
    let sb = Sandbox::create(cx, SandboxSpec::new()).await?;
    sb.put_file(cx, "empty", b"").await?;
    let back = sb.get_file(cx, "empty").await?;
    ensure!(
        back.is_empty(),
        "an empty file read back as {} bytes",
        back.len()
    );
    Ok(())
}

/// Putting a file under missing directories creates them.
#[testkit::test(requires = ["files"])]
async fn put_creates_parent_directories(cx: &mut Cx) -> testkit::Result {
    let sb = Sandbox::create(cx, SandboxSpec::new()).await?;
    sb.put_file(cx, "a/b/c/deep.txt", b"deep").await?;
    ensure!(
        sb.get_file(cx, "a/b/c/deep.txt").await? == b"deep",
        "the deep file reads back wrong"
    );
    Ok(())
}

/// Putting an existing file replaces it and answers 204.
#[testkit::test(requires = ["files"])]
async fn put_replaces_an_existing_file(cx: &mut Cx) -> testkit::Result {
    let sb = Sandbox::create(cx, SandboxSpec::new()).await?;
    sb.put_file(cx, "f.txt", b"a much longer first version")
        .await?;
    let status = sb.put_file(cx, "f.txt", b"v2").await?;
    ensure!(
        status == 204,
        "replacing a file answered {status}, expected 204"
    );
    let back = sb.get_file(cx, "f.txt").await?;
    ensure!(
        back == b"v2",
        "after replacing, the file holds {:?}",
        String::from_utf8_lossy(&back)
    );
    Ok(())
}

/// A deleted file answers 404, and deleting it again answers 404 too.
#[testkit::test(requires = ["files"])]
async fn deleted_file_is_gone(cx: &mut Cx) -> testkit::Result {
    let sb = Sandbox::create(cx, SandboxSpec::new()).await?;
    sb.put_file(cx, "doomed.txt", b"x").await?;
    sb.delete_file(cx, "doomed.txt").await?;
    expect_error(sb.get_file(cx, "doomed.txt").await, 404, "not_found")?;
    expect_error(sb.delete_file(cx, "doomed.txt").await, 404, "not_found")?;
    Ok(())
}

/// Reading a file that was never written answers 404 `not_found`.
#[testkit::test(requires = ["files"])]
async fn missing_file_is_404(cx: &mut Cx) -> testkit::Result {
    let sb = Sandbox::create(cx, SandboxSpec::new()).await?;
    expect_error(sb.get_file(cx, "never-written").await, 404, "not_found")?;
    Ok(())
}

/// Paths with `..`, absolute paths and the sandbox root itself are refused
/// with 400 `path_escape`, for reads and writes alike.
#[testkit::test(requires = ["files"])]
async fn paths_cannot_leave_the_sandbox(cx: &mut Cx) -> testkit::Result {
    let sb = Sandbox::create(cx, SandboxSpec::new()).await?;
    for bad in [
        "../escape.txt",
        "a/../../escape.txt",
        "/etc/passwd",
        "a/..",
        "./",
    ] {
        expect_error(sb.put_file(cx, bad, b"x").await, 400, "path_escape")
            .with_context(|| format!("writing {bad:?}"))?;
        expect_error(sb.get_file(cx, bad).await, 400, "path_escape")
            .with_context(|| format!("reading {bad:?}"))?;
    }
    Ok(())
}

/// A symlink that leads outside the sandbox cannot be followed by the files API.
#[testkit::test(requires = ["files", "exec"])]
async fn symlinks_cannot_leave_the_sandbox(cx: &mut Cx) -> testkit::Result {
    let sb = Sandbox::create(cx, SandboxSpec::new()).await?;
    sb.sh(cx, "ln -s /etc outside && ln -s /etc/hostname outside-file")
        .await?;
    expect_error(
        sb.get_file(cx, "outside/hostname").await,
        400,
        "path_escape",
    )?;
    expect_error(sb.get_file(cx, "outside-file").await, 400, "path_escape")?;
    expect_error(
        sb.put_file(cx, "outside/planted", b"x").await,
        400,
        "path_escape",
    )?;
    Ok(())
}

/// A symlink inside the sandbox is followed.
#[testkit::test(requires = ["files", "exec"])]
async fn symlinks_inside_the_sandbox_work(cx: &mut Cx) -> testkit::Result {
    let sb = Sandbox::create(cx, SandboxSpec::new()).await?;
    sb.put_file(cx, "real/data.txt", b"inside").await?;
    sb.sh(cx, "ln -s real alias").await?;
    ensure!(
        sb.get_file(cx, "alias/data.txt").await? == b"inside",
        "the inside symlink was not followed"
    );
    Ok(())
}

/// A file written through the API is what commands in the sandbox read.
#[testkit::test(requires = ["files", "exec"])]
async fn files_are_visible_to_exec(cx: &mut Cx) -> testkit::Result {
    let sb = Sandbox::create(cx, SandboxSpec::new()).await?;
    sb.put_file(cx, "in/put.txt", b"from the api\n").await?;
    let out = sb.exec(cx, Cmd::new(["cat", "in/put.txt"])).await?;
    out.ensure_success("cat in/put.txt")?;
    ensure!(
        out.stdout == "from the api\n",
        "cat printed {:?}",
        out.stdout
    );
    Ok(())
}

/// Sandboxes do not share files.
#[testkit::test(requires = ["files"])]
async fn files_belong_to_their_sandbox(cx: &mut Cx) -> testkit::Result {
    let a = Sandbox::create(cx, SandboxSpec::new()).await?;
    let b = Sandbox::create(cx, SandboxSpec::new()).await?;
    a.put_file(cx, "mine.txt", b"a").await?;
    let in_b = b.find_file(cx, "mine.txt").await?;
    ensure!(
        in_b.is_none(),
        "{}'s file is readable in {}: {in_b:?}",
        a.name(),
        b.name()
    );
    Ok(())
}

testkit::main!();
