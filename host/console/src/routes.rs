//! The console's routes, all under `/console`:
//!
//! | route | what |
//! |---|---|
//! | `GET /console/login`, `POST /console/login` | the sign-in form; a token exchanged for a session cookie |
//! | `POST /console/logout` | end the session |
//! | `GET /console/approvals` | the queue (`?offset=`); `POST /console/approvals/{id}/decide` (`verb` approve/deny, `note`) |
//! | `GET /console/approvals/decided` | approvals no longer pending, newest first (`?offset=`) |
//! | `GET /console/sagas` | sagas (`?state=&tool=&principal=&since=&offset=`); `GET /console/sagas/{id}` its timeline; `POST .../action` (`resume`, `rollback`, `undo`) |
//! | `GET /console/traces/{id}` | a turn's trace |
//! | `GET /console/health` | budget and health, the spend chart over `?days=` days (default [`CHART_DAYS`]) |
//! | `GET /console/neurons` | neuron versions; `POST /console/neurons/{name}/{version}` (`action` approve/reject/retire, `grants` one per line, `note`) |
//! | `GET /console/memory` | memory fact proposals (`?all=true`: decided ones too); `POST /console/memory/decide` (`verb` approve/approve-all/discard, `id` checked, `shown` listed) |
//! | `GET /console/events` | server-sent events: `pending` (the number of pending approvals) when it changes |
//! | `GET /console/static/{console.js,console.css}` | the assets, compiled into the binary |
//!
//! Every answer carries [`CSP`] and the other headers of [`secure`]. A
//! page without a live session redirects to the sign-in form; a POST
//! without a live session, without the session's CSRF token, or from
//! another origin ([`same_origin`]) is 403 and changes nothing.

use crate::backend::{
    Backend, BackendError, NeuronAction, PageReq, SagaAction, SagaFilter, SignIn,
};
use crate::pages::{self, PAGE_SIZE};
use crate::session::{self, Session, Sessions};
use axum::Router;
use axum::extract::{Form, Path, Query, Request, State};
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::middleware::Next;
use axum::response::sse::{Event, KeepAlive, Sse};
use axum::response::{IntoResponse, Redirect, Response};
use axum::routing::{get, post};
use maud::Markup;
use serde::Deserialize;
use std::sync::Arc;
use std::time::Duration;

/// The Content-Security-Policy of every console answer: nothing but this
/// origin's script, style and images; no inline script or style, no
/// framing, forms posting only here.
pub const CSP: &str = "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; connect-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'";

/// Most concurrent `/console/events` streams.
pub const MAX_STREAMS: usize = 16;
/// How often an event stream compares the pending count.
pub const EVENT_TICK: Duration = Duration::from_secs(1);
/// Days of the budget page's spend chart unless `?days=` says.
pub const CHART_DAYS: u32 = 14;
pub use crate::charts::MAX_CHART_DAYS;

/// Most bytes of a console form body.
pub const MAX_FORM_BYTES: usize = 16 * 1024;

const JS: &str = include_str!("../static/console.js");
const CSS: &str = include_str!("../static/console.css");

struct Console {
    backend: Arc<dyn Backend>,
    sessions: Sessions,
    streams: Arc<tokio::sync::Semaphore>,
}

type Shared = State<Arc<Console>>;

/// The console's router (paths under `/console`), over `backend`. Mount
/// it behind the server's `Host`/`Origin` allowlist; it does its own
/// authentication (a session from an operator token), not the bearer
/// middleware of the API.
pub fn router(backend: Arc<dyn Backend>) -> Router {
    let c = Arc::new(Console {
        backend,
        sessions: Sessions::default(),
        streams: Arc::new(tokio::sync::Semaphore::new(MAX_STREAMS)),
    });
    Router::new()
        .route(
            "/console",
            get(|| async { Redirect::to("/console/approvals") }),
        )
        .route(
            "/console/",
            get(|| async { Redirect::to("/console/approvals") }),
        )
        .route("/console/login", get(login_form).post(login))
        .route("/console/logout", post(logout))
        .route("/console/approvals", get(approvals))
        .route("/console/approvals/decided", get(history::decided))
        .route("/console/approvals/{id}/decide", post(decide))
        .route("/console/sagas", get(sagas))
        .route("/console/sagas/{id}", get(saga))
        .route("/console/sagas/{id}/action", post(saga_action))
        .route("/console/traces/{id}", get(trace))
        .route("/console/health", get(health))
        .route("/console/neurons", get(neurons))
        .route("/console/neurons/{name}/{version}", post(neuron_action))
        .route("/console/memory", get(memory::list))
        .route("/console/memory/decide", post(memory::decide))
        .route("/console/events", get(events))
        .route("/console/static/{file}", get(asset))
        .with_state(c)
        .layer(axum::extract::DefaultBodyLimit::max(MAX_FORM_BYTES))
        .layer(axum::middleware::from_fn(secure))
}

