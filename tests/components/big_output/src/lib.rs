//! `big_output` (test component): `execute` returns about `mb` megabytes
//! (10^6 bytes, default 100) of JSON data, so that the host's output size cap
//! can be tested. The JSON text is built in place (one allocation of the
//! output's size), so a memory cap a little above `mb` is enough.
//! Args: `{"mb": 100}` (optional, 0 to 1000).

use capsaga_sdk::prelude::*;

/// Arguments.
#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Args {
    /// Size of the returned data in megabytes (10^6 bytes); default 100.
    #[serde(default = "default_mb")]
    #[schemars(range(max = 1000))]
    pub mb: u32,
}

fn default_mb() -> u32 {
    100
}

/// The component.
pub struct BigOutput;

impl Tool for BigOutput {
    type Args = Args;

    fn meta() -> Meta {
        Meta::new(
            "big_output",
            "Test component: returns about 100 MB of data.",
        )
    }

    fn execute(_ctx: &CallContext, args: Args) -> Result<Output, ToolError> {
        let len = usize::try_from(args.mb.min(1000))
            .unwrap_or(0)
            .saturating_mul(1_000_000);
        let prefix = format!("{{\"len\":{len},\"blob\":\"");
        let mut json = String::with_capacity(prefix.len() + len + 2);
        json.push_str(&prefix);
        json.extend(std::iter::repeat_n('x', len));
        json.push_str("\"}");
        Ok(Output::from_json_text(json)?.summary(format!("returned {len} bytes")))
    }
}

capsaga_sdk::export_tool!(BigOutput);
