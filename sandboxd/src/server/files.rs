//! The file endpoints, confined beneath a sandbox's root.
//!
//! A path is checked as text first (relative, no `..`, names the filesystem
//! can hold), then every open resolves it beneath the root in one step with
//! `openat2(RESOLVE_BENEATH)`: the kernel refuses a walk that would leave the
//! root, whatever the tree looks like at that instant. Checking each
//! component and then opening by name was two steps, and swapping a
//! directory for a symlink between them let writes land outside.

use std::fs::File;
use std::io::{Read, Write};
use std::os::fd::{AsRawFd, OwnedFd};
use std::os::unix::fs::{MetadataExt, OpenOptionsExt};
use std::path::Path;

use axum::body::Bytes;
use axum::extract::rejection::BytesRejection;
use axum::extract::{Path as UrlPath, State};
use axum::http::{header, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::Json;
use nix::errno::Errno;
use nix::fcntl::{openat2, OFlag, OpenHow, ResolveFlag};
use nix::sys::stat::{fstatat, mkdirat, Mode, SFlag};
use nix::unistd::{unlinkat, UnlinkatFlags};

use super::extract::body_error;
use super::handlers::ready;
use super::AppState;
use crate::api::{FileEntry, FileList, FileWritten};
use crate::error::{ApiError, ApiResult};

/// Longest name of one path component (Linux `NAME_MAX`).
const NAME_MAX: usize = 255;
/// Longest path (Linux `PATH_MAX` less the terminating NUL).
const PATH_MAX: usize = 4095;

/// The components of `raw`, refusing anything that could leave the root or
/// that the filesystem cannot hold.
fn components(raw: &str) -> ApiResult<Vec<&str>> {
    if raw.is_empty() {
        return Err(ApiError::path_escape("empty path"));
    }
    if raw.starts_with('/') {
        return Err(ApiError::path_escape(format!(
            "absolute path {raw:?} refused: paths are relative to the sandbox"
        )));
    }
    if raw.contains('\0') {
        return Err(ApiError::bad_request("path contains a NUL byte"));
    }
    if raw.len() > PATH_MAX {
        return Err(name_too_long(format!(
            "path of {} bytes is too long: at most {PATH_MAX} bytes",
            raw.len()
        )));
    }
    let mut comps = Vec::new();
    for c in raw.split('/') {
        match c {
            "" | "." => {}
            ".." => {
                return Err(ApiError::path_escape(format!(
                    "path {raw:?} refused: `..` is not allowed"
                )))
            }
            c if c.len() > NAME_MAX => {
                return Err(name_too_long(format!(
                    "a path component of {} bytes ({}...) is too long: at most {NAME_MAX} bytes per name",
                    c.len(),
                    c.chars().take(16).collect::<String>()
                )))
            }
            c => comps.push(c),
        }
    }
    if comps.is_empty() {
        return Err(ApiError::path_escape(format!(
            "path {raw:?} names the sandbox root, not a file"
        )));
    }
    Ok(comps)
}

fn name_too_long(message: String) -> ApiError {
    ApiError::new(StatusCode::BAD_REQUEST, "name_too_long", message)
}

/// A sandbox root opened once per request; every path is resolved beneath it.
struct Beneath<'a> {
    root: File,
    raw: &'a str,
}

impl<'a> Beneath<'a> {
    fn open(root: &Path, raw: &'a str) -> ApiResult<Self> {
        let root = std::fs::OpenOptions::new()
            .read(true)
            .custom_flags(nix::libc::O_DIRECTORY)
            .open(root)?;
        Ok(Self { root, raw })
    }

    /// Opens `rel` (components joined by `/`) beneath the root; symlinks are
    /// followed only while they stay beneath it.
    fn at(&self, rel: &str, flags: OFlag, mode: Mode) -> Result<OwnedFd, Errno> {
        // openat2 refuses any flag that means nothing with O_PATH.
        let extra = if flags.contains(OFlag::O_PATH) {
            OFlag::O_CLOEXEC
        } else {
            OFlag::O_CLOEXEC | OFlag::O_NOCTTY
        };
        let how = OpenHow::new()
            .flags(flags | extra)
            .mode(mode)
            .resolve(ResolveFlag::RESOLVE_BENEATH | ResolveFlag::RESOLVE_NO_MAGICLINKS);
        let rel = if rel.is_empty() { "." } else { rel };
        openat2(&self.root, rel, how)
    }

