//! `time_now`: the current time, from the sandbox's wall clock.
//!
//! Arguments: none (`{}`). Output: `{"unix_ms": 1748601296789, "rfc3339":
//! "2025-05-30T10:34:56.789Z"}` (UTC, millisecond precision). No side
//! effects, no capabilities.

use std::time::{SystemTime, UNIX_EPOCH};

use capsaga_sdk::prelude::*;

/// No arguments: pass an empty object.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Args {}

/// What `time_now` returns.
#[derive(Debug, Serialize, Deserialize, PartialEq, Eq)]
pub struct Now {
    /// Milliseconds since 1970-01-01T00:00:00Z.
    pub unix_ms: u64,
    /// The same instant as RFC 3339 in UTC, e.g. `2025-05-30T10:34:56.789Z`.
    pub rfc3339: String,
}

/// The tool.
pub struct TimeNow;

impl Tool for TimeNow {
    type Args = Args;

    fn meta() -> Meta {
        Meta::new(
            "time_now",
            "Returns the current date and time in UTC, as RFC 3339 text and as Unix milliseconds.",
        )
        .idempotent(true)
        .dry_run(true)
    }

    fn execute(_ctx: &CallContext, _args: Args) -> Result<Output, ToolError> {
        let since_epoch = SystemTime::now().duration_since(UNIX_EPOCH).map_err(|e| {
            ToolError::unknown(format!("the clock is before 1970: {e}"))
                .hint("the sandbox clock is wrong; do not rely on the time")
        })?;
        let unix_ms = u64::try_from(since_epoch.as_millis()).map_err(|_| {
            ToolError::unknown("the clock is past the year 584 million")
                .hint("the sandbox clock is wrong; do not rely on the time")
        })?;
        let rfc3339 = rfc3339_utc(unix_ms);
        let summary = format!("It is {rfc3339}");
        Ok(Output::new(Now { unix_ms, rfc3339 }).summary(summary))
    }
}

capsaga_sdk::export_tool!(TimeNow);

/// Formats `unix_ms` as `YYYY-MM-DDTHH:MM:SS.mmmZ` (proleptic Gregorian, UTC).
pub fn rfc3339_utc(unix_ms: u64) -> String {
    let millis = unix_ms % 1000;
    let secs = unix_ms / 1000;
    let days = secs / 86_400;
    let sod = secs % 86_400;
    let (year, month, day) = civil_from_days(days);
    format!(
        "{year:04}-{month:02}-{day:02}T{:02}:{:02}:{:02}.{millis:03}Z",
        sod / 3600,
        (sod % 3600) / 60,
        sod % 60
    )
}

/// Days since 1970-01-01 to (year, month 1-12, day 1-31); Howard Hinnant's
/// `civil_from_days`, restricted to non-negative day counts.
fn civil_from_days(days: u64) -> (u64, u64, u64) {
    let z = days + 719_468;
    let era = z / 146_097;
    let doe = z - era * 146_097; // [0, 146096]
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365; // [0, 399]
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100); // [0, 365]
    let mp = (5 * doy + 2) / 153; // [0, 11]
    let day = doy - (153 * mp + 2) / 5 + 1; // [1, 31]
    let month = if mp < 10 { mp + 3 } else { mp - 9 }; // [1, 12]
    let year = yoe + era * 400 + u64::from(month <= 2);
    (year, month, day)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn meta_is_valid_and_has_no_capabilities() {
        let meta = capsaga_sdk::describe::<TimeNow>(env!("CARGO_PKG_VERSION"));
        assert_eq!(meta.check(), Ok(()));
        assert!(meta.capabilities.is_empty());
        assert!(!meta.has_side_effects);
        let schema = meta.args_schema.unwrap_or_default();
        assert_eq!(schema["type"], "object");
        assert_eq!(schema["additionalProperties"], false);
    }

    #[test]
    fn formats_known_instants() {
        assert_eq!(rfc3339_utc(0), "1970-01-01T00:00:00.000Z");
        assert_eq!(rfc3339_utc(951_782_400_000), "2000-02-29T00:00:00.000Z");
        assert_eq!(rfc3339_utc(1_709_251_199_999), "2024-02-29T23:59:59.999Z");
        assert_eq!(rfc3339_utc(1_735_689_600_123), "2025-01-01T00:00:00.123Z");
        assert_eq!(rfc3339_utc(4_102_444_800_000), "2100-01-01T00:00:00.000Z");
    }

    #[test]
    fn execute_returns_now() {
        let out = TimeNow::execute(&CallContext::default(), Args {});
        let now: Option<Now> = out.ok().and_then(|o| o.data_as().ok());
        let now = now.unwrap_or_else(|| panic!("time_now failed"));
        assert!(now.unix_ms > 1_700_000_000_000);
        assert_eq!(now.rfc3339, rfc3339_utc(now.unix_ms));
    }
}