/// Middleware: the security headers of every console answer.
pub async fn secure(req: Request, next: Next) -> Response {
    let mut r = next.run(req).await;
    let h = r.headers_mut();
    for (k, v) in [
        ("content-security-policy", CSP),
        ("x-content-type-options", "nosniff"),
        ("x-frame-options", "DENY"),
        ("referrer-policy", "same-origin"),
        ("cache-control", "no-store"),
        ("cross-origin-opener-policy", "same-origin"),
        ("cross-origin-resource-policy", "same-origin"),
    ] {
        h.insert(k, HeaderValue::from_static(v));
    }
    r
}

/// Whether a state-changing request comes from the console's own pages:
/// its `Origin`, when sent, is `http(s)://<Host>` exactly; its
/// `Sec-Fetch-Site`, when sent, is `same-origin` or `none`. A browser
/// sends at least one of them on every POST; a request with neither (not
/// a browser) still needs the session cookie and its CSRF token.
pub fn same_origin(headers: &HeaderMap) -> bool {
    let text = |n: header::HeaderName| headers.get(n).map(|v| v.to_str().unwrap_or("\u{0}"));
    let host = text(header::HOST).unwrap_or("").to_ascii_lowercase();
    if let Some(o) = text(header::ORIGIN) {
        let o = o.to_ascii_lowercase();
        let ok =
            !host.is_empty() && (o == format!("http://{host}") || o == format!("https://{host}"));
        if !ok {
            return false;
        }
    }
    match headers.get("sec-fetch-site").map(|v| v.as_bytes()) {
        None => true,
        Some(v) => v == b"same-origin" || v == b"none",
    }
}

fn html(status: StatusCode, m: Markup) -> Response {
    (
        status,
        [(header::CONTENT_TYPE, "text/html; charset=utf-8")],
        m.into_string(),
    )
        .into_response()
}

fn forbidden(why: &str) -> Response {
    html(StatusCode::FORBIDDEN, pages::error(None, "Refused", why))
}

impl Console {
    /// The live session of this request, its operator still an operator.
    async fn session(&self, headers: &HeaderMap) -> Option<(String, Session)> {
        let cookies = headers
            .get_all(header::COOKIE)
            .iter()
            .filter_map(|v| v.to_str().ok());
        let id = session::cookie_value(cookies)?.to_string();
        let s = self.sessions.get(&id)?;
        if !self.backend.still_operator(&s.operator).await {
            self.sessions.remove(&id);
            return None;
        }
        Some((id, s))
    }

    /// The session of a POST that passed the origin and CSRF checks.
    async fn posted(&self, headers: &HeaderMap, csrf: &str) -> Result<Session, Response> {
        if !same_origin(headers) {
            return Err(forbidden("this request came from another origin: refused"));
        }
        let Some((_, s)) = self.session(headers).await else {
            return Err(forbidden("no live session: sign in again"));
        };
        if !s.csrf_ok(csrf) {
            return Err(forbidden(
                "the form's CSRF token is missing or wrong: refused",
            ));
        }
        Ok(s)
    }
}

fn to_login() -> Response {
    Redirect::to("/console/login").into_response()
}

fn failure(s: &Session, e: &BackendError) -> Response {
    let status = match e {
        BackendError::NotFound(_) => StatusCode::NOT_FOUND,
        BackendError::Conflict(_) => StatusCode::CONFLICT,
        BackendError::Forbidden(_) | BackendError::Unauthorized => StatusCode::FORBIDDEN,
        BackendError::Internal(_) => StatusCode::INTERNAL_SERVER_ERROR,
    };
    html(
        status,
        pages::error(Some((&s.operator, &s.csrf)), "Not done", &e.to_string()),
    )
}