    /// The directory holding the last component, created (beneath the root) if `create`.
    fn parent(&self, comps: &[&str], create: bool) -> Result<OwnedFd, Errno> {
        let dir = OFlag::O_PATH | OFlag::O_DIRECTORY;
        let parents = &comps[..comps.len() - 1];
        if !create {
            return self.at(&parents.join("/"), dir, Mode::empty());
        }
        let mut cur = self.at("", dir, Mode::empty())?;
        for (i, c) in parents.iter().enumerate() {
            // `mkdirat` never follows a symlink in its last component, and
            // `cur` was itself resolved beneath the root.
            match mkdirat(&cur, *c, Mode::from_bits_truncate(0o777)) {
                Ok(()) | Err(Errno::EEXIST) => {}
                Err(e) => return Err(e),
            }
            cur = self.at(&parents[..=i].join("/"), dir, Mode::empty())?;
        }
        Ok(cur)
    }

    /// The API error of a failed open or walk.
    fn error(&self, e: Errno, sandbox: &str) -> ApiError {
        let raw = self.raw;
        match e {
            Errno::EXDEV => ApiError::path_escape(format!(
                "path {raw:?} refused: a symlink leads outside the sandbox (or is absolute)"
            )),
            Errno::ELOOP => {
                ApiError::bad_request(format!("path {raw:?}: too many levels of symlinks"))
            }
            Errno::ENOENT => {
                ApiError::not_found(format!("file {raw:?} not found in sandbox {sandbox:?}"))
            }
            Errno::ENOTDIR => {
                ApiError::bad_request(format!("path {raw:?}: a parent is not a directory"))
            }
            Errno::EISDIR => ApiError::bad_request(format!("{raw:?} is a directory")),
            Errno::ENAMETOOLONG => name_too_long(format!("path {raw:?} is too long")),
            Errno::ENXIO => ApiError::bad_request(format!("{raw:?} is not a regular file")),
            Errno::ENOSYS => ApiError::internal(
                "this kernel has no openat2 (Linux 5.6 or later is needed to confine paths)",
            ),
            e => ApiError::internal(format!("i/o error on {raw:?}: {e}")),
        }
    }
}

/// The metadata of `file`, refusing anything but a regular file.
fn regular(file: &File, raw: &str) -> ApiResult<std::fs::Metadata> {
    let meta = file.metadata()?;
    if meta.is_dir() {
        return Err(ApiError::bad_request(format!("{raw:?} is a directory")));
    }
    if !meta.is_file() {
        return Err(ApiError::bad_request(format!(
            "{raw:?} is not a regular file"
        )));
    }
    Ok(meta)
}

/// Refuses anything but a regular file with a single name.
fn check_writable(file: &File, raw: &str) -> ApiResult<()> {
    let meta = regular(file, raw)?;
    if meta.nlink() > 1 {
        // Writing would change every other name of the file too, which may be
        // outside the sandbox.
        return Err(ApiError::new(
            StatusCode::CONFLICT,
            "hard_link",
            format!(
                "{raw:?} has {} hard links: writing it would change the file under its other names; delete it first, then write it",
                meta.nlink()
            ),
        ));
    }
    Ok(())
}

/// Writes `data` to `raw` beneath `root`; true if the file existed.
/// Held shared by every read of a file through the API and exclusive by
/// every write: a rewrite truncates the file before it writes it, and a
/// read in between would see it empty (a register read back to nothing).
/// One lock for all: a write holds it only while its body, already
/// received, goes to disk.
static REWRITES: std::sync::RwLock<()> = std::sync::RwLock::new(());

fn write_file(root: &Path, sandbox: &str, raw: &str, data: &[u8]) -> ApiResult<bool> {
    let _alone = REWRITES.write().unwrap_or_else(|p| p.into_inner());
    let comps = components(raw)?;
    let b = Beneath::open(root, raw)?;
    b.parent(&comps, true).map_err(|e| match e {
        Errno::EXDEV | Errno::ELOOP => b.error(e, sandbox),
        e => ApiError::bad_request(format!(
            "cannot create the parent directories of {raw:?}: {e}"
        )),
    })?;
    let rel = comps.join("/");
    // No O_TRUNC: the checks below must see the file before anything changes it.
    let write = OFlag::O_WRONLY | OFlag::O_NONBLOCK;
    let (fd, existed) = match b.at(&rel, write, Mode::empty()) {
        Ok(fd) => (fd, true),
        Err(Errno::ENOENT) => {
            let create = write | OFlag::O_CREAT | OFlag::O_EXCL;
            match b.at(&rel, create, Mode::from_bits_truncate(0o666)) {
                Ok(fd) => (fd, false),
                // Created by someone else in between: write it as an existing file.
                Err(Errno::EEXIST) => (
                    b.at(&rel, write, Mode::empty())
                        .map_err(|e| b.error(e, sandbox))?,
                    true,
                ),
                Err(e) => return Err(b.error(e, sandbox)),
            }
        }
        Err(e) => return Err(b.error(e, sandbox)),
    };
    let mut file = File::from(fd);
    check_writable(&file, raw)?;
    file.set_len(0)?;
    file.write_all(data)?;
    Ok(existed)
}

