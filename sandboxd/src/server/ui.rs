//! The web UI: one plain HTML page with its script and style, embedded in
//! the binary (no build step). The page signs in with a form post that
//! turns the token into the session cookie, then drives the JSON API from
//! its script with that cookie.

use axum::extract::rejection::FormRejection;
use axum::extract::State;
use axum::http::{header, HeaderMap, HeaderValue, StatusCode};
use axum::response::{Html, IntoResponse, Response};
use axum::Form;
use serde::Deserialize;

use super::{App, AppState};
use crate::skeleton::middleware::{check_token, has_session, open_session};

const PAGE: &str = include_str!("ui/index.html");
const SCRIPT: &str = include_str!("ui/app.js");
const STYLE: &str = include_str!("ui/app.css");

fn escape(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}

/// The page in its sign-in or app view; `error` says why a sign-in failed.
fn page(app: &App, signed_in: bool, error: Option<&str>) -> Html<String> {
    let error = error.map_or_else(String::new, |e| {
        format!("<p id=\"sign-in-error\" class=\"error\">{}</p>", escape(e))
    });
    Html(
        PAGE.replace("{{VIEW}}", if signed_in { "app" } else { "sign-in" })
            .replace("{{POD_NAME}}", &escape(&app.gate.store.name))
            .replace("{{SIGN_IN_ERROR}}", &error),
    )
}

/// `GET /`: the app for a signed-in visitor, the sign-in form for anyone else.
pub(super) async fn index(State(app): AppState, headers: HeaderMap) -> Response {
    let mut resp = page(&app, has_session(&app.gate, &headers), None).into_response();
    // The page shows live state: never from a cache.
    resp.headers_mut()
        .insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    resp
}

pub(super) async fn script() -> impl IntoResponse {
    (
        [(header::CONTENT_TYPE, "text/javascript; charset=utf-8")],
        SCRIPT,
    )
}

pub(super) async fn style() -> impl IntoResponse {
    ([(header::CONTENT_TYPE, "text/css; charset=utf-8")], STYLE)
}

#[derive(Deserialize)]
pub(super) struct SignIn {
    token: String,
}

/// `POST /ui/sign-in` (form field `token`): a session cookie and back to
/// `/`, or the sign-in form again saying what was wrong.
pub(super) async fn sign_in(
    State(app): AppState,
    form: Result<Form<SignIn>, FormRejection>,
) -> Response {
    let failed = |status: StatusCode, why: &str| {
        let mut resp = page(&app, false, Some(why)).into_response();
        *resp.status_mut() = status;
        resp
    };
    let form = match form {
        Ok(Form(f)) => f,
        Err(e) => {
            return failed(
                StatusCode::BAD_REQUEST,
                &format!(
                    "the sign-in form must post a `token` field: {}",
                    e.body_text()
                ),
            )
        }
    };
    if let Err(e) = check_token(&app.gate, form.token.trim()) {
        return failed(e.status, &e.message);
    }
    let Some(cookie) = open_session(&app.gate) else {
        return failed(StatusCode::INTERNAL_SERVER_ERROR, "cannot open a session");
    };
    (
        StatusCode::SEE_OTHER,
        [
            (header::LOCATION, HeaderValue::from_static("/")),
            (header::SET_COOKIE, cookie),
        ],
    )
        .into_response()
}