async fn login_form(State(c): Shared, headers: HeaderMap) -> Response {
    if c.session(&headers).await.is_some() {
        return Redirect::to("/console/approvals").into_response();
    }
    html(StatusCode::OK, pages::sign_in(None))
}

#[derive(Deserialize)]
struct LoginForm {
    #[serde(default)]
    token: String,
}

async fn login(State(c): Shared, headers: HeaderMap, Form(f): Form<LoginForm>) -> Response {
    if !same_origin(&headers) {
        return forbidden("this sign-in came from another origin: refused");
    }
    let refused = |status, why: &str| html(status, pages::sign_in(Some(why)));
    match c.backend.sign_in(f.token.trim()).await {
        Ok(SignIn::Operator(op)) => match c.sessions.create(&op) {
            Ok((id, _)) => {
                let mut r = Redirect::to("/console/approvals").into_response();
                if let Ok(v) = HeaderValue::from_str(&session::set_cookie(&id)) {
                    r.headers_mut().insert(header::SET_COOKIE, v);
                }
                r
            }
            Err(e) => refused(StatusCode::INTERNAL_SERVER_ERROR, &e.to_string()),
        },
        Ok(SignIn::Client(_)) => refused(
            StatusCode::FORBIDDEN,
            "a client-role token cannot open the console: sign in with an operator token",
        ),
        Err(BackendError::Unauthorized) => refused(StatusCode::UNAUTHORIZED, "not a valid token"),
        Err(e) => refused(StatusCode::SERVICE_UNAVAILABLE, &e.to_string()),
    }
}

#[derive(Deserialize)]
struct CsrfForm {
    #[serde(default)]
    csrf: String,
}

async fn logout(State(c): Shared, headers: HeaderMap, Form(f): Form<CsrfForm>) -> Response {
    if let Err(r) = c.posted(&headers, &f.csrf).await {
        return r;
    }
    if let Some((id, _)) = c.session(&headers).await {
        c.sessions.remove(&id);
    }
    let mut r = Redirect::to("/console/login").into_response();
    if let Ok(v) = HeaderValue::from_str(&session::clear_cookie()) {
        r.headers_mut().insert(header::SET_COOKIE, v);
    }
    r
}

#[derive(Deserialize, Default)]
struct Offset {
    #[serde(default)]
    offset: u64,
}

fn page(offset: u64) -> PageReq {
    PageReq {
        offset: offset.min(10_000_000),
        limit: PAGE_SIZE,
    }
}

async fn approvals_page(c: &Console, s: &Session, offset: u64, flash: Option<&str>) -> Response {
    match c.backend.approvals(page(offset)).await {
        Ok(p) => html(
            StatusCode::OK,
            pages::approvals(&s.operator, &s.csrf, &p, offset, flash),
        ),
        Err(e) => failure(s, &e),
    }
}

async fn approvals(State(c): Shared, headers: HeaderMap, Query(q): Query<Offset>) -> Response {
    let Some((_, s)) = c.session(&headers).await else {
        return to_login();
    };
    let offset = q.offset;
    approvals_page(&c, &s, offset, None).await
}

#[derive(Deserialize)]
struct DecideForm {
    #[serde(default)]
    csrf: String,
    #[serde(default)]
    verb: String,
    #[serde(default)]
    note: String,
}

fn clean_note(n: &str) -> Option<String> {
    let n: String = n.chars().filter(|c| !c.is_control()).take(1000).collect();
    let n = n.trim();
    (!n.is_empty()).then(|| n.to_string())
}

async fn decide(
    State(c): Shared,
    headers: HeaderMap,
    Path(id): Path<String>,
    Form(f): Form<DecideForm>,
) -> Response {
    let s = match c.posted(&headers, &f.csrf).await {
        Ok(s) => s,
        Err(r) => return r,
    };
    let approve = match f.verb.as_str() {
        "approve" => true,
        "deny" => false,
        _ => return failure(&s, &BackendError::Conflict("verb: approve or deny".into())),
    };
    let note = clean_note(&f.note);
    match c
        .backend
        .decide(&s.operator, &id, approve, note.as_deref())
        .await
    {
        Ok(d) => approvals_page(&c, &s, 0, Some(&d.message)).await,
        Err(e) => failure(&s, &e),
    }
}