/// Reads the regular file `raw` beneath `root`.
fn read_file(root: &Path, sandbox: &str, raw: &str) -> ApiResult<Vec<u8>> {
    let _beside_no_write = REWRITES.read().unwrap_or_else(|p| p.into_inner());
    let comps = components(raw)?;
    let b = Beneath::open(root, raw)?;
    // O_NONBLOCK: opening a FIFO must not wait for a writer.
    let fd = b
        .at(
            &comps.join("/"),
            OFlag::O_RDONLY | OFlag::O_NONBLOCK,
            Mode::empty(),
        )
        .map_err(|e| b.error(e, sandbox))?;
    let mut file = File::from(fd);
    let meta = regular(&file, raw)?;
    let mut data = Vec::with_capacity(meta.len() as usize);
    file.read_to_end(&mut data)?;
    Ok(data)
}

/// Removes `raw` beneath `root`: a file or symlink by name, a directory with
/// everything in it.
fn remove(root: &Path, sandbox: &str, raw: &str) -> ApiResult<()> {
    let comps = components(raw)?;
    let b = Beneath::open(root, raw)?;
    let parent = b.parent(&comps, false).map_err(|e| b.error(e, sandbox))?;
    let last = comps[comps.len() - 1];
    let st = fstatat(&parent, last, nix::fcntl::AtFlags::AT_SYMLINK_NOFOLLOW)
        .map_err(|e| b.error(e, sandbox))?;
    let kind = SFlag::from_bits_truncate(st.st_mode) & SFlag::S_IFMT;
    if kind == SFlag::S_IFLNK {
        // Removing the link itself is harmless, but a link leading out (or
        // nowhere) is refused as every other request through it is.
        match b.at(&comps.join("/"), OFlag::O_PATH, Mode::empty()) {
            Ok(_) => {}
            Err(Errno::ENOENT | Errno::EXDEV) => {
                return Err(b.error(Errno::EXDEV, sandbox));
            }
            Err(e) => return Err(b.error(e, sandbox)),
        }
    }
    if kind == SFlag::S_IFDIR {
        // Through the parent's descriptor, so no name outside is walked again;
        // `remove_dir_all` itself never follows symlinks inside.
        let path = format!("/proc/self/fd/{}/{last}", parent.as_raw_fd());
        std::fs::remove_dir_all(path)?;
    } else {
        unlinkat(&parent, last, UnlinkatFlags::NoRemoveDir).map_err(|e| b.error(e, sandbox))?;
    }
    Ok(())
}

/// Lists the tree under `root`, each directory opened beneath the root and
/// read through its own descriptor, so no symlink is followed.
fn list(root: &Path, sandbox: &str) -> ApiResult<FileList> {
    let b = Beneath::open(root, "")?;
    let mut items = Vec::new();
    let mut truncated = false;
    // Directories still to read, as paths relative to the root.
    let mut stack = vec![String::new()];
    while let Some(dir) = stack.pop() {
        let flags = OFlag::O_RDONLY | OFlag::O_DIRECTORY | OFlag::O_NOFOLLOW;
        let fd = match b.at(&dir, flags, Mode::empty()) {
            Ok(fd) => fd,
            // Removed or replaced while listing: list what is there.
            Err(Errno::ENOENT | Errno::ENOTDIR | Errno::ELOOP) => continue,
            Err(e) => return Err(b.error(e, sandbox)),
        };
        let mut entries: Vec<FileEntry> =
            std::fs::read_dir(format!("/proc/self/fd/{}", fd.as_raw_fd()))?
                .flatten()
                .filter_map(|e| {
                    let name = e.file_name().into_string().ok()?;
                    // DirEntry::metadata does not follow symlinks.
                    let meta = e.metadata().ok()?;
                    let t = meta.file_type();
                    let kind = if t.is_file() {
                        "file"
                    } else if t.is_dir() {
                        "dir"
                    } else if t.is_symlink() {
                        "symlink"
                    } else {
                        "other"
                    };
                    let path = if dir.is_empty() {
                        name
                    } else {
                        format!("{dir}/{name}")
                    };
                    let size = if t.is_file() { meta.len() } else { 0 };
                    Some(FileEntry {
                        path,
                        kind: kind.to_string(),
                        size,
                    })
                })
                .collect();
        entries.sort_by(|a, b| b.path.cmp(&a.path));
        for e in entries {
            if items.len() >= FileList::MAX_ITEMS {
                truncated = true;
                break;
            }
            if e.kind == "dir" {
                stack.push(e.path.clone());
            }
            items.push(e);
        }
        if truncated {
            break;
        }
    }
    items.sort_by(|a, b| a.path.cmp(&b.path));
    Ok(FileList { items, truncated })
}

