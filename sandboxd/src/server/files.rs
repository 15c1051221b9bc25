//! The file endpoints and path confinement beneath a sandbox's root.

use std::path::{Path, PathBuf};

use axum::body::Bytes;
use axum::extract::rejection::BytesRejection;
use axum::extract::{Path as UrlPath, State};
use axum::http::{header, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::Json;

use super::extract::body_error;
use super::handlers::ready;
use super::{App, AppState};
use crate::api::FileWritten;
use crate::error::{ApiError, ApiResult};

/// Resolves `raw` inside `root`, refusing anything that could leave it.
pub(crate) fn confine(root: &Path, raw: &str) -> ApiResult<PathBuf> {
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
    let mut comps = Vec::new();
    for c in raw.split('/') {
        match c {
            "" | "." => {}
            ".." => {
                return Err(ApiError::path_escape(format!(
                    "path {raw:?} refused: `..` is not allowed"
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
    let root = root.canonicalize()?;
    let mut cur = root.clone();
    let mut rest = comps.into_iter();
    for c in rest.by_ref() {
        cur.push(c);
        match std::fs::symlink_metadata(&cur) {
            Ok(m) if m.file_type().is_symlink() => match cur.canonicalize() {
                Ok(target) if target.starts_with(&root) => cur = target,
                _ => {
                    return Err(ApiError::path_escape(format!(
                        "path {raw:?} refused: a symlink leads outside the sandbox"
                    )))
                }
            },
            Ok(_) => {}
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => break,
            Err(e) if e.raw_os_error() == Some(nix::libc::ENOTDIR) => {
                return Err(ApiError::bad_request(format!(
                    "path {raw:?}: a parent is not a directory"
                )))
            }
            Err(e) => return Err(e.into()),
        }
    }
    cur.extend(rest);
    Ok(cur)
}

fn file_target(app: &App, name: &str, raw: &str) -> ApiResult<PathBuf> {
    ready(app, name)?;
    confine(&app.store.root(name), raw)
}

pub(super) async fn put_file(
    State(app): AppState,
    UrlPath((name, raw)): UrlPath<(String, String)>,
    body: Result<Bytes, BytesRejection>,
) -> ApiResult<Response> {
    let target = file_target(&app, &name, &raw)?;
    let body = body.map_err(body_error)?;
    let existed = match tokio::fs::metadata(&target).await {
        Ok(m) if m.is_dir() => {
            return Err(ApiError::bad_request(format!("{raw:?} is a directory")))
        }
        Ok(_) => true,
        Err(_) => false,
    };
    if let Some(parent) = target.parent() {
        tokio::fs::create_dir_all(parent).await.map_err(|e| {
            ApiError::bad_request(format!(
                "cannot create the parent directories of {raw:?}: {e}"
            ))
        })?;
    }
    tokio::fs::write(&target, &body).await?;
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
    let target = file_target(&app, &name, &raw)?;
    match tokio::fs::metadata(&target).await {
        Ok(m) if m.is_dir() => {
            return Err(ApiError::bad_request(format!("{raw:?} is a directory")))
        }
        Ok(_) => {}
        Err(_) => {
            return Err(ApiError::not_found(format!(
                "file {raw:?} not found in sandbox {name:?}"
            )))
        }
    }
    let data = tokio::fs::read(&target).await?;
    Ok(([(header::CONTENT_TYPE, "application/octet-stream")], data).into_response())
}

pub(super) async fn delete_file(
    State(app): AppState,
    UrlPath((name, raw)): UrlPath<(String, String)>,
) -> ApiResult<StatusCode> {
    let target = file_target(&app, &name, &raw)?;
    match tokio::fs::symlink_metadata(&target).await {
        Ok(m) if m.is_dir() => tokio::fs::remove_dir_all(&target).await?,
        Ok(_) => tokio::fs::remove_file(&target).await?,
        Err(_) => {
            return Err(ApiError::not_found(format!(
                "file {raw:?} not found in sandbox {name:?}"
            )))
        }
    }
    Ok(StatusCode::NO_CONTENT)
}

#[cfg(test)]
mod tests {
    use super::*;

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
            let e = confine(&root, bad).unwrap_err();
            assert_eq!(e.code, "path_escape", "{bad}");
        }
        let root_c = root.canonicalize().unwrap();
        assert_eq!(confine(&root, "a/b.txt").unwrap(), root_c.join("a/b.txt"));
        assert_eq!(confine(&root, "in/f").unwrap(), root_c.join("sub/f"));
        assert_eq!(confine(&root, "./sub//f").unwrap(), root_c.join("sub/f"));
    }
}