#[derive(Deserialize, Default)]
struct SagaQuery {
    #[serde(default)]
    state: String,
    #[serde(default)]
    tool: String,
    #[serde(default)]
    principal: String,
    #[serde(default)]
    since: String,
    #[serde(default)]
    offset: u64,
}

fn field(v: &str) -> Option<String> {
    let v = v.trim();
    (!v.is_empty() && v.len() <= 200 && !v.contains(char::is_control)).then(|| v.to_string())
}

async fn sagas(State(c): Shared, headers: HeaderMap, Query(q): Query<SagaQuery>) -> Response {
    let Some((_, s)) = c.session(&headers).await else {
        return to_login();
    };
    let filter = SagaFilter {
        state: field(&q.state),
        tool: field(&q.tool),
        principal: field(&q.principal),
        since: field(&q.since),
    };
    let pairs: Vec<(&str, &str)> = [
        ("state", &filter.state),
        ("tool", &filter.tool),
        ("principal", &filter.principal),
        ("since", &filter.since),
    ]
    .into_iter()
    .filter_map(|(k, v)| v.as_deref().map(|v| (k, v)))
    .collect();
    let query = match serde_urlencoded::to_string(&pairs) {
        Ok(q) if !q.is_empty() => format!("?{q}"),
        _ => String::new(),
    };
    match c.backend.sagas(&filter, page(q.offset)).await {
        Ok(p) => html(
            StatusCode::OK,
            pages::sagas(&s.operator, &s.csrf, &filter, &p, q.offset, &query),
        ),
        Err(e) => failure(&s, &e),
    }
}

async fn saga_page(c: &Console, s: &Session, id: &str, flash: Option<&str>) -> Response {
    match c.backend.saga(id).await {
        Ok(Some(d)) => html(StatusCode::OK, pages::saga(&s.operator, &s.csrf, &d, flash)),
        Ok(None) => failure(s, &BackendError::NotFound(format!("saga {id}"))),
        Err(e) => failure(s, &e),
    }
}

async fn saga(State(c): Shared, headers: HeaderMap, Path(id): Path<String>) -> Response {
    let Some((_, s)) = c.session(&headers).await else {
        return to_login();
    };
    saga_page(&c, &s, &id, None).await
}

#[derive(Deserialize)]
struct ActionForm {
    #[serde(default)]
    csrf: String,
    #[serde(default)]
    action: String,
}

async fn saga_action(
    State(c): Shared,
    headers: HeaderMap,
    Path(id): Path<String>,
    Form(f): Form<ActionForm>,
) -> Response {
    let s = match c.posted(&headers, &f.csrf).await {
        Ok(s) => s,
        Err(r) => return r,
    };
    let Some(action) = SagaAction::parse(&f.action) else {
        return failure(
            &s,
            &BackendError::Conflict("action: resume, rollback or undo".into()),
        );
    };
    match c.backend.saga_action(&s.operator, &id, action).await {
        Ok(d) => saga_page(&c, &s, &id, Some(&d.message)).await,
        Err(e) => failure(&s, &e),
    }
}

async fn trace(State(c): Shared, headers: HeaderMap, Path(id): Path<String>) -> Response {
    let Some((_, s)) = c.session(&headers).await else {
        return to_login();
    };
    match c.backend.trace(&id).await {
        Ok(Some(t)) => html(StatusCode::OK, pages::trace(&s.operator, &s.csrf, &t)),
        Ok(None) => failure(&s, &BackendError::NotFound(format!("trace {id}"))),
        Err(e) => failure(&s, &e),
    }
}

#[derive(Deserialize, Default)]
struct Days {
    #[serde(default)]
    days: Option<u32>,
}

