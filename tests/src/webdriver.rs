//! A real headless Chromium driven over the W3C WebDriver protocol
//! (<https://www.w3.org/TR/webdriver2/>) by Debian's `chromedriver`, with
//! reqwest: the console tests' browser (`tests/tests/console/`). The
//! driver runs on a free 127.0.0.1 port, the browser with a fresh profile
//! in a temp dir; both end when the [`Browser`] is dropped.
//!
//! [`Browser::start`] is `None` when `/usr/bin/chromium` or
//! `/usr/bin/chromedriver` is missing (`apt-get install chromium
//! chromium-driver`): the tests then say SKIPPED.

use serde_json::{Value, json};
use std::path::Path;
use std::process::{Child, Command, Stdio};

/// Debian's Chromium.
pub const CHROMIUM: &str = "/usr/bin/chromium";
/// Debian's chromedriver.
pub const CHROMEDRIVER: &str = "/usr/bin/chromedriver";
/// The W3C WebDriver element reference key.
const ELEMENT: &str = "element-6066-11e4-a52e-4f735466cecf";

/// A browser session, ended (with its driver) when dropped.
pub struct Browser {
    driver: Child,
    base: String,
    session: String,
    http: reqwest::Client,
    _profile: tempfile::TempDir,
}

/// An element of the current page.
#[derive(Debug, Clone)]
pub struct Element(String);

fn free_port() -> u16 {
    let l = std::net::TcpListener::bind("127.0.0.1:0").expect("a free port");
    l.local_addr().expect("an address").port()
}

impl Browser {
    /// Start chromedriver and a headless Chromium session; `None` (after
    /// printing SKIPPED) when either is not installed, except under CI
    /// (`CI` set, as `.ci/run` does), which installs both: there a missing
    /// browser fails the test instead of letting it pass without running.
    pub async fn start() -> Option<Browser> {
        if !Path::new(CHROMIUM).exists() || !Path::new(CHROMEDRIVER).exists() {
            assert!(
                std::env::var_os("CI").is_none(),
                "{CHROMIUM} or {CHROMEDRIVER} missing and CI must have them (.ci/run installs chromium chromium-driver)"
            );
            eprintln!(
                "SKIPPED: {CHROMIUM} or {CHROMEDRIVER} missing (apt-get install chromium chromium-driver): the console's browser tests did not run"
            );
            return None;
        }
        let port = free_port();
        let driver = Command::new(CHROMEDRIVER)
            .arg(format!("--port={port}"))
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("chromedriver starts");
        let http = crate::mcp_rig::http();
        let base = format!("http://127.0.0.1:{port}");
        let mut b = Browser {
            driver,
            base,
            session: String::new(),
            http,
            _profile: tempfile::tempdir().expect("a profile dir"),
        };
        let status = format!("{}/status", b.base);
        crate::wait_until_async("chromedriver ready", || {
            let c = b.http.clone();
            let u = status.clone();
            async move {
                match c.get(&u).send().await {
                    Ok(r) => r
                        .json::<Value>()
                        .await
                        .ok()
                        .is_some_and(|v| v["value"]["ready"] == true),
                    Err(_) => false,
                }
            }
        })
        .await;
        let profile = b._profile.path().to_string_lossy().into_owned();
        let caps = json!({"capabilities": {"alwaysMatch": {
            "browserName": "chrome",
            "goog:chromeOptions": {
                "binary": CHROMIUM,
                "args": [
                    "--headless", "--no-sandbox", "--disable-gpu",
                    "--disable-background-networking", "--disable-component-update",
                    "--disable-sync", "--no-first-run", "--disable-dev-shm-usage",
                    "--window-size=1280,900",
                    format!("--user-data-dir={profile}"),
                ]
            }
        }}});
        let v = b.call("POST", "/session", Some(caps)).await;
        b.session = v["sessionId"]
            .as_str()
            .unwrap_or_else(|| panic!("no session: {v}"))
            .to_string();
        Some(b)
    }

    async fn call(&self, method: &str, path: &str, body: Option<Value>) -> Value {
        let url = format!("{}{path}", self.base);
        let req = match method {
            "POST" => self.http.post(&url).json(&body.unwrap_or(json!({}))),
            "DELETE" => self.http.delete(&url),
            _ => self.http.get(&url),
        };
        let r = req.send().await.expect("chromedriver answers");
        let v: Value = r.json().await.expect("JSON from chromedriver");
        v["value"].clone()
    }

    async fn s(&self, method: &str, path: &str, body: Option<Value>) -> Value {
        let p = format!("/session/{}{path}", self.session);
        self.call(method, &p, body).await
    }

    /// Open `url`.
    pub async fn goto(&self, url: &str) {
        let v = self.s("POST", "/url", Some(json!({"url": url}))).await;
        assert!(v.is_null(), "navigate to {url}: {v}");
    }

