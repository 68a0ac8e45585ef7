//! Wall-clock helpers: the timestamp format of stored rows and traces, the
//! UTC day of the budget counters (a call's deadline is the sandbox's:
//! `capsaga_sandbox::deadline_from_now`).

/// The current time as RFC 3339 UTC with milliseconds, e.g.
/// `2026-11-30T04:05:06.789Z`.
pub fn now_rfc3339() -> String {
    jiff::Timestamp::now()
        .strftime("%Y-%m-%dT%H:%M:%S%.3fZ")
        .to_string()
}

/// `now + ms` as [`now_rfc3339`] writes it (the latest representable
/// time when it overflows), for expiry times compared as text.
pub fn rfc3339_after(ms: u64) -> String {
    let now = jiff::Timestamp::now();
    let later = i64::try_from(ms)
        .ok()
        .and_then(|ms| now.checked_add(jiff::SignedDuration::from_millis(ms)).ok())
        .unwrap_or(jiff::Timestamp::MAX);
    later.strftime("%Y-%m-%dT%H:%M:%S%.3fZ").to_string()
}

/// `now - ms` as [`now_rfc3339`] writes it (the earliest representable
/// time when it underflows), for "at least this old" compared as text.
pub fn rfc3339_before(ms: u64) -> String {
    let now = jiff::Timestamp::now();
    let earlier = i64::try_from(ms)
        .ok()
        .and_then(|ms| now.checked_sub(jiff::SignedDuration::from_millis(ms)).ok())
        .unwrap_or(jiff::Timestamp::MIN);
    earlier.strftime("%Y-%m-%dT%H:%M:%S%.3fZ").to_string()
}

/// Today's UTC date, `YYYY-MM-DD`.
pub fn today() -> String {
    jiff::Timestamp::now().strftime("%Y-%m-%d").to_string()
}

/// The UTC date `days` days before today, `YYYY-MM-DD` (the earliest
/// representable day when it underflows).
pub fn days_ago(days: u64) -> String {
    let ms = days.saturating_mul(86_400_000);
    rfc3339_before(ms).chars().take(10).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn timestamps_are_rfc3339_millis() {
        let t = now_rfc3339();
        assert_eq!(t.len(), 24, "{t}");
        assert!(t.ends_with('Z'));
        assert_eq!(today().len(), 10);
        let later = rfc3339_after(60_000);
        assert_eq!(later.len(), 24, "{later}");
        assert!(later > now_rfc3339(), "text order is time order");
        assert!(rfc3339_after(u64::MAX).starts_with("9999-"));
        let earlier = rfc3339_before(60_000);
        assert_eq!(earlier.len(), 24, "{earlier}");
        assert!(earlier < now_rfc3339(), "text order is time order");
    }
}
