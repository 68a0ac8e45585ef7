//! `GET /console/approvals/decided`: the approvals no longer pending
//! (approved, denied, claimed, stale, expired), the newest first, with who
//! decided, when and the note. Read-only: nothing here changes state.

use super::{Offset, Shared, failure, html, page, to_login};
use crate::pages;
use axum::extract::{Query, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::Response;

pub(super) async fn decided(
    State(c): Shared,
    headers: HeaderMap,
    Query(q): Query<Offset>,
) -> Response {
    let Some((_, s)) = c.session(&headers).await else {
        return to_login();
    };
    match c.backend.decided_approvals(page(q.offset)).await {
        Ok(p) => html(
            StatusCode::OK,
            pages::decided_approvals(&s.operator, &s.csrf, &p, q.offset),
        ),
        Err(e) => failure(&s, &e),
    }
}
