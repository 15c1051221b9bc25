//! Records: named entries whose id the server assigns, kept in memory (a
//! restart forgets them). They give the framework's tests a resource that
//! is deleted and checked by id, not by name, with the id in the path
//! (`GET`/`DELETE /api/records/{id}`) or in a JSON body
//! (`POST /api/records/lookup`, `POST /api/records/delete`), and whose
//! creation's answer can be lost (fault `drop-record-answer=N`).

use std::collections::BTreeMap;
use std::pin::Pin;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Mutex, MutexGuard};
use std::task::{Context, Poll};

use axum::body::{Body, Bytes};
use axum::extract::{Path as UrlPath, Query, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::Json;
use serde::{Deserialize, Serialize};

use super::extract::ApiJson;
use super::AppState;
use crate::api::is_dns_label;
use crate::error::{ApiError, ApiResult};

/// One record.
#[derive(Debug, Clone, Serialize)]
pub(super) struct Record {
    /// Assigned by the server at creation; unrelated to the name.
    id: String,
    name: String,
}

/// `POST /api/records` body.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct CreateRecord {
    name: String,
}

/// `POST /api/records/lookup` and `/delete` body.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct ById {
    id: String,
}

/// `GET /api/records` query.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct ListQuery {
    #[serde(default)]
    prefix: String,
}

/// `GET /api/records` answer.
#[derive(Debug, Serialize)]
pub(super) struct RecordList {
    items: Vec<Record>,
}

/// Records by id.
static RECORDS: Mutex<BTreeMap<String, Record>> = Mutex::new(BTreeMap::new());
/// Creations so far, for `drop-record-answer`.
static CREATES: AtomicU64 = AtomicU64::new(0);

fn records() -> MutexGuard<'static, BTreeMap<String, Record>> {
    // A handler that panicked left the map whole: every change is one call.
    RECORDS
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}

fn no_record(id: &str) -> ApiError {
    ApiError::new(
        StatusCode::NOT_FOUND,
        "no_record",
        format!("no record with id {id:?}"),
    )
}

pub(super) async fn create_record(
    State(app): AppState,
    ApiJson(req): ApiJson<CreateRecord>,
) -> ApiResult<Response> {
    if !is_dns_label(&req.name) {
        return Err(ApiError::new(
            StatusCode::BAD_REQUEST,
            "invalid_name",
            format!("invalid record name {:?}: expected a DNS label (1-63 of a-z, 0-9, '-', not starting or ending with '-')", req.name),
        ));
    }
    let record = {
        let mut all = records();
        if all.values().any(|r| r.name == req.name) {
            return Err(ApiError::conflict(format!(
                "a record named {:?} exists",
                req.name
            )));
        }
        let record = Record {
            id: crate::state::random_id(16),
            name: req.name,
        };
        all.insert(record.id.clone(), record.clone());
        record
    };
    let n = CREATES.fetch_add(1, Ordering::SeqCst);
    if n < app.gate.faults.drop_record_answer {
        eprintln!(
            "sandboxd: fault drop-record-answer: created record {:?} (id {}) and dropped the answer ({} of {})",
            record.name,
            record.id,
            n + 1,
            app.gate.faults.drop_record_answer
        );
        return Ok((StatusCode::CREATED, Body::new(LostAnswer)).into_response());
    }
    Ok((StatusCode::CREATED, Json(record)).into_response())
}

pub(super) async fn list_records(Query(q): Query<ListQuery>) -> Json<RecordList> {
    let items = records()
        .values()
        .filter(|r| r.name.starts_with(&q.prefix))
        .cloned()
        .collect();
    Json(RecordList { items })
}

pub(super) async fn get_record(UrlPath(id): UrlPath<String>) -> ApiResult<Json<Record>> {
    lookup(&id).map(Json)
}

pub(super) async fn delete_record(UrlPath(id): UrlPath<String>) -> ApiResult<StatusCode> {
    remove(&id).map(|()| StatusCode::NO_CONTENT)
}

pub(super) async fn lookup_record(ApiJson(req): ApiJson<ById>) -> ApiResult<Json<Record>> {
    lookup(&req.id).map(Json)
}

pub(super) async fn delete_record_by_body(ApiJson(req): ApiJson<ById>) -> ApiResult<StatusCode> {
    remove(&req.id).map(|()| StatusCode::NO_CONTENT)
}

fn lookup(id: &str) -> ApiResult<Record> {
    records().get(id).cloned().ok_or_else(|| no_record(id))
}

fn remove(id: &str) -> ApiResult<()> {
    records().remove(id).map(drop).ok_or_else(|| no_record(id))
}

/// A body that fails before its first byte: the server closes the
/// connection, and the client never reads an answer.
struct LostAnswer;

impl axum::body::HttpBody for LostAnswer {
    type Data = Bytes;
    type Error = std::io::Error;

    fn poll_frame(
        self: Pin<&mut Self>,
        _: &mut Context<'_>,
    ) -> Poll<Option<Result<hyper::body::Frame<Bytes>, std::io::Error>>> {
        Poll::Ready(Some(Err(std::io::Error::other(
            "the answer was dropped (fault drop-record-answer)",
        ))))
    }
}
