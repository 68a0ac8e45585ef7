//! The memory page's routes: `GET /console/memory` (pending proposals,
//! `?all=true` every one) and `POST /console/memory/decide` (CSRF and
//! same-origin checked like every console POST; the decision is the
//! backend's, under the signed-in operator).

use super::{Shared, failure, html, to_login};
use crate::backend::BackendError;
use crate::memory::{self, parse_decision};
use crate::session::Session;
use axum::body::Bytes;
use axum::extract::{Query, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::Response;
use serde::Deserialize;

#[derive(Deserialize, Default)]
pub(super) struct All {
    #[serde(default)]
    all: bool,
}

async fn page(c: &super::Console, s: &Session, all: bool, flash: Option<&str>) -> Response {
    match c.backend.proposals(all).await {
        Ok(rows) => html(
            StatusCode::OK,
            memory::page(&s.operator, &s.csrf, rows.as_deref(), all, flash),
        ),
        Err(e) => failure(s, &e),
    }
}

/// `GET /console/memory`.
pub(super) async fn list(State(c): Shared, headers: HeaderMap, Query(q): Query<All>) -> Response {
    let Some((_, s)) = c.session(&headers).await else {
        return to_login();
    };
    page(&c, &s, q.all, None).await
}

/// `POST /console/memory/decide`: the form's `id`s repeat, so the body
/// is read as pairs.
pub(super) async fn decide(State(c): Shared, headers: HeaderMap, body: Bytes) -> Response {
    let pairs: Vec<(String, String)> = serde_urlencoded::from_bytes(&body).unwrap_or_default();
    let csrf = pairs
        .iter()
        .find(|(k, _)| k == "csrf")
        .map(|(_, v)| v.as_str())
        .unwrap_or("");
    let s = match c.posted(&headers, csrf).await {
        Ok(s) => s,
        Err(r) => return r,
    };
    let d = match parse_decision(&pairs) {
        Ok(d) => d,
        Err(why) => return failure(&s, &BackendError::Conflict(why)),
    };
    match c
        .backend
        .decide_proposals(&s.operator, &d.ids, d.approve)
        .await
    {
        Ok(done) => page(&c, &s, false, Some(&done.message)).await,
        Err(e) => failure(&s, &e),
    }
}