    /// The current URL.
    pub async fn url(&self) -> String {
        self.s("GET", "/url", None)
            .await
            .as_str()
            .unwrap_or_default()
            .to_string()
    }

    /// The first element matching CSS `selector`, if any.
    pub async fn find(&self, selector: &str) -> Option<Element> {
        let v = self
            .s(
                "POST",
                "/element",
                Some(json!({"using": "css selector", "value": selector})),
            )
            .await;
        v[ELEMENT].as_str().map(|e| Element(e.to_string()))
    }

    /// The first element matching `selector`; panics when there is none.
    pub async fn get(&self, selector: &str) -> Element {
        match self.find(selector).await {
            Some(e) => e,
            None => panic!(
                "no element {selector} on {}:\n{}",
                self.url().await,
                self.text("body").await
            ),
        }
    }

    /// Type `text` into `e`.
    pub async fn type_into(&self, e: &Element, text: &str) {
        let v = self
            .s(
                "POST",
                &format!("/element/{}/value", e.0),
                Some(json!({"text": text})),
            )
            .await;
        assert!(v.is_null(), "type: {v}");
    }

    /// Empty the editable element `e` (WebDriver "Element Clear").
    pub async fn clear(&self, e: &Element) {
        let v = self
            .s("POST", &format!("/element/{}/clear", e.0), Some(json!({})))
            .await;
        assert!(v.is_null(), "clear: {v}");
    }

    /// Click `e`.
    pub async fn click(&self, e: &Element) {
        let v = self
            .s("POST", &format!("/element/{}/click", e.0), Some(json!({})))
            .await;
        assert!(v.is_null(), "click: {v}");
    }

    /// The rendered text of the first element matching `selector` ("" when
    /// none).
    pub async fn text(&self, selector: &str) -> String {
        let Some(e) = self.find(selector).await else {
            return String::new();
        };
        self.s("GET", &format!("/element/{}/text", e.0), None)
            .await
            .as_str()
            .unwrap_or_default()
            .to_string()
    }

    /// The value of attribute `name` of `e` ("" when it has none).
    pub async fn attr(&self, e: &Element, name: &str) -> String {
        self.s("GET", &format!("/element/{}/attribute/{name}", e.0), None)
            .await
            .as_str()
            .unwrap_or_default()
            .to_string()
    }

    /// Run `script` (a function body) in the page and return its value.
    pub async fn eval(&self, script: &str) -> Value {
        self.s(
            "POST",
            "/execute/sync",
            Some(json!({"script": script, "args": []})),
        )
        .await
    }

    /// The text of an open alert/confirm/prompt dialog, if one is open.
    pub async fn alert(&self) -> Option<String> {
        let v = self.s("GET", "/alert/text", None).await;
        v.as_str().map(String::from)
    }

    /// The browser's cookies for the current page.
    pub async fn cookies(&self) -> Vec<Value> {
        self.s("GET", "/cookie", None)
            .await
            .as_array()
            .cloned()
            .unwrap_or_default()
    }

    /// Save a PNG screenshot of the page to `path`.
    pub async fn screenshot(&self, path: &Path) {
        use base64::Engine as _;
        let v = self.s("GET", "/screenshot", None).await;
        let png = base64::engine::general_purpose::STANDARD
            .decode(v.as_str().unwrap_or_default())
            .expect("a base64 screenshot");
        if let Some(dir) = path.parent() {
            std::fs::create_dir_all(dir).expect("the screenshot directory");
        }
        std::fs::write(path, png).expect("the screenshot written");
    }

    /// Wait until the page's `selector` text contains `needle` (polled
    /// every 50 ms up to [`crate::wait_bound`]; the page's URL and text in
    /// the panic otherwise).
    pub async fn wait_text(&self, selector: &str, needle: &str) {
        let t0 = std::time::Instant::now();
        while !self.text(selector).await.contains(needle) {
            if t0.elapsed() > crate::wait_bound() {
                panic!(
                    "timed out waiting for {selector} to show {needle:?} on {}:\n{}",
                    self.url().await,
                    self.text("body").await
                );
            }
            tokio::time::sleep(std::time::Duration::from_millis(50)).await;
        }
    }
}

impl Drop for Browser {
    fn drop(&mut self) {
        if !self.session.is_empty() {
            // The driver ends Chromium with the session; best effort, on a
            // blocking client (Drop cannot await).
            let url = format!("{}/session/{}", self.base, self.session);
            let _ = std::thread::spawn(move || {
                let rt = tokio::runtime::Builder::new_current_thread()
                    .enable_all()
                    .build();
                if let Ok(rt) = rt {
                    rt.block_on(async {
                        let _ = crate::mcp_rig::http().delete(&url).send().await;
                    });
                }
            })
            .join();
        }
        let _ = self.driver.kill();
        let _ = self.driver.wait();
    }
}