/// Runs a blocking file operation off the async workers.
async fn blocking<T: Send + 'static>(
    f: impl FnOnce() -> ApiResult<T> + Send + 'static,
) -> ApiResult<T> {
    tokio::task::spawn_blocking(f)
        .await
        .map_err(|e| ApiError::internal(format!("file operation failed: {e}")))?
}

pub(super) async fn put_file(
    State(app): AppState,
    UrlPath((name, raw)): UrlPath<(String, String)>,
    body: Result<Bytes, BytesRejection>,
) -> ApiResult<Response> {
    ready(&app, &name)?;
    components(&raw)?;
    let body = body.map_err(body_error)?;
    let root = app.gate.store.root(&name);
    let (sb, path, data) = (name.clone(), raw.clone(), body.clone());
    let existed = blocking(move || write_file(&root, &sb, &path, &data)).await?;
    if existed {
        Ok(StatusCode::NO_CONTENT.into_response())
    } else {
        Ok((
            StatusCode::CREATED,
            Json(FileWritten {
                path: raw,
                size: body.len() as u64,
            }),
        )
            .into_response())
    }
}

pub(super) async fn get_file(
    State(app): AppState,
    UrlPath((name, raw)): UrlPath<(String, String)>,
) -> ApiResult<Response> {
    ready(&app, &name)?;
    let root = app.gate.store.root(&name);
    let data = blocking(move || read_file(&root, &name, &raw)).await?;
    Ok(([(header::CONTENT_TYPE, "application/octet-stream")], data).into_response())
}

pub(super) async fn list_files(
    State(app): AppState,
    UrlPath(name): UrlPath<String>,
) -> ApiResult<Json<FileList>> {
    ready(&app, &name)?;
    let root = app.gate.store.root(&name);
    Ok(Json(blocking(move || list(&root, &name)).await?))
}

pub(super) async fn delete_file(
    State(app): AppState,
    UrlPath((name, raw)): UrlPath<(String, String)>,
) -> ApiResult<StatusCode> {
    ready(&app, &name)?;
    let root = app.gate.store.root(&name);
    blocking(move || remove(&root, &name, &raw)).await?;
    Ok(StatusCode::NO_CONTENT)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A read beside a rewrite of the same file sees the old content or the
    /// new one whole: never the file truncated and not yet written (a
    /// register read through the API would go back to nothing).
    #[test]
    fn a_read_never_sees_a_rewrite_half_done() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().to_owned();
        let (a, b) = (vec![b'a'; 64 * 1024], vec![b'b'; 64 * 1024]);
        write_file(&root, "t", "reg", &a).unwrap();
        let writer = {
            let (root, a, b) = (root.clone(), a.clone(), b.clone());
            std::thread::spawn(move || {
                for i in 0..2000 {
                    write_file(&root, "t", "reg", if i % 2 == 0 { &b } else { &a }).unwrap();
                }
            })
        };
        let mut torn = 0;
        while !writer.is_finished() {
            let seen = read_file(&root, "t", "reg").unwrap();
            if seen != a && seen != b {
                torn += 1;
            }
        }
        writer.join().unwrap();
        assert_eq!(torn, 0, "reads that saw a rewrite half done");
    }

    #[test]
    fn confinement() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().join("root");
        std::fs::create_dir(&root).unwrap();
        std::fs::create_dir(root.join("sub")).unwrap();
        std::os::unix::fs::symlink("/etc", root.join("out")).unwrap();
        std::os::unix::fs::symlink("sub", root.join("in")).unwrap();
        for bad in [
            "",
            "/etc/passwd",
            "../x",
            "a/../../x",
            "out/passwd",
            "out",
            ".",
        ] {
            let e = read_file(&root, "t", bad).unwrap_err();
            assert_eq!(e.code, "path_escape", "read {bad}: {}", e.message);
            let e = write_file(&root, "t", bad, b"x").unwrap_err();
            assert_eq!(e.code, "path_escape", "write {bad}: {}", e.message);
            let e = remove(&root, "t", bad).unwrap_err();
            assert_eq!(e.code, "path_escape", "remove {bad}: {}", e.message);
        }
        let written = |raw: &str, data: &[u8], at: &str| {
            assert!(!write_file(&root, "t", raw, data).unwrap(), "{raw} existed");
            assert_eq!(std::fs::read(root.join(at)).unwrap(), data, "{raw}");
            assert_eq!(read_file(&root, "t", raw).unwrap(), data, "{raw}");
        };
        written("a/b.txt", b"1", "a/b.txt");
        written("in/f", b"2", "sub/f");
        assert!(write_file(&root, "t", "./sub//f", b"3").unwrap());
        assert_eq!(std::fs::read(root.join("sub/f")).unwrap(), b"3");
        remove(&root, "t", "in/f").unwrap();
        assert!(!root.join("sub/f").exists());
        remove(&root, "t", "a").unwrap();
        assert!(!root.join("a").exists());
    }
}
