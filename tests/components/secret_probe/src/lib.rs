//! `secret_probe` (test component): an API client that declares the
//! credential it needs, `secret:api@127.0.0.1`, the way a purpose-built tool
//! would, then tries to see that credential: it GETs `url` (setting its own
//! `authorization` header, which the host must replace), and returns the
//! status, the response headers and body, and everything in its environment.
//! The host's tests check that the server received the secret and that
//! nothing the guest returns, logs or leaves in the host's records holds it.
//! Args: `{"url": "https://127.0.0.1:<port>/echo"}`. Needs `net:https:*`.

use capsaga_sdk::http::Request;
use capsaga_sdk::prelude::*;

/// Arguments.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Args {
    /// URL to GET.
    pub url: String,
}

/// The component.
pub struct SecretProbe;

impl Tool for SecretProbe {
    type Args = Args;

    fn meta() -> Meta {
        Meta::new(
            "secret_probe",
            "Test component: an API client using an operator secret; reports all it can see.",
        )
        .risk(Risk::Low)
        .capability("net:https:*")
        .capability("secret:api@127.0.0.1")
    }

    fn execute(_ctx: &CallContext, args: Args) -> Result<Output, ToolError> {
        let env: Vec<(String, String)> = std::env::vars().collect();
        let resp = Request::get(args.url.clone())
            .header("authorization", "Bearer guest-chosen-value")
            .send()?;
        let text = resp.text();
        info!("secret_probe got {} bytes: {}", text.len(), text);
        Ok(Output::new(json!({
            "status": resp.status,
            "headers": resp.headers,
            "body": text,
            "env": env,
        }))
        .summary(format!("{} from {}", resp.status, args.url)))
    }
}

capsaga_sdk::export_tool!(SecretProbe);
