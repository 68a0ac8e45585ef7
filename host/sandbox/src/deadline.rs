//! Call deadlines: the absolute time, in milliseconds since the Unix epoch,
//! by which a call must end (`CallContext::deadline_ms`).

/// `now + ms` in milliseconds since the Unix epoch (saturating), the
/// `deadline_ms` of a call that may run for `ms` milliseconds.
pub fn deadline_from_now(ms: u64) -> u64 {
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_millis() as u64)
        .unwrap_or(0);
    now.saturating_add(ms)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_deadline_is_later_than_its_length() {
        assert!(deadline_from_now(1000) > 1000);
        assert_eq!(deadline_from_now(u64::MAX), u64::MAX);
    }
}