async fn health(State(c): Shared, headers: HeaderMap, Query(q): Query<Days>) -> Response {
    let Some((_, s)) = c.session(&headers).await else {
        return to_login();
    };
    let days = q.days.unwrap_or(CHART_DAYS).clamp(1, MAX_CHART_DAYS);
    match c.backend.health(days).await {
        Ok(h) => html(StatusCode::OK, pages::health(&s.operator, &s.csrf, &h)),
        Err(e) => failure(&s, &e),
    }
}

async fn neurons_page(c: &Console, s: &Session, flash: Option<&str>) -> Response {
    match c.backend.neurons().await {
        Ok(rows) => html(
            StatusCode::OK,
            pages::neurons(&s.operator, &s.csrf, &rows, flash),
        ),
        Err(e) => failure(s, &e),
    }
}

async fn neurons(State(c): Shared, headers: HeaderMap) -> Response {
    let Some((_, s)) = c.session(&headers).await else {
        return to_login();
    };
    neurons_page(&c, &s, None).await
}

#[derive(Deserialize)]
struct NeuronForm {
    #[serde(default)]
    csrf: String,
    #[serde(default)]
    action: String,
    #[serde(default)]
    grants: String,
    #[serde(default)]
    note: String,
}

async fn neuron_action(
    State(c): Shared,
    headers: HeaderMap,
    Path((name, version)): Path<(String, u32)>,
    Form(f): Form<NeuronForm>,
) -> Response {
    let s = match c.posted(&headers, &f.csrf).await {
        Ok(s) => s,
        Err(r) => return r,
    };
    let action = match f.action.as_str() {
        "approve" => NeuronAction::Approve(
            f.grants
                .lines()
                .map(str::trim)
                .filter(|g| !g.is_empty())
                .map(String::from)
                .collect(),
        ),
        "reject" => NeuronAction::Reject,
        "retire" => NeuronAction::Retire,
        _ => {
            return failure(
                &s,
                &BackendError::Conflict("action: approve, reject or retire".into()),
            );
        }
    };
    let note = clean_note(&f.note);
    match c
        .backend
        .neuron_action(&s.operator, &name, version, action, note.as_deref())
        .await
    {
        Ok(d) => neurons_page(&c, &s, Some(&d.message)).await,
        Err(e) => failure(&s, &e),
    }
}

/// `GET /console/events`: `pending` events with the number of pending
/// approvals, sent at the start and whenever it changes (compared every
/// [`EVENT_TICK`]); the stream ends when the session does. At most
/// [`MAX_STREAMS`] at once (503 beyond).
async fn events(State(c): Shared, headers: HeaderMap) -> Response {
    let Some((id, _)) = c.session(&headers).await else {
        return StatusCode::UNAUTHORIZED.into_response();
    };
    let Ok(permit) = c.streams.clone().try_acquire_owned() else {
        return StatusCode::SERVICE_UNAVAILABLE.into_response();
    };
    let state = (c, id, permit, None::<u64>);
    let stream = futures::stream::unfold(state, |(c, id, permit, last)| async move {
        let mut first = last.is_none();
        loop {
            if !first {
                tokio::time::sleep(EVENT_TICK).await;
            }
            first = false;
            let s = c.sessions.peek(&id)?;
            if !c.backend.still_operator(&s.operator).await {
                return None;
            }
            let Ok(n) = c.backend.pending_count().await else {
                continue;
            };
            if last != Some(n) {
                let ev = Event::default().event("pending").data(n.to_string());
                return Some((
                    Ok::<_, std::convert::Infallible>(ev),
                    (c, id, permit, Some(n)),
                ));
            }
        }
    });
    Sse::new(stream)
        .keep_alive(KeepAlive::default())
        .into_response()
}

async fn asset(Path(file): Path<String>) -> Response {
    let (body, kind) = match file.as_str() {
        "console.js" => (JS, "text/javascript; charset=utf-8"),
        "console.css" => (CSS, "text/css; charset=utf-8"),
        _ => return StatusCode::NOT_FOUND.into_response(),
    };
    ([(header::CONTENT_TYPE, kind)], body).into_response()
}

#[path = "routes_memory.rs"]
mod memory;

#[path = "routes_history.rs"]
mod history;

#[cfg(test)]
#[path = "routes_tests.rs"]
mod tests;
